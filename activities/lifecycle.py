"""Lifecycle activities run by Schedules: retention, the sweeper of forgotten memories, the
re-drive of erasures stuck in `started`, and the re-arming of lost session idle timers."""

from __future__ import annotations

from datetime import timedelta

from psycopg_pool import AsyncConnectionPool
from temporalio import activity
from temporalio.client import Client

from activities.authorization import claim_for_this_run
from activities.errors import temporal_failures
from activities.heartbeat import progress
from agent_memory.core import contract
from agent_memory.lifecycle.erasure_runs import ErasureRedriveInput, ErasureRedriveResult, redrive_stuck_erasures
from agent_memory.lifecycle.idle_timers import IdleTimerSweepInput, IdleTimerSweepResult, sweep_idle_timers
from agent_memory.lifecycle.retention import RetentionInput, RetentionResult, apply_retention
from agent_memory.lifecycle.sweeper import MemorySweepInput, MemorySweepResult, sweep_forgotten
from agent_memory.security.keyring import KeyRing


class LifecycleActivities:
    def __init__(self, pool: AsyncConnectionPool, keyring: KeyRing, temporal: Client, task_queue: str, *,
                 forget_grace: timedelta, idle_timeout: timedelta = timedelta(minutes=10)):
        self.pool = pool
        self.keyring = keyring
        self.temporal = temporal
        self.task_queue = task_queue  # where re-driven erasures run
        self.forget_grace = forget_grace  # the deployment's (AGENT_MEMORY_FORGET_GRACE_SECONDS)
        self.idle_timeout = idle_timeout  # of re-armed idle timers (AGENT_MEMORY_IDLE_TIMEOUT_SECONDS)

    @activity.defn(name=contract.APPLY_RETENTION)
    @temporal_failures
    async def apply_retention(self, request: RetentionInput) -> RetentionResult:
        return await apply_retention(self.pool, self.keyring, limit_per_tenant=request.limit_per_tenant,
                                     progress=lambda r: progress().update(step="retention",
                                                                          done=sum(r.forgotten.values())))

    @activity.defn(name=contract.SWEEP_FORGOTTEN_MEMORIES)
    @temporal_failures
    async def sweep_forgotten_memories(self, request: MemorySweepInput) -> MemorySweepResult:
        if request.beyond_schedule():  # a grace period of its own: an operator must have asked for this very run
            await claim_for_this_run(self.pool, self.keyring, "memory-sweep")
        grace = self.forget_grace if request.grace_seconds is None else timedelta(seconds=request.grace_seconds)
        return await sweep_forgotten(self.pool, self.keyring, grace=grace, batch_size=request.batch_size,
                                     progress=lambda r: progress().update(step="sweep", done=r.swept))

    @activity.defn(name=contract.REDRIVE_STUCK_ERASURES)
    @temporal_failures
    async def redrive_stuck_erasures(self, request: ErasureRedriveInput) -> ErasureRedriveResult:
        return await redrive_stuck_erasures(self.pool, self.temporal, self.task_queue,
                                            stuck_after=timedelta(seconds=request.stuck_after_seconds))

    @activity.defn(name=contract.SWEEP_IDLE_TIMERS)
    @temporal_failures
    async def sweep_idle_timers(self, request: IdleTimerSweepInput) -> IdleTimerSweepResult:
        """Start the idle timer of every idle session with unconsolidated messages and no
        running timer, in every tenant, on this worker's task queue."""
        return await sweep_idle_timers(self.pool, self.temporal, activity.info().task_queue, request,
                                       self.idle_timeout.total_seconds())
