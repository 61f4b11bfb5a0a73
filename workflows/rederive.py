"""Re-derivation of stored memory under the current extractor, for a tenant or one subject.

list subjects → per subject: list the sessions due (facts of an older extractor, or every
consolidated session) → per session: the current extractor's extraction of its messages (the
consolidation's own step, recorded before anything is written) → compare with the current facts
and, unless a dry run, apply the differences as events (one recorded transaction per session) →
wake the subject's projector for the new values' vectors.

History carries ids, operation ids and counts; the differences (values) are recorded in Postgres
with each session and read back by the client. A run that writes acts only on an operator request
registered in Postgres (checked by the session step). A restarted or retried run finds each done
session recorded under its request and does nothing again.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import VersioningBehavior

with workflow.unsafe.imports_passed_through():
    from activities.consolidation import ConsolidationActivities
    from activities.projection import ProjectionActivities
    from activities.rederive import RederiveActivities
    from agent_memory.core import contract
    from agent_memory.core.models import (
        ProjectionInput,
        ProviderPlacement,
        RederiveCounts,
        RederiveInput,
        RederiveProgress,
        RederiveResult,
        RederiveSessionInput,
        RederiveSubjectInput,
        StepInput,
        StepOutcome,
        SubjectListInput,
    )
    from agent_memory.core.run_metadata import progress_details

from workflows.token_budget import BudgetRaised, within_token_budget

# Presets (agent_memory/core/contract.py): the lists are short reads (REBUILD_LIST); the extraction
# is a model step (PROVIDER_STEP: a local activity for a provider in the worker's process, else an
# ordinary activity on the model queue, as in a consolidation); a session's comparison and its
# events are one transaction (STORE_WRITE); the projector's wake-up (PROJECTOR_WAKE). A tenant-wide
# run continues as a new run after each page of subjects (request.subjects_per_run). With a remote
# model the extraction waits, parked, while the tenant's daily token budget is spent
# (workflows/token_budget.py).


@workflow.defn(name=contract.REDERIVE_WORKFLOW, versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class RederiveWorkflow:
    def __init__(self) -> None:
        self._progress = RederiveProgress(step="starting")
        self._placement: ProviderPlacement | None = None
        # Set by the budget-changed signal: a run parked on the token budget checks it again now.
        self._budget_raised = BudgetRaised()

    @workflow.signal(name=contract.SIGNAL_BUDGET_CHANGED)
    def budget_changed(self) -> None:
        self._budget_raised.signalled = True

    @workflow.query(name=contract.PROGRESS_QUERY)
    def progress(self) -> RederiveProgress:
        return self._progress

    @workflow.run
    async def run(self, request: RederiveInput) -> RederiveResult:
        totals = request.carried.totals if request.carried else RederiveCounts()
        self._show(totals)
        more, last = False, None
        if request.subject_id:
            subjects = [request.subject_id]
        else:
            self._progress.step = "list_subjects"
            listed = await workflow.execute_activity_method(
                RederiveActivities.list_subjects_to_rederive,
                SubjectListInput(tenant_id=request.tenant_id, after_subject=request.after_subject,
                                 limit=request.subjects_per_run),
                **contract.REBUILD_LIST.options())
            subjects = [s for s in listed.subjects if not s.startswith("erased:")]
            more = len(listed.subjects) == request.subjects_per_run
            last = listed.subjects[-1] if listed.subjects else None

        extractor = request.carried.extractor if request.carried else ""
        for subject in subjects:
            self._progress.step = f"list_sessions {subject}"
            due = await workflow.execute_activity_method(
                RederiveActivities.list_sessions_to_rederive,
                RederiveSubjectInput(tenant_id=request.tenant_id, subject_id=subject,
                                     all_sessions=request.all_sessions),
                **contract.REBUILD_LIST.options())
            extractor = self._progress.extractor = due.extractor
            self._progress.sessions_total += len(due.sessions)
            appended = 0
            for session in due.sessions:
                counts = await self._rederive_session(request, subject, session)
                totals = totals.plus(counts)
                appended += counts.events_appended
                self._progress.sessions_done += 1
                self._show(totals)
            if appended:
                # The new values' vectors: the subject's projector embeds their outbox rows.
                self._progress.step = f"wake_projector {subject}"
                await workflow.execute_local_activity_method(
                    ProjectionActivities.wake_projector,
                    ProjectionInput(tenant_id=request.tenant_id, subject_id=subject),
                    **contract.PROJECTOR_WAKE.local_options())
            self._progress.subjects_done += 1
            self._show(totals)

        result = RederiveResult(
            workflow_id=workflow.info().workflow_id, request_id=request.request_id, tenant_id=request.tenant_id,
            subject_id=request.subject_id, dry_run=request.dry_run, all_sessions=request.all_sessions,
            extractor=extractor, subjects=len(subjects) + (request.carried.subjects if request.carried else 0),
            totals=totals)
        if more:
            self._progress.step = "continue with the next subjects"
            workflow.continue_as_new(request.model_copy(update={"after_subject": last, "carried": result}))
        self._progress.step = "done"
        self._show(totals)
        workflow.logger.info("re-derivation done: %d sessions, %d events", totals.sessions, totals.events_appended)
        return result

    async def _rederive_session(self, request: RederiveInput, subject: str, session: str) -> RederiveCounts:
        step = StepInput(tenant_id=request.tenant_id, subject_id=subject, session_id=session)
        if self._placement is None:
            # Where this worker's extractor computes, recorded (a marker) so that a replay on any
            # worker takes the same route.
            self._placement = await workflow.execute_local_activity_method(
                ConsolidationActivities.locate_providers, step, **contract.STORE_WRITE.local_options())
        self._progress.step = f"extract_facts {subject}/{session}"
        extraction: StepOutcome
        if self._placement.model_steps_in_worker:
            extraction = await workflow.execute_local_activity_method(
                ConsolidationActivities.extract_facts, step, **contract.PROVIDER_STEP.local_options())
        else:
            # A model's call spends the tenant's daily tokens: parked while they are spent.
            await within_token_budget(step, self._progress, self._budget_raised)
            self._progress.step = f"extract_facts {subject}/{session}"
            extraction = await workflow.execute_activity_method(
                ConsolidationActivities.extract_facts, step,
                task_queue=contract.model_task_queue(workflow.info().task_queue),
                priority=contract.tenant_fairness(request.tenant_id), **contract.PROVIDER_STEP.options())
        self._progress.step = f"rederive_session {subject}/{session}"
        outcome = await workflow.execute_local_activity_method(
            RederiveActivities.rederive_session,
            RederiveSessionInput(tenant_id=request.tenant_id, subject_id=subject, session_id=session,
                                 request_id=request.request_id, extraction_operation_id=extraction.operation_id,
                                 dry_run=request.dry_run),
            **contract.STORE_WRITE.local_options())
        return outcome.counts

    def _show(self, totals: RederiveCounts) -> None:
        """The run's counts in the Temporal UI (current details; creates no command)."""
        for name in ("added", "changed", "unsupported", "kept_confirmed", "withheld", "events_appended"):
            setattr(self._progress, name, getattr(totals, name))
        workflow.set_current_details(progress_details(self._progress))
