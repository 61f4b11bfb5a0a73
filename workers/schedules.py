"""The Temporal Schedules of a deployment, created (or left as they are) when a worker starts,
so an operator finds every periodic job, its last runs and its next one in the UI's Schedules tab.

Scheduled runs authorize by carrying no authority. A Schedule's action input is its workflow's
bounded default (`RunInput.beyond_schedule()` is False: no forced rotation, no compaction of every
table, no grace period of its own), which an activity runs without a registration; anything
beyond those defaults needs an operator request claimed by the one run that uses it
(agent_memory/security/operator_requests.py). A Schedule definition whose input went beyond is
refused when the module loads. So whoever copies a scheduled run's input (or writes one) and
starts it under any id gets what the Schedule's next tick would do anyway: a sweep after the
deployment's grace period, a rotation only when a key was shredded, a compaction of pending
tickets; never more. Nothing of a Schedule's input needs to be kept secret or single-use."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import BaseModel
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.service import RPCError, RPCStatusCode

from agent_memory.core import contract
from agent_memory.core.projection_models import ProjectionSweepInput
from agent_memory.core.run_inputs import RunInput
from agent_memory.core.run_metadata import run_summary
from agent_memory.lifecycle.compaction import CompactionInput
from agent_memory.lifecycle.erasure_runs import ErasureRedriveInput
from agent_memory.lifecycle.idle_timers import IdleTimerSweepInput
from agent_memory.lifecycle.review import ReviewInput
from agent_memory.lifecycle.sweeper import MemorySweepInput
from agent_memory.security.keyring import KeyRotationInput

KEY_ROTATION_SCHEDULE = contract.KEY_ROTATION_SCHEDULE_ID
COMPACTION_SCHEDULE = contract.COMPACTION_SCHEDULE_ID
PROJECTION_SWEEP_SCHEDULE = contract.PROJECTION_SWEEP_SCHEDULE_ID
MEMORY_SWEEP_SCHEDULE = contract.MEMORY_SWEEP_SCHEDULE_ID
ERASURE_REDRIVE_SCHEDULE = contract.ERASURE_REDRIVE_SCHEDULE_ID
IDLE_TIMER_SWEEP_SCHEDULE = contract.IDLE_TIMER_SWEEP_SCHEDULE_ID
REVIEW_SCHEDULE = contract.REVIEW_SCHEDULE_ID


@dataclass(frozen=True)
class ScheduleDefinition:
    schedule_id: str
    workflow: str
    argument: RunInput
    every: timedelta
    note: str

    def __post_init__(self) -> None:
        if self.argument.beyond_schedule():
            raise ValueError(f"Schedule {self.schedule_id}: its input asks for more than a Schedule may "
                             "(an operator request authorizes that, per run): keep the bounded defaults")


SCHEDULES = (
    ScheduleDefinition(KEY_ROTATION_SCHEDULE, contract.KEY_ROTATION_WORKFLOW, KeyRotationInput(force=False),
                       timedelta(days=1), "Rotates the key-encryption key when subject keys were shredded since the "
                       "last rotation: old copies of shredded keys (WAL, backups) become undecryptable."),
    ScheduleDefinition(COMPACTION_SCHEDULE, contract.PHYSICAL_COMPACTION_WORKFLOW, CompactionInput(force=False),
                       timedelta(hours=1), "VACUUM FULL + fresh statistics of the tables erasures touched, and a "
                       "Redis AOF/RDB rewrite, for every erasure since the last run."),
    ScheduleDefinition(PROJECTION_SWEEP_SCHEDULE, contract.PROJECTION_SWEEP_WORKFLOW, ProjectionSweepInput(),
                       timedelta(hours=1), "Wakes the projector of every subject with outbox rows due (pending, next "
                       "attempt passed, not dead-lettered), in every tenant: a stuck vector is retried without a "
                       "new consolidation of its subject."),
    ScheduleDefinition(MEMORY_SWEEP_SCHEDULE, contract.MEMORY_SWEEP_WORKFLOW, MemorySweepInput(),
                       timedelta(hours=1), "Forgets what each tenant's retention policy expires (agent-memory "
                       "retention show), then removes memories forgotten longer than the grace period "
                       "(AGENT_MEMORY_FORGET_GRACE_SECONDS, default 24 h) from every store, events included; keeps "
                       "a tombstone (id, version) per memory and counts its residue (agent-memory stats)."),
    ScheduleDefinition(ERASURE_REDRIVE_SCHEDULE, contract.ERASURE_REDRIVE_WORKFLOW, ErasureRedriveInput(),
                       timedelta(hours=1), "Starts again the erasures stuck in 'started' for over an hour whose "
                       "workflow is gone (terminated, failed, lost); erasure is idempotent. Counted in agent-memory "
                       "stats; one that cannot be started is logged as an error with its reason."),
    ScheduleDefinition(IDLE_TIMER_SWEEP_SCHEDULE, contract.IDLE_TIMER_SWEEP_WORKFLOW, IdleTimerSweepInput(),
                       timedelta(minutes=10), "Starts the idle timer of every session with messages no consolidation "
                       "covered, idle longer than the idle timeout (AGENT_MEMORY_IDLE_TIMEOUT_SECONDS, default 600), "
                       "whose timer is not running (its signal was lost in a Temporal outage): the session is "
                       "consolidated without anyone ending it. A running timer is left alone."),
    ScheduleDefinition(REVIEW_SCHEDULE, contract.REVIEW_WORKFLOW, ReviewInput(), timedelta(days=1),
                       "Marks, without deleting, what may have gone stale in every tenant: current facts past their "
                       "namespace's shelf life (agent-memory retention show: shelf_life_days) and not confirmed "
                       "since, facts contradicted by later candidates, near-duplicate notes, candidates close to "
                       "their expiry. Listed by agent-memory review list, resolved by review resolve or a "
                       "correction; reported by the memory.stale webhook."),
)


async def ensure_schedules(client: Client, task_queue: str, *, keys_rotatable: bool = True) -> list[str]:
    """Create the Schedules that do not exist yet; existing ones (and an operator's pause or
    changed interval) are left alone. Returns the ids created. Keys from the environment cannot
    be rotated by us: no rotation Schedule then (docs/operations.md, "Keys")."""
    created = []
    for definition in SCHEDULES:
        if definition.schedule_id == KEY_ROTATION_SCHEDULE and not keys_rotatable:
            continue
        try:
            await client.create_schedule(
                definition.schedule_id,
                Schedule(
                    action=ScheduleActionStartWorkflow(
                        definition.workflow, definition.argument, id=contract.scheduled_workflow_id(definition.schedule_id),
                        task_queue=task_queue, static_summary=run_summary(definition.schedule_id)),
                    spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=definition.every)]),
                    # A run still going when the next is due (a long VACUUM FULL) is not doubled.
                    policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
                    state=ScheduleState(note=definition.note),
                ))
            created.append(definition.schedule_id)
        except ScheduleAlreadyRunningError:
            pass
    return created


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
