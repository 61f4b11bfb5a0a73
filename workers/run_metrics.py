"""A worker interceptor counting the consolidation runs that fail (agent_memory_consolidations_total
{outcome="failed"}): a workflow does no I/O of its own, so its failure is counted here, where the
worker sees it end the run. The committed ones are counted by the commit activity
(activities/consolidation.py), once per run.

A failure is counted when the run fails (a failure error: a step's permanent failure, facts that
kept changing), not when it is cancelled, and not when a worker replays the history of a run that
failed earlier (a query of a closed run replays it).
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import FailureError, is_cancelled_exception
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from agent_memory.core import contract
from agent_memory.telemetry.metrics import CONSOLIDATIONS
from agent_memory.telemetry.record import count_for_tenant


def fails_the_run(err: BaseException) -> bool:
    """Whether `err`, raised by a workflow, fails its run (a task failure is retried, a
    cancellation cancels it)."""
    return isinstance(err, (FailureError, asyncio.TimeoutError)) and not is_cancelled_exception(err)


class _RunOutcomesInbound(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        try:
            return await super().execute_workflow(input)
        except Exception as err:
            if (workflow.info().workflow_type == contract.CONSOLIDATION_WORKFLOW and fails_the_run(err)
                    and not workflow.unsafe.is_replaying()):
                tenant_id = getattr(input.args[0], "tenant_id", None) if input.args else None
                count_for_tenant(CONSOLIDATIONS, tenant_id, outcome="failed")
            raise


class RunOutcomes(Interceptor):
    """Counts the consolidation runs that fail (see the module)."""

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput
                                   ) -> type[WorkflowInboundInterceptor] | None:
        return _RunOutcomesInbound
