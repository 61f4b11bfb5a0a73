"""The maintenance Schedules on the real dev server: created once, visible, and their runs work."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio.client import ScheduleActionStartWorkflow

from workers.schedules import (
    COMPACTION_SCHEDULE,
    ERASURE_REDRIVE_SCHEDULE,
    IDLE_TIMER_SWEEP_SCHEDULE,
    KEY_ROTATION_SCHEDULE,
    MEMORY_SWEEP_SCHEDULE,
    PROJECTION_SWEEP_SCHEDULE,
    REVIEW_SCHEDULE,
    ensure_schedules,
)


async def test_schedules_are_created_once_and_a_triggered_run_completes(services, running_worker, task_queue):
    temporal = services.temporal
    for schedule_id in (KEY_ROTATION_SCHEDULE, COMPACTION_SCHEDULE, PROJECTION_SWEEP_SCHEDULE,
                        MEMORY_SWEEP_SCHEDULE, ERASURE_REDRIVE_SCHEDULE, IDLE_TIMER_SWEEP_SCHEDULE,
                        REVIEW_SCHEDULE):  # a fresh start
        with contextlib.suppress(Exception):  # not there yet
            await temporal.get_schedule_handle(schedule_id).delete()
    first = await ensure_schedules(temporal, task_queue, keys_rotatable=False)
    assert [(r.schedule_id, r.outcome) for r in first] == [
        (KEY_ROTATION_SCHEDULE, "absent as declared"), (COMPACTION_SCHEDULE, "created"),
        (PROJECTION_SWEEP_SCHEDULE, "created"), (MEMORY_SWEEP_SCHEDULE, "created"),
        (ERASURE_REDRIVE_SCHEDULE, "created"), (IDLE_TIMER_SWEEP_SCHEDULE, "created"), (REVIEW_SCHEDULE, "created")]
    assert "environment" in (first[0].reason or "")
    assert [r.schedule_id for r in await ensure_schedules(temporal, task_queue)
            if r.outcome == "created"] == [KEY_ROTATION_SCHEDULE]
    # Idempotent: Schedules as designed are left unchanged.
    assert {r.outcome for r in await ensure_schedules(temporal, task_queue)} == {"unchanged"}

    rotation = await temporal.get_schedule_handle(KEY_ROTATION_SCHEDULE).describe()
    assert rotation.schedule.spec.intervals[0].every == timedelta(days=1)
    compaction = temporal.get_schedule_handle(COMPACTION_SCHEDULE)
    described = await compaction.describe()
    action = described.schedule.action
    assert isinstance(action, ScheduleActionStartWorkflow) and action.workflow == "PhysicalCompactionWorkflow"
    assert described.schedule.spec.intervals[0].every == timedelta(hours=1)
    idle = await temporal.get_schedule_handle(IDLE_TIMER_SWEEP_SCHEDULE).describe()
    assert idle.schedule.spec.intervals[0].every == timedelta(minutes=10)
    review = await temporal.get_schedule_handle(REVIEW_SCHEDULE).describe()
    assert review.schedule.spec.intervals[0].every == timedelta(days=1)
    assert isinstance(review.schedule.action, ScheduleActionStartWorkflow)
    assert review.schedule.action.workflow == "ReviewWorkflow"

    async with running_worker():
        await compaction.trigger()
        for _ in range(300):
            described = await compaction.describe()
            recent = described.info.recent_actions
            if recent:
                run = temporal.get_workflow_handle(recent[-1].action.workflow_id,
                                                   first_execution_run_id=recent[-1].action.first_execution_run_id)
                result = await run.result()
                assert result["compaction_id"].startswith("compaction-")
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the triggered compaction never ran")
    for schedule_id in (KEY_ROTATION_SCHEDULE, COMPACTION_SCHEDULE, REVIEW_SCHEDULE):
        await temporal.get_schedule_handle(schedule_id).delete()
