"""Consolidation activities: thin wrappers that fetch by reference, call the domain core and
return counts and operation ids (never transcripts) to the workflow."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypeVar

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.errors import temporal_failures
from activities.heartbeat import progress
from agent_memory import contract
from agent_memory.concurrency import await_both
from agent_memory.conflicts import decide
from agent_memory.contract import ErrorType
from agent_memory.evidence import load_session, session_idle_state
from agent_memory.hooks import after_record, fault_point
from agent_memory.keyring import KeyRing
from agent_memory.memory_store import commit_consolidation, current_candidates, current_facts, ended_fact_versions
from agent_memory.models import (
    CommitInput,
    CommitOutcome,
    ConflictPlan,
    ConflictPlanInput,
    ConsolidationStepsOutcome,
    ExtractionResult,
    ImportanceResult,
    KnownFact,
    Message,
    ProjectionInput,
    ProjectionOutcome,
    ProviderPlacement,
    StepInput,
    StepOutcome,
    SummaryResult,
)
from agent_memory.operation_keys import CommitKey, PlanKey, ProviderStep, ProviderStepKey, request_hash
from agent_memory.operations import OperationRecorder
from agent_memory.projection import OutboxProjector, project_vectors
from agent_memory.provider_policy import ProviderShield, restored
from agent_memory.providers.base import Embedder, FactExtractor, ImportanceScorer, Summarizer, runs_in_worker
from agent_memory.providers.notes import write_observations
from agent_memory.scope import Mode, SubjectErasedError, subject_scope
from agent_memory.vocabulary import VOCABULARY_VERSION, canonical_extraction
from agent_memory.write_policy import read_write_policy


def messages_digest(messages: list[Message]) -> str:
    """Identifies exactly which evidence a provider saw: same messages → same operation id."""
    h = hashlib.sha256()
    for m in messages:
        h.update(f"{m.message_id}\x1f{m.role}\x1f{m.content}\x1e".encode())
    return h.hexdigest()[:24]


def facts_digest(facts: list[KnownFact]) -> str:
    """Identifies the current facts an extractor was shown (their times too: the newest are kept
    when the prompt caps them)."""
    h = hashlib.sha256()
    for f in facts:
        h.update(f"{f.namespace}\x1f{f.key}\x1f{f.value}\x1f{f.observed_at.isoformat() if f.observed_at else ''}"
                 f"\x1e".encode())
    return h.hexdigest()[:24]



R = TypeVar("R", bound=BaseModel)

class ConsolidationActivities:
    def __init__(self, pool: AsyncConnectionPool, keyring: KeyRing, extractor: FactExtractor,
                 scorer: ImportanceScorer, summarizer: Summarizer, embedder: Embedder,
                 projector: OutboxProjector | None = None):
        """`projector`: embeds the run's own rows in consolidate_in_worker (the worker passes the
        projection activities' one, so both follow one policy)."""
        self.pool = pool
        self.keyring = keyring
        self.extractor = extractor
        self.scorer = scorer
        self.summarizer = summarizer
        self.embedder = embedder
        self.recorder = OperationRecorder(pool, keyring)
        self.recorder.after_record = after_record  # fault points of the crash suite; off unless configured
        if projector is None:
            projector = OutboxProjector(pool, keyring, embedder)
            projector.after_record = after_record
        self.projector = projector

    async def _session(self, step: StepInput) -> tuple[list[Message], datetime | None]:
        # An erased subject's messages are gone; say so rather than "session not found".
        async with subject_scope(self.pool, self.keyring, step.tenant_id, step.subject_id, Mode.WRITE):
            pass
        return await load_session(self.pool, step.tenant_id, step.subject_id, step.session_id, through=step.through)

    async def _known_facts(self, step: StepInput) -> list[KnownFact]:
        """The subject's current facts, as check_conflicts reads them (an erased subject is refused)."""
        async with subject_scope(self.pool, self.keyring, step.tenant_id, step.subject_id, Mode.WRITE) as scope:
            current = await current_facts(scope.conn, step.tenant_id, step.subject_id)
        return [KnownFact(namespace=f.namespace, key=f.key, value=f.value, observed_at=f.observed_at)
                for f in sorted(current.values(), key=lambda f: (f.namespace, f.key))]

    async def _provider_step(self, step: StepInput, kind: ProviderStep,
                             provider: FactExtractor | ImportanceScorer | Summarizer,
                             result_type: type[R], call: Callable[[list[Message]], Awaitable[R]],
                             context: dict[str, str] | None = None) -> StepOutcome:
        """`context`: what else the provider is given or the result depends on besides the
        messages; it is recorded with the request and keys the operation with them."""
        messages, newest = await self._session(step)
        digest = messages_digest(messages)
        request = {"session_id": step.session_id, "messages": digest, "provider": provider.name,
                   "version": provider.version}
        if context:
            # In the key as well: another context is another operation, never a mismatch with a
            # recorded one.
            request |= context
            digest = request_hash({"messages": digest, **context})[:24]
        key = ProviderStepKey.for_messages(kind, step.subject_id, step.session_id, provider, digest)
        result, reused = await self.recorder.run(
            tenant_id=step.tenant_id, subject_id=step.subject_id, key=key, request=request,
            result_type=result_type, call=lambda: call(messages))
        count = len(result.facts) if isinstance(result, ExtractionResult) else (
            len(result.sentences) if isinstance(result, SummaryResult) else 1)
        return StepOutcome(operation_id=key.operation_id, count=count, reused=reused, through=newest)

    @activity.defn(name=contract.EXTRACT_FACTS)
    @temporal_failures
    async def extract_facts(self, step: StepInput) -> StepOutcome:
        known = await self._known_facts(step)
        shield = await ProviderShield.for_provider(self.pool, step.tenant_id, self.extractor)

        async def extract(messages: list[Message]) -> ExtractionResult:
            # A remote model sees the tenant's identifiers as placeholders (and no fact of an
            # excluded namespace); the values are put back in what it extracted.
            redactor = shield.redactor()
            found = await self.extractor.extract(redactor.messages(messages),
                                                 current_facts=shield.known_facts(known, redactor))
            # One vocabulary whatever the provider: normalised before it is recorded, so the plan
            # and the commit only ever see canonical keys.
            result = canonical_extraction(restored(found, redactor))
            return result.model_copy(update={"current_facts_digest": facts_digest(known)})

        # Keyed on the messages, not on the current facts: the facts change with every commit, and
        # a consolidation run again after its own commit (a reset, a re-run of a failed run) must
        # find the recorded extraction (the commit is then replayed), not make a second one or fail
        # as a mismatch. The record says which facts the extractor saw (current_facts_digest).
        return await self._provider_step(step, "extract", self.extractor, ExtractionResult, extract,
                                         context={"vocabulary": VOCABULARY_VERSION})

    @activity.defn(name=contract.SCORE_IMPORTANCE)
    @temporal_failures
    async def score_importance(self, step: StepInput) -> StepOutcome:
        shield = await ProviderShield.for_provider(self.pool, step.tenant_id, self.scorer)

        async def score(messages: list[Message]) -> ImportanceResult:
            redactor = shield.redactor()
            return restored(await self.scorer.score(redactor.messages(messages)), redactor)

        return await self._provider_step(step, "importance", self.scorer, ImportanceResult, score)

    @activity.defn(name=contract.SUMMARIZE_SESSION)
    @temporal_failures
    async def summarize_session(self, step: StepInput) -> StepOutcome:
        shield = await ProviderShield.for_provider(self.pool, step.tenant_id, self.summarizer)

        async def summarize(messages: list[Message]) -> SummaryResult:
            redactor = shield.redactor()
            summary = restored(await self.summarizer.summarize(redactor.messages(messages)), redactor)
            # Notes are a deterministic rewrite of the messages, not a model's output: a provider
            # that writes none (a remote model's summary) still gets them, recorded with its result.
            if not summary.observations:
                summary = summary.model_copy(update={"observations": write_observations(messages)})
            return summary

        return await self._provider_step(step, "summary", self.summarizer, SummaryResult, summarize)

    @activity.defn(name=contract.CHECK_CONFLICTS)
    @temporal_failures
    async def check_conflicts(self, step: ConflictPlanInput) -> StepOutcome:
        """Decide each extracted fact against the current facts; the plan is recorded so the
        commit applies exactly what was decided, guarded by the versions it was decided on."""
        extraction = await self.recorder.load(step.tenant_id, step.subject_id, step.extraction_operation_id,
                                              ExtractionResult)

        async def plan() -> ConflictPlan:
            # Part of the write path: an erased subject is refused, not planned against.
            async with subject_scope(self.pool, self.keyring, step.tenant_id, step.subject_id, Mode.WRITE) as scope:
                current = await current_facts(scope.conn, step.tenant_id, step.subject_id)
                held = await current_candidates(scope.conn, step.tenant_id, step.subject_id)
                ended = await ended_fact_versions(scope.conn, step.tenant_id, step.subject_id)
                policy = await read_write_policy(scope.conn, step.tenant_id)
            return ConflictPlan(decisions=decide(extraction.facts, current, held, ended,
                                                 needs_confirmation=policy.needs_confirmation))

        # Keyed on the extraction: a later run over more messages makes its own plan.
        key = PlanKey.for_extraction(step.session_id, step.extraction_operation_id, step.round)
        result, reused = await self.recorder.run(
            tenant_id=step.tenant_id, subject_id=step.subject_id, key=key,
            request=step.model_dump(), result_type=ConflictPlan, call=plan)
        fault_point("after_plan")
        return StepOutcome(operation_id=key.operation_id, count=len(result.decisions), reused=reused)

    @activity.defn(name=contract.COMMIT_CONSOLIDATION)
    @temporal_failures
    async def commit_consolidation(self, step: CommitInput) -> CommitOutcome:
        load = self.recorder.load
        messages, _ = await self._session(StepInput(tenant_id=step.tenant_id, subject_id=step.subject_id,
                                                    session_id=step.session_id, through=step.through))
        outcome = await commit_consolidation(
            self.pool, self.keyring, tenant_id=step.tenant_id, subject_id=step.subject_id,
            session_id=step.session_id, key=CommitKey.for_request(step.session_id, step.model_dump()),
            request=step.model_dump(),
            extraction=await load(step.tenant_id, step.subject_id, step.extraction_operation_id, ExtractionResult),
            plan=await load(step.tenant_id, step.subject_id, step.plan_operation_id, ConflictPlan),
            importance=await load(step.tenant_id, step.subject_id, step.importance_operation_id, ImportanceResult),
            summary=await load(step.tenant_id, step.subject_id, step.summary_operation_id, SummaryResult),
            happened_at=max(m.created_at for m in messages), through=step.through)
        fault_point("after_commit")
        return outcome

    @activity.defn(name=contract.LOCATE_PROVIDERS)
    @temporal_failures
    async def locate_providers(self, step: StepInput) -> ProviderPlacement:
        """Where this worker's providers compute: the consolidation runs the steps of providers in
        the worker's process as local activities, and those of remote ones as ordinary ones."""
        return ProviderPlacement(
            model_steps_in_worker=all(runs_in_worker(p) for p in (self.extractor, self.scorer, self.summarizer)),
            embedder_in_worker=runs_in_worker(self.embedder))

    @activity.defn(name=contract.CONSOLIDATE_IN_WORKER)
    @temporal_failures
    async def consolidate_in_worker(self, step: StepInput) -> ConsolidationStepsOutcome:
        """Every step of the consolidation in one local activity, for providers that compute in
        this process: a route that recorded runs took (workflows/consolidation.py, patch
        `in-worker-consolidation-as-one-local-activity`). Registered for those runs only; a run
        on the step route schedules each step itself. Each step is a
        recorded operation, so a retry resumes from the last recorded result. With a provider that
        computes elsewhere it does nothing but say where they compute."""
        placement = await self.locate_providers(step)
        if not (placement.model_steps_in_worker and placement.embedder_in_worker):
            return ConsolidationStepsOutcome(placement=placement)
        return await self.consolidate_in_line(step, placement)

    @activity.defn(name=contract.CONSOLIDATE_WITH_REMOTE_PROVIDERS)
    @temporal_failures
    async def consolidate_with_remote_providers(self, step: StepInput) -> ConsolidationStepsOutcome:
        """The same steps as consolidate_in_worker, as one heartbeated ordinary activity, for runs
        recorded on that route with a remote provider (patch
        `remote-consolidation-as-one-activity`). Registered for those runs only."""
        return await self.consolidate_in_line(step, await self.locate_providers(step))

    async def consolidate_in_line(self, step: StepInput, placement: ProviderPlacement) -> ConsolidationStepsOutcome:
        """The steps of the two one-activity routes above, called in line, in the workflow's
        order. The workflow itself schedules each step as an activity (its pipeline is defined
        there); this serves the runs recorded on those routes, and `agent-memory-tools bench
        consolidate` as its direct pipeline: the same activity code without Temporal."""
        steps = progress()
        steps.update(step=contract.EXTRACT_FACTS)
        extraction = await self.extract_facts(step)
        step = step.model_copy(update={"through": extraction.through})
        steps.update(step=f"{contract.SCORE_IMPORTANCE}, {contract.SUMMARIZE_SESSION}")
        importance, summary = await await_both(asyncio.ensure_future(self.score_importance(step)),
                                               asyncio.ensure_future(self.summarize_session(step)))
        for round_ in range(contract.MAX_CONFLICT_ROUNDS):
            steps.update(step=f"{contract.CHECK_CONFLICTS}, {contract.COMMIT_CONSOLIDATION}")
            plan = await self.check_conflicts(ConflictPlanInput(
                **step.model_dump(), extraction_operation_id=extraction.operation_id, round=round_))
            try:
                commit = await self.commit_consolidation(CommitInput(
                    **step.model_dump(), extraction_operation_id=extraction.operation_id,
                    plan_operation_id=plan.operation_id, importance_operation_id=importance.operation_id,
                    summary_operation_id=summary.operation_id))
            except ApplicationError as err:
                if err.type != ErrorType.VERSION_CONFLICT:
                    raise
                continue  # another writer changed a fact since the plan: re-read and re-decide
            done = ConsolidationStepsOutcome(placement=placement, facts_extracted=extraction.count, decisions=plan.count,
                                         conflict_retries=round_, commit=commit)
            break
        else:
            raise ApplicationError(f"facts kept changing during {contract.MAX_CONFLICT_ROUNDS} commit attempts",
                                   type=ErrorType.VERSION_CONFLICT, non_retryable=True)
        steps.update(step=contract.PROJECT_OUTBOX_BATCH)
        try:
            # A failed embedding is recorded on its row and left to the projector, never raised.
            done.projection = await self.projector.project_batch(step.tenant_id, step.subject_id)
        except SubjectErasedError:
            done.refused_reason = "subject erased"  # after the commit: what was committed is reported
        return done

    @activity.defn(name=contract.COUNT_UNCONSOLIDATED)
    @temporal_failures
    async def count_unconsolidated(self, step: StepInput) -> StepOutcome:
        """How many of the session's messages no successful consolidation has covered yet."""
        count, idle = await session_idle_state(self.pool, step.tenant_id, step.subject_id, step.session_id)
        return StepOutcome(operation_id="", count=count, idle_seconds=idle)

    @activity.defn(name=contract.PROJECT_VECTORS)
    @temporal_failures
    async def project_vectors(self, step: ProjectionInput) -> ProjectionOutcome:
        return await project_vectors(self.pool, self.recorder, self.embedder, step.tenant_id, step.subject_id)
