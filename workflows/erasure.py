"""Compliance erasure of one subject: tombstone, delete everywhere, shred, verify, receipt."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.erasure import CompleteErasureInput, ErasureActivities
    from agent_memory.models import ErasureInput, ErasureProgress, ErasureReceipt, ErasureStepInput

# Erasure is a legal obligation: transient failures are retried until they pass (no attempt
# cap, a capped interval); permanent ones are non-retryable types.
ERASURE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                            maximum_interval=timedelta(minutes=1), maximum_attempts=0)
STEP_TIMEOUT = timedelta(minutes=2)
# Activities heartbeat every 5 s (activities/errors.py): a dead worker is noticed this fast.
HEARTBEAT_TIMEOUT = timedelta(seconds=20)
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


@workflow.defn
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
            ErasureActivities.begin_erasure, request, start_to_close_timeout=STEP_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=ERASURE_RETRY)
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
                await workflow.execute_activity_method(
                    ErasureActivities.erase_store, step.model_copy(update={"store": store}),
                    start_to_close_timeout=STEP_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=ERASURE_RETRY)
                if store not in self._progress.stores_done:
                    self._progress.stores_done.append(store)
            self._progress.step = "shred subject key"
            await workflow.execute_activity_method(
                ErasureActivities.shred_subject_key, step, start_to_close_timeout=STEP_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=ERASURE_RETRY)
            self._progress.step = "verify"
            report = await workflow.execute_activity_method(
                ErasureActivities.verify_erasure, step, start_to_close_timeout=STEP_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=ERASURE_RETRY)
            residue = report.residue
            if report.total == 0:
                break
        else:
            raise ApplicationError(f"residue remains after {MAX_ERASE_ROUNDS} rounds: {residue}",
                                   type="ErasureResidue", non_retryable=True)

        self._progress.step = "receipt"
        receipt = await workflow.execute_activity_method(
            ErasureActivities.complete_erasure,
            CompleteErasureInput(tenant_id=request.tenant_id, subject_id=request.subject_id,
                                 request_id=request.request_id, residue=residue),
            start_to_close_timeout=STEP_TIMEOUT, heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=ERASURE_RETRY)
        self._progress.step = "done"
        return receipt
