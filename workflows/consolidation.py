"""Consolidation of one finished session into long-term memory.

extract facts → score importance → check conflicts → summarize → commit (one transaction) →
project vectors. History carries operation ids and counts; the data stays in Postgres.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.consolidation import ConsolidationActivities
    from agent_memory.models import (
        CommitInput,
        CommitOutcome,
        ConflictPlanInput,
        ConsolidationInput,
        ConsolidationProgress,
        ConsolidationResult,
        ProjectionInput,
        StepInput,
    )

# Transient failures are retried without an attempt cap, at a capped interval: an outage of the
# model provider or of Postgres must not fail a consolidation. Permanent failures are raised as
# non-retryable types (activities/errors.py) and end the retries at once.
# Model calls: the recorded operation makes each retry free of a second call once a result exists.
PROVIDER_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                             maximum_interval=timedelta(minutes=2), maximum_attempts=0)
# Database writes: fast retries for transient errors (restarts, serialisation).
WRITE_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=500), backoff_coefficient=2.0,
                          maximum_interval=timedelta(seconds=30), maximum_attempts=0)
# The vector projection can lag; it keeps trying without blocking the facts.
PROJECTION_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                               maximum_interval=timedelta(seconds=60), maximum_attempts=0)
PROVIDER_TIMEOUT = timedelta(minutes=2)
WRITE_TIMEOUT = timedelta(seconds=60)
PROJECTION_TIMEOUT = timedelta(minutes=5)
# Activities heartbeat every 5 s (activities/errors.py): a dead worker is noticed this fast.
HEARTBEAT_TIMEOUT = timedelta(seconds=20)
MAX_CONFLICT_ROUNDS = 5


def _failure_type(err: ActivityError) -> str | None:
    return err.cause.type if isinstance(err.cause, ApplicationError) else None


@workflow.defn
class ConsolidationWorkflow:
    def __init__(self) -> None:
        self._progress = ConsolidationProgress(step="starting")

    @workflow.query
    def progress(self) -> ConsolidationProgress:
        return self._progress

    @workflow.run
    async def run(self, request: ConsolidationInput) -> ConsolidationResult:
        try:
            return await self._consolidate(request)
        except ActivityError as err:
            if _failure_type(err) != "SubjectErased":
                raise
            self._progress.step = "refused: subject erased"
            return self._result(request, refused_reason="subject erased")

    async def _consolidate(self, request: ConsolidationInput) -> ConsolidationResult:
        step = StepInput(tenant_id=request.tenant_id, subject_id=request.subject_id, session_id=request.session_id)

        self._progress.step = "extract_facts"
        extraction = await workflow.execute_activity_method(
            ConsolidationActivities.extract_facts, step,
            start_to_close_timeout=PROVIDER_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=PROVIDER_RETRY)
        self._progress.facts_extracted = extraction.count
        # Every later step works on the messages the extraction saw, however many arrive meanwhile.
        step = step.model_copy(update={"through": extraction.through})

        self._progress.step = "score_importance"
        importance = await workflow.execute_activity_method(
            ConsolidationActivities.score_importance, step,
            start_to_close_timeout=PROVIDER_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=PROVIDER_RETRY)

        commit = None
        for round_ in range(MAX_CONFLICT_ROUNDS):
            self._progress.step = "check_conflicts"
            plan = await workflow.execute_activity_method(
                ConsolidationActivities.check_conflicts,
                ConflictPlanInput(**step.model_dump(), extraction_operation_id=extraction.operation_id, round=round_),
                start_to_close_timeout=WRITE_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=WRITE_RETRY)
            self._progress.decisions = plan.count

            if round_ == 0:
                self._progress.step = "summarize_session"
                summary = await workflow.execute_activity_method(
                    ConsolidationActivities.summarize_session, step,
                    start_to_close_timeout=PROVIDER_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=PROVIDER_RETRY)

            self._progress.step = "commit_consolidation"
            try:
                commit = await workflow.execute_activity_method(
                    ConsolidationActivities.commit_consolidation,
                    CommitInput(**step.model_dump(), extraction_operation_id=extraction.operation_id,
                                plan_operation_id=plan.operation_id, importance_operation_id=importance.operation_id,
                                summary_operation_id=summary.operation_id),
                    start_to_close_timeout=WRITE_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=WRITE_RETRY)
                break
            except ActivityError as err:
                if _failure_type(err) != "VersionConflict":
                    raise
                # Another writer changed a fact since the plan: re-read and re-decide.
                self._progress.conflict_retries += 1
        if commit is None:
            raise ApplicationError(f"facts kept changing during {MAX_CONFLICT_ROUNDS} commit attempts",
                                   type="VersionConflict", non_retryable=True)
        self._progress.events_appended = commit.events_appended

        self._progress.step = "project_vectors"
        projection = await workflow.execute_activity_method(
            ConsolidationActivities.project_vectors,
            ProjectionInput(tenant_id=request.tenant_id, subject_id=request.subject_id),
            start_to_close_timeout=PROJECTION_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=PROJECTION_RETRY)
        self._progress.vectors_upserted = projection.vectors_upserted
        self._progress.step = "done"
        return self._result(request, commit=commit, vectors=projection.vectors_upserted)

    def _result(self, request: ConsolidationInput, *, commit: CommitOutcome | None = None, vectors: int = 0,
                refused_reason: str | None = None) -> ConsolidationResult:
        return ConsolidationResult(
            workflow_id=workflow.info().workflow_id, tenant_id=request.tenant_id, subject_id=request.subject_id,
            session_id=request.session_id, facts_extracted=self._progress.facts_extracted,
            events_appended=commit.events_appended if commit else 0,
            facts_written=commit.facts_written if commit else 0,
            episode_written=commit.episode_written if commit else False, vectors_upserted=vectors,
            refused_reason=refused_reason)
