"""Re-derivation activities: list the subjects and the sessions to re-derive; compare one
session's facts with the current extractor's recorded extraction and, when an operator asked for
it, apply the differences. The extraction itself is the consolidation's `extract_facts`."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool
from temporalio import activity
from temporalio.client import Client

from activities.authorization import claim_for_this_run
from activities.errors import temporal_failures
from agent_memory.core import contract
from agent_memory.core.hooks import fault_point
from agent_memory.core.models import (
    ExtractionResult,
    RederiveSessionInput,
    RederiveSessions,
    RederiveSubjectInput,
    SessionRederiveOutcome,
    SubjectList,
    SubjectListInput,
)
from agent_memory.memory import rederive
from agent_memory.memory.operations import OperationRecorder
from agent_memory.projection.rebuild import list_subjects
from agent_memory.providers.base import FactExtractor
from agent_memory.security.keyring import KeyRing


class RederiveActivities:
    def __init__(self, pool: AsyncConnectionPool, keyring: KeyRing, extractor: FactExtractor,
                 temporal: Client | None = None):
        """`extractor`: the worker's current extractor, whose version decides which sessions are due.
        `temporal`: asked for the first run of a continued re-derivation, which holds its claim."""
        self.temporal = temporal
        self.pool = pool
        self.keyring = keyring
        self.extractor = extractor
        self.recorder = OperationRecorder(pool, keyring)

    @activity.defn(name=contract.LIST_SUBJECTS_TO_REDERIVE)
    @temporal_failures
    async def list_subjects_to_rederive(self, request: SubjectListInput) -> SubjectList:
        return SubjectList(subjects=await list_subjects(self.pool, request.tenant_id, after=request.after_subject,
                                                        limit=request.limit))

    @activity.defn(name=contract.LIST_SESSIONS_TO_REDERIVE)
    @temporal_failures
    async def list_sessions_to_rederive(self, request: RederiveSubjectInput) -> RederiveSessions:
        """The subject's consolidated sessions whose facts an older extractor wrote (every
        consolidated session with `all_sessions`), minus those the current one re-derived."""
        sessions = await rederive.sessions_to_rederive(self.pool, self.keyring, request.tenant_id, request.subject_id,
                                                       self.extractor, all_sessions=request.all_sessions)
        return RederiveSessions(extractor=rederive.extractor_tag(self.extractor), sessions=sessions)

    @activity.defn(name=contract.REDERIVE_SESSION)
    @temporal_failures
    async def rederive_session(self, step: RederiveSessionInput) -> SessionRederiveOutcome:
        """One session's differences, recorded under the request; applied as events unless a dry
        run, and then only for a run an authorized caller registered (operator_requests)."""
        if not step.dry_run:
            await claim_for_this_run(self.pool, self.keyring, "rederive", chain=self.temporal, chained=True)
        extraction = await self.recorder.load(step.tenant_id, step.subject_id, step.extraction_operation_id,
                                              ExtractionResult)
        operation_id, record, reused = await rederive.rederive_session(
            self.pool, self.keyring, tenant_id=step.tenant_id, subject_id=step.subject_id,
            session_id=step.session_id, request_id=step.request_id,
            extraction_operation_id=step.extraction_operation_id, extraction=extraction, dry_run=step.dry_run)
        fault_point("after_rederive_session")
        return SessionRederiveOutcome(operation_id=operation_id, counts=record.counts(), reused=reused)
