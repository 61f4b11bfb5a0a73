"""A day of the deployment's Schedules (workers/schedules.py) on a time-skipping Temporal
(start_time_skipping_v2, as tests/workflows/test_time_skipping.py explains), their activities
mocked under their real names: each Schedule is backfilled over one day, its runs one after the
other, so every run after the first gets the previous run's result from Temporal. The worker's
payload codec reads those as the Schedule's own and warns about none of them; a payload copied
out of a scheduled run into another workflow is still refused, with its warning."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, ScheduleBackfill, ScheduleOverlapPolicy, WorkflowFailureError
from temporalio.common import RawValue
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities.webhooks import WebhookSweepInput
from agent_memory.api.search_attributes import SESSION_ID, SUBJECT_ID, TENANT_ID
from agent_memory.core import contract
from agent_memory.core.projection_models import ProjectionSweepInput, ProjectionSweepResult
from agent_memory.lifecycle.compaction import CompactionInput, CompactionResult
from agent_memory.lifecycle.erasure_runs import ErasureRedriveInput, ErasureRedriveResult
from agent_memory.lifecycle.idle_timers import IdleTimerSweepInput, IdleTimerSweepResult
from agent_memory.lifecycle.retention import RetentionInput, RetentionResult
from agent_memory.lifecycle.review import (
    ReviewInput,
    ReviewTenants,
    TenantReviewInput,
    TenantReviewResult,
)
from agent_memory.lifecycle.sweeper import MemorySweepInput, MemorySweepResult
from agent_memory.memory.webhooks import WebhookSweepResult
from agent_memory.security.keyring import KeyRotationInput, RotationResult
from agent_memory.security.payload_codec import PAYLOAD_REJECTED, encrypted_data_converter
from workers.deployment import workflow_runners
from workers.embedded import temporal_binary
from workers.schedules import SCHEDULES, ensure_schedules
from workers.worker import PASSTHROUGH_MODULES, WORKFLOWS

pytestmark = pytest.mark.stack

TIME_SKIPPING = ["--dynamic-config-value", "frontend.WorkflowTimeSkippingEnabled=true"]
CODEC_LOGGER = "agent_memory.security.payload_codec"
DAY = timedelta(days=1)


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await WorkflowEnvironment.start_time_skipping_v2(
        data_converter=encrypted_data_converter([os.urandom(32)]), dev_server_existing_path=temporal_binary(),
        dev_server_extra_args=TIME_SKIPPING, search_attributes=[TENANT_ID, SUBJECT_ID, SESSION_ID])
    try:
        yield environment
    finally:
        await environment.shutdown()


# The activities of the scheduled workflows, under their real names, each with a result that
# names its run: every run's result differs from the one before it.

@activity.defn(name="rotate_key_encryption_key")
async def rotate_key_encryption_key(request: KeyRotationInput) -> RotationResult:
    return RotationResult(new_kek_id=activity.info().workflow_id or "", rewrapped_subject_keys=0,
                          reencrypted_reasons=0, destroyed_kek_ids=[], shreds_made_irreversible=0,
                          elapsed_seconds=0.0, rotated=False)


@activity.defn(name="compact_erased_data")
async def compact_erased_data(request: CompactionInput) -> CompactionResult:
    return CompactionResult(compaction_id=activity.info().workflow_id or "", tickets=0, tables=[], redis={},
                            elapsed_seconds=0.0)


@activity.defn(name="sweep_projection_outbox")
async def sweep_projection_outbox(request: ProjectionSweepInput) -> ProjectionSweepResult:
    return ProjectionSweepResult(tenants=1, subjects_woken=0)


@activity.defn(name="apply_retention")
async def apply_retention(request: RetentionInput) -> RetentionResult:
    return RetentionResult()


@activity.defn(name="sweep_forgotten_memories")
async def sweep_forgotten_memories(request: MemorySweepInput) -> MemorySweepResult:
    return MemorySweepResult()


@activity.defn(name="redrive_stuck_erasures")
async def redrive_stuck_erasures(request: ErasureRedriveInput) -> ErasureRedriveResult:
    return ErasureRedriveResult()


@activity.defn(name="sweep_idle_timers")
async def sweep_idle_timers(request: IdleTimerSweepInput) -> IdleTimerSweepResult:
    return IdleTimerSweepResult()


@activity.defn(name="sweep_webhook_deliveries")
async def sweep_webhook_deliveries(request: WebhookSweepInput) -> WebhookSweepResult:
    return WebhookSweepResult()


@activity.defn(name="list_review_tenants")
async def list_review_tenants(request: ReviewInput) -> ReviewTenants:
    return ReviewTenants(tenant_ids=["t-day"])


@activity.defn(name="review_tenant")
async def review_tenant(request: TenantReviewInput) -> TenantReviewResult:
    return TenantReviewResult(tenant_id=request.tenant_id)


ACTIVITIES = [rotate_key_encryption_key, compact_erased_data, sweep_projection_outbox, apply_retention,
              sweep_forgotten_memories, redrive_stuck_erasures, sweep_idle_timers, sweep_webhook_deliveries,
              list_review_tenants, review_tenant]


def _runs_in_a_day(every: timedelta) -> int:
    return DAY // every


async def _completed_runs(client: Client, schedule_id: str) -> int:
    described = await client.get_schedule_handle(schedule_id).describe()
    return described.info.num_actions if not described.info.running_actions else -1


async def _wait_for_runs(client: Client, expected: dict[str, int], timeout: float) -> dict[str, int]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        done = {schedule_id: await _completed_runs(client, schedule_id) for schedule_id in expected}
        if all(done[s] >= n for s, n in expected.items()) or loop.time() > deadline:
            return done
        await asyncio.sleep(1)


async def test_a_day_of_scheduled_runs_warns_about_no_payload_and_a_copied_one_is_still_refused(env, caplog):
    temporal: Client = env.client
    task_queue = f"schedules-day-{uuid.uuid4()}"
    sandboxed, unsandboxed = workflow_runners(None, SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH_MODULES)))
    # The day ends before now: the Schedules' own next runs (an interval from now) stay out of it.
    day_start = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - DAY
    expected = {d.schedule_id: _runs_in_a_day(d.every) for d in SCHEDULES}
    caplog.set_level(logging.WARNING, logger=CODEC_LOGGER)
    async with Worker(temporal, task_queue=task_queue, workflows=WORKFLOWS, activities=ACTIVITIES,
                      workflow_runner=sandboxed, unsandboxed_workflow_runner=unsandboxed):
        created = [r.schedule_id for r in await ensure_schedules(temporal, task_queue) if r.outcome == "created"]
        assert sorted(created) == sorted(expected)
        for schedule_id in expected:
            # One after the other, as the Schedule's own runs follow each other.
            await temporal.get_schedule_handle(schedule_id).backfill(ScheduleBackfill(
                start_at=day_start, end_at=day_start + DAY - timedelta(seconds=1),
                overlap=ScheduleOverlapPolicy.BUFFER_ALL))
        done = await _wait_for_runs(temporal, expected, timeout=600)
        assert all(done[s] >= n for s, n in expected.items()), (done, expected)
        warnings = [r.getMessage() for r in caplog.records if r.name == CODEC_LOGGER]
        assert warnings == []

        # The runs did get their predecessors' results: the last idle-timer sweep's start carries one.
        sweep = await temporal.get_schedule_handle(contract.IDLE_TIMER_SWEEP_SCHEDULE_ID).describe()
        last = sweep.info.recent_actions[-1].action
        events = [e async for e in temporal.get_workflow_handle(last.workflow_id).fetch_history_events()]
        started = events[0].workflow_execution_started_event_attributes
        assert started.last_completion_result.payloads

        # A scheduled run's result copied into a run of another Schedule or a run started by hand:
        # refused, and warned about. (A client without the codec sends the ciphertext as it is.)
        plain = await Client.connect(temporal.service_client.config.target_host,
                                     namespace=temporal.namespace)
        [copied] = started.last_completion_result.payloads
        caplog.clear()
        for workflow, forged_id in ((contract.KEY_ROTATION_WORKFLOW, "agent-memory/key-rotation/run-forged"),
                                    (contract.REVIEW_WORKFLOW, f"review/t-day/manual-{uuid.uuid4().hex[:8]}")):
            handle = await plain.start_workflow(workflow, RawValue(copied), id=forged_id, task_queue=task_queue)
            with pytest.raises(WorkflowFailureError) as failed:
                await asyncio.wait_for(handle.result(), timeout=60)
            cause: Any = failed.value.cause
            assert cause.type == PAYLOAD_REJECTED and "copied from another run" in cause.message
        warnings = [r.getMessage() for r in caplog.records if r.name == CODEC_LOGGER]
        assert len([w for w in warnings if "copied from another run" in w]) >= 2, warnings
    assert [e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED]
