"""Memory lifecycle, run by Temporal Schedules an operator sees in the UI:

- the memory sweep (hourly): first each tenant's retention policy forgets what it expires (the
  `retention` actor; restorable within the grace period like any forget), then memories
  forgotten longer than the grace period leave every store for good, each leaving a tombstone
  (id and version) and a residue count;
- the erasure re-drive (hourly): erasure requests stuck in `started` whose workflow is gone are
  started again (erasure is idempotent), the others counted;
- the idle-timer sweep (every 10 minutes): sessions with unconsolidated messages, idle longer
  than the idle timeout, whose idle timer is not running (lost to a Temporal outage) get one;
  then webhook deliveries whose run was never started (a crash between their commit and the
  start, or a forget by retention) get theirs.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import VersioningBehavior

with workflow.unsafe.imports_passed_through():
    from activities.lifecycle import LifecycleActivities
    from activities.webhooks import WebhookActivities, WebhookSweepInput
    from agent_memory.core import contract
    from agent_memory.lifecycle.erasure_runs import ErasureRedriveInput, ErasureRedriveResult
    from agent_memory.lifecycle.idle_timers import IdleTimerSweepInput, IdleTimerSweepResult
    from agent_memory.lifecycle.retention import RetentionInput
    from agent_memory.lifecycle.sweeper import MemorySweepInput, MemorySweepResult

# A database outage is waited out (no attempt cap); a retried step resumes where it stopped:
# what retention forgot and what the sweep swept are marked so (contract.MEMORY_SWEEP).


@workflow.defn(name=contract.MEMORY_SWEEP_WORKFLOW, versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class MemorySweepWorkflow:
    @workflow.run
    async def run(self, request: MemorySweepInput) -> MemorySweepResult:
        forgotten: dict[str, int] = {}
        if request.retention:
            retention = await workflow.execute_activity_method(
                LifecycleActivities.apply_retention, RetentionInput(limit_per_tenant=request.retention_limit_per_tenant),
                **contract.MEMORY_SWEEP.options())
            forgotten = retention.forgotten
        swept = await workflow.execute_activity_method(
            LifecycleActivities.sweep_forgotten_memories, request, **contract.MEMORY_SWEEP.options())
        return swept.model_copy(update={"retention_forgotten": forgotten})


@workflow.defn(name=contract.ERASURE_REDRIVE_WORKFLOW, versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class ErasureRedriveWorkflow:
    @workflow.run
    async def run(self, request: ErasureRedriveInput) -> ErasureRedriveResult:
        return await workflow.execute_activity_method(
            LifecycleActivities.redrive_stuck_erasures, request, **contract.MEMORY_SWEEP.options())


@workflow.defn(name=contract.IDLE_TIMER_SWEEP_WORKFLOW, versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class IdleTimerSweepWorkflow:
    @workflow.run
    async def run(self, request: IdleTimerSweepInput) -> IdleTimerSweepResult:
        result = await workflow.execute_activity_method(
            LifecycleActivities.sweep_idle_timers, request, **contract.PROJECTION_SWEEP.options())
        if workflow.patched("sweep-webhook-deliveries"):
            webhooks = await workflow.execute_activity_method(
                WebhookActivities.sweep_webhook_deliveries, WebhookSweepInput(),
                **contract.PROJECTION_SWEEP.options())
            result = result.model_copy(update={"webhook_deliveries_started": webhooks.deliveries_started})
        return result
