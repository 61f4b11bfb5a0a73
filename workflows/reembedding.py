"""Re-embedding a tenant's memories under a new embedding model (agent_memory/projection/reembedding.py):
begin, batches until every vector of the active model has its twin, then switch. Recall reads
the old model until the switch. Progress is the `progress` query. The history carries ids,
counts and a cursor, never texts or vectors; it continues as new every 200 batches."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities.reembedding import ReembeddingActivities
    from agent_memory.core import contract
    from agent_memory.core.run_metadata import progress_details
    from agent_memory.projection.reembedding import (
        BeginReembedInput,
        ReembedBatchInput,
        ReembedInput,
        ReembedProgress,
        SwitchModelInput,
    )

BATCHES_PER_RUN = 200
# A pass finds every source vector without a twin; a memory made between passes may need one
# more. More passes than this and the switch waits for an operator (the run fails, loudly).
MAX_PASSES = 5


@workflow.defn(name=contract.REEMBED_WORKFLOW, versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class ReembedWorkflow:
    def __init__(self) -> None:
        self._progress: ReembedProgress | None = None

    @workflow.run
    async def run(self, request: ReembedInput) -> ReembedProgress:
        progress = self._progress = ReembedProgress(
            tenant_id=request.tenant_id, target_model=request.target_model, source_model=request.source_model,
            state="starting", total=request.total, done=request.embedded + request.reused)
        if request.source_model is None:
            begun = await workflow.execute_activity_method(
                ReembeddingActivities.begin_reembedding,
                BeginReembedInput(tenant_id=request.tenant_id, target_model=request.target_model,
                                  target_dimensions=request.target_dimensions),
                **contract.STORE_WRITE.options())
            if begun.source_model is None:
                progress.state = "nothing to do"
                return progress
            request = request.model_copy(update={"source_model": begun.source_model, "total": begun.total})
            progress.source_model, progress.total = begun.source_model, begun.total
        assert request.source_model is not None
        progress.state = "building"
        cursor = (request.after_memory_id, request.after_version)
        while True:
            batch = await workflow.execute_activity_method(
                ReembeddingActivities.reembed_batch,
                ReembedBatchInput(tenant_id=request.tenant_id, source_model=request.source_model,
                                  target_model=request.target_model, after_memory_id=cursor[0],
                                  after_version=cursor[1], batch_size=request.batch_size),
                **contract.REEMBED_STEP.options())
            progress.batches += 1
            progress.done += batch.written
            workflow.set_current_details(progress_details(progress))  # for the UI; no command
            cursor = (batch.next_memory_id, batch.next_version)
            if batch.done:
                switched = await workflow.execute_activity_method(
                    ReembeddingActivities.switch_embedding_model,
                    SwitchModelInput(tenant_id=request.tenant_id, source_model=request.source_model,
                                     target_model=request.target_model),
                    **contract.STORE_WRITE.options())
                if switched.switched:
                    progress.state = "switched"
                    workflow.set_current_details(progress_details(progress))
                    return progress
                request = request.model_copy(update={"passes": request.passes + 1})
                if request.passes >= MAX_PASSES:
                    raise ApplicationError(
                        f"{switched.missing} vectors still lack their twin after {MAX_PASSES} passes",
                        type=contract.ErrorType.REEMBED_INCOMPLETE, non_retryable=True)
                cursor = (None, None)
            if progress.batches >= BATCHES_PER_RUN:
                workflow.continue_as_new(request.model_copy(update={
                    "total": progress.total, "embedded": progress.done, "reused": 0,
                    "after_memory_id": cursor[0], "after_version": cursor[1]}))

    @workflow.query
    def progress(self) -> ReembedProgress | None:
        return self._progress
