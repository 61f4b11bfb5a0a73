"""The vector projection as its own durable flow: one projector per subject, id
projector/{tenant}/{subject}, started or signalled ("wake", signal-with-start) by every commit that
leaves rows to it (all of them with a remote embedder; with one in the worker, the consolidation
embeds its own rows first), live write, rebuild repair and the hourly sweep.

It drains the subject's outbox in bounded batches (one provider call per batch), loops while rows
are due, sleeps until the earliest retry of a failed row (woken early by "wake"), continues as
new after `batches_per_run` batches and completes when nothing is pending. History carries counts
and timings only; texts and vectors stay in Postgres.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.projection import ProjectionActivities
    from agent_memory.core import contract
    from agent_memory.core.contract import ErrorType
    from agent_memory.core.projection_models import (
        ProjectionSweepInput,
        ProjectionSweepResult,
        ProjectorBatchInput,
        ProjectorInput,
        ProjectorProgress,
        ProjectorResult,
    )

# A timer never longer than this: a row's next attempt that moved earlier (an operator's requeue
# without a wake) is noticed within the hour; the hourly sweep covers a projector that is gone.
MAX_SLEEP = timedelta(hours=1)
MIN_SLEEP = timedelta(milliseconds=100)
IN_FLIGHT_PAUSE_SECONDS = 5.0


@workflow.defn(name=contract.PROJECTOR_WORKFLOW, versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class ProjectorWorkflow:
    def __init__(self) -> None:
        self._woken = False
        self._progress = ProjectorProgress(step="starting")

    @workflow.signal(name=contract.SIGNAL_WAKE)
    def wake(self) -> None:
        self._woken = True

    @workflow.query
    def progress(self) -> ProjectorProgress:
        return self._progress

    @workflow.run
    async def run(self, request: ProjectorInput) -> ProjectorResult:
        totals = request.model_copy()
        p = self._progress
        p.runs, p.batches, p.vectors_upserted = totals.runs, totals.batches, totals.vectors_upserted
        p.retried, p.dead_lettered = totals.retried, totals.dead_lettered
        batches_this_run = 0
        while True:
            if batches_this_run >= request.batches_per_run or workflow.info().is_continue_as_new_suggested():
                p.step = "continue as new"
                workflow.continue_as_new(totals.model_copy(update={"runs": totals.runs + 1}))
            self._woken = False  # a wake-up from here on means: look again
            p.step = "project_outbox_batch"
            try:
                outcome = await workflow.execute_activity_method(
                    ProjectionActivities.project_outbox_batch,
                    ProjectorBatchInput(tenant_id=request.tenant_id, subject_id=request.subject_id),
                    **contract.VECTOR_PROJECTION.options())
            except ActivityError as err:
                if not (isinstance(err.cause, ApplicationError) and err.cause.type == ErrorType.SUBJECT_ERASED):
                    raise
                p.step = "stopped: subject erased"
                workflow.logger.info("projector stopped: the subject was erased")
                return self._result(request, totals, stopped_reason="subject erased")
            batches_this_run += 1
            totals.batches += 1
            totals.vectors_upserted += outcome.vectors_upserted
            totals.retried += outcome.retried
            totals.dead_lettered += outcome.dead_lettered
            totals.skipped += outcome.skipped
            p.batches, p.vectors_upserted = totals.batches, totals.vectors_upserted
            p.retried, p.dead_lettered, p.pending = totals.retried, totals.dead_lettered, outcome.pending
            made_progress = outcome.selected > outcome.in_flight
            if outcome.due and made_progress:
                continue
            if not outcome.pending and not self._woken:
                p.step = "done"
                return self._result(request, totals)
            if self._woken:
                continue
            # Rows wait for their next attempt, or are due but claimed by another attempt (a
            # retry the server gave up on may still run): sleep until the earliest one, or a short
            # pause, unless woken first.
            seconds = IN_FLIGHT_PAUSE_SECONDS if outcome.due else outcome.next_attempt_in_seconds
            sleep = MAX_SLEEP if seconds is None else min(MAX_SLEEP, max(MIN_SLEEP, timedelta(seconds=seconds)))
            p.step = "waiting for the next attempt"
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(lambda: self._woken, timeout=sleep)

    @staticmethod
    def _result(request: ProjectorInput, totals: ProjectorInput, *, stopped_reason: str | None = None
                ) -> ProjectorResult:
        return ProjectorResult(tenant_id=request.tenant_id, subject_id=request.subject_id, runs=totals.runs,
                               batches=totals.batches, vectors_upserted=totals.vectors_upserted,
                               retried=totals.retried, dead_lettered=totals.dead_lettered, skipped=totals.skipped,
                               stopped_reason=stopped_reason)


@workflow.defn(name=contract.PROJECTION_SWEEP_WORKFLOW, versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class ProjectionSweepWorkflow:
    """The hourly Schedule's run: wakes the projector of every subject with due rows, so a stuck
    row is retried without any new consolidation of its subject."""

    @workflow.run
    async def run(self, request: ProjectionSweepInput) -> ProjectionSweepResult:
        return await workflow.execute_activity_method(
            ProjectionActivities.sweep_projection_outbox, request, **contract.PROJECTION_SWEEP.options())
