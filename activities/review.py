"""The review's activities (workflows/review.py): the tenants to review, and one tenant's review
at the workflow's time, after which the `memory.stale` webhook deliveries it wrote are started."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool
from temporalio import activity
from temporalio.client import Client

from activities.errors import temporal_failures
from activities.heartbeat import progress
from agent_memory.core import contract
from agent_memory.lifecycle.review import (
    ReviewInput,
    ReviewTenants,
    TenantReviewInput,
    TenantReviewResult,
    review_tenant,
    review_tenants,
)
from agent_memory.memory.webhooks import dispatch_deliveries
from agent_memory.security.keyring import KeyRing


class ReviewActivities:
    def __init__(self, pool: AsyncConnectionPool, keyring: KeyRing, temporal: Client, task_queue: str):
        self.pool = pool
        self.keyring = keyring
        self.temporal = temporal
        self.task_queue = task_queue  # where the webhook deliveries run

    @activity.defn(name=contract.LIST_REVIEW_TENANTS)
    @temporal_failures
    async def list_review_tenants(self, request: ReviewInput) -> ReviewTenants:
        return await review_tenants(self.pool)

    @activity.defn(name=contract.REVIEW_TENANT)
    @temporal_failures
    async def review_tenant(self, request: TenantReviewInput) -> TenantReviewResult:
        """Mark what went stale in the tenant at the workflow's time; a retry after a crash finds
        the subjects already reviewed recorded and appends nothing for them."""
        result = await review_tenant(self.pool, self.keyring, request.tenant_id, request.as_of, limit=request.limit,
                                     progress=lambda r: progress().update(step="review", done=r.subjects))
        await dispatch_deliveries(self.pool, self.temporal, self.task_queue, request.tenant_id)
        return result
