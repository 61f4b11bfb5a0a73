"""Every activity the workflows call, mocked under its real name and returning the real result
models, for the time-skipping workflow tests (tests/workflows/test_time_skipping.py).

Each call is recorded (its input and its attempt number); a test scripts failures per activity
with `fail(name, error, times=...)`, the residue each `verify_erasure` reports, the subjects
`list_subjects_to_rebuild` pages through, how many messages `count_unconsolidated` finds, where
`locate_providers` says the providers run (remote unless told), how many of the token budget's
checks find it spent (`budget_spent_checks`) and how many rows the consolidation's own embedding
batch leaves pending. The mocks of `consolidate_in_worker` and
`consolidate_with_remote_providers` stand for the one-activity routes of runs recorded before.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from temporalio import activity
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from activities.erasure import CompleteErasureInput, ResidueReport
from agent_memory.core.models import (
    CommitInput,
    CommitOutcome,
    ConflictPlanInput,
    ConsolidationStepsOutcome,
    ErasureInput,
    ErasureReceipt,
    ErasureStepInput,
    ProjectionInput,
    ProjectionOutcome,
    ProviderPlacement,
    RebuildSubjectInput,
    StepInput,
    StepOutcome,
    StoreCount,
    SubjectList,
    SubjectListInput,
    SubjectRebuild,
    TokenBudgetState,
)
from agent_memory.core.projection_models import ProjectorBatchInput, ProjectorBatchOutcome
from agent_memory.lifecycle.erasure import ErasureStarted

THROUGH = datetime(2024, 1, 1, 9, 30, tzinfo=UTC)
FACTS_EXTRACTED = 2
EVENTS_PER_COMMIT = 4
VECTORS_PER_PROJECTION = 3


@dataclass(frozen=True)
class Call:
    attempt: int
    input: Any


@dataclass
class _Failure:
    error: BaseException
    times: int | None  # None: every call


class MockedActivities:
    def __init__(self, *, subjects: list[str] | None = None, residue: list[dict[str, int]] | None = None,
                 unconsolidated: int = 3, in_worker: bool = False, model_in_worker: bool | None = None,
                 left_pending: int = 0) -> None:
        # in_worker: every provider in the worker's process (the offline default); model_in_worker
        # overrides it for the model steps alone (a remote model beside an embedder in the worker).
        self.placement = ProviderPlacement(
            model_steps_in_worker=in_worker if model_in_worker is None else model_in_worker,
            embedder_in_worker=in_worker)
        self.left_pending = left_pending
        # check_token_budget finds the tenant's budget spent this many times, then tokens left.
        self.budget_spent_checks = 0
        self.erased_after_commit = False  # either route's one activity: the subject erased before its embedding
        self.calls: dict[str, list[Call]] = defaultdict(list)
        self._failures: dict[str, _Failure] = {}
        self.subjects = sorted(subjects or [])
        # verify_erasure reports these one after another; the last one again once they run out.
        self.residue = residue or [{}]
        self.unconsolidated = unconsolidated
        # Activities that wait, each, until all of them have started (see `meet`).
        self._meeting: set[str] = set()

    def meet(self, *names: str) -> None:
        """Each of `names` returns only once every one of them has started: run one after another,
        the first would never return (it fails after a few seconds instead)."""
        self._meeting = set(names)

    async def _wait_for_the_others(self, name: str) -> None:
        if name not in self._meeting:
            return
        for _ in range(500):
            if all(self.calls[other] for other in self._meeting):
                return
            await asyncio.sleep(0.01)
        raise ApplicationError(f"{name} ran alone: {sorted(self._meeting)} did not run at once", non_retryable=True)

    def fail(self, name: str, error: BaseException, *, times: int | None = None) -> None:
        """Attempts of `name` raise `error`: the first `times` of them, or every one (None)."""
        self._failures[name] = _Failure(error, times)

    def count(self, name: str) -> int:
        return len(self.calls[name])

    def attempts(self, name: str) -> list[int]:
        return [c.attempt for c in self.calls[name]]

    def inputs(self, name: str) -> list[Any]:
        return [c.input for c in self.calls[name]]

    def _record(self, name: str, value: Any) -> None:
        self.calls[name].append(Call(activity.info().attempt, value))
        failure = self._failures.get(name)
        if failure is not None and (failure.times is None or failure.times > 0):
            if failure.times is not None:
                failure.times -= 1
            raise failure.error

    def all(self) -> list[Any]:
        return [self.locate_providers, self.check_token_budget, self.consolidate_in_worker, self.consolidate_with_remote_providers,
                self.extract_facts, self.score_importance, self.check_conflicts,
                self.summarize_session, self.commit_consolidation, self.project_vectors, self.project_outbox_batch,
                self.wake_projector, self.count_unconsolidated,
                self.begin_erasure, self.erase_store, self.shred_subject_key, self.verify_erasure,
                self.complete_erasure, self.list_subjects_to_rebuild, self.rebuild_subject, self.unmocked]

    @activity.defn(dynamic=True)
    async def unmocked(self, args: Sequence[RawValue]) -> None:
        """An activity a workflow calls that no mock stands for (one added since): the run fails at
        once, naming it, instead of retrying an unregistered activity until the test times out."""
        name = activity.info().activity_type
        self._record(name, list(args))
        raise ApplicationError(f"activity {name!r} is not mocked: add it to MockedActivities", type="NotMocked",
                               non_retryable=True)

    # --- consolidation -----------------------------------------------------------------------

    @activity.defn(name="locate_providers")
    async def locate_providers(self, step: StepInput) -> ProviderPlacement:
        self._record("locate_providers", step)
        return self.placement

    @activity.defn(name="check_token_budget")
    async def check_token_budget(self, step: StepInput) -> TokenBudgetState:
        self._record("check_token_budget", step)
        spent = self.count("check_token_budget") <= self.budget_spent_checks
        return TokenBudgetState(tenant_id=step.tenant_id, daily_tokens=1000, source="tenant", day=THROUGH.date(),
                                used_tokens=1000 if spent else 10)

    @activity.defn(name="consolidate_in_worker")
    async def consolidate_in_worker(self, step: StepInput) -> ConsolidationStepsOutcome:
        """The in-worker route's one local activity: every step, and the batch of the run's rows."""
        self._record("consolidate_in_worker", step)
        if not (self.placement.model_steps_in_worker and self.placement.embedder_in_worker):
            return ConsolidationStepsOutcome(placement=self.placement)  # the workflow runs the steps
        return self._every_step(step)

    @activity.defn(name="consolidate_with_remote_providers")
    async def consolidate_with_remote_providers(self, step: StepInput) -> ConsolidationStepsOutcome:
        """The remote route's one ordinary activity: the same steps."""
        self._record("consolidate_with_remote_providers", step)
        return self._every_step(step)

    def _every_step(self, step: StepInput) -> ConsolidationStepsOutcome:
        commit = CommitOutcome(operation_id=f"commit/{step.session_id}", session_id=step.session_id, through=THROUGH,
                               events_appended=EVENTS_PER_COMMIT, facts_written=FACTS_EXTRACTED, episode_written=True,
                               outbox_rows=EVENTS_PER_COMMIT)
        if self.erased_after_commit:
            return ConsolidationStepsOutcome(placement=self.placement, facts_extracted=FACTS_EXTRACTED,
                                         decisions=FACTS_EXTRACTED, commit=commit, refused_reason="subject erased")
        return ConsolidationStepsOutcome(
            placement=self.placement, facts_extracted=FACTS_EXTRACTED, decisions=FACTS_EXTRACTED, commit=commit,
            projection=ProjectorBatchOutcome(selected=VECTORS_PER_PROJECTION, vectors_upserted=VECTORS_PER_PROJECTION,
                                             embedded=VECTORS_PER_PROJECTION, provider_calls=1,
                                             pending=self.left_pending, due=self.left_pending))

    @activity.defn(name="extract_facts")
    async def extract_facts(self, step: StepInput) -> StepOutcome:
        self._record("extract_facts", step)
        return StepOutcome(operation_id=f"extract/{step.session_id}", count=FACTS_EXTRACTED, through=THROUGH)

    @activity.defn(name="score_importance")
    async def score_importance(self, step: StepInput) -> StepOutcome:
        self._record("score_importance", step)
        await self._wait_for_the_others("score_importance")
        return StepOutcome(operation_id=f"importance/{step.session_id}", count=1, through=THROUGH)

    @activity.defn(name="check_conflicts")
    async def check_conflicts(self, step: ConflictPlanInput) -> StepOutcome:
        self._record("check_conflicts", step)
        return StepOutcome(operation_id=f"plan/{step.session_id}/{step.round}", count=FACTS_EXTRACTED)

    @activity.defn(name="summarize_session")
    async def summarize_session(self, step: StepInput) -> StepOutcome:
        self._record("summarize_session", step)
        await self._wait_for_the_others("summarize_session")
        return StepOutcome(operation_id=f"summary/{step.session_id}", count=1, through=THROUGH)

    @activity.defn(name="commit_consolidation")
    async def commit_consolidation(self, step: CommitInput) -> CommitOutcome:
        self._record("commit_consolidation", step)
        return CommitOutcome(operation_id=f"commit/{step.session_id}", session_id=step.session_id, through=step.through,
                             events_appended=EVENTS_PER_COMMIT, facts_written=FACTS_EXTRACTED, episode_written=True,
                             outbox_rows=EVENTS_PER_COMMIT)

    @activity.defn(name="project_vectors")
    async def project_vectors(self, step: ProjectionInput) -> ProjectionOutcome:
        self._record("project_vectors", step)
        return ProjectionOutcome(vectors_upserted=VECTORS_PER_PROJECTION, outbox_done=VECTORS_PER_PROJECTION)

    @activity.defn(name="project_outbox_batch")
    async def project_outbox_batch(self, step: ProjectorBatchInput) -> ProjectorBatchOutcome:
        self._record("project_outbox_batch", step)
        return ProjectorBatchOutcome(selected=VECTORS_PER_PROJECTION, vectors_upserted=VECTORS_PER_PROJECTION,
                                     embedded=VECTORS_PER_PROJECTION, provider_calls=1, pending=self.left_pending,
                                     due=self.left_pending)

    @activity.defn(name="wake_projector")
    async def wake_projector(self, step: ProjectionInput) -> None:
        """The real one signal-with-starts the subject's projector; that workflow is not under test."""
        self._record("wake_projector", step)

    @activity.defn(name="count_unconsolidated")
    async def count_unconsolidated(self, step: StepInput) -> StepOutcome:
        self._record("count_unconsolidated", step)
        return StepOutcome(operation_id="", count=self.unconsolidated)

    # --- erasure -----------------------------------------------------------------------------

    @activity.defn(name="begin_erasure")
    async def begin_erasure(self, request: ErasureInput) -> ErasureStarted:
        self._record("begin_erasure", request)
        return ErasureStarted(requested_at=THROUGH, tombstoned_at=THROUGH)

    @activity.defn(name="erase_store")
    async def erase_store(self, step: ErasureStepInput) -> StoreCount:
        self._record("erase_store", step)
        return StoreCount(store=step.store, removed=1)

    @activity.defn(name="shred_subject_key")
    async def shred_subject_key(self, step: ErasureStepInput) -> StoreCount:
        self._record("shred_subject_key", step)
        return StoreCount(store="subject_key", removed=1)

    @activity.defn(name="verify_erasure")
    async def verify_erasure(self, step: ErasureStepInput) -> ResidueReport:
        self._record("verify_erasure", step)
        residue = self.residue[min(self.count("verify_erasure"), len(self.residue)) - 1]
        return ResidueReport(residue=residue, total=sum(residue.values()))

    @activity.defn(name="complete_erasure")
    async def complete_erasure(self, step: CompleteErasureInput) -> ErasureReceipt:
        self._record("complete_erasure", step)
        return ErasureReceipt(request_id=step.request_id, tenant_id=step.tenant_id, subject_id=step.subject_id,
                              removed={"messages": 1}, residue=step.residue, residue_total=sum(step.residue.values()),
                              key_shredded=True, requested_at=THROUGH, tombstoned_at=THROUGH, completed_at=THROUGH)

    # --- rebuild -----------------------------------------------------------------------------

    @activity.defn(name="list_subjects_to_rebuild")
    async def list_subjects_to_rebuild(self, request: SubjectListInput) -> SubjectList:
        self._record("list_subjects_to_rebuild", request)
        after = [s for s in self.subjects if request.after_subject is None or s > request.after_subject]
        return SubjectList(subjects=after[:request.limit] if request.limit is not None else after)

    @activity.defn(name="rebuild_subject")
    async def rebuild_subject(self, step: RebuildSubjectInput) -> SubjectRebuild:
        self._record("rebuild_subject", step)
        return subject_rebuild(step.subject_id, force=step.force)


def differs(subject: str) -> bool:
    """Every seventh subject's live projection differs from the rebuilt one."""
    return int(subject.rsplit("-", 1)[1]) % 7 == 0


def subject_rebuild(subject: str, *, force: bool = False) -> SubjectRebuild:
    """A realistic entry: digests, per-table row counts, the tables that differ."""
    equal = not differs(subject)
    tables = {"facts": 12, "episodes": 3, "observations": 9, "outbox": 0, "vectors": 15, "search_index": 24}
    return SubjectRebuild(
        subject=subject, live_digest=("a" if equal else "b") * 64, rebuilt_digest="a" * 64, equal=equal,
        rows=sum(tables.values()), repaired=force or not equal, events=40,
        tables_differing=[] if equal else ["facts", "vectors"], rows_by_table=tables,
        live_rows_by_table=tables if equal else {**tables, "facts": 11}, elapsed_ms=17)
