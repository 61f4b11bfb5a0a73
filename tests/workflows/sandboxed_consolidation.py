"""The consolidation workflow as the SDK's sandbox runs it: the product runs it unsandboxed for
throughput, and the replay tests run this twin to show its code still passes the sandbox. Imported
inside the sandbox, this module re-imports workflows/consolidation.py there."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agent_memory.core import contract
    from agent_memory.core.models import ConsolidationInput, ConsolidationResult

from workflows.consolidation import ConsolidationWorkflow


@workflow.defn(name=contract.CONSOLIDATION_WORKFLOW, sandboxed=True)
class SandboxedConsolidationWorkflow(ConsolidationWorkflow):
    @workflow.run
    async def run(self, request: ConsolidationInput) -> ConsolidationResult:
        return await super().run(request)
