"""The daily review of stale memory (the `agent-memory/review` Schedule): every tenant, one
activity per tenant, at the workflow's own time.

1. list the tenants (or take the one a run started by hand names);
2. review each in turn at `workflow.now()`: mark current facts past their namespace's shelf life
   and unconfirmed since, facts contradicted by later candidates, near-duplicate notes and
   candidates close to their expiry, and close the marks whose memory changed since
   (agent_memory/lifecycle/review.py).

One run covers every tenant and the Schedule skips a run while the last one is going; a tenant's
review holds a lock of the tenant (agent_memory/lifecycle/review.py), so a run started by hand
waits for the Schedule's and a tenant has at most one review at a time. Each tenant's review is idempotent (recorded per
subject under a deterministic operation id): a worker crash retries the activity, which finds
what it already marked and appends nothing for it. The history carries tenant ids, a time and
counts, never memory text.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import VersioningBehavior

with workflow.unsafe.imports_passed_through():
    from activities.review import ReviewActivities
    from agent_memory.core import contract
    from agent_memory.lifecycle.review import ReviewInput, ReviewResult, TenantReviewInput


@workflow.defn(name=contract.REVIEW_WORKFLOW, versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class ReviewWorkflow:
    @workflow.run
    async def run(self, request: ReviewInput) -> ReviewResult:
        as_of = workflow.now()
        if request.tenant_id is not None:  # one tenant, started by hand (agent-memory review run)
            tenant_ids = [request.tenant_id]
        else:
            tenant_ids = (await workflow.execute_activity_method(
                ReviewActivities.list_review_tenants, request, **contract.MEMORY_SWEEP.options())).tenant_ids
        result = ReviewResult()
        for tenant_id in tenant_ids:
            reviewed = await workflow.execute_activity_method(
                ReviewActivities.review_tenant,
                TenantReviewInput(tenant_id=tenant_id, as_of=as_of, limit=request.limit_per_tenant),
                **contract.MEMORY_SWEEP.options())
            result.tenants += 1
            result.obsolete += reviewed.obsolete
            result.skipped_erased += reviewed.skipped_erased
            for reason, n in reviewed.marked.items():
                result.marked[reason] = result.marked.get(reason, 0) + n
        workflow.logger.info("review: %d tenants, marked %s, %d obsolete", result.tenants, result.marked,
                             result.obsolete)
        return result
