"""The Temporal Schedules of a deployment as designed, and how each one stands against its design.

The Schedules carry guarantees: key rotation makes a shredded key irreversible (its KEK is
destroyed), compaction removes erased residue from disk, the erasure re-drive finishes a
cancelled erasure, the idle-timer sweep consolidates sessions whose timer was lost. Anyone with
a Temporal client can pause or edit them, so each is checked against its definition here: missing,
paused, or drifted (interval, action, policies). `ensure_schedules` puts every one back as
designed and says what it changed; `check_schedules` only reads (stats, readiness, erasure
status). A Schedule the deployment deliberately does without is declared in
`expected_absences`, with its reason, and is not reported as missing.

Scheduled runs authorize by carrying no authority. A Schedule's action input is its workflow's
bounded default (`RunInput.beyond_schedule()` is False: no forced rotation, no compaction of every
table, no grace period of its own), which an activity runs without a registration; anything
beyond those defaults needs an operator request claimed by the one run that uses it
(agent_memory/security/operator_requests.py). A Schedule definition whose input went beyond is
refused when the module loads. So whoever copies a scheduled run's input (or writes one) and
starts it under any id gets what the Schedule's next tick would do anyway: a sweep after the
deployment's grace period, a rotation only when a key was shredded, a compaction of pending
tickets; never more. Nothing of a Schedule's input needs to be kept secret or single-use.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleDescription,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.converter import WorkflowSerializationContext
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

log = logging.getLogger(__name__)

KEY_ROTATION_SCHEDULE = contract.KEY_ROTATION_SCHEDULE_ID
COMPACTION_SCHEDULE = contract.COMPACTION_SCHEDULE_ID
PROJECTION_SWEEP_SCHEDULE = contract.PROJECTION_SWEEP_SCHEDULE_ID
MEMORY_SWEEP_SCHEDULE = contract.MEMORY_SWEEP_SCHEDULE_ID
ERASURE_REDRIVE_SCHEDULE = contract.ERASURE_REDRIVE_SCHEDULE_ID
IDLE_TIMER_SWEEP_SCHEDULE = contract.IDLE_TIMER_SWEEP_SCHEDULE_ID
REVIEW_SCHEDULE = contract.REVIEW_SCHEDULE_ID

# What a Schedule that is not as designed holds back, for the surfaces that name it.
BLOCKS_IRREVERSIBILITY = KEY_ROTATION_SCHEDULE  # a shredded key's KEK is not destroyed
BLOCKS_COMPACTION = COMPACTION_SCHEDULE  # erased residue stays on disk


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

# Keys from the environment (EnvKeyProvider) cannot be created or destroyed by the product.
KEYS_FROM_THE_ENVIRONMENT = ("the key-encryption keys come from the environment (AGENT_MEMORY_MASTER_KEY), "
                             "which the product cannot rotate: rotate them where they are kept (docs/operations.md, "
                             "\"Keys\")")


def expected_absences(*, keys_rotatable: bool) -> dict[str, str]:
    """The Schedules this deployment deliberately does without, each with its reason."""
    return {} if keys_rotatable else {KEY_ROTATION_SCHEDULE: KEYS_FROM_THE_ENVIRONMENT}


# The parts of a Schedule that are checked, in the words the reports use.
Part = Literal["paused", "spec", "workflow type", "workflow id", "task queue", "input", "workflow options",
               "policies", "limited actions"]


class ScheduleCheck(BaseModel):
    """How one Schedule stands against its definition (nothing changed)."""
    schedule_id: str
    exists: bool
    expected_absent: str | None = None  # the declared reason, when the deployment does without it
    paused: bool = False
    note: str | None = None  # the Schedule's note as found (who paused it, and why, when they said)
    drift: list[Part] = []  # every part not as designed, "paused" included

    @property
    def as_designed(self) -> bool:
        return self.expected_absent is not None or (self.exists and not self.drift)


class ScheduleEnsured(BaseModel):
    """What `ensure_schedules` did to one Schedule."""
    schedule_id: str
    outcome: Literal["created", "unpaused", "updated", "unpaused and updated", "unchanged", "absent as declared"]
    updated: list[Part] = []  # the parts put back (besides the pause)
    found_note: str | None = None  # the note of a paused Schedule as found
    reason: str | None = None  # the declared reason of an expected absence


class SchedulesHealth(BaseModel):
    """The Schedules not as designed, for stats and readiness: names per kind."""
    missing: list[str] = []
    paused: list[str] = []
    drifted: list[str] = []
    expected_absent: dict[str, str] = {}

    @property
    def degraded(self) -> list[str]:
        return sorted({*self.missing, *self.paused, *self.drifted})

    @property
    def count(self) -> int:
        return len(self.degraded)


def desired_schedule(definition: ScheduleDefinition, task_queue: str) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(
            definition.workflow, definition.argument, id=contract.scheduled_workflow_id(definition.schedule_id),
            task_queue=task_queue, static_summary=run_summary(definition.schedule_id)),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=definition.every)]),
        # A run still going when the next is due (a long VACUUM FULL) is not doubled.
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
        state=ScheduleState(note=definition.note),
    )


async def _input_matches(client: Client, action: ScheduleActionStartWorkflow, definition: ScheduleDefinition) -> bool:
    if len(action.args) != 1:
        return False
    converter = client.data_converter.with_context(
        WorkflowSerializationContext(namespace=client.namespace, workflow_id=action.id))
    try:
        [value] = await converter.decode(list(action.args), [type(definition.argument)])
    except Exception:  # not ours (plaintext, another key, another place) or not the model: altered
        return False
    return bool(value == definition.argument)


async def _drift(client: Client, definition: ScheduleDefinition, task_queue: str,
                 described: ScheduleDescription) -> list[Part]:
    schedule = described.schedule
    drift: list[Part] = []
    if schedule.state.paused:
        drift.append("paused")
    spec = schedule.spec
    intervals = [(i.every, i.offset or timedelta(0)) for i in spec.intervals]
    if (intervals != [(definition.every, timedelta(0))] or spec.calendars or spec.cron_expressions or spec.skip
            or spec.start_at is not None or spec.end_at is not None or spec.jitter not in (None, timedelta(0))):
        drift.append("spec")
    action = schedule.action
    if not isinstance(action, ScheduleActionStartWorkflow):
        drift.extend(["workflow type", "input"])
    else:
        if action.workflow != definition.workflow:
            drift.append("workflow type")
        if action.id != contract.scheduled_workflow_id(definition.schedule_id):
            drift.append("workflow id")
        if action.task_queue != task_queue:
            drift.append("task queue")
        if not await _input_matches(client, action, definition):
            drift.append("input")
        if (action.execution_timeout, action.run_timeout, action.task_timeout, action.retry_policy) != (
                None, None, None, None):
            drift.append("workflow options")
    policy = schedule.policy
    if policy.overlap != ScheduleOverlapPolicy.SKIP or policy.pause_on_failure:
        drift.append("policies")
    if schedule.state.limited_actions:
        drift.append("limited actions")
    return drift


async def check_schedule(client: Client, definition: ScheduleDefinition, task_queue: str, *,
                         expected_absent: str | None = None) -> ScheduleCheck:
    try:
        described = await client.get_schedule_handle(definition.schedule_id).describe()
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
        return ScheduleCheck(schedule_id=definition.schedule_id, exists=False, expected_absent=expected_absent)
    if expected_absent is not None:  # present though the deployment does without it: left alone
        return ScheduleCheck(schedule_id=definition.schedule_id, exists=True, expected_absent=expected_absent,
                             paused=described.schedule.state.paused, note=described.schedule.state.note)
    return ScheduleCheck(schedule_id=definition.schedule_id, exists=True, paused=described.schedule.state.paused,
                         note=described.schedule.state.note,
                         drift=await _drift(client, definition, task_queue, described))


async def check_schedules(client: Client, task_queue: str, *, keys_rotatable: bool = True) -> list[ScheduleCheck]:
    """Every Schedule against its definition; nothing is changed."""
    absent = expected_absences(keys_rotatable=keys_rotatable)
    return [await check_schedule(client, d, task_queue, expected_absent=absent.get(d.schedule_id)) for d in SCHEDULES]


def schedules_health(checks: list[ScheduleCheck]) -> SchedulesHealth:
    health = SchedulesHealth()
    for check in checks:
        if check.expected_absent is not None:
            health.expected_absent[check.schedule_id] = check.expected_absent
        elif not check.exists:
            health.missing.append(check.schedule_id)
        else:
            if check.paused:
                health.paused.append(check.schedule_id)
            if [part for part in check.drift if part != "paused"]:
                health.drifted.append(check.schedule_id)
    return health


async def ensure_schedules(client: Client, task_queue: str, *, keys_rotatable: bool = True) -> list[ScheduleEnsured]:
    """Every Schedule as designed: a missing one created, a paused one unpaused, a drifted one
    (interval, action, policies) updated back to its definition; a Schedule the deployment
    declares it does without (`expected_absences`) is neither created nor reported. Says per
    Schedule what it changed."""
    absent = expected_absences(keys_rotatable=keys_rotatable)
    report = []
    for definition in SCHEDULES:
        if definition.schedule_id in absent:
            report.append(ScheduleEnsured(schedule_id=definition.schedule_id, outcome="absent as declared",
                                          reason=absent[definition.schedule_id]))
            continue
        report.append(await _ensure_one(client, definition, task_queue))
    return report


async def _ensure_one(client: Client, definition: ScheduleDefinition, task_queue: str) -> ScheduleEnsured:
    handle = client.get_schedule_handle(definition.schedule_id)
    check = await check_schedule(client, definition, task_queue)
    if not check.exists:
        try:
            await client.create_schedule(definition.schedule_id, desired_schedule(definition, task_queue))
            return ScheduleEnsured(schedule_id=definition.schedule_id, outcome="created")
        except ScheduleAlreadyRunningError:  # another process created it meanwhile
            check = await check_schedule(client, definition, task_queue)
    updated: list[Part] = [part for part in check.drift if part != "paused"]
    if updated:
        desired = desired_schedule(definition, task_queue)

        def restore(current: ScheduleUpdateInput) -> ScheduleUpdate:
            # The pause is lifted below with its own note; the state is otherwise the design's.
            desired.state = ScheduleState(note=definition.note, paused=current.description.schedule.state.paused)
            return ScheduleUpdate(schedule=desired)

        await handle.update(restore)
    if check.paused:
        await handle.unpause(note=f"unpaused by agent-memory schedules ensure: {definition.note}")
    outcome: Any = ("unpaused and updated" if check.paused and updated else "unpaused" if check.paused
                    else "updated" if updated else "unchanged")
    if outcome != "unchanged":
        log.warning("Schedule %s restored as designed: %s%s", definition.schedule_id, outcome,
                    f" ({', '.join(updated)})" if updated else "")
    return ScheduleEnsured(schedule_id=definition.schedule_id, outcome=outcome, updated=updated,
                           found_note=check.note if check.paused else None)
