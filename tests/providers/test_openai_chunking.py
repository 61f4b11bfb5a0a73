"""Settings a small local model needs (see test_local_model.py for the real server): sessions longer
than the context window go in chunks, every response array is bounded, max_tokens is sent, and a
wider embedding is truncated to the store's dimension. Against the scripted server that speaks the API."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel

from agent_memory.core.models import ExtractedEntity, KnownFact, Message
from agent_memory.providers.base import EMBEDDING_DIMENSIONS, estimate_tokens
from agent_memory.providers.errors import ProviderOutputInvalid
from agent_memory.providers.openai.bundle import openai_providers
from agent_memory.providers.openai.chat import CHUNK_FILL
from agent_memory.providers.openai.config import OpenAICompatibleConfig
from agent_memory.providers.openai.responses import ExtractionOut, ImportanceOut, SummaryOut
from agent_memory.providers.openai.schema import strict_json_schema
from tests.providers.openai_server import FakeOpenAIServer, chat_completion, embeddings

T0 = datetime(2024, 5, 8, 10, 0, tzinfo=UTC)
LONG = [Message(message_id=f"m{i}", turn_index=i, role="user", created_at=T0 + timedelta(minutes=i),
                content=f"Message number {i}: " + "I talked about my week and my plans at some length. " * 6)
        for i in range(40)]


def _config(server: FakeOpenAIServer, **overrides) -> OpenAICompatibleConfig:
    fields = dict(base_url=server.base_url, api_key="k", chat_model="small", embedding_model="small",
                  timeout_seconds=5.0)
    return OpenAICompatibleConfig(**(fields | overrides))


def _ids(request) -> list[str]:
    return [json.loads(line)["id"] for line in request.body["messages"][-1]["content"].splitlines()[1:]]


def _route(request):
    ids = _ids(request)
    name = request.body["response_format"]["json_schema"]["name"]
    if name == "fact_extraction":  # the same fact from every chunk, and one of the chunk's own
        same = {"namespace": "location", "key": "home_city", "value": "Lisbon", "claim_type": "explicit",
                "permanence": "permanent", "valid_until": None, "confidence": 0.9,
                "evidence_message_ids": [ids[0]], "observed_at": None}
        own = same | {"namespace": "note", "key": f"chunk_{ids[0]}", "value": ids[-1]}
        # The same person from every chunk ("Mel" in the first, "Melanie" alias "mel" after), a pet of the
        # same name, and an event of the chunk's own.
        first = ids[0] == "m0"
        entities = [{"name": "Mel" if first else "Melanie", "entity_type": "person", "aliases": [] if first else ["mel"],
                     "evidence_message_ids": [ids[-1], ids[0]]},
                    {"name": "Mel", "entity_type": "pet", "aliases": [], "evidence_message_ids": [ids[0]]},
                    {"name": f"Chunk {ids[0]}", "entity_type": "event", "aliases": [], "evidence_message_ids": [ids[0]]}]
        return chat_completion(json.dumps({"facts": [same, own], "entities": entities}), prompt_tokens=100,
                               completion_tokens=10)
    if name == "importance":
        return chat_completion(json.dumps({"importance": 3 + len(ids) % 5, "rationale": ids[0]}))
    return chat_completion(json.dumps({"sentences": [{"text": f"Chunk from {ids[0]}.", "source_message_ids": [ids[0]]}]}))


def test_every_response_array_is_bounded():
    def arrays(node):
        if isinstance(node, dict):
            if node.get("type") == "array":
                yield node
            for value in node.values():
                yield from arrays(value)
        elif isinstance(node, list):
            for value in node:
                yield from arrays(value)

    class Inner(BaseModel):
        tags: list[str] | None  # a nullable array: anyOf [array, null]
        default: str  # a property named like a keyword stays a property

    class Nested(BaseModel):
        grid: list[list[int]]  # an array of arrays
        inner: list[Inner] = []  # items from $defs

    for model in (ExtractionOut, ImportanceOut, SummaryOut, Nested):
        assert all(isinstance(a.get("maxItems"), int) for a in arrays(strict_json_schema(model)))
        assert "maxLength" not in json.dumps(strict_json_schema(model))
    nested = strict_json_schema(Nested)
    assert len(list(arrays(nested))) == 4 and nested["$defs"]["Inner"]["required"] == ["tags", "default"]


async def test_a_long_session_is_extracted_in_chunks_that_fit_the_window():
    with FakeOpenAIServer() as server:
        server.responder = _route
        bundle = openai_providers(_config(server, context_tokens=4096, max_tokens=1024))
        result = await bundle.extractor.extract(LONG)
        await bundle.aclose()
    chunks = [_ids(r) for r in server.requests]
    assert len(chunks) > 1
    assert [i for chunk in chunks for i in chunk] == [m.message_id for m in LONG]  # in order, each once
    assert all(r.body["max_tokens"] == 1024 for r in server.requests)
    assert all(len(json.dumps(r.body["messages"])) < (4096 - 1024) * 4 for r in server.requests)
    keys = [(f.namespace, f.key) for f in result.facts]
    assert keys.count(("location", "home_city")) == 1  # the same fact from every chunk is kept once
    assert len(keys) == 1 + len(chunks)
    assert (result.input_tokens, result.output_tokens) == (100 * len(chunks), 10 * len(chunks))
    # The same entity from every chunk is one entity, citing what each chunk cited, in message order.
    order = [m.message_id for m in LONG]
    assert [e for e in result.entities if e.entity_type == "person"] == [ExtractedEntity(
        name="Melanie", entity_type="person", aliases=["Mel"],
        evidence_message_ids=sorted({i for c in chunks for i in (c[0], c[-1])}, key=order.index))]
    pets = [(e.name, e.evidence_message_ids) for e in result.entities if e.entity_type == "pet"]
    assert pets == [("Mel", [c[0] for c in chunks])]  # another type: another entity
    assert [e.name for e in result.entities if e.entity_type == "event"] == [f"Chunk {c[0]}" for c in chunks]


async def test_current_facts_go_with_every_chunk_and_the_chunks_still_fit():
    known = [KnownFact(namespace="preference", key=f"a_rather_long_object_name_{i}", value="like " * 5,
                       observed_at=T0 - timedelta(days=i)) for i in range(60)]
    with FakeOpenAIServer() as server:
        server.responder = _route
        bundle = openai_providers(_config(server, context_tokens=4096, max_tokens=1024))
        await bundle.extractor.extract(LONG, current_facts=known)
        await bundle.aclose()
    shown = [r.body["messages"][1]["content"] for r in server.requests]
    assert len(shown) > 1 and len(set(shown)) == 1  # the same facts with each chunk
    assert "older facts not shown" in shown[0]  # capped to a quarter of the chunk's budget
    assert estimate_tokens(shown[0]) <= (4096 - 1024) * CHUNK_FILL / 4
    assert [i for r in server.requests for i in _ids(r)] == [m.message_id for m in LONG]
    assert all(len(json.dumps(r.body["messages"])) < (4096 - 1024) * 4 for r in server.requests)


async def test_each_chunk_cites_from_its_own_ids():
    with FakeOpenAIServer() as server:
        server.responder = _route
        bundle = openai_providers(_config(server, context_tokens=4096, max_tokens=1024, cite_from_enum=True))
        await bundle.extractor.extract(LONG)
        await bundle.aclose()
    assert len(server.requests) > 1
    for r in server.requests:
        for cites in ("FactOut", "EntityOut"):
            items = r.body["response_format"]["json_schema"]["schema"]["$defs"][cites]["properties"][
                "evidence_message_ids"]["items"]
            assert items["enum"] == _ids(r)


async def test_long_sessions_are_scored_and_summarised_per_chunk_within_the_cap():
    with FakeOpenAIServer() as server:
        server.responder = _route
        bundle = openai_providers(_config(server, context_tokens=4096, max_tokens=1024))
        score = await bundle.scorer.score(LONG)
        summary = await bundle.summarizer.summarize(LONG, token_cap=60)
        await bundle.aclose()
    n = len([r for r in server.requests if r.body["response_format"]["json_schema"]["name"] == "importance"])
    assert n > 1 and 3 <= score.importance <= 7
    assert len(summary.sentences) > 1 and summary.token_count <= 60
    assert all(s.source_message_ids for s in summary.sentences)


async def test_without_a_window_the_session_is_one_call_and_max_tokens_is_not_sent():
    with FakeOpenAIServer() as server:
        server.responder = _route
        bundle = openai_providers(_config(server))
        await bundle.extractor.extract(LONG)
        await bundle.aclose()
    assert server.count() == 1 and "max_tokens" not in server.last.body


@pytest.mark.parametrize("truncate", [True, False])
async def test_a_wider_embedding_is_truncated_and_renormalised_only_when_configured(truncate):
    wide = [[0.5] * 576, [float(i) for i in range(576)]]
    with FakeOpenAIServer() as server:
        server.responder = lambda request: embeddings(wide)
        bundle = openai_providers(_config(server, send_dimensions=False, truncate_dimensions=truncate))
        if truncate:
            result = await bundle.embedder.embed(["a", "b"])
            assert [len(v) for v in result.vectors] == [EMBEDDING_DIMENSIONS] * 2
            assert all(abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-9 for v in result.vectors)
            assert result.vectors[1][1] > result.vectors[1][0] == 0.0  # the first dimensions, in order
        else:
            with pytest.raises(ProviderOutputInvalid, match="576 dimensions, expected 384"):
                await bundle.embedder.embed(["a", "b"])
        await bundle.aclose()
        assert "dimensions" not in server.last.body
