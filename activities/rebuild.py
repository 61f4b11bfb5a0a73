"""Rebuild activities: list a tenant's subjects; replay, compare and repair one subject."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.errors import temporal_failures
from agent_memory import rebuild
from agent_memory.keyring import KeyRing
from agent_memory.models import RebuildSubjectInput, SubjectList, SubjectListInput, SubjectRebuild
from agent_memory.operations import OperationRecorder
from agent_memory.providers.base import Embedder


class RebuildActivities:
    def __init__(self, pool: AsyncConnectionPool, keyring: KeyRing, embedder: Embedder):
        self.pool = pool
        self.keyring = keyring
        self.embedder = embedder
        self.recorder = OperationRecorder(pool, keyring)

    @activity.defn
    @temporal_failures
    async def list_subjects_to_rebuild(self, request: SubjectListInput) -> SubjectList:
        return SubjectList(subjects=await rebuild.list_subjects(self.pool, request.tenant_id,
                                                                after=request.after_subject, limit=request.limit))

    @activity.defn
    @temporal_failures
    async def rebuild_subject(self, step: RebuildSubjectInput) -> SubjectRebuild:
        try:
            return await rebuild.rebuild_subject(self.pool, self.keyring, step.tenant_id, step.subject_id,
                                                 force=step.force, recorder=self.recorder, embedder=self.embedder)
        except rebuild.EventLogError as exc:  # a corrupt log does not heal by retrying
            raise ApplicationError(str(exc), type="EventLogUnreadable", non_retryable=True) from exc
