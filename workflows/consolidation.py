"""Consolidation of one finished session into long-term memory.

extract facts → score importance and summarize, at once → check conflicts → commit (one
transaction) → embed the session's rows (one batch) and wake the subject's projector for whatever
is left (workflows/projector.py). Each step is an activity of its own, named in the run's
history: a model's calls are ordinary activities on the model task queue (its own workers and
rate limit, a heartbeat each); the short database steps, and the steps of providers that compute
in the worker's process (the offline default), are local activities (one marker each).
Runs recorded on earlier routes (every step in one activity; model steps as local activities or
on the workflow's queue; vectors projected by the run itself) replay as they ran, each behind its
`workflow.patched` id; the one-activity routes' activity runs the steps as a run of this workflow
on the step route. History carries operation ids and counts; the data stays in Postgres.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.consolidation import ConsolidationActivities
    from activities.projection import ProjectionActivities
    from agent_memory.core import contract
    from agent_memory.core.contract import ErrorType
    from agent_memory.core.models import (
        CommitInput,
        CommitOutcome,
        ConflictPlanInput,
        ConsolidationInput,
        ConsolidationProgress,
        ConsolidationResult,
        ConsolidationStepsOutcome,
        ProjectionInput,
        ProviderPlacement,
        StepInput,
        StepOutcome,
    )
    from agent_memory.core.projection_models import ProjectorBatchInput, ProjectorBatchOutcome
    from agent_memory.core.run_metadata import consolidation_details

from workflows.token_budget import BudgetRaised, within_token_budget

# Activity options: agent_memory/core/contract.py's presets. Transient failures are retried without an
# attempt cap, at a capped interval: an outage of the model provider or of Postgres must not fail
# a consolidation. Permanent failures are raised as non-retryable types (activities/errors.py)
# and end the retries at once. Model calls (contract.PROVIDER_STEP): the recorded operation makes
# each retry free of a second call once a result exists; database writes (STORE_WRITE): fast
# retries; the vector projection (VECTOR_PROJECTION) can lag without blocking the facts.
MAX_CONFLICT_ROUNDS = contract.MAX_CONFLICT_ROUNDS
# Runs recorded before the providers were located: every model call an ordinary activity, and the
# projector embeds every row.
REMOTE_PROVIDERS = ProviderPlacement(model_steps_in_worker=False, embedder_in_worker=False)
ProviderStepMethod = Callable[[ConsolidationActivities, StepInput], Awaitable[StepOutcome]]


def _failure_type(err: ActivityError | ApplicationError) -> str | None:
    """The error type of a failed step: an activity's failure is an ActivityError whose cause is
    the ApplicationError; a local activity's reaches the workflow as the ApplicationError itself."""
    if isinstance(err, ApplicationError):
        return err.type
    return err.cause.type if isinstance(err.cause, ApplicationError) else None


# Outside the SDK's sandbox: every session's consolidation would otherwise pay for a fresh sandbox
# and a re-import of this module (about 0.03x of throughput with a 1 s model latency, more offline;
# docs/performance.md). Its code stays sandbox-clean: tests/workflows/test_replay.py replays every
# recorded consolidation in the sandbox, where a wall clock, randomness or I/O would fail it.
@workflow.defn(name=contract.CONSOLIDATION_WORKFLOW, sandboxed=False, versioning_behavior=VersioningBehavior.PINNED)
class ConsolidationWorkflow:
    def __init__(self) -> None:
        self._progress = ConsolidationProgress(step="starting")
        self._commit: CommitOutcome | None = None
        # Where the providers compute (the step route's first step records it), the batch that
        # embedded the run's own rows, and why the run was refused: for steps_outcome.
        self._placement = REMOTE_PROVIDERS
        self._batch: ProjectorBatchOutcome | None = None
        self._refused_reason: str | None = None
        # Set by the budget-changed signal: a run parked on the token budget checks it again now.
        self._budget_raised = BudgetRaised()

    @workflow.signal(name=contract.SIGNAL_BUDGET_CHANGED)
    def budget_changed(self) -> None:
        self._budget_raised.signalled = True

    @workflow.query(name=contract.PROGRESS_QUERY)
    def progress(self) -> ConsolidationProgress:
        return self._progress

    @workflow.query(name=contract.STEPS_OUTCOME_QUERY)
    def steps_outcome(self) -> ConsolidationStepsOutcome:
        """What the steps did, as a one-activity route's activity reports it: a run recorded on
        such a route and still in flight has that activity run the steps as a run of this workflow
        on the step route, and report this (ConsolidationActivities.consolidate_with_remote_providers)."""
        return ConsolidationStepsOutcome(
            placement=self._placement, facts_extracted=self._progress.facts_extracted,
            decisions=self._progress.decisions, conflict_retries=self._progress.conflict_retries,
            commit=self._commit, projection=self._batch, refused_reason=self._refused_reason)

    @workflow.run
    async def run(self, request: ConsolidationInput) -> ConsolidationResult:
        try:
            return await self._consolidate(request)
        except (ActivityError, ApplicationError) as err:
            if _failure_type(err) != ErrorType.SUBJECT_ERASED:
                raise
            self._progress.step = "refused: subject erased"
            self._refused_reason = "subject erased"
            workflow.logger.info("consolidation refused: the subject was erased")
            # Erased after the commit (while waking the projector): what was committed is reported.
            return self._result(request, commit=self._commit, refused_reason="subject erased")

    async def _consolidate(self, request: ConsolidationInput) -> ConsolidationResult:
        # The short database steps (plan, commit, wake) run as local activities: each is one
        # marker event instead of a task round trip through the server (six events). They are
        # recorded operations like every step, so running one again after a crash is harmless.
        #
        # Each step its own activity: a model's extraction, importance and summary calls are
        # ordinary activities on the model task queue (contract.model_task_queue: its own workers
        # and rate limit), each with its timeout, retries and heartbeat, and local activities when
        # the providers compute in the worker's process; the plan, the commit and the wake are local
        # activities; the run's own rows are embedded by a local activity with an embedder in the
        # worker's process, else by an ordinary one on the model queue. Every step
        # is a recorded operation, so a retry after a crash resumes from the last recorded result.
        # Runs recorded on the routes below (patched) replay as they ran.
        steps = workflow.patched("each-step-its-own-activity")
        local = steps or workflow.patched("store-steps-as-local-activities")
        model_queue = contract.model_task_queue(workflow.info().task_queue) if steps else None
        step = StepInput(tenant_id=request.tenant_id, subject_id=request.subject_id, session_id=request.session_id)

        placement = REMOTE_PROVIDERS
        if steps:
            # Where this worker's embedder computes, recorded (a marker) so that a replay on any
            # worker takes the same route for the projection.
            placement = await workflow.execute_local_activity_method(
                ConsolidationActivities.locate_providers, step, **contract.STORE_WRITE.local_options())
        elif workflow.patched("in-worker-consolidation-as-one-local-activity"):
            # Runs recorded on this route ran every step in one local activity when every
            # provider computed in the worker's process, else went on to the one ordinary
            # activity below. A run still in flight on it gets from the local activity only where
            # the providers compute, never a commit (waiting there would hold a local-activity
            # slot and this run's workflow task, which the steps need), and goes on below; the
            # recorded answer keeps a replay on any worker on the same route.
            self._progress.step = "consolidate_in_worker"
            done = await workflow.execute_local_activity_method(
                ConsolidationActivities.consolidate_in_worker, step, **contract.IN_WORKER_CONSOLIDATION.local_options())
            if done.commit is not None:
                return await self._consolidated_in_one_activity(request, done)
            placement = done.placement
            if workflow.patched("remote-consolidation-as-one-activity"):
                # Runs recorded on this route ran every step in one heartbeated ordinary activity.
                # For a run in flight on it the activity runs the steps as a run of this workflow
                # on the step route (one per activity, however often it is retried), heartbeats
                # while it waits, and returns what the steps did (steps_outcome): the pipeline is
                # defined here only.
                self._progress.step = "consolidate_with_remote_providers"
                done = await workflow.execute_activity_method(
                    ConsolidationActivities.consolidate_with_remote_providers, step,
                    **contract.REMOTE_CONSOLIDATION.options())
                return await self._consolidated_in_one_activity(request, done)
        elif workflow.patched("in-worker-providers-as-local-activities"):
            # Providers that compute in the worker's process (the offline default) run as local
            # activities too: with all of them in the worker a consolidation is one workflow task,
            # its steps marker events. A remote model's calls stay ordinary activities, which the
            # server heartbeats and times out while a call takes its minutes. The placement is
            # recorded (a marker), so a replay on any worker takes the same route.
            placement = await workflow.execute_local_activity_method(
                ConsolidationActivities.locate_providers, step, **contract.STORE_WRITE.local_options())
        self._placement = placement
        # Providers that compute in the worker's process (the offline extractor, scorer and
        # summarizer: milliseconds of CPU, no model call) run as local activities, one marker each:
        # a task round trip through the server per step would cost more than the step. A model's
        # calls stay ordinary activities on the model queue. Step-route runs recorded before this
        # sent the offline steps to the model queue too, and replay so.
        in_worker = placement.model_steps_in_worker and (
            not steps or workflow.patched("in-worker-model-steps-as-local-activities"))

        # The tenant's daily token budget, checked before each round of model calls; a run whose
        # tenant spent it waits, parked, instead of failing (_within_token_budget). In-worker
        # providers make no model call and spend no tokens: their runs check nothing.
        budgeted = not in_worker and workflow.patched("token-budget-parks-model-steps")
        if budgeted:
            await within_token_budget(step, self._progress, self._budget_raised)

        self._progress.step = "extract_facts"
        extraction = await self._start_provider_step(ConsolidationActivities.extract_facts, step, in_worker,
                                                     model_queue)
        self._progress.facts_extracted = extraction.count
        # Every later step works on the messages the extraction saw, however many arrive meanwhile.
        step = step.model_copy(update={"through": extraction.through})

        if steps or workflow.patched("importance-and-summary-at-once"):
            # Importance and the summary read the messages the extraction saw and nothing of each
            # other: the two model calls run at once, so a consolidation waits for two model calls
            # in a row instead of three. (The conflict plan, a local activity, would hold the
            # workflow task open and so delay their scheduling: it runs after them.)
            if budgeted:
                await within_token_budget(step, self._progress, self._budget_raised)
            self._progress.step = "score_importance, summarize_session"
            importance_call = self._start_provider_step(ConsolidationActivities.score_importance, step, in_worker,
                                                        model_queue)
            summary_call = self._start_provider_step(ConsolidationActivities.summarize_session, step, in_worker,
                                                     model_queue)
            try:
                importance = await importance_call
                summary = await summary_call
            except BaseException:
                # One failed (or the run is cancelled): the other is not waited for.
                importance_call.cancel()
                summary_call.cancel()
                raise
            at_once = True
        else:
            self._progress.step = "score_importance"
            importance = await workflow.execute_activity_method(
                ConsolidationActivities.score_importance, step,
                **contract.PROVIDER_STEP.options())
            at_once = False

        commit = None
        for round_ in range(MAX_CONFLICT_ROUNDS):
            self._progress.step = "check_conflicts"
            plan = await self._check_conflicts(step, extraction.operation_id, round_, local)
            self._progress.decisions = plan.count

            if round_ == 0 and not at_once:
                self._progress.step = "summarize_session"
                summary = await workflow.execute_activity_method(
                    ConsolidationActivities.summarize_session, step,
                    **contract.PROVIDER_STEP.options())

            self._progress.step = "commit_consolidation"
            commit_input = CommitInput(**step.model_dump(), extraction_operation_id=extraction.operation_id,
                                       plan_operation_id=plan.operation_id,
                                       importance_operation_id=importance.operation_id,
                                       summary_operation_id=summary.operation_id)
            try:
                if local:
                    commit = await workflow.execute_local_activity_method(
                        ConsolidationActivities.commit_consolidation, commit_input,
                        **contract.STORE_WRITE.local_options())
                else:
                    commit = await workflow.execute_activity_method(
                        ConsolidationActivities.commit_consolidation, commit_input, **contract.STORE_WRITE.options())
                break
            except (ActivityError, ApplicationError) as err:
                if _failure_type(err) != ErrorType.VERSION_CONFLICT:
                    raise
                # Another writer changed a fact since the plan: re-read and re-decide.
                self._progress.conflict_retries += 1
                workflow.logger.info("facts changed since the plan (round %d): deciding again", round_ + 1)
        if commit is None:
            raise ApplicationError(f"facts kept changing during {MAX_CONFLICT_ROUNDS} commit attempts",
                                   type=ErrorType.VERSION_CONFLICT, non_retryable=True)
        self._progress.events_appended = commit.events_appended
        self._commit = commit

        if steps or workflow.patched("projection-by-projector"):
            vectors = 0
            # The run embeds its own rows (the projector's batch step) and leaves the rest to the
            # projector: more rows than a batch, an embedding failed and due again later, rows
            # another attempt holds. A failed embedding is recorded on its row, never raised: it
            # cannot hold the run. An embedder in the worker's process runs as a local activity;
            # a remote one as an ordinary activity (the server times out a call that hangs), and
            # runs recorded before it did so leave every row to the projector (a second workflow
            # per consolidation: its start, three workflow tasks and a dozen more events).
            batch_input = ProjectorBatchInput(tenant_id=request.tenant_id, subject_id=request.subject_id)
            batch: ProjectorBatchOutcome | None = None
            if placement.embedder_in_worker:
                self._progress.step = "project_vectors"
                batch = await workflow.execute_local_activity_method(
                    ProjectionActivities.project_outbox_batch, batch_input,
                    **contract.VECTOR_PROJECTION.local_options())
            elif model_queue is not None:
                # A remote embedder's call: on the model queue, under its rate limit.
                self._progress.step = "project_vectors"
                batch = await workflow.execute_activity_method(
                    ProjectionActivities.project_outbox_batch, batch_input, task_queue=model_queue,
                    priority=contract.tenant_fairness(request.tenant_id), **contract.VECTOR_PROJECTION.options())
            elif workflow.patched("remote-embedder-embeds-the-runs-rows"):
                self._progress.step = "project_vectors"
                batch = await workflow.execute_activity_method(
                    ProjectionActivities.project_outbox_batch, batch_input, **contract.VECTOR_PROJECTION.options())
            if batch is not None:
                self._batch = batch
                vectors = self._progress.vectors_upserted = batch.vectors_upserted
                if not batch.pending:
                    self._progress.step = "done"
                    return self._result(request, commit=commit, vectors=vectors)
            # Committed is done: the subject's projector (workflows/projector.py) embeds the outbox
            # rows on its own schedule, so lagging embeddings never fail or hold a consolidation.
            self._progress.step = "wake_projector"
            wake = ProjectionInput(tenant_id=request.tenant_id, subject_id=request.subject_id)
            if local:
                await workflow.execute_local_activity_method(
                    ProjectionActivities.wake_projector, wake, **contract.PROJECTOR_WAKE.local_options())
            else:
                await workflow.execute_activity_method(
                    ProjectionActivities.wake_projector, wake, **contract.PROJECTOR_WAKE.options())
            self._progress.step = "done"
            return self._result(request, commit=commit, vectors=vectors, projector_woken=True)

        self._progress.step = "project_vectors"
        projection = await workflow.execute_activity_method(
            ConsolidationActivities.project_vectors,
            ProjectionInput(tenant_id=request.tenant_id, subject_id=request.subject_id),
            **contract.VECTOR_PROJECTION.options())
        self._progress.vectors_upserted = projection.vectors_upserted
        self._progress.step = "done"
        return self._result(request, commit=commit, vectors=projection.vectors_upserted)

    async def _consolidated_in_one_activity(self, request: ConsolidationInput,
                                            done: ConsolidationStepsOutcome) -> ConsolidationResult:
        assert done.commit is not None
        self._commit = done.commit
        self._progress = ConsolidationProgress(
            step="done", facts_extracted=done.facts_extracted, decisions=done.decisions,
            events_appended=done.commit.events_appended, conflict_retries=done.conflict_retries,
            vectors_upserted=done.projection.vectors_upserted if done.projection else 0)
        if done.projection is None:
            self._progress.step = "refused: subject erased"
            return self._result(request, commit=done.commit, refused_reason=done.refused_reason)
        if not done.projection.pending:
            return self._result(request, commit=done.commit, vectors=done.projection.vectors_upserted)
        # Rows left (more than a batch, an embedding due again later): the subject's projector.
        self._progress.step = "wake_projector"
        await workflow.execute_local_activity_method(
            ProjectionActivities.wake_projector, ProjectionInput(tenant_id=request.tenant_id, subject_id=request.subject_id),
            **contract.PROJECTOR_WAKE.local_options())
        self._progress.step = "done"
        return self._result(request, commit=done.commit, vectors=done.projection.vectors_upserted,
                            projector_woken=True)

    @staticmethod
    def _start_provider_step(method: ProviderStepMethod, step: StepInput, in_worker: bool,
                             model_queue: str | None) -> workflow.ActivityHandle[StepOutcome]:
        """A model step: a local activity for a provider in the worker's process, else an ordinary
        activity on the model queue (on routes recorded before it, on the workflow's queue); the
        same retry preset every way. On the model queue it carries the tenant's fairness key: the
        queue's backlog is handed out round-robin by tenant."""
        if in_worker:
            return workflow.start_local_activity_method(method, step, **contract.PROVIDER_STEP.local_options())
        if model_queue is not None:
            return workflow.start_activity_method(method, step, task_queue=model_queue,
                                                  priority=contract.tenant_fairness(step.tenant_id),
                                                  **contract.PROVIDER_STEP.options())
        return workflow.start_activity_method(method, step, **contract.PROVIDER_STEP.options())

    async def _check_conflicts(self, step: StepInput, extraction_operation_id: str, round_: int,
                               local: bool) -> StepOutcome:
        plan_input = ConflictPlanInput(**step.model_dump(), extraction_operation_id=extraction_operation_id,
                                       round=round_)
        if local:
            return await workflow.execute_local_activity_method(
                ConsolidationActivities.check_conflicts, plan_input, **contract.STORE_WRITE.local_options())
        return await workflow.execute_activity_method(
            ConsolidationActivities.check_conflicts, plan_input, **contract.STORE_WRITE.options())

    def _result(self, request: ConsolidationInput, *, commit: CommitOutcome | None = None, vectors: int = 0,
                refused_reason: str | None = None, projector_woken: bool = False) -> ConsolidationResult:
        workflow.set_current_details(consolidation_details(  # for the UI; creates no command
            commit.facts_written if commit else 0, bool(commit and commit.episode_written),
            self._progress.decisions, vectors, refused_reason))
        return ConsolidationResult(
            workflow_id=workflow.info().workflow_id, tenant_id=request.tenant_id, subject_id=request.subject_id,
            session_id=request.session_id, facts_extracted=self._progress.facts_extracted,
            events_appended=commit.events_appended if commit else 0,
            facts_written=commit.facts_written if commit else 0,
            episode_written=commit.episode_written if commit else False, vectors_upserted=vectors,
            refused_reason=refused_reason, withheld=commit.withheld if commit else {},
            projector_woken=projector_woken)
