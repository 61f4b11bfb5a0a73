"""Rebuild activities: list a tenant's subjects; replay, compare and repair one subject."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from activities.authorization import claim_for_this_run
from activities.errors import temporal_failures
from agent_memory.core import contract
from agent_memory.core.models import RebuildSubjectInput, SubjectList, SubjectListInput, SubjectRebuild
from agent_memory.memory.events import EventLogError
from agent_memory.memory.operations import OperationRecorder
from agent_memory.projection import rebuild
from agent_memory.projection.projector import projection_lag, wake_projector
from agent_memory.providers.base import Embedder
from agent_memory.security.keyring import KeyRing
from agent_memory.telemetry.metrics import REBUILD_DIGEST_MISMATCHES, REBUILDS
from agent_memory.telemetry.record import count


class RebuildActivities:
    def __init__(self, pool: AsyncConnectionPool, keyring: KeyRing, embedder: Embedder,
                 temporal: Client | None = None):
        """temporal: to wake a subject's projector when the rebuild leaves outbox rows due."""
        self.pool = pool
        self.keyring = keyring
        self.embedder = embedder
        self.recorder = OperationRecorder(pool, keyring)
        self.temporal = temporal

    @activity.defn(name=contract.LIST_SUBJECTS_TO_REBUILD)
    @temporal_failures
    async def list_subjects_to_rebuild(self, request: SubjectListInput) -> SubjectList:
        return SubjectList(subjects=await rebuild.list_subjects(self.pool, request.tenant_id,
                                                                after=request.after_subject, limit=request.limit))

    @activity.defn(name=contract.REBUILD_SUBJECT)
    @temporal_failures
    async def rebuild_subject(self, step: RebuildSubjectInput) -> SubjectRebuild:
        if step.force:  # rewrites even equal projections: an operator must have asked for this run
            await claim_for_this_run(self.pool, self.keyring, "rebuild", chain=self.temporal, chained=True)
        try:
            entry = await rebuild.rebuild_subject(self.pool, self.keyring, step.tenant_id, step.subject_id,
                                                  force=step.force, recorder=self.recorder, embedder=self.embedder,
                                                  request_id=step.request_id)
        except EventLogError as exc:  # a corrupt log does not heal by retrying
            count(REBUILDS, outcome="failed")
            raise ApplicationError(str(exc), type=contract.ErrorType.EVENT_LOG_UNREADABLE, non_retryable=True) from exc
        if not entry.skipped_erased:  # an erased subject is not rebuilt, only reported
            count(REBUILDS, outcome="equal" if entry.equal else "mismatch")
            if not entry.equal:
                count(REBUILD_DIGEST_MISMATCHES)
        # A repaired subject may have outbox rows due again (items that lost their vector): its
        # projector embeds them. Decided on the outbox, not on `repaired`, so a retried activity
        # (the rebuild then finds nothing to repair) still wakes it.
        if self.temporal is not None and not entry.skipped_erased:
            lag = await projection_lag(self.pool, step.tenant_id, step.subject_id)
            if lag.due:
                await wake_projector(self.temporal, activity.info().task_queue, step.tenant_id, step.subject_id)
        return entry
