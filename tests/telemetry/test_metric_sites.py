"""The Prometheus counters and histograms at the places where things happen, read from the one
registry before and after the real code path runs. The sites that need a worker are checked in
their own tests (consolidations: tests/activities/test_consolidation_activities.py,
tests/workflows/test_consolidation.py and test_substance_gate.py; webhooks, erasures, the sweeper
and rebuilds in theirs)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError
from starlette.requests import Request
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, RetryState

from activities.consolidation import consolidation_outcome
from agent_memory.api.http.auth import checked_key, checked_operator_key
from agent_memory.api.http.problems import internal_error, unavailable
from agent_memory.api.mcp_server import _answers
from agent_memory.api.services import rejection_counter
from agent_memory.core.errors import ServiceUnavailable
from agent_memory.core.models import CommitOutcome, SummaryResult
from agent_memory.lifecycle.erasure import scan_residue
from agent_memory.providers.errors import ProviderRetryableError
from agent_memory.providers.metering import metered, model_label
from agent_memory.providers.offline import ExtractiveSummarizer, offline_providers
from agent_memory.providers.openai.config import OpenAICompatibleConfig
from agent_memory.providers.openai.embedder import OpenAICompatibleEmbedder
from agent_memory.security.api_keys import ApiKeyError, TooManyFailuresError, create_key
from agent_memory.security.failure_limits import FailureLimiter
from agent_memory.security.operator_requests import UnauthorizedRequestError, claim_operator_request
from agent_memory.telemetry.metrics import MODEL_CALLS, READ_DURATION, REGISTRY, tenant_label
from agent_memory.telemetry.record import attempt_bucket, count, timed
from tests.providers.openai_server import FakeOpenAIServer, Reply, embeddings, error_body
from tests.sessions import commit_notes, session
from workers.run_metrics import fails_the_run


def value(name: str, **labels: str) -> float:
    """A sample's value in the product's registry (0 when it was never counted)."""
    return REGISTRY.get_sample_value(f"agent_memory_{name}", labels) or 0.0


class Rises:
    """How much samples rose while the block ran: `with Rises() as rose: ...; rose("x_total", a="b")`."""

    def __enter__(self) -> Rises:
        self._snapshot = {(s.name, tuple(sorted(s.labels.items()))): s.value
                          for metric in REGISTRY.collect() for s in metric.samples}
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def __call__(self, name: str, **labels: str) -> float:
        key = (f"agent_memory_{name}", tuple(sorted(labels.items())))
        return value(name, **labels) - self._snapshot.get(key, 0.0)


# --- the recording functions ------------------------------------------------------------------


def test_an_attempt_is_bucketed_into_four_labels():
    assert [attempt_bucket(n) for n in (0, 1, 2, 3, 4, 5, 100)] == ["1", "1", "2", "3", "4+", "4+", "4+"]


def test_a_metric_a_site_gets_wrong_is_logged_and_never_fails_the_operation(caplog):
    with caplog.at_level(logging.ERROR, logger="agent_memory.telemetry.record"):
        count(MODEL_CALLS, tenant="t")  # labels missing: a bug of the site
    assert "not counted" in caplog.text


async def test_a_timed_block_is_observed_only_when_it_succeeds():
    with Rises() as rose:
        with timed(READ_DURATION, route="recall"):
            await asyncio.sleep(0.01)
        with pytest.raises(RuntimeError), timed(READ_DURATION, route="recall"):
            raise RuntimeError("failed read")
    assert rose("read_duration_seconds_count", route="recall") == 1
    assert rose("read_duration_seconds_sum", route="recall") >= 0.01


# --- model calls ----------------------------------------------------------------------------------


async def test_a_provider_call_is_counted_with_its_model_purpose_tokens_and_cost():
    tenant = tenant_label("t-metered")
    summarizer = ExtractiveSummarizer()
    messages = session("s", "2024-03-01T09:00:00Z", "I live in Porto.", "I have a cat called Miso.").messages
    with FakeOpenAIServer() as server, Rises() as rose:
        await metered("t-metered", summarizer, "summarize", summarizer.summarize(messages))
        embedder = OpenAICompatibleEmbedder(OpenAICompatibleConfig(
            base_url=server.base_url, api_key="k", chat_model="test-chat", embedding_model="test-embed",
            embedding_price_per_1k=0.02, embedding_dimensions=4))
        server.reply(Reply(body=embeddings([[1.0, 0.0, 0.0, 0.0]], prompt_tokens=500)))
        await metered("t-metered", embedder, "embed", embedder.embed(["Lin lives in Porto."]))
        # The model says "slow down": an error, and a wait for its rate limit.
        server.reply(Reply(status=429, headers={"Retry-After": "1"}, body=error_body("slow down")))
        with pytest.raises(ProviderRetryableError):
            await metered("t-metered", embedder, "embed", embedder.embed(["again"]))
        await embedder.aclose()
    assert model_label(summarizer) == "extractive-summarizer"
    assert model_label(embedder) == "openai-compatible:test-embed"
    model = "openai-compatible:test-embed"
    assert rose("model_calls_total", tenant=tenant, model="extractive-summarizer", purpose="summarize",
                outcome="ok") == 1
    assert rose("model_calls_total", tenant=tenant, model=model, purpose="embed", outcome="ok") == 1
    assert rose("model_calls_total", tenant=tenant, model=model, purpose="embed", outcome="error") == 1
    assert rose("model_tokens_total", tenant=tenant, model=model, direction="input") == 500
    assert rose("model_tokens_total", tenant=tenant, model=model, direction="output") == 0
    assert rose("model_cost_usd_total", tenant=tenant, model=model) == pytest.approx(0.01)
    assert rose("rate_limit_waits_total", tenant=tenant) == 1


# --- consolidation outcomes --------------------------------------------------------------------


def _commit(facts: int) -> CommitOutcome:
    return CommitOutcome(operation_id="op", events_appended=facts, facts_written=facts, episode_written=False,
                         outbox_rows=0)


def test_a_gated_session_without_facts_is_a_consolidation_of_no_substance():
    gated = SummaryResult(sentences=[], token_count=0, gated="small_talk")
    summarized = SummaryResult(sentences=[], token_count=0)  # not gated: an episode
    assert consolidation_outcome(gated, _commit(0)) == "no_substance"
    assert consolidation_outcome(gated, _commit(1)) == "committed"  # its facts are what it is for
    assert consolidation_outcome(summarized, _commit(0)) == "committed"


def test_only_a_failure_error_fails_a_consolidation_run():
    assert fails_the_run(ApplicationError("facts kept changing", non_retryable=True))
    assert fails_the_run(ActivityError("step failed", scheduled_event_id=1, started_event_id=2, identity="w",
                                       activity_type="commit", activity_id="1",
                                       retry_state=RetryState.NON_RETRYABLE_FAILURE))
    assert not fails_the_run(CancelledError("cancelled"))  # cancelled, not failed
    assert not fails_the_run(asyncio.CancelledError())
    assert not fails_the_run(RuntimeError("a bug: the workflow task fails and is retried"))


# --- trust and availability ------------------------------------------------------------------


async def test_refused_credentials_are_counted_by_reason_and_the_limiter_as_limited():
    limiter = FailureLimiter(burst=2, window=60.0)
    with Rises() as rose:
        for _ in range(2):
            with pytest.raises(ApiKeyError):
                await checked_key(limiter, None, "10.0.0.1", None, "read")
        with pytest.raises(ApiKeyError):
            await checked_operator_key(limiter, None, "10.0.0.2", "not-a-key")
        with pytest.raises(TooManyFailuresError):  # 10.0.0.1 failed twice already: its bucket is full
            await checked_key(limiter, None, "10.0.0.1", None, "read")
    assert rose("auth_failures_total", reason="missing") == 2
    assert rose("auth_failures_total", reason="malformed") == 1
    assert rose("auth_failures_total", reason="limited") == 1


async def test_an_unavailable_dependency_is_counted_by_surface_alike():
    request = Request({"type": "http", "method": "GET", "path": "/v1/x", "headers": [], "query_string": b""})

    @_answers
    async def tool() -> None:
        raise ServiceUnavailable("the key provider is not set up")

    with Rises() as rose:
        assert unavailable("postgres").status_code == 503
        assert internal_error(request, ServiceUnavailable("no schema")).status_code == 503
        with pytest.raises(ToolError):
            await tool()
    assert rose("unavailable_responses_total", dependency="postgres") == 1
    assert rose("unavailable_responses_total", dependency="service") == 2


async def test_a_refused_temporal_payload_is_a_refused_workflow_input():
    with Rises() as rose:
        await rejection_counter(None)("maintenance-compaction", "not ours")  # names no tenant: no database
    assert rose("refused_workflow_inputs_total", reason="payload") == 1


# --- on the database (the session's stack) ------------------------------------------------------


async def test_reads_are_timed_by_route_and_contexts_measured(client, services, tenant):
    s = session("s1", "2024-03-01T09:00:00Z", "I live in Porto.", "I have a cat called Miso.")
    await commit_notes(client, services, tenant, "lin", s, datetime(2024, 3, 1, 9, tzinfo=UTC))
    label = tenant_label(tenant)
    embedder = offline_providers().embedder.name
    with Rises() as rose:
        await client.recall(tenant, "lin", "where does Lin live?")
        context = await client.context(tenant, "lin", "what pet does Lin have?")
        await client.build_prompt(tenant, "lin", "s1", "Any tips for Porto?")
    assert rose("read_duration_seconds_count", route="recall") == 1
    assert rose("read_duration_seconds_count", route="context") == 1
    assert rose("read_duration_seconds_count", route="prompt") == 1
    # The context and the prompt's context, each assembled once; the read's query embedded thrice.
    assert rose("context_items_count") == 2 and context.items
    assert rose("context_items_sum") >= len(context.items)
    assert rose("context_tokens_sum") >= context.tokens > 0
    assert rose("model_calls_total", tenant=label, model=embedder, purpose="query", outcome="ok") == 3


async def test_a_scope_a_key_lacks_and_an_unregistered_run_are_counted(services, tenant):
    reader = (await create_key(services.pool, tenant, "read")).token
    with Rises() as rose:
        with pytest.raises(Exception, match="scope"):
            await checked_key(FailureLimiter(), services.pool, "10.0.0.3", reader, "write")
        with pytest.raises(UnauthorizedRequestError):
            await claim_operator_request(services.pool, services.keyring, "rebuild", "rebuild/nobody", "run-1")
    assert rose("auth_failures_total", reason="scope") == 1
    assert rose("refused_workflow_inputs_total", reason="unregistered") == 1


async def test_a_residue_scan_counts_what_it_finds(client, services, tenant):
    s = session("s1", "2024-03-01T09:00:00Z", "I live in Porto.")
    await commit_notes(client, services, tenant, "lin", s, datetime(2024, 3, 1, 9, tzinfo=UTC))
    with Rises() as rose:
        residue = await scan_residue(services.pool, services.redis, tenant, "lin")  # not erased: all of it
    assert sum(residue.values()) > 0
    assert rose("erasure_residue_found_total") == sum(residue.values())
