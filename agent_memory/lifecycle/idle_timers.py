"""Session idle timers (workflows/session_idle.py): arming one, and the sweep that re-arms the
timers a Temporal outage lost.

An append signals its session's timer after its rows commit; when Temporal cannot be reached
the rows stay committed and the append answers `idle_timer: "pending"`. Such a session is
then found by the idle-timer sweep (a Schedule, workers/schedules.py): every session whose
newest message no consolidation has covered is older than the idle timeout, in every tenant,
gets its timer started — unless one is running, which is left alone (not touched, so its
clock is not restarted). A retried append that finds only duplicates arms a timer the same
way."""

from __future__ import annotations

from typing import Literal

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from agent_memory.core import contract
from agent_memory.core.contract import SESSION_ID, SUBJECT_ID, TENANT_ID, idle_workflow_id
from agent_memory.core.models import SessionIdleInput
from agent_memory.core.run_inputs import RunInput
from agent_memory.store.db import registered_tenants, tenant_transaction


class IdleTimerSweepInput(RunInput):
    kind: Literal["idle-timer-sweep"] = "idle-timer-sweep"
    # None: the worker's AGENT_MEMORY_IDLE_TIMEOUT_SECONDS (default 600).
    idle_seconds: float | None = Field(default=None, gt=0)
    # Only sessions with a message recorded this recently are looked at (a bounded scan).
    lookback_seconds: float = Field(default=7 * 24 * 3600.0, gt=0)
    sessions_per_tenant: int = Field(default=1000, ge=1)


class IdleTimerSweepResult(BaseModel):
    tenants: int = 0
    sessions_found: int = 0  # idle, with messages no consolidation covered
    timers_started: int = 0  # of those, the ones with no running timer
    webhook_deliveries_started: int = 0  # runs of webhook deliveries never started before


async def arm_idle_timer(temporal: Client, task_queue: str, tenant_id: str, subject_id: str, session_id: str,
                         idle_seconds: float, *, touch: bool) -> bool:
    """Start the session's idle timer. `touch`: signal-with-start (new messages: a running timer's
    clock starts again). Otherwise a running timer is left as it is. Returns whether a timer
    was started or touched (False: a running one was left alone)."""
    arguments = SessionIdleInput(tenant_id=tenant_id, subject_id=subject_id, session_id=session_id,
                                 idle_seconds=idle_seconds)
    attributes = TypedSearchAttributes([SearchAttributePair(TENANT_ID, tenant_id),
                                        SearchAttributePair(SUBJECT_ID, subject_id),
                                        SearchAttributePair(SESSION_ID, session_id)])
    workflow_id = idle_workflow_id(tenant_id, subject_id, session_id)
    if touch:
        await temporal.start_workflow(contract.SESSION_IDLE_WORKFLOW, arguments, id=workflow_id,
                                      task_queue=task_queue, start_signal=contract.SIGNAL_TOUCH,
                                      search_attributes=attributes)
        return True
    try:
        running = (await temporal.get_workflow_handle(workflow_id).describe()).status == WorkflowExecutionStatus.RUNNING
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
        running = False
    if running:
        return False
    # USE_EXISTING: a timer started meanwhile (an append) is attached to, not restarted.
    await temporal.start_workflow(contract.SESSION_IDLE_WORKFLOW, arguments, id=workflow_id, task_queue=task_queue,
                                  id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                                  search_attributes=attributes)
    return True


IDLE_SESSIONS_SQL = """
SELECT m.subject_id, m.session_id FROM messages m
 WHERE m.tenant_id = %(t)s AND m.recorded_at > now() - make_interval(secs => %(lookback)s)
 GROUP BY m.subject_id, m.session_id
HAVING max(m.recorded_at) < now() - make_interval(secs => %(idle)s)
   AND max(m.recorded_at) > coalesce(
       (SELECT max((o.result ->> 'through')::timestamptz) FROM operations o
         WHERE o.tenant_id = %(t)s AND o.subject_id = m.subject_id AND o.session_id = m.session_id
           AND o.kind = 'commit' AND o.status = 'succeeded'), '-infinity')
 ORDER BY max(m.recorded_at)
 LIMIT %(limit)s
"""


async def idle_unconsolidated_sessions(pool: AsyncConnectionPool, tenant_id: str, *, idle_seconds: float,
                                       lookback_seconds: float, limit: int) -> list[tuple[str, str]]:
    """(subject, session) of the tenant's sessions whose newest message, not covered by any
    consolidation, was recorded over `idle_seconds` ago (and within the lookback), oldest first."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(IDLE_SESSIONS_SQL, {"t": tenant_id, "idle": idle_seconds,
                                                     "lookback": lookback_seconds, "limit": limit})
        return [(row[0], row[1]) for row in await cur.fetchall()]


async def sweep_idle_timers(pool: AsyncConnectionPool, temporal: Client, task_queue: str,
                            request: IdleTimerSweepInput, idle_seconds: float) -> IdleTimerSweepResult:
    """Start the idle timer of every idle session with unconsolidated messages that has none
    running, tenant by tenant (each in its own RLS-scoped transaction)."""
    idle = request.idle_seconds or idle_seconds
    result = IdleTimerSweepResult()
    for tenant_id in await registered_tenants(pool):
        result.tenants += 1
        for subject_id, session_id in await idle_unconsolidated_sessions(
                pool, tenant_id, idle_seconds=idle, lookback_seconds=request.lookback_seconds,
                limit=request.sessions_per_tenant):
            result.sessions_found += 1
            if await arm_idle_timer(temporal, task_queue, tenant_id, subject_id, session_id, idle, touch=False):
                result.timers_started += 1
    return result
