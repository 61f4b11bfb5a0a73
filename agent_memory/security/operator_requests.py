"""Single-use authorizations: requests an authorized caller registers in Postgres before a
destructive run starts, each consumed by the one run that acts on it.

Temporal is an orchestrator, not an authority: whoever reaches its frontend can start any
workflow, and can copy a finished run's input into a new run under the same workflow id. A run
that destroys or rewrites more than its Schedule would (a forced key rotation, a compaction of
every table, a memory sweep with its own grace period, a forced rebuild, a re-derivation that
writes, a re-embedding, which deletes the old model's vectors at its switch) therefore acts only
on a registration made for it here; an erasure acts on its erasure request
(agent_memory/lifecycle/erasure.py), claimed the same way.

A registration names its run by a keyed digest (the identifier key) of kind and workflow id, and
records which caller registered it (`registered_by`: the operator's key or account) and when it
expires unclaimed (`AGENT_MEMORY_OPERATOR_REQUEST_TTL_SECONDS`, 15 minutes by default). The first
run that acts on it claims it in one atomic UPDATE (`claimed_by_run_id`, `claimed_at`); that run's
retried activities (another attempt, another worker after a crash) pass again, and every other
run — a new run under the same workflow id, a copied input, a start after the expiry — is refused
at once, non-retryably, with the claimant and its time or the expiry in the message. A run that
continues as new is one run: the chain's first run id holds the claim (see
activities/authorization.py). Registering the same run name again (a request id reused, a model
changed back) renews the registration for the next run; asking again for a run that is running,
or finished and attached to, registers nothing (`starts_a_new_run`).

Runs a Schedule starts carry no authority: their input is the Schedule's bounded defaults
(workers/schedules.py), which need no registration, and an input beyond those defaults is what
needs one. A copied scheduled input therefore does nothing the Schedule would not do anyway.
"""

from __future__ import annotations

import getpass
import socket
from datetime import datetime, timedelta
from typing import ClassVar, Literal

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from agent_memory.core.errors import Forbidden
from agent_memory.security.keyring import KeyRing
from agent_memory.store.counters import add_counts_if_known
from agent_memory.telemetry.metrics import REFUSED_WORKFLOW_INPUTS
from agent_memory.telemetry.record import count

OperatorRequestKind = Literal["key-rotation", "compaction", "memory-sweep", "rebuild", "rederive", "reembedding"]
DEFAULT_TTL_SECONDS = 900.0  # AGENT_MEMORY_OPERATOR_REQUEST_TTL_SECONDS
AuthorizationState = Literal["unclaimed", "claimed", "expired"]


class UnauthorizedRequestError(Forbidden):
    """A destructive run whose request no authorized caller registered for it."""

    counter: ClassVar[str] = "refused:request"  # in the tenant's `agent-memory stats`
    reason: ClassVar[str] = "unregistered"  # agent_memory_refused_workflow_inputs_total{reason}


class AuthorizationClaimedError(UnauthorizedRequestError):
    """The run's authorization was consumed by another run (a replay under the same id)."""

    counter = "refused:claimed"
    reason = "claimed"


class AuthorizationExpiredError(UnauthorizedRequestError):
    """The run's authorization expired before any run claimed it."""

    counter = "refused:expired"
    reason = "expired"


class OperatorAuthorization(BaseModel):
    """One registration as `agent-memory authorizations` lists it."""

    kind: str
    workflow_id: str | None  # None: registered before workflow ids were recorded
    tenant_id: str | None
    registered_by: str | None
    registered_at: datetime
    expires_at: datetime
    claimed_by_run_id: str | None
    claimed_at: datetime | None
    state: AuthorizationState
    refused_runs: int
    last_refused_at: datetime | None


def local_operator() -> str:
    """Who registers from this process when no operator key is presented (the CLI, which holds
    the database's credentials itself): its OS account and host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
        user = "unknown"
    return f"os-user:{user}@{socket.gethostname()}"


# A closed run after which ALLOW_DUPLICATE_FAILED_ONLY starts a new one under the same id.
_FAILED = {WorkflowExecutionStatus.FAILED, WorkflowExecutionStatus.TERMINATED, WorkflowExecutionStatus.CANCELED,
           WorkflowExecutionStatus.TIMED_OUT}


async def starts_a_new_run(temporal: Client, workflow_id: str, *, failed_only: bool) -> bool:
    """Whether starting `workflow_id` now (conflict policy USE_EXISTING) makes a new run rather
    than attaching to the one there: only then is a registration made (or renewed), so asking
    again for a running or finished run never reopens its consumed authorization. A run that
    closes in between is met by a new run refused as claimed, never by a reopened one."""
    try:
        status = (await temporal.get_workflow_handle(workflow_id).describe()).status
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return True
        raise
    if status == WorkflowExecutionStatus.RUNNING:
        return False
    return status in _FAILED if failed_only else True


def _run_digest(keyring: KeyRing, kind: OperatorRequestKind, workflow_id: str) -> str:
    return keyring.request_authorization(kind, "", "", "", workflow_id)


async def register_operator_request(pool: AsyncConnectionPool, keyring: KeyRing, kind: OperatorRequestKind,
                                    workflow_id: str, *, registered_by: str, ttl_seconds: float = DEFAULT_TTL_SECONDS,
                                    shown_workflow_id: str | None = None, tenant_id: str | None = None) -> None:
    """Registered by the operator's client before the run starts; the run must claim it within
    `ttl_seconds`. `shown_workflow_id` is the id as listed (a subject by its digest), by default
    the workflow id; `tenant_id` counts the run's refusals in that tenant's stats."""
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO operator_requests (run_digest, kind, registered_by, shown_workflow_id, run_tenant, expires_at) "
            "VALUES (%s, %s, %s, %s, %s, now() + %s) ON CONFLICT (run_digest) DO UPDATE SET "
            "registered_by = EXCLUDED.registered_by, shown_workflow_id = EXCLUDED.shown_workflow_id, "
            "run_tenant = EXCLUDED.run_tenant, requested_at = now(), expires_at = EXCLUDED.expires_at, "
            "claimed_by_run_id = NULL, claimed_at = NULL",
            (_run_digest(keyring, kind, workflow_id), kind, registered_by, shown_workflow_id or workflow_id,
             tenant_id, timedelta(seconds=ttl_seconds)))


async def claim_operator_request(pool: AsyncConnectionPool, keyring: KeyRing, kind: OperatorRequestKind,
                                 workflow_id: str, run_id: str) -> None:
    """Claim the registration of this run for `run_id`, or refuse (non-retryable
    `UnauthorizedRequest`): none registered, claimed by another run, or expired unclaimed. The
    claiming run claims again as often as its activities retry."""
    digest = _run_digest(keyring, kind, workflow_id)
    async with pool.connection() as conn:
        cur = await conn.execute(
            "UPDATE operator_requests SET claimed_by_run_id = %(run)s, claimed_at = coalesce(claimed_at, now()) "
            "WHERE run_digest = %(digest)s AND kind = %(kind)s "
            "AND ((claimed_by_run_id IS NULL AND expires_at > now()) OR claimed_by_run_id = %(run)s) "
            "RETURNING claimed_at", {"run": run_id, "digest": digest, "kind": kind})
        if await cur.fetchone() is not None:
            return
        cur = await conn.execute(
            "UPDATE operator_requests SET refused_runs = refused_runs + 1, last_refused_at = now() "
            "WHERE run_digest = %s AND kind = %s RETURNING claimed_by_run_id, claimed_at, expires_at, run_tenant",
            (digest, kind))
        row = await cur.fetchone()
    if row is None:
        count_refusal(UnauthorizedRequestError.reason)
        raise UnauthorizedRequestError(
            f"no operator request is registered for this {kind} run ({workflow_id!r}): a run that does more than its "
            "Schedule acts only when started by agent-memory's own client, which registers it first")
    claimant, claimed_at, expires_at, tenant_id = row
    error: UnauthorizedRequestError
    if claimant is not None:
        error = AuthorizationClaimedError(
            f"the operator request of this {kind} run ({workflow_id!r}) was consumed by run {claimant} at "
            f"{claimed_at:%Y-%m-%d %H:%M:%S %Z}; run {run_id} is refused: an authorization acts once, so "
            "register a new run (`agent-memory authorizations` lists them)")
    else:
        error = AuthorizationExpiredError(
            f"the operator request of this {kind} run ({workflow_id!r}) expired unclaimed at "
            f"{expires_at:%Y-%m-%d %H:%M:%S %Z}; run {run_id} is refused: start it again with agent-memory, "
            "which registers a new one (AGENT_MEMORY_OPERATOR_REQUEST_TTL_SECONDS sets how long one waits)")
    count_refusal(error.reason)
    if tenant_id is not None:
        await add_counts_if_known(pool, tenant_id, {error.counter: 1})
    raise error


def count_refusal(reason: str) -> None:
    """One destructive run refused for its input (agent_memory_refused_workflow_inputs_total), by
    reason: unregistered, claimed, expired (an UnauthorizedRequestError's `reason`), or payload
    (a Temporal payload the codec refused)."""
    count(REFUSED_WORKFLOW_INPUTS, reason=reason)


async def list_operator_requests(pool: AsyncConnectionPool, *, limit: int = 100) -> list[OperatorAuthorization]:
    """The newest registrations first, with who registered them and which run claimed them."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT kind, shown_workflow_id, run_tenant, registered_by, requested_at, expires_at, claimed_by_run_id, "
            "claimed_at, CASE WHEN claimed_by_run_id IS NOT NULL THEN 'claimed' WHEN expires_at <= now() "
            "THEN 'expired' ELSE 'unclaimed' END, refused_runs, last_refused_at FROM operator_requests "
            "ORDER BY requested_at DESC LIMIT %s", (limit,))
        rows = await cur.fetchall()
    return [OperatorAuthorization(
        kind=kind, workflow_id=shown, tenant_id=tenant, registered_by=by, registered_at=at, expires_at=expires,
        claimed_by_run_id=run, claimed_at=claimed, state=state, refused_runs=refused, last_refused_at=last)
        for kind, shown, tenant, by, at, expires, run, claimed, state, refused, last in rows]


async def refused_operator_runs(pool: AsyncConnectionPool) -> int:
    """Runs refused because another run had consumed their registration or it had expired, across
    the deployment (a rotation, a compaction and a sweep name no tenant)."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT coalesce(sum(refused_runs), 0) FROM operator_requests")
        row = await cur.fetchone()
    return int(row[0]) if row else 0
