"""Starting erasure workflows, and re-driving erasures stuck in `started`.

An erasure request is recorded in Postgres before its workflow starts; the workflow marks it
completed at its end. A request still `started` long after it was made means its workflow is
either still running (retrying through an outage: left alone) or gone — terminated by hand,
failed on a bug, lost with its Temporal namespace. The `agent-memory/erasure-redrive`
Schedule starts those again under the same workflow id (erasure is idempotent: every step
records what it removed, so a second run finishes the first one's work), records each re-drive
on the request, and counts them in `agent-memory stats`. A request whose workflow cannot be
started again is logged as an error with its reason and kept `started`, so it stays visible.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Literal

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.service import RPCError, RPCStatusCode

from agent_memory.core import contract
from agent_memory.core.models import ErasureInput, ErasureReceipt
from agent_memory.core.run_inputs import RunInput
from agent_memory.store.counters import read_counts
from agent_memory.store.db import fetch_one, registered_tenants, tenant_transaction

log = logging.getLogger(__name__)


class ErasureRedriveInput(RunInput):
    kind: Literal["erasure-redrive"] = "erasure-redrive"
    stuck_after_seconds: float = Field(default=3600.0, ge=0)


class ErasureRedriveResult(BaseModel):
    tenants: int = 0
    stuck: int = 0  # requests `started` for longer than the threshold
    still_running: int = 0  # their workflow is running (retrying): left alone
    redriven: int = 0
    failed: int = 0  # could not be started again: logged with the reason, kept `started`


class ErasureCounts(BaseModel):
    """What `agent-memory stats` shows of erasures, per tenant."""

    started: int  # still open: registered, no receipt yet
    stuck: int  # open longer than the erasure deadline (AGENT_MEMORY_ERASURE_DEADLINE_SECONDS, an hour)
    redriven: int  # requests re-driven at least once
    redrives: int
    completed: int = 0  # closed with a receipt
    failed: int = 0  # still open after a run that ended without completing (re-driven at least once)
    oldest_open_age_seconds: float | None = None  # the oldest open request's age; None: none is open
    # Starts refused because no authorized caller registered them (counters.py): destructive
    # requests with no matching registration, and Temporal payloads not written for their run.
    refused_requests: int = 0
    refused_payloads: int = 0
    # Runs refused because their single-use authorization (an erasure request, or an operator
    # request naming this tenant) was consumed by another run, or expired unclaimed.
    refused_claimed: int = 0
    refused_expired: int = 0


async def start_erasure_workflow(temporal: Client, task_queue: str, tenant_id: str, subject_id: str,
                                 request_id: str, *,
                                 reuse: WorkflowIDReusePolicy = WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
                                 ) -> WorkflowHandle:
    """Start the erasure's workflow, or attach to the running one with its id."""
    return await temporal.start_workflow(
        contract.ERASURE_WORKFLOW, ErasureInput(tenant_id=tenant_id, subject_id=subject_id, request_id=request_id),
        id=contract.erasure_workflow_id(tenant_id, subject_id, request_id), task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING, id_reuse_policy=reuse,
        search_attributes=TypedSearchAttributes([SearchAttributePair(contract.TENANT_ID, tenant_id),
                                                 SearchAttributePair(contract.SUBJECT_ID, subject_id)]),
        result_type=ErasureReceipt)


async def _workflow_status(temporal: Client, workflow_id: str) -> WorkflowExecutionStatus | None:
    try:
        return (await temporal.get_workflow_handle(workflow_id).describe()).status
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def redrive_stuck_erasures(pool: AsyncConnectionPool, temporal: Client, task_queue: str, *,
                                 stuck_after: timedelta) -> ErasureRedriveResult:
    result = ErasureRedriveResult()
    for tenant_id in await registered_tenants(pool):
        result.tenants += 1
        async with tenant_transaction(pool, tenant_id) as conn:
            cur = await conn.execute(
                "SELECT request_id, subject_id FROM erasure_requests WHERE tenant_id = %s AND status = 'started' "
                "AND requested_at < now() - %s ORDER BY requested_at LIMIT 1000", (tenant_id, stuck_after))
            stuck = await cur.fetchall()
        for request_id, subject_id in stuck:
            result.stuck += 1
            workflow_id = contract.erasure_workflow_id(tenant_id, subject_id, request_id)
            status = await _workflow_status(temporal, workflow_id)
            if status == WorkflowExecutionStatus.RUNNING:
                result.still_running += 1
                continue
            last = status.name.lower() if status is not None else "missing"
            try:
                # Any closed run may be followed by a new one: erasure is idempotent.
                await start_erasure_workflow(temporal, task_queue, tenant_id, subject_id, request_id,
                                             reuse=WorkflowIDReusePolicy.ALLOW_DUPLICATE)
                note, ok = f"re-driven: its last run was {last}", True
            except Exception as exc:  # recorded and logged below; the other requests go on
                # The note keeps the error's type only: its text may quote the workflow id (the subject).
                note, ok = f"could not be re-driven (last run {last}): {type(exc).__name__}", False
                log.error("erasure %s of tenant %s stuck in started: %s: %s", request_id, tenant_id, note, exc)
            result.redriven += ok
            result.failed += not ok
            async with tenant_transaction(pool, tenant_id) as conn:
                await conn.execute(
                    "UPDATE erasure_requests SET redrive_count = redrive_count + 1, last_redriven_at = now(), "
                    "redrive_note = %s WHERE tenant_id = %s AND request_id = %s", (note, tenant_id, request_id))
    return result


async def erasure_counts(pool: AsyncConnectionPool, tenant_id: str, *,
                         stuck_after_seconds: float = 3600.0) -> ErasureCounts:
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'started'), "
            "count(*) FILTER (WHERE status = 'started' AND requested_at < now() - make_interval(secs => %s)), "
            "count(*) FILTER (WHERE redrive_count > 0), coalesce(sum(redrive_count), 0), "
            "count(*) FILTER (WHERE status = 'completed'), "
            "count(*) FILTER (WHERE status = 'started' AND redrive_count > 0), "
            "extract(epoch FROM now() - min(requested_at) FILTER (WHERE status = 'started')) "
            "FROM erasure_requests WHERE tenant_id = %s", (stuck_after_seconds, tenant_id))
        started, stuck, redriven, redrives, completed, failed, oldest = await fetch_one(cur)
    refused = await read_counts(pool, tenant_id,
                                ["refused:request", "refused:payload", "refused:claimed", "refused:expired"])
    return ErasureCounts(started=started, stuck=stuck, redriven=redriven, redrives=int(redrives), completed=completed,
                         failed=failed, oldest_open_age_seconds=float(oldest) if oldest is not None else None,
                         refused_requests=refused["refused:request"], refused_payloads=refused["refused:payload"],
                         refused_claimed=refused["refused:claimed"], refused_expired=refused["refused:expired"])
