"""Consolidation through the OpenAI-compatible providers, against a local server that speaks
the API (real sockets, the real openai client) and the real Temporal and Postgres."""

from __future__ import annotations

import json
import time

from agent_memory.core import contract
from agent_memory.providers.base import EMBEDDING_DIMENSIONS
from agent_memory.providers.openai.bundle import openai_providers
from agent_memory.providers.openai.config import OpenAICompatibleConfig
from agent_memory.store.db import tenant_transaction
from tests.providers.openai_server import FakeOpenAIServer, Reply, chat_completion, embeddings, error_body
from tests.sessions import session
from tests.workflows.history_steps import LOCAL, history_steps

# Four messages: a shorter session gets no episode and no summary call (the substance gate). The
# assistant's questions are no notes.
S = session("s-oa", "2024-03-01T09:00:00Z", "Hi, my name is Lin Wei.", "I live in Hangzhou.",
            ("assistant", "Which district of the city do you live in?"), ("assistant", "Is it close to the lake?"))


def route(req):
    """Answers like a model would: cites the ids and times it was shown."""
    if req.path.endswith("embeddings"):
        return embeddings([[1.0] + [0.0] * (EMBEDDING_DIMENSIONS - 1) for _ in req.body["input"]])
    name = req.body["response_format"]["json_schema"]["name"]
    lines = [json.loads(line) for line in req.body["messages"][-1]["content"].splitlines()[1:]]
    if name == "fact_extraction":
        return chat_completion(json.dumps({"facts": [{
            "namespace": "location", "key": "home_city", "value": "Hangzhou", "claim_type": "explicit",
            "permanence": "permanent", "valid_until": None, "confidence": 0.95,
            "evidence_message_ids": [lines[1]["id"]], "observed_at": lines[1]["time"]}]}),
            prompt_tokens=120, completion_tokens=40)
    if name == "importance":
        return chat_completion('{"importance": 5, "rationale": "home city"}')
    return chat_completion(json.dumps({"sentences": [{"text": "Lin Wei lives in Hangzhou.",
                                                      "source_message_ids": [lines[1]["id"]]}]}))


def bundle_for(server):
    return openai_providers(OpenAICompatibleConfig(base_url=server.base_url, api_key="k", chat_model="test-chat",
                                                   embedding_model="test-embed", timeout_seconds=5))


async def _operations(services, tenant):
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT kind, provider, input_tokens, attempts, status, error FROM operations "
                                 "WHERE tenant_id = %s ORDER BY kind", (tenant,))
        return await cur.fetchall()


async def test_429_is_retried_after_retry_after_and_usage_is_recorded(client, services, tenant, running_worker):
    with FakeOpenAIServer() as server:
        server.responder = route
        server.reply(Reply(status=429, headers={"Retry-After": "2"}, body=error_body("slow down"),
                           path="/v1/chat/completions"))
        bundle = bundle_for(server)
        async with running_worker(providers=bundle):
            await client.append_messages(tenant, "lin", S)
            started = time.monotonic()
            handle = await client.end_session(tenant, "lin", S.session_id)
            result = await client.consolidation_result(handle)
            elapsed = time.monotonic() - started
        await bundle.aclose()
    assert result.facts_written == 1 and result.episode_written
    # A remote model's calls, and the remote embedder's batch of the run's rows, are ordinary
    # activities on the model queue (the server heartbeats each and retried the extraction after
    # the 429's Retry-After), each round of them after a check of the tenant's token budget;
    # nothing was left for the projector.
    history = await handle.fetch_history()
    model = contract.model_task_queue(client.task_queue)
    assert history_steps(history) == [
        ("locate_providers", LOCAL), ("check_token_budget", LOCAL), ("extract_facts", model),
        ("check_token_budget", LOCAL), ("score_importance", model), ("summarize_session", model),
        ("check_conflicts", LOCAL), ("commit_consolidation", LOCAL), ("project_outbox_batch", model)]
    attempts = [e.activity_task_started_event_attributes.attempt for e in history.events
                if e.HasField("activity_task_started_event_attributes")]
    assert attempts == [2, 1, 1, 1]  # extraction, importance and summary, the run's own rows
    assert not result.projector_woken and result.vectors_upserted >= 2
    assert elapsed >= 2.0  # the server's Retry-After became the next retry delay
    assert [(f.key, f.value) for f in await client.facts(tenant, "lin")] == [("home_city", "Hangzhou")]
    ops = {row[0]: row for row in await _operations(services, tenant)}
    assert ops["extract"][1:5] == ("openai-compatible:test-chat", 120, 2, "succeeded")
    async with tenant_transaction(services.pool, tenant) as conn:  # notes, though the model wrote none
        cur = await conn.execute("SELECT source_message_ids FROM observations WHERE tenant_id = %s "
                                 "ORDER BY message_id", (tenant,))
        assert [row[0] for row in await cur.fetchall()] == [["s-oa:1"], ["s-oa:2"]]


async def test_schema_invalid_output_fails_non_retryably_and_keeps_the_raw_text(client, services, tenant,
                                                                               running_worker):
    with FakeOpenAIServer() as server:
        server.responder = lambda req: chat_completion('Sure! ```json\n{"facts": [{"namespace": 3}]}\n```')
        bundle = bundle_for(server)
        async with running_worker(providers=bundle):
            await client.append_messages(tenant, "lin", S)
            handle = await client.end_session(tenant, "lin", S.session_id)
            try:
                await client.consolidation_result(handle)
                raise AssertionError("the workflow should have failed")
            except Exception as err:  # WorkflowFailureError → ActivityError → ApplicationError
                assert getattr(err.cause.cause, "type", None) == "ProviderOutputInvalid"
        await bundle.aclose()
        assert len(server.requests) == 1  # not retried: the same prompt would give the same output
    (kind, _, _, attempts, status, error), = await _operations(services, tenant)
    assert (kind, attempts, status) == ("extract", 1, "failed")
    assert '{"facts": [{"namespace": 3}]}' in error  # the raw output, for the operator
    assert await client.facts(tenant, "lin", history=True) == []


def _fact(operation: str, namespace: str, key: str, value: str, line: dict) -> dict:
    return {"operation": operation, "namespace": namespace, "key": key, "value": value, "claim_type": "explicit",
            "permanence": "permanent", "valid_until": None, "confidence": 0.9, "evidence_message_ids": [line["id"]],
            "observed_at": line["time"]}


async def test_an_end_and_a_correction_from_the_model_end_and_void_facts(client, services, tenant, running_worker):
    """The model is shown the current facts and answers with operations: a correction voids the
    mistaken home city, an end closes the diet; the first session's keys are spoken loosely
    (`location/city`, `diet/diet`) and land on the vocabulary's, so the operations find them."""
    first = session("s-ops-1", "2024-03-01T09:00:00Z", "I live in Lyon.", "I'm vegetarian.")
    second = session("s-ops-2", "2024-04-01T09:00:00Z", "Sorry, I meant Lille, not Lyon.", "And I eat meat again.")
    shown: dict[str, str] = {}

    def model(req):
        if req.path.endswith("embeddings"):
            return embeddings([[1.0] + [0.0] * (EMBEDDING_DIMENSIONS - 1) for _ in req.body["input"]])
        name = req.body["response_format"]["json_schema"]["name"]
        lines = [json.loads(line) for line in req.body["messages"][-1]["content"].splitlines()[1:]]
        if name == "fact_extraction":
            shown[lines[0]["id"]] = req.body["messages"][1]["content"]
            facts = ([_fact("assert", "location", "city", "Lyon", lines[0]),
                      _fact("assert", "diet", "diet", "vegetarian", lines[1])] if lines[0]["text"] == "I live in Lyon." else
                     [_fact("correct", "location", "home_city", "Lille", lines[0]),
                      _fact("end", "diet", "restriction", "vegetarian", lines[1])])
            return chat_completion(json.dumps({"facts": facts}))
        if name == "importance":
            return chat_completion('{"importance": 6, "rationale": "facts"}')
        return chat_completion(json.dumps({"sentences": [{"text": lines[0]["text"],
                                                          "source_message_ids": [lines[0]["id"]]}]}))

    with FakeOpenAIServer() as server:
        server.responder = model
        bundle = bundle_for(server)
        async with running_worker(providers=bundle):
            for s in (first, second):
                await client.append_messages(tenant, "lin", s)
                result = await client.consolidation_result(await client.end_session(tenant, "lin", s.session_id))
                assert result.refused_reason is None
        await bundle.aclose()

    assert shown["s-ops-1:1"] == "Current facts of the subject (namespace/key = value): none."
    assert shown["s-ops-2:1"].splitlines()[1:] == ['diet/restriction = "vegetarian"', 'location/home_city = "Lyon"']
    assert [(f.namespace, f.key, f.value) for f in await client.facts(tenant, "lin")] == [
        ("location", "home_city", "Lille")]
    history = sorted((f.key, f.value, f.status) for f in await client.facts(tenant, "lin", history=True))
    assert history == [("home_city", "Lille", "active"), ("home_city", "Lyon", "voided"),
                       ("restriction", "vegetarian", "closed")]
    async with tenant_transaction(services.pool, tenant) as conn:  # the record says what the model was shown
        cur = await conn.execute("SELECT result->>'current_facts_digest' FROM operations WHERE tenant_id = %s "
                                 "AND kind = 'extract' ORDER BY created_at", (tenant,))
        digests = [row[0] for row in await cur.fetchall()]
    assert len(digests) == 2 and len(set(digests)) == 2 and all(digests)
