"""Idempotent tool calls: an agent's side effects (an e-mail sent, an order placed) made once.

Before a side-effecting call an agent claims its call key with the request it is about to make;
after the call it records the result. A retried claim of the same key and request is told what
happened: `completed` with the recorded result (do not call again), `in_flight` while another
attempt holds the call's lease, or `claimed` — the caller holds the call now: the first claim,
a claim after a recorded failure, or after the holder's lease ran out without a record (that
attempt may or may not have made the call; a tool whose effect cannot be checked should keep its
lease longer than the call can take). A claim of a used key for a different request is refused.

Each record belongs to the identity that claimed it (`claimed_as`: the agent or app an API key
is limited to, or the tenant for a key limited to neither; agent_memory.security.api_keys.key_identity). A call given
an identity reads, records and retakes only the calls of that identity: to it another's call
does not exist (a read or a record: not found), and a claim of another's call key is refused
(409) without its result. A call without one (the library, in process) acts on any.

Each record belongs to one subject: its result is encrypted under the subject's key (an erasure
deletes the rows and shreds the key), only a keyed digest of the request is kept, and the tenant's
retention (`tool_call_days`) decides how long a record answers retries before it is swept.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

import psycopg
from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, ConfigDict, JsonValue

from agent_memory.core.errors import Conflict, InvalidInput, NotFound
from agent_memory.core.models import check_identifier, is_printable_name
from agent_memory.security.crypto import SubjectKey
from agent_memory.security.keyring import KeyRing
from agent_memory.store.scope import Mode, subject_scope

# The request and the result as JSON, each at most this many bytes.
TOOL_CALL_JSON_MAX_BYTES = 65536
TOOL_NAME_MAX_CHARS = 64
LEASE_MIN_SECONDS = 1
LEASE_MAX_SECONDS = 86400
LEASE_DEFAULT_SECONDS = 300
# How long a record answers retries unless the tenant's retention says otherwise.
TOOL_CALL_DAYS_DEFAULT = 7

ToolCallState = Literal["claimed", "in_flight", "completed", "failed"]
Outcome = Literal["completed", "failed"]


class ToolCall(BaseModel):
    """A tool call as a claim, a record or a read returns it."""

    model_config = ConfigDict(extra="forbid")

    call_key: str
    tool: str
    # claimed: the caller holds the call (make it, then record it); in_flight: another attempt
    # holds it until lease_expires_at; completed: `result` is the call's recorded result;
    # failed: the last attempt failed (a read only: a claim takes the call again).
    state: ToolCallState
    # The holding attempt's number: a record names it, so an attempt whose lease ran out and
    # was taken over cannot overwrite the newer attempt's record.
    attempt: int
    result: JsonValue = None
    claimed_at: datetime
    lease_expires_at: datetime
    completed_at: datetime | None = None
    expires_at: datetime


class _Row(BaseModel):
    call_key: str
    claimed_as: str | None
    tool: str
    request_digest: str
    status: Literal["in_flight", "completed", "failed"]
    attempt: int
    result_ciphertext: bytes | None
    result_nonce: bytes | None
    claimed_at: datetime
    lease_expires_at: datetime
    completed_at: datetime | None
    expires_at: datetime
    lease_running: bool
    expired: bool


_COLUMNS = ("call_key, claimed_as, tool, request_digest, status, attempt, result_ciphertext, result_nonce, claimed_at, "
            "lease_expires_at, completed_at, expires_at, lease_expires_at > now() AS lease_running, "
            "expires_at <= now() AS expired")


def _canonical(field: str, value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if len(text.encode()) > TOOL_CALL_JSON_MAX_BYTES:
        raise InvalidInput(f"{field} is {len(text.encode())} bytes as JSON: keep it within "
                           f"{TOOL_CALL_JSON_MAX_BYTES} bytes (store a reference to a larger payload)")
    return text


def _check_tool(tool: str) -> str:
    if not isinstance(tool, str) or not 1 <= len(tool) <= TOOL_NAME_MAX_CHARS or not is_printable_name(tool):
        raise InvalidInput(f"tool {str(tool)[:40]!r} is invalid: name the tool in 1 to {TOOL_NAME_MAX_CHARS} "
                           "printable characters")
    return tool


def _check_lease(lease_seconds: int) -> int:
    if not isinstance(lease_seconds, int) or not LEASE_MIN_SECONDS <= lease_seconds <= LEASE_MAX_SECONDS:
        raise InvalidInput(f"lease_seconds {lease_seconds!r} is invalid: use {LEASE_MIN_SECONDS} to "
                           f"{LEASE_MAX_SECONDS} seconds, longer than the call can take")
    return lease_seconds


def _aad(tenant_id: str, subject_id: str, call_key: str, attempt: int) -> bytes:
    return f"tool_call\x1f{tenant_id}\x1f{subject_id}\x1f{call_key}\x1f{attempt}".encode()


def _answers(row: _Row, claimed_as: str | None) -> bool:
    """Whether a call of identity `claimed_as` may see the record (None: in process, any)."""
    return claimed_as is None or row.claimed_as == claimed_as


def _view(row: _Row, key: SubjectKey | None, tenant_id: str, subject_id: str, state: ToolCallState) -> ToolCall:
    result: JsonValue = None
    if row.result_ciphertext is not None and row.result_nonce is not None and key is not None:
        result = key.decrypt(row.result_ciphertext, row.result_nonce,
                             _aad(tenant_id, subject_id, row.call_key, row.attempt))["result"]
    return ToolCall(call_key=row.call_key, tool=row.tool, state=state, attempt=row.attempt, result=result,
                    claimed_at=row.claimed_at, lease_expires_at=row.lease_expires_at,
                    completed_at=row.completed_at, expires_at=row.expires_at)


async def _locked(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, call_key: str) -> _Row | None:
    cur = conn.cursor(row_factory=class_row(_Row))
    await cur.execute(f"SELECT {_COLUMNS} FROM tool_calls WHERE tenant_id = %s AND subject_id = %s "
                      "AND call_key = %s FOR UPDATE", (tenant_id, subject_id, call_key))
    return await cur.fetchone()


async def claim_tool_call(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str,
                          call_key: str, tool: str, request: JsonValue, *, lease_seconds: int = LEASE_DEFAULT_SECONDS,
                          actor_id: str | None = None, claimed_as: str | None = None) -> ToolCall:
    """Claim `call_key` for `request` before making the call (see the module for the answers),
    as the identity `claimed_as`."""
    check_identifier("call_key", call_key)
    _check_tool(tool)
    _check_lease(lease_seconds)
    canonical = _canonical("request", request)
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.WRITE) as scope:
        conn = scope.conn
        key = await keyring.subject_key(conn, tenant_id, subject_id, create=True)
        assert key is not None  # created when missing
        digest = key.digest(f"{tool}\x1f{canonical}")
        params = {"t": tenant_id, "s": subject_id, "k": call_key, "tool": tool, "d": digest,
                  "lease": lease_seconds, "by": actor_id, "as": claimed_as}
        cur = conn.cursor(row_factory=class_row(_Row))
        # How long the record answers retries: the tenant's retention (lifecycle/retention.py).
        days = await conn.execute(
            "SELECT coalesce((SELECT (policy->>'tool_call_days')::int FROM retention_policies "
            "WHERE tenant_id = %s), %s)", (tenant_id, TOOL_CALL_DAYS_DEFAULT))
        (params["days"],) = await days.fetchone() or (TOOL_CALL_DAYS_DEFAULT,)
        await cur.execute(
            "INSERT INTO tool_calls (tenant_id, subject_id, call_key, tool, request_digest, status, attempt, "
            "claimed_by, claimed_as, lease_expires_at, expires_at) VALUES (%(t)s, %(s)s, %(k)s, %(tool)s, %(d)s, "
            "'in_flight', 1, %(by)s, %(as)s, now() + make_interval(secs => %(lease)s), now() + make_interval(days => %(days)s)) "
            f"ON CONFLICT (tenant_id, subject_id, call_key) DO NOTHING RETURNING {_COLUMNS}", params)
        inserted = await cur.fetchone()
        if inserted is not None:
            return _view(inserted, key, tenant_id, subject_id, "claimed")
        row = await _locked(conn, tenant_id, subject_id, call_key)
        if row is None:  # swept between the insert and the read: the next claim inserts
            raise Conflict(f"call_key {call_key!r} changed while it was claimed: claim it again")
        if not row.expired:
            if not _answers(row, claimed_as):
                raise Conflict(f"call_key {call_key!r} is another agent's or app's call: use a call key of your own")
            params["as"] = row.claimed_as  # retaken by its own identity (or in process): still its
            if row.request_digest != digest:
                raise Conflict(f"call_key {call_key!r} was claimed for a different request: a new request "
                               "needs a new call_key")
            if row.status == "completed":
                return _view(row, key, tenant_id, subject_id, "completed")
            if row.status == "in_flight" and row.lease_running:
                return _view(row, None, tenant_id, subject_id, "in_flight")
        # Free to take: a failed attempt, a lease that ran out without a record, or a record past
        # the tenant's retention (then the key starts over, for whatever request it now names).
        await cur.execute(
            "UPDATE tool_calls SET tool = %(tool)s, request_digest = %(d)s, status = 'in_flight', "
            "attempt = attempt + 1, result_ciphertext = NULL, result_nonce = NULL, claimed_by = %(by)s, claimed_as = %(as)s, "
            "claimed_at = now(), lease_expires_at = now() + make_interval(secs => %(lease)s), completed_at = NULL, "
            "expires_at = now() + make_interval(days => %(days)s) "
            f"WHERE tenant_id = %(t)s AND subject_id = %(s)s AND call_key = %(k)s RETURNING {_COLUMNS}", params)
        taken = await cur.fetchone()
        assert taken is not None  # locked above
        return _view(taken, key, tenant_id, subject_id, "claimed")


async def record_tool_call(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str,
                           call_key: str, *, attempt: int, result: JsonValue,
                           outcome: Outcome = "completed", claimed_as: str | None = None) -> ToolCall:
    """Record what attempt `attempt` of the claimed call returned. `completed`: the result is
    final, every later claim gets it back; `failed`: the next claim makes the call again.
    Recording the same thing twice answers the same record."""
    check_identifier("call_key", call_key)
    if outcome not in ("completed", "failed"):
        raise InvalidInput(f"outcome {outcome!r} is invalid: use completed (the result is final) or failed "
                           "(the next claim makes the call again)")
    if not isinstance(attempt, int) or attempt < 1:
        raise InvalidInput(f"attempt {attempt!r} is invalid: pass the attempt number the claim returned")
    canonical = _canonical("result", result)
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.WRITE) as scope:
        conn = scope.conn
        row = await _locked(conn, tenant_id, subject_id, call_key)
        if row is None or row.expired or not _answers(row, claimed_as):
            raise NotFound(f"call_key {call_key!r} has no claim: claim it before the call, record after")
        key = await keyring.subject_key(conn, tenant_id, subject_id, create=True)
        assert key is not None
        if row.attempt != attempt:
            raise Conflict(f"attempt {attempt} no longer holds call_key {call_key!r}: attempt {row.attempt} "
                           "claimed it after the lease ran out")
        if row.status != "in_flight":
            recorded = _view(row, key, tenant_id, subject_id, row.status)
            same = json.dumps(recorded.result, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            if row.status == outcome and same == canonical:
                return recorded
            raise Conflict(f"attempt {attempt} of call_key {call_key!r} is already recorded as {row.status} "
                           "with another result")
        ciphertext, nonce = key.encrypt({"result": json.loads(canonical)},
                                        _aad(tenant_id, subject_id, call_key, attempt))
        cur = conn.cursor(row_factory=class_row(_Row))
        await cur.execute(
            "UPDATE tool_calls SET status = %s, result_ciphertext = %s, result_nonce = %s, completed_at = now() "
            f"WHERE tenant_id = %s AND subject_id = %s AND call_key = %s RETURNING {_COLUMNS}",
            (outcome, ciphertext, nonce, tenant_id, subject_id, call_key))
        done = await cur.fetchone()
        assert done is not None
        return _view(done, key, tenant_id, subject_id, outcome)


async def read_tool_call(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str,
                         call_key: str, *, claimed_as: str | None = None) -> ToolCall:
    """The call's current record (404 when the key was never claimed, its record expired, or
    another identity than `claimed_as` claimed it)."""
    check_identifier("call_key", call_key)
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.READ) as scope:
        cur = scope.conn.cursor(row_factory=class_row(_Row))
        await cur.execute(f"SELECT {_COLUMNS} FROM tool_calls WHERE tenant_id = %s AND subject_id = %s "
                          "AND call_key = %s", (tenant_id, subject_id, call_key))
        row = await cur.fetchone()
        if row is None or row.expired or not _answers(row, claimed_as):
            raise NotFound(f"call_key {call_key!r} has no record: it was never claimed, or its record expired "
                           "under the tenant's retention")
        state: ToolCallState = "in_flight" if row.status == "in_flight" else row.status
        key = await keyring.subject_key(scope.conn, tenant_id, subject_id, create=False)
        return _view(row, key, tenant_id, subject_id, state)


async def list_tool_calls(conn: psycopg.AsyncConnection, keyring: KeyRing, tenant_id: str,
                          subject_id: str) -> list[ToolCall]:
    """The subject's unexpired tool-call records, oldest claim first (the subject's export), in a
    transaction the caller scoped to the subject."""
    cur = conn.cursor(row_factory=class_row(_Row))
    await cur.execute(f"SELECT {_COLUMNS} FROM tool_calls WHERE tenant_id = %s AND subject_id = %s "
                      "AND expires_at > now() ORDER BY claimed_at, call_key", (tenant_id, subject_id))
    rows = await cur.fetchall()
    key = await keyring.subject_key(conn, tenant_id, subject_id, create=False) if rows else None
    return [_view(row, key, tenant_id, subject_id, row.status) for row in rows]


async def sweep_expired_tool_calls(conn: psycopg.AsyncConnection, tenant_id: str, limit: int) -> int:
    """Delete the tenant's tool-call records past their expiry (the retention Schedule)."""
    cur = await conn.execute(
        "DELETE FROM tool_calls WHERE ctid = ANY(ARRAY(SELECT ctid FROM tool_calls WHERE tenant_id = %s "
        "AND expires_at <= now() LIMIT %s))", (tenant_id, limit))
    return cur.rowcount
