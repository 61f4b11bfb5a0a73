"""Consolidation activities: thin wrappers that fetch by reference, call the domain core and
return counts and operation ids (never transcripts) to the workflow."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel
from temporalio import activity
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle, WorkflowQueryFailedError
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError

from activities.errors import temporal_failures
from activities.heartbeat import heartbeat_interval, progress
from activities.webhooks import start_webhook_deliveries
from agent_memory.core import contract
from agent_memory.core.hooks import after_record, fault_point
from agent_memory.core.models import (
    CommitInput,
    CommitOutcome,
    ConflictPlan,
    ConflictPlanInput,
    ConsolidationInput,
    ConsolidationProgress,
    ConsolidationResult,
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
    TokenBudgetState,
)
from agent_memory.core.operation_keys import CommitKey, PlanKey, ProviderStep, ProviderStepKey, request_hash
from agent_memory.core.vocabulary import VOCABULARY_VERSION, canonical_extraction
from agent_memory.memory.conflicts import decide
from agent_memory.memory.evidence import load_session, session_idle_state
from agent_memory.memory.memory_store import (
    commit_consolidation,
    current_candidates,
    current_facts,
    ended_fact_versions,
    evidence_arrivals,
)
from agent_memory.memory.operations import OperationRecorder
from agent_memory.memory.substance import EpisodeGate, gate_reason
from agent_memory.memory.token_budget import token_budget_state
from agent_memory.memory.write_policy import read_write_policy
from agent_memory.projection.projector import project_vectors
from agent_memory.providers.base import Embedder, FactExtractor, ImportanceScorer, Summarizer, runs_in_worker
from agent_memory.providers.metering import metered
from agent_memory.providers.notes import write_observations
from agent_memory.providers.policy import ProviderShield, restored
from agent_memory.security.keyring import KeyRing
from agent_memory.store.scope import Mode, SubjectErasedError, subject_scope
from agent_memory.telemetry.metrics import CONSOLIDATIONS
from agent_memory.telemetry.record import count_for_tenant


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



def _permanent(err: WorkflowFailureError) -> ApplicationError:
    """A failed consolidation run's failure as the failure of the activity that waited for it, of
    the same type: permanent, the run under that id never running again."""
    cause: BaseException | None = err.cause
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.__cause__
    if cause is None:
        return ApplicationError(f"the consolidation run failed: {err.cause}", non_retryable=True)
    return ApplicationError(cause.message, type=cause.type, non_retryable=True)


def consolidation_outcome(summary: SummaryResult, commit: CommitOutcome) -> str:
    """A committed consolidation's outcome as the metrics count it: `no_substance` when the
    substance gate kept the session from an episode and no fact was written, else `committed`."""
    return "no_substance" if summary.gated is not None and commit.facts_written == 0 else "committed"


R = TypeVar("R", bound=BaseModel)
EPISODE_GATE = EpisodeGate()

class ConsolidationActivities:
    def __init__(self, pool: AsyncConnectionPool, keyring: KeyRing, extractor: FactExtractor,
                 scorer: ImportanceScorer, summarizer: Summarizer, embedder: Embedder,
                 temporal: Client | None = None, daily_token_budget: int | None = None):
        """`temporal`: the client with which consolidate_with_remote_providers starts the run it
        waits for (that activity needs one; the others do not). `daily_token_budget`: the default
        of a tenant without a budget of its own (AGENT_MEMORY_DAILY_TOKEN_BUDGET; None: unlimited)."""
        self.temporal = temporal
        self.daily_token_budget = daily_token_budget
        self.pool = pool
        self.keyring = keyring
        self.extractor = extractor
        self.scorer = scorer
        self.summarizer = summarizer
        self.embedder = embedder
        self.recorder = OperationRecorder(pool, keyring)
        self.recorder.after_record = after_record  # fault points of the crash suite; off unless configured

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
                             provider: FactExtractor | ImportanceScorer | Summarizer | EpisodeGate,
                             result_type: type[R], call: Callable[[list[Message]], Awaitable[R]],
                             context: dict[str, str] | None = None,
                             instead: Callable[[list[Message]], tuple[EpisodeGate, Callable[[list[Message]], Awaitable[R]]]
                                               | None] | None = None) -> StepOutcome:
        """`context`: what else the provider is given or the result depends on besides the
        messages; it is recorded with the request and keys the operation with them. `instead`:
        given the messages, what stands in for the provider (recorded under its own name), or None."""
        messages, newest = await self._session(step)
        if instead is not None and (standin := instead(messages)) is not None:
            provider, call = standin
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
            found = await metered(step.tenant_id, self.extractor, "extract", self.extractor.extract(
                redactor.messages(messages), current_facts=shield.known_facts(known, redactor)))
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
            return restored(await metered(step.tenant_id, self.scorer, "importance",
                                          self.scorer.score(redactor.messages(messages))), redactor)

        return await self._provider_step(step, "importance", self.scorer, ImportanceResult, score)

    @activity.defn(name=contract.SUMMARIZE_SESSION)
    @temporal_failures
    async def summarize_session(self, step: StepInput) -> StepOutcome:
        shield = await ProviderShield.for_provider(self.pool, step.tenant_id, self.summarizer)

        async def summarize(messages: list[Message]) -> SummaryResult:
            redactor = shield.redactor()
            summary = restored(await metered(step.tenant_id, self.summarizer, "summarize",
                                             self.summarizer.summarize(redactor.messages(messages))), redactor)
            # Notes are a deterministic rewrite of the messages, not a model's output: a provider
            # that writes none (a remote model's summary) still gets them, recorded with its result.
            if not summary.observations:
                summary = summary.model_copy(update={"observations": write_observations(messages)})
            return summary

        def gated(messages: list[Message]) -> tuple[EpisodeGate, Callable[[list[Message]], Awaitable[SummaryResult]]
                                                     ] | None:
            # A session without substance is not summarized: no provider call, no episode.
            reason = gate_reason(messages)
            if reason is None:
                return None

            async def no_episode(messages: list[Message]) -> SummaryResult:
                return EPISODE_GATE.result(messages, reason)

            return EPISODE_GATE, no_episode

        return await self._provider_step(step, "summary", self.summarizer, SummaryResult, summarize, instead=gated)

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
                # Which statement is newer follows the server's order of receipt, read here so the
                # recorded plan is what a retry or a replay sees.
                received = await evidence_arrivals(
                    scope.conn, step.tenant_id, step.subject_id, step.session_id,
                    sorted({i for f in extraction.facts for i in f.evidence_message_ids}))
            return ConflictPlan(decisions=decide(extraction.facts, current, held, ended,
                                                 needs_confirmation=policy.needs_confirmation,
                                                 needs_corroboration=policy.needs_corroboration,
                                                 received_at=received))

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
        summary = await load(step.tenant_id, step.subject_id, step.summary_operation_id, SummaryResult)

        def committed(done: CommitOutcome) -> None:
            # Once per run: after this attempt's transaction, never for a retry that found it recorded.
            count_for_tenant(CONSOLIDATIONS, step.tenant_id, outcome=consolidation_outcome(summary, done))

        outcome = await commit_consolidation(
            self.pool, self.keyring, tenant_id=step.tenant_id, subject_id=step.subject_id,
            session_id=step.session_id, key=CommitKey.for_request(step.session_id, step.model_dump()),
            request=step.model_dump(),
            extraction=await load(step.tenant_id, step.subject_id, step.extraction_operation_id, ExtractionResult),
            plan=await load(step.tenant_id, step.subject_id, step.plan_operation_id, ConflictPlan),
            importance=await load(step.tenant_id, step.subject_id, step.importance_operation_id, ImportanceResult),
            summary=summary, happened_at=max(m.created_at for m in messages), through=step.through,
            written_at={m.message_id: m.created_at for m in messages}, committed=committed)
        fault_point("after_commit")
        if self.temporal is not None:
            await start_webhook_deliveries(self.pool, self.temporal, activity.info().task_queue, step.tenant_id)
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
        """A local activity of runs recorded on the in-worker route (workflows/consolidation.py,
        patch `in-worker-consolidation-as-one-local-activity`), registered for those still in
        flight: it says where this worker's providers compute and commits nothing, so the run goes
        on to consolidate_with_remote_providers, which runs the workflow's steps. It waits for
        nothing: a local activity holds a local-activity slot and its run's workflow task, and the
        steps' own run needs both kinds of this worker."""
        return ConsolidationStepsOutcome(placement=await self.locate_providers(step))

    @activity.defn(name=contract.CONSOLIDATE_WITH_REMOTE_PROVIDERS)
    @temporal_failures
    async def consolidate_with_remote_providers(self, step: StepInput) -> ConsolidationStepsOutcome:
        """The one ordinary activity of runs recorded on the one-activity routes (patch
        `remote-consolidation-as-one-activity`), registered for those still in flight. The steps
        are the workflow's: it starts the consolidation workflow for the session on this activity's
        task queue (a new run, so on the step route), one per activity of the calling run however
        often it is retried, heartbeats with the step in progress while it waits, and returns what
        the steps did (the workflow's steps_outcome query). It holds an activity slot only: the
        run it waits for needs workflow tasks, local activities and the model queue's workers.
        Refused before the commit (the subject is erased) or failed, it raises as the steps
        would have: SubjectErased, or the run's failure type, permanent either way."""
        info = activity.info()
        if self.temporal is None or info.workflow_id is None or info.workflow_run_id is None:
            raise ApplicationError("runs in a consolidation run, by a worker with a Temporal client",
                                   non_retryable=True)
        run = await self._start_steps_route(
            step, contract.steps_route_workflow_id(info.workflow_id, info.workflow_run_id, info.activity_id),
            info.task_queue)
        steps = progress()
        waiting = asyncio.ensure_future(run.result())
        try:
            while not (await asyncio.wait({waiting}, timeout=heartbeat_interval(info.heartbeat_timeout)
                                          .total_seconds()))[0]:
                with contextlib.suppress(RPCError, WorkflowQueryFailedError):  # the next beat asks again
                    now = await run.query(contract.PROGRESS_QUERY, result_type=ConsolidationProgress)
                    steps.update(step=now.step)
            await waiting
        except WorkflowFailureError as err:
            raise _permanent(err) from None
        except asyncio.CancelledError:
            waiting.cancel()
            cancelled = activity.cancellation_details()
            if cancelled is not None and cancelled.cancel_requested:  # the calling run is cancelled
                with contextlib.suppress(RPCError):
                    await run.cancel()
            raise  # a timeout or a worker shutting down: a retry waits for the same run
        done: ConsolidationStepsOutcome = await run.query(contract.STEPS_OUTCOME_QUERY, result_type=ConsolidationStepsOutcome)
        if done.commit is None:
            raise SubjectErasedError(step.tenant_id, step.subject_id)  # refused before the commit
        if done.refused_reason is not None:
            done.projection = None  # erased after the commit: what was committed is reported
        return done

    async def _start_steps_route(self, step: StepInput, workflow_id: str, task_queue: str
                                 ) -> WorkflowHandle[Any, ConsolidationResult]:
        """Start the consolidation under `workflow_id`, or the run already under it (running or
        closed: never a second one), with the session's search attributes."""
        assert self.temporal is not None
        try:
            return await self.temporal.start_workflow(
                contract.CONSOLIDATION_WORKFLOW,
                ConsolidationInput(tenant_id=step.tenant_id, subject_id=step.subject_id, session_id=step.session_id),
                id=workflow_id, task_queue=task_queue, result_type=ConsolidationResult,
                priority=contract.tenant_fairness(step.tenant_id),
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                search_attributes=TypedSearchAttributes([
                    SearchAttributePair(contract.TENANT_ID, step.tenant_id),
                    SearchAttributePair(contract.SUBJECT_ID, step.subject_id),
                    SearchAttributePair(contract.SESSION_ID, step.session_id)]))
        except WorkflowAlreadyStartedError:  # closed already: its result stands
            return self.temporal.get_workflow_handle(workflow_id, result_type=ConsolidationResult)

    @activity.defn(name=contract.CHECK_TOKEN_BUDGET)
    @temporal_failures
    async def check_token_budget(self, step: StepInput) -> TokenBudgetState:
        """The tenant's daily model-token budget and what it spent today (UTC), read before the
        consolidation's model calls: an exhausted budget parks the run (workflows/consolidation.py)."""
        return await token_budget_state(self.pool, step.tenant_id, self.daily_token_budget)

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
