"""The Temporal Schedules of a deployment, created (or left as they are) when a worker starts,
so an operator finds every periodic job, its last runs and its next one in the UI's Schedules tab."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

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

from agent_memory import contract
from agent_memory.compaction import CompactionInput
from agent_memory.keyring import KeyRotationInput
from agent_memory.projection_models import ProjectionSweepInput

KEY_ROTATION_SCHEDULE = contract.KEY_ROTATION_SCHEDULE_ID
COMPACTION_SCHEDULE = contract.COMPACTION_SCHEDULE_ID
PROJECTION_SWEEP_SCHEDULE = contract.PROJECTION_SWEEP_SCHEDULE_ID


@dataclass(frozen=True)
class ScheduleDefinition:
    schedule_id: str
    workflow: str
    argument: BaseModel
    every: timedelta
    note: str


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
)


async def ensure_schedules(client: Client, task_queue: str, *, keys_rotatable: bool = True) -> list[str]:
    """Create the Schedules that do not exist yet; existing ones (and an operator's pause or
    changed interval) are left alone. Returns the ids created. Keys from the environment cannot
    be rotated by us: no rotation Schedule then (README: key management)."""
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
                        task_queue=task_queue),
                    spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=definition.every)]),
                    # A run still going when the next is due (a long VACUUM FULL) is not doubled.
                    policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
                    state=ScheduleState(note=definition.note),
                ))
            created.append(definition.schedule_id)
        except ScheduleAlreadyRunningError:
            pass
    return created
