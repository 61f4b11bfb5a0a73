"""Projection activities: drain a subject's outbox in bounded batches, wake a subject's projector,
and sweep every tenant for subjects with due rows. Counts in, counts out; texts and vectors
stay in Postgres."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool
from temporalio import activity
from temporalio.client import Client

from activities.errors import temporal_failures
from activities.heartbeat import progress
from agent_memory.core import contract
from agent_memory.core.hooks import after_record
from agent_memory.core.models import ProjectionInput
from agent_memory.core.projection_models import (
    ProjectionPolicy,
    ProjectionSweepInput,
    ProjectionSweepResult,
    ProjectorBatchInput,
    ProjectorBatchOutcome,
)
from agent_memory.projection.projector import (
    OutboxProjector,
    prune_projected_rows,
    subjects_with_due_rows,
    wake_projector,
)
from agent_memory.providers.base import Embedder
from agent_memory.security.keyring import KeyRing
from agent_memory.store.db import registered_tenants


class ProjectionActivities:
    def __init__(self, pool: AsyncConnectionPool, keyring: KeyRing, embedder: Embedder, temporal: Client,
                 policy: ProjectionPolicy | None = None):
        self.pool = pool
        self.temporal = temporal
        self.projector = OutboxProjector(pool, keyring, embedder, policy)
        self.projector.after_record = after_record  # fault points of the crash suite; off unless configured

    @activity.defn(name=contract.PROJECT_OUTBOX_BATCH)
    @temporal_failures
    async def project_outbox_batch(self, step: ProjectorBatchInput) -> ProjectorBatchOutcome:
        return await self.projector.project_batch(step.tenant_id, step.subject_id)

    @activity.defn(name=contract.WAKE_PROJECTOR)
    @temporal_failures
    async def wake_projector(self, step: ProjectionInput) -> None:
        """Signal-with-start the subject's projector on this worker's task queue."""
        await wake_projector(self.temporal, activity.info().task_queue, step.tenant_id, step.subject_id)

    @activity.defn(name=contract.SWEEP_PROJECTION_OUTBOX)
    @temporal_failures
    async def sweep_projection_outbox(self, request: ProjectionSweepInput) -> ProjectionSweepResult:
        """Wake the projector of every subject with due rows (pending, not dead, next attempt
        passed), and prune rows projected over an hour ago, tenant by tenant: each tenant's rows
        are read in its own RLS-scoped transaction."""
        tenants = await registered_tenants(self.pool)
        woken = pruned = 0
        task_queue = activity.info().task_queue
        for done, tenant_id in enumerate(tenants):
            progress().update(step="sweep", done=done, total=len(tenants))
            for subject_id in await subjects_with_due_rows(self.pool, tenant_id, request.subjects_per_tenant):
                await wake_projector(self.temporal, task_queue, tenant_id, subject_id)
                woken += 1
            # Projected rows are pruned, bounded per run: the outbox holds what is in flight.
            pruned += await prune_projected_rows(self.pool, tenant_id, limit=request.prune_per_tenant)
        return ProjectionSweepResult(tenants=len(tenants), subjects_woken=woken, rows_pruned=pruned)
