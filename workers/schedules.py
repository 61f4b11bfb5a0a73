"""The Temporal Schedules of a deployment, kept as designed by every worker: checked and restored
when it starts and every hour (agent_memory/lifecycle/schedules.py says what is checked), so an
operator finds every periodic job, its last runs and its next one in the UI's Schedules tab."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timedelta

from pydantic import BaseModel
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from agent_memory.lifecycle.schedules import (
    COMPACTION_SCHEDULE,
    ERASURE_REDRIVE_SCHEDULE,
    IDLE_TIMER_SWEEP_SCHEDULE,
    KEY_ROTATION_SCHEDULE,
    MEMORY_SWEEP_SCHEDULE,
    PROJECTION_SWEEP_SCHEDULE,
    REVIEW_SCHEDULE,
    SCHEDULES,
    ScheduleDefinition,
    ScheduleEnsured,
    check_schedules,
    ensure_schedules,
    expected_absences,
)

__all__ = [
    "COMPACTION_SCHEDULE",
    "ERASURE_REDRIVE_SCHEDULE",
    "IDLE_TIMER_SWEEP_SCHEDULE",
    "KEY_ROTATION_SCHEDULE",
    "MEMORY_SWEEP_SCHEDULE",
    "PROJECTION_SWEEP_SCHEDULE",
    "REVIEW_SCHEDULE",
    "SCHEDULES",
    "ScheduleDefinition",
    "ScheduleEnsured",
    "check_schedules",
    "describe_schedules",
    "ensure_schedules",
    "expected_absences",
    "keep_schedules",
]

log = logging.getLogger(__name__)

# How often a running worker checks the Schedules against their design.
CHECK_EVERY = timedelta(hours=1)


async def keep_schedules(client: Client, task_queue: str, stop: asyncio.Event, *, keys_rotatable: bool = True,
                         every: timedelta = CHECK_EVERY, at_once: bool = True) -> None:
    """Until `stop`: at once (unless `at_once` is false: the caller just checked) and then every
    `every`, restore what is not as designed (a pause, an edited interval or action, a deleted
    Schedule) and log each restoration. A check that fails (Temporal down) is logged and tried
    again at the next one."""
    first = at_once
    while True:
        if not first:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=every.total_seconds())
        first = False
        if stop.is_set():
            return
        try:
            await ensure_schedules(client, task_queue, keys_rotatable=keys_rotatable)  # logs each restoration
        except Exception as exc:
            log.warning("the Schedules could not be checked (tried again in %s): %s", every, exc)


class ScheduleDescription(BaseModel):
    schedule_id: str
    workflow: str
    every: str
    paused: bool
    note: str | None
    recent_runs: int
    last_run: datetime | None
    next_run: datetime | None


async def describe_schedules(client: Client) -> list[ScheduleDescription]:
    """The deployment's Schedules as the UI shows them (ids of SCHEDULES that exist)."""
    described = []
    for definition in SCHEDULES:
        try:
            info = await client.get_schedule_handle(definition.schedule_id).describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                continue
            raise
        intervals = info.schedule.spec.intervals
        recent = info.info.recent_actions
        described.append(ScheduleDescription(
            schedule_id=definition.schedule_id, workflow=definition.workflow,
            every=str(intervals[0].every) if intervals else "-", paused=info.schedule.state.paused,
            note=info.schedule.state.note, recent_runs=len(recent),
            last_run=recent[-1].started_at if recent else None,
            next_run=info.info.next_action_times[0] if info.info.next_action_times else None))
    return described
