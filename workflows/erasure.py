"""Compliance erasure of one subject: tombstone, delete everywhere, shred, verify, receipt."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.erasure import CompleteErasureInput, ErasureActivities
    from agent_memory.core import contract
    from agent_memory.core.models import ErasureInput, ErasureProgress, ErasureReceipt, ErasureStepInput
    from agent_memory.core.run_metadata import progress_details

# Erasure is a legal obligation: transient failures are retried until they pass (no attempt
# cap, a capped interval); permanent ones are non-retryable types (contract.ERASURE_STEP).
# A residue found by the scan sends the deletions round again, at most this often.
MAX_ERASE_ROUNDS = 3
# Frozen step lists, one per workflow version, written out rather than derived from the live
# STORES: a store added later must not change what an old run's history replays. Runs started
# before observations and the lexical index existed erase the first list; runs started before
# event metadata was redacted, the second; current runs, the third (tests check it equals STORES).
STORES_BEFORE_OBSERVATIONS: tuple[str, ...] = (
    "working_memory", "vectors", "outbox", "episodes", "facts", "operations", "messages")
STORES_BEFORE_EVENT_METADATA: tuple[str, ...] = (
    "working_memory", "vectors", "search_index", "outbox", "observations", "episodes", "facts", "operations", "messages")
STORES_WITH_EVENT_METADATA: tuple[str, ...] = (*STORES_BEFORE_EVENT_METADATA, "event_metadata")


@workflow.defn(name=contract.ERASURE_WORKFLOW, versioning_behavior=VersioningBehavior.PINNED)
class ErasureWorkflow:
    def __init__(self) -> None:
        self._progress = ErasureProgress(step="starting")

    @workflow.query
    def progress(self) -> ErasureProgress:
        return self._progress

    @workflow.run
    async def run(self, request: ErasureInput) -> ErasureReceipt:
        self._progress.step = "tombstone"
        started = await workflow.execute_activity_method(
            ErasureActivities.begin_erasure, request, **contract.ERASURE_STEP.options())
        if started.completed_receipt is not None:
            self._progress.step = "done (already completed)"
            return started.completed_receipt

        step = ErasureStepInput(tenant_id=request.tenant_id, subject_id=request.subject_id,
                                request_id=request.request_id)
        residue: dict[str, int] = {}
        if workflow.patched("erase-event-metadata"):
            stores = STORES_WITH_EVENT_METADATA
        elif workflow.patched("erase-observations-and-search-index"):
            stores = STORES_BEFORE_EVENT_METADATA
        else:
            stores = STORES_BEFORE_OBSERVATIONS
        for _ in range(MAX_ERASE_ROUNDS):
            for store in stores:
                self._progress.step = f"erase {store}"
                workflow.set_current_details(progress_details(self._progress))  # for the UI; no command
                await workflow.execute_activity_method(
                    ErasureActivities.erase_store, step.model_copy(update={"store": store}),
                    **contract.ERASURE_STEP.options())
                if store not in self._progress.stores_done:
                    self._progress.stores_done.append(store)
            self._progress.step = "shred subject key"
            await workflow.execute_activity_method(
                ErasureActivities.shred_subject_key, step, **contract.ERASURE_STEP.options())
            self._progress.step = "verify"
            workflow.set_current_details(progress_details(self._progress))
            report = await workflow.execute_activity_method(
                ErasureActivities.verify_erasure, step, **contract.ERASURE_STEP.options())
            residue = report.residue
            if report.total == 0:
                break
        else:
            raise ApplicationError(f"residue remains after {MAX_ERASE_ROUNDS} rounds: {residue}",
                                   type=contract.ErrorType.ERASURE_RESIDUE, non_retryable=True)

        self._progress.step = "receipt"
        receipt = await workflow.execute_activity_method(
            ErasureActivities.complete_erasure,
            CompleteErasureInput(tenant_id=request.tenant_id, subject_id=request.subject_id,
                                 request_id=request.request_id, residue=residue),
            **contract.ERASURE_STEP.options())
        workflow.set_current_details(f"**done**\nstores done: {len(self._progress.stores_done)}\n"
                                     f"residue: {receipt.residue_total}")
        self._progress.step = "done"
        return receipt
