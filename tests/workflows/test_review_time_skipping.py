"""The daily review on a time-skipping Temporal (start_time_skipping_v2, as tests/workflows/
test_time_skipping.py explains) with its real activities on the session's real PostgreSQL: a
review run started with a delay runs at the skipped time, so facts written now have aged past
their shelf life by its `workflow.now()`. A fact whose namespace has no shelf life is never
marked; a re-run over unchanged data appends no event; keeping a marked fact confirms it, so a
run within the shelf life of that confirmation marks nothing, and one past it marks it again."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities.review import ReviewActivities
from agent_memory.api.search_attributes import SESSION_ID, SUBJECT_ID, TENANT_ID
from agent_memory.lifecycle.review import ReviewInput, ReviewResult
from agent_memory.security.payload_codec import encrypted_data_converter
from tests.sessions import session
from workers.deployment import workflow_runners
from workers.embedded import temporal_binary
from workers.worker import PASSTHROUGH_MODULES
from workflows.review import ReviewWorkflow

pytestmark = pytest.mark.stack

RESULT_TIMEOUT = 120.0
TIME_SKIPPING = ["--dynamic-config-value", "frontend.WorkflowTimeSkippingEnabled=true"]
SUBJECT = "lin"


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await WorkflowEnvironment.start_time_skipping_v2(
        data_converter=encrypted_data_converter([os.urandom(32)]), dev_server_existing_path=temporal_binary(),
        dev_server_extra_args=TIME_SKIPPING, search_attributes=[TENANT_ID, SUBJECT_ID, SESSION_ID])
    try:
        yield environment
    finally:
        await environment.shutdown()


async def _review(env: WorkflowEnvironment, task_queue: str, after: timedelta, tenant: str) -> ReviewResult:
    """One review run of the test's tenant (other tests' tenants share the database), started
    `after` from now in the run's virtual time."""
    handle = await env.client.start_workflow(
        ReviewWorkflow.run, ReviewInput(tenant_id=tenant), id=f"review/ts-{uuid.uuid4().hex[:12]}", task_queue=task_queue,
        start_delay=after, result_type=ReviewResult)
    return await asyncio.wait_for(handle.result(), timeout=RESULT_TIMEOUT)


async def _events(services, tenant: str) -> int:
    async with services.pool.connection() as conn, conn.transaction():
        await conn.execute("SELECT set_config('app.tenant_id', %s, true)", (tenant,))
        cur = await conn.execute("SELECT count(*) FROM memory_events WHERE tenant_id = %s", (tenant,))
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def test_facts_aging_past_their_shelf_life_are_marked_and_a_kept_fact_is_not(env, services, client, tenant):
    s = session("s-1", datetime.now(UTC).isoformat(), "I live in Oslo.", "My name is Lin.")
    await client.append_messages(tenant, SUBJECT, s)
    await client.write_fact(tenant, SUBJECT, "location", "home_city", "Oslo", expected_version=0,
                            evidence_message_ids=["s-1:1"])
    await client.write_fact(tenant, SUBJECT, "profile", "name", "Lin", expected_version=0,
                            evidence_message_ids=["s-1:2"])
    task_queue = f"review-ts-{uuid.uuid4()}"
    sandboxed, unsandboxed = workflow_runners(None, SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH_MODULES)))
    temporal: Client = env.client
    review = ReviewActivities(services.pool, services.keyring, temporal, task_queue)
    async with Worker(temporal, task_queue=task_queue, workflows=[ReviewWorkflow],
                      activities=[review.list_review_tenants, review.review_tenant],
                      workflow_runner=sandboxed, unsandboxed_workflow_runner=unsandboxed):
        # Within location's shelf life (180 days): nothing is stale.
        within = await _review(env, task_queue, timedelta(days=100), tenant)
        assert within.marked.get("stale", 0) == 0
        assert await client.admin.stale_marks(tenant) == []

        # Past it: the location is marked; the name (profile: no shelf life) never is.
        past = await _review(env, task_queue, timedelta(days=200), tenant)
        assert past.tenants >= 1 and past.marked.get("stale", 0) >= 1
        [mark] = await client.admin.stale_marks(tenant)
        [home] = [f for f in await client.facts(tenant, SUBJECT) if f.key == "home_city"]
        [name] = [f for f in await client.facts(tenant, SUBJECT) if f.key == "name"]
        assert (mark.reason, mark.memory_id, mark.fact_id, mark.in_force) == ("stale", home.memory_id, home.fact_id,
                                                                               True)
        assert home.stale_reasons == ["stale"] and name.stale_reasons == []

        # The same data reviewed again: no event appended, the mark unchanged.
        events = await _events(services, tenant)
        again = await _review(env, task_queue, timedelta(days=200), tenant)
        assert again.marked.get("stale", 0) == 0
        assert await _events(services, tenant) == events
        assert [m.version for m in await client.admin.stale_marks(tenant)] == [mark.version]

        # Kept: a confirmation (last_confirmed_at moves) and the mark resolved.
        kept = await client.admin.resolve_stale_mark(tenant, SUBJECT, mark.mark_id, "keep")
        assert kept.confirmed and (kept.mark.state, kept.mark.resolution) == ("resolved", "keep")
        [confirmed] = [f for f in await client.facts(tenant, SUBJECT) if f.key == "home_city"]
        assert confirmed.last_confirmed_at > home.last_confirmed_at and confirmed.stale_reasons == []
        assert await client.admin.stale_marks(tenant) == []

        # Within the shelf life of the confirmation nothing is marked; past it, the fact again.
        assert (await _review(env, task_queue, timedelta(days=100), tenant)).marked.get("stale", 0) == 0
        assert await client.admin.stale_marks(tenant) == []
        assert (await _review(env, task_queue, timedelta(days=200), tenant)).marked.get("stale", 0) == 1
        [renewed] = await client.admin.stale_marks(tenant)
        assert renewed.mark_id == mark.mark_id and renewed.confirmed_at == confirmed.last_confirmed_at
    counts = await client.admin.stale_mark_counts(tenant)
    assert counts.in_force == {"stale": 1} and counts.resolved == 0
