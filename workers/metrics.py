"""The worker's gauges, sampled: every AGENT_MEMORY_METRICS_SAMPLE_SECONDS (15 s) a task of the
worker process reads what `agent-memory stats` reads, for every tenant of the registry, and sets
the gauges of agent_memory.telemetry.metrics from it. Off the hot path: a sample is a handful of
small aggregate queries per tenant, one visibility listing and a few Temporal descriptions; a
source that fails is logged and its gauges keep their last value until the next sample.

Each gauge counts what a key of `stats --json` counts, by the mapping docs/operations.md#metrics
tabulates (e.g. `agent_memory_outbox_depth` is `projection.due`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

from agent_memory.core import contract
from agent_memory.core.run_metadata import public_memo_text
from agent_memory.lifecycle.erasure_runs import erasure_counts
from agent_memory.lifecycle.review import tenant_mark_counts
from agent_memory.lifecycle.schedules import check_schedules, schedules_health
from agent_memory.lifecycle.sweeper import lifecycle_counts
from agent_memory.memory.webhooks import dead_delivery_count
from agent_memory.projection.projector import projection_lag
from agent_memory.store.db import registered_tenants
from agent_memory.telemetry import metrics as m

if TYPE_CHECKING:
    from prometheus_client import Gauge

    from agent_memory.api.services import Services

log = logging.getLogger(__name__)

# Labelled values of one gauge: {label values: value}; several tenants under one label (`other`,
# `all`) add up, or keep the largest for an age.
Values = dict[tuple[str, ...], float]


def publish(gauge: Gauge, values: Values) -> None:
    """Replace the gauge's series with `values` (a tenant gone, a state emptied: its series goes)."""
    gauge.clear()
    for labels, value in values.items():
        gauge.labels(*labels).set(value)


class MetricsSampler:
    """Sets the worker's gauges from the database and Temporal, every `interval` seconds."""

    def __init__(self, services: Services, *, interval: float) -> None:
        self.services = services
        self.interval = interval
        self.task_queue = services.settings.task_queue

    async def run(self, stop: asyncio.Event) -> None:
        """Sample at once, then every `interval`, until `stop`."""
        while not stop.is_set():
            await self.sample()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.interval)

    async def sample(self) -> None:
        """One sample of every source; a source that fails is logged, the others are still read."""
        sources: tuple[tuple[str, Callable[[], Awaitable[None]]], ...] = (
            ("database pool", self.pool), ("tenants' counts", self.tenants), ("parked runs", self.parked_runs),
            ("Schedules", self.schedules), ("task queue backlog", self.backlog))
        for name, source in sources:
            try:
                await source()
            except Exception as exc:  # a metric is never worth failing the worker
                log.warning("metrics: the %s could not be sampled (tried again in %g s): %s", name, self.interval, exc)

    async def pool(self) -> None:
        stats = self.services.pool.get_stats()
        size, idle = stats.get("pool_size", 0), stats.get("pool_available", 0)
        publish(m.DB_POOL_CONNECTIONS, {("in_use",): size - idle, ("idle",): idle,
                                        ("waiting",): stats.get("requests_waiting", 0)})

    async def tenants(self) -> None:
        """The per-tenant counts of `stats`, for every tenant, under bounded tenant labels."""
        pool = self.services.pool
        deadline = self.services.settings.erasure_deadline_seconds
        lag_events: Values = defaultdict(float)
        lag_seconds: Values = defaultdict(float)
        outbox: Values = defaultdict(float)
        dead: Values = defaultdict(float)
        erasures: Values = defaultdict(float)
        grace: Values = defaultdict(float)
        stale: Values = defaultdict(float)
        webhooks: Values = defaultdict(float)
        oldest_erasure = 0.0
        for tenant_id in await registered_tenants(pool):
            tenant = (m.tenant_label(tenant_id),)
            lag = await projection_lag(pool, tenant_id)
            lag_events[tenant] += lag.pending
            lag_seconds[tenant] = max(lag_seconds[tenant], lag.oldest_pending_age_seconds or 0.0)
            outbox[tenant] += lag.due
            dead[tenant] += lag.dead_letters
            counts = await erasure_counts(pool, tenant_id, stuck_after_seconds=deadline)
            for state, n in (("running", counts.started - counts.stuck), ("stuck", counts.stuck),
                             ("completed", counts.completed), ("failed", counts.failed)):
                erasures[(*tenant, state)] += n
            oldest_erasure = max(oldest_erasure, counts.oldest_open_age_seconds or 0.0)
            grace[tenant] += (await lifecycle_counts(pool, tenant_id)).forgotten_in_grace
            for reason, n in (await tenant_mark_counts(pool, tenant_id)).in_force.items():
                stale[(*tenant, reason)] += n
            webhooks[tenant] += await dead_delivery_count(pool, tenant_id)
        for gauge, values in ((m.PROJECTION_LAG_EVENTS, lag_events), (m.PROJECTION_LAG_SECONDS, lag_seconds),
                              (m.OUTBOX_DEPTH, outbox), (m.DEAD_LETTERS, dead), (m.ERASURES, erasures),
                              (m.FORGOTTEN_IN_GRACE, grace), (m.STALE_FACTS, stale),
                              (m.WEBHOOK_DEAD_DELIVERIES, webhooks)):
            publish(gauge, values)
        m.ERASURE_OLDEST_OPEN_SECONDS.set(oldest_erasure)

    async def parked_runs(self) -> None:
        """Running consolidations of the task queue parked on their tenant's token budget (what
        `runs --parked` lists), from one visibility listing."""
        query = (f"WorkflowType = '{contract.CONSOLIDATION_WORKFLOW}' AND ExecutionStatus = 'Running' "
                 f"AND TaskQueue = '{self.task_queue}'")
        parked: Values = defaultdict(float)
        async for wf in self.services.temporal.list_workflows(query):
            if public_memo_text(wf.raw_info.memo, contract.RUN_STATE_MEMO) == contract.PARKED_TOKEN_BUDGET:
                parked[(m.tenant_label(contract.workflow_id_tenant(wf.id)),)] += 1
        publish(m.PARKED_RUNS, parked)

    async def schedules(self) -> None:
        health = schedules_health(await check_schedules(self.services.temporal, self.task_queue,
                                                        keys_rotatable=self.services.keyring.provider.rotatable))
        publish(m.SCHEDULES_NOT_AS_DESIGNED, {("paused",): len(health.paused), ("altered",): len(health.drifted),
                                              ("missing",): len(health.missing)})

    async def backlog(self) -> None:
        """Approximate tasks waiting (workflow and activity tasks) on the task queue and the model's."""
        service = self.services.temporal.workflow_service
        namespace = self.services.temporal.namespace
        values: Values = {}
        for queue in (self.task_queue, contract.model_task_queue(self.task_queue)):
            total = 0
            for kind in (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
                described = await service.describe_task_queue(DescribeTaskQueueRequest(
                    namespace=namespace, task_queue=TaskQueue(name=queue), task_queue_type=kind, report_stats=True))
                total += described.stats.approximate_backlog_count
            values[(queue,)] = total
        publish(m.TASK_QUEUE_BACKLOG, values)
