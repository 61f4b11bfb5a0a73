"""Recorded operations: the one place where idempotency and the tenant scope are applied.

A provider call is recorded (request hash, status, result, provider request id, tokens) before
anything derived from it is written; a retried activity with the same operation id gets the
recorded result back and the provider is not called again. An operation is named by a typed key
(`operation_keys.py`), which renders its id and whose fields every row written here stores in
their own columns (migration 010).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from agent_memory.core.errors import Conflict, NotFound
from agent_memory.core.models import ProviderResult
from agent_memory.core.operation_keys import KEY_COLUMNS, OperationKey, request_hash
from agent_memory.memory.token_budget import add_model_tokens
from agent_memory.security.keyring import KeyRing
from agent_memory.store.db import tenant_transaction
from agent_memory.store.scope import Mode, SubjectErasedError, enter_subject, subject_scope

__all__ = ["KEY_COLUMN_LIST", "KEY_FILL", "KEY_PLACEHOLDERS", "OperationKey", "OperationMismatchError",
           "OperationRecorder", "RecordNotFoundError", "SubjectErasedError", "claim_operations", "ensure_not_erased",
           "operation_error", "record_failed", "record_succeeded", "record_succeeded_many", "recorded_result",
           "recorded_results", "request_hash"]

R = TypeVar("R", bound=BaseModel)
log = logging.getLogger(__name__)


class RecordNotFoundError(NotFound):
    """A record the caller named (a session, an operation's result) does not exist: permanent.
    Distinct from LookupError in general, whose KeyError/IndexError mean a bug, not bad input."""


class OperationMismatchError(Conflict):
    """The same operation id was used for a different request."""


# The key's typed fields (operation_keys.KeyColumns), written with every row an operation key
# inserts; an upsert fills them on a row recorded before they existed (migration 010).
KEY_COLUMN_LIST = ", ".join(KEY_COLUMNS)
KEY_PLACEHOLDERS = ", ".join(["%s"] * len(KEY_COLUMNS))
KEY_FILL = ", ".join(f"{c} = coalesce(operations.{c}, EXCLUDED.{c})" for c in KEY_COLUMNS)


async def ensure_not_erased(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, digest: str) -> None:
    """Take the shared subject lock and refuse if the subject is tombstoned, in the caller's
    transaction: `scope.enter_subject` in WRITE mode. New code opens `scope.subject_scope`
    instead; this remains for callers that manage their own transaction."""
    await enter_subject(conn, tenant_id, subject_id, digest, Mode.WRITE)


async def recorded_result(conn: psycopg.AsyncConnection, tenant_id: str, key: OperationKey,
                          req_hash: str, result_type: type[R]) -> R | None:
    operation_id = key.operation_id
    cur = await conn.execute(
        "SELECT status, request_hash, result FROM operations WHERE tenant_id = %s AND operation_id = %s",
        (tenant_id, operation_id))
    row = await cur.fetchone()
    if row is None or row[0] != "succeeded":
        return None
    if row[1] != req_hash:
        raise OperationMismatchError(f"operation {operation_id} was recorded for a different request")
    return result_type.model_validate(row[2])


async def recorded_results(conn: psycopg.AsyncConnection, tenant_id: str,
                           requests: dict[str, str]) -> dict[str, Any]:
    """The results of the operations already recorded as succeeded, by operation id, for
    `requests` (operation id -> request hash), in one query; an id recorded for another request
    raises OperationMismatchError."""
    cur = await conn.execute(
        "SELECT operation_id, request_hash, result FROM operations "
        "WHERE tenant_id = %s AND operation_id = ANY(%s) AND status = 'succeeded'",
        (tenant_id, list(requests)))
    found = {}
    for operation_id, req_hash, result in await cur.fetchall():
        if req_hash != requests[operation_id]:
            raise OperationMismatchError(f"operation {operation_id} was recorded for a different request")
        found[operation_id] = result
    return found


# A claim takes an operation that has no record, whose last attempt failed, or whose claim's
# lease lapsed (its attempt died mid-call). A live claim of another attempt is left to it, and a
# succeeded record is never claimed again.
_CLAIM_SQL = f"""
    INSERT INTO operations (tenant_id, operation_id, subject_id, kind, request_hash, status, attempts,
                            {KEY_COLUMN_LIST})
    VALUES (%s, %s, %s, %s, %s, 'started', 1, {KEY_PLACEHOLDERS})
    ON CONFLICT (tenant_id, operation_id) DO UPDATE
       SET attempts = operations.attempts + 1, status = 'started', updated_at = now(), {KEY_FILL}
     WHERE operations.status = 'failed'
        OR (operations.status = 'started' AND operations.updated_at < now() - %s)
    RETURNING operation_id
    """


async def claim_operations(conn: psycopg.AsyncConnection, *, tenant_id: str, subject_id: str,
                           claims: list[tuple[OperationKey, str]], lease: timedelta) -> set[str]:
    """Claim each (key, request hash) in the caller's transaction, in one pipelined round trip;
    returns the operation ids this attempt holds."""
    won: set[str] = set()
    async with conn.cursor() as cur:
        await cur.executemany(_CLAIM_SQL, [(tenant_id, key.operation_id, subject_id, key.kind, req_hash,
                                            *key.columns(), lease) for key, req_hash in claims], returning=True)
        while True:
            won.update(row[0] for row in await cur.fetchall())
            if not cur.nextset():
                break
    return won


def operation_error(exc: BaseException) -> str:
    """A failed call's record: the error, and what the model said when it said something."""
    error = f"{type(exc).__name__}: {exc}"
    if raw := getattr(exc, "raw_text", None):  # what the model said, for the operator
        error += f"\nraw output: {raw[:16000]}"
    # Postgres text holds no NUL and no lone surrogate; the record must not fail on them.
    return error.replace("\x00", "\\u0000").encode("utf-8", "replace").decode("utf-8")


async def record_failed(pool: AsyncConnectionPool, tenant_id: str, operation_ids: list[str],
                        exc: BaseException) -> None:
    """Release this attempt's claims of `operation_ids` as failed (a retry claims them again);
    a result recorded meanwhile is kept."""
    async with tenant_transaction(pool, tenant_id) as conn:
        await conn.execute(
            "UPDATE operations SET status = 'failed', error = %s, updated_at = now() "
            "WHERE tenant_id = %s AND operation_id = ANY(%s) AND status <> 'succeeded'",
            (operation_error(exc), tenant_id, operation_ids))


_RECORD_SUCCEEDED_SQL = f"""
    INSERT INTO operations (tenant_id, operation_id, subject_id, kind, request_hash, status, result,
                            provider, provider_request_id, input_tokens, output_tokens, cost_usd, attempts,
                            {KEY_COLUMN_LIST})
    VALUES (%s, %s, %s, %s, %s, 'succeeded', %s, %s, %s, %s, %s, %s, 1, {KEY_PLACEHOLDERS})
    ON CONFLICT (tenant_id, operation_id) DO UPDATE
       SET status = 'succeeded', result = EXCLUDED.result, provider = EXCLUDED.provider,
           provider_request_id = EXCLUDED.provider_request_id, input_tokens = EXCLUDED.input_tokens,
           output_tokens = EXCLUDED.output_tokens, cost_usd = EXCLUDED.cost_usd, error = NULL,
           updated_at = now(), {KEY_FILL}
     WHERE operations.status <> 'succeeded'
    """


async def record_succeeded(conn: psycopg.AsyncConnection, *, tenant_id: str, subject_id: str, key: OperationKey,
                           req_hash: str, result: BaseModel) -> None:
    """Record a completed operation inside the caller's transaction (transactional writes)."""
    await record_succeeded_many(conn, tenant_id=tenant_id, subject_id=subject_id, records=[(key, req_hash, result)])


async def record_succeeded_many(conn: psycopg.AsyncConnection, *, tenant_id: str, subject_id: str,
                                records: list[tuple[OperationKey, str, BaseModel]]) -> None:
    """Record completed operations (key, request hash, result) inside the caller's transaction,
    in one pipelined round trip."""
    def row(key: OperationKey, req_hash: str, result: BaseModel) -> tuple[Any, ...]:
        meta = result if isinstance(result, ProviderResult) else ProviderResult()
        return (tenant_id, key.operation_id, subject_id, key.kind, req_hash, Jsonb(result.model_dump(mode="json")),
                meta.provider or None, meta.provider_request_id, meta.input_tokens, meta.output_tokens,
                meta.cost_usd, *key.columns())

    rows = [row(*record) for record in records]
    if not any(isinstance(result, ProviderResult) and (result.input_tokens or result.output_tokens)
               for _, _, result in records):  # no tokens reported (a store step, an in-worker provider)
        async with conn.cursor() as cur:
            await cur.executemany(_RECORD_SUCCEEDED_SQL, rows)
        return
    # A model call's tokens count against the tenant's daily budget once, in this transaction:
    # only the rows recorded now (a result recorded before is left as it is, and not counted).
    recorded = 0
    async with conn.cursor() as cur:
        await cur.executemany(_RECORD_SUCCEEDED_SQL + " RETURNING input_tokens + output_tokens", rows, returning=True)
        while True:
            recorded += sum(int(r[0]) for r in await cur.fetchall())
            if not cur.nextset():
                break
    await add_model_tokens(conn, tenant_id, recorded)


# A claimed call's lease: renewed every third of it while the call runs (`renewed_claims`), so a
# slow call (a local model under load takes minutes: its client timeout is 300 s) keeps its claim
# however long it takes, and the claim of an attempt that died lapses after at most this long: a
# retry after a crash waits out at most this (the heartbeat timeout, 20 s, has usually passed
# first). Three missed renewals in a row, not one slow commit, make a live attempt look dead. Below
# the activities' start-to-close timeouts (contract.PROVIDER_STEP): a retry that waits out a dead
# attempt's claim must still have the time for its own call.
CLAIM_LEASE = timedelta(seconds=30)
CLAIM_POLL_SECONDS = 0.5


async def _renew_claims(pool: AsyncConnectionPool, tenant_id: str, operation_ids: list[str],
                        lease: timedelta) -> None:
    while True:
        await asyncio.sleep(lease.total_seconds() / 3)
        try:
            async with tenant_transaction(pool, tenant_id) as conn:
                await conn.execute("UPDATE operations SET updated_at = now() WHERE tenant_id = %s "
                                   "AND operation_id = ANY(%s) AND status = 'started'", (tenant_id, operation_ids))
        except psycopg.Error as exc:  # the call goes on; at worst a claim lapses and is taken over
            log.warning("could not renew the claims of %s: %s", operation_ids[:3], exc)


@contextlib.asynccontextmanager
async def renewed_claims(pool: AsyncConnectionPool, tenant_id: str, operation_ids: list[str], *,
                         lease: timedelta = CLAIM_LEASE) -> AsyncIterator[None]:
    """Keep this attempt's claims of `operation_ids` live while the body (the claimed call) runs."""
    renewal = asyncio.create_task(_renew_claims(pool, tenant_id, operation_ids, lease))
    try:
        yield
    finally:
        renewal.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewal


class OperationRecorder:
    """Runs effectful calls at most once per operation id, scoped to a tenant."""

    def __init__(self, pool: AsyncConnectionPool, keyring: KeyRing, *, lease: timedelta = CLAIM_LEASE):
        self._pool = pool
        self.keyring = keyring
        self.lease = lease
        # Test hook for the crash suite: called after a result is recorded, before returning.
        self.after_record: Callable[[OperationKey], Awaitable[None]] | None = None

    async def run(self, *, tenant_id: str, subject_id: str, key: OperationKey, request: dict[str, Any],
                  result_type: type[R], call: Callable[[], Awaitable[R]]) -> tuple[R, bool]:
        """Return (result, reused). `call` runs at most once per operation id at a time, and only
        when no successful record exists."""
        req_hash = request_hash(request)
        operation_id = key.operation_id
        waited = False
        while True:
            async with subject_scope(self._pool, self.keyring, tenant_id, subject_id, Mode.WRITE) as scope:
                conn = scope.conn
                existing = await recorded_result(conn, tenant_id, key, req_hash, result_type)
                if existing is not None:
                    return existing, True
                # Claim the call. A live claim of another attempt (a concurrent projection, an
                # attempt the server gave up on that still runs) is waited for, not duplicated;
                # a claim older than the lease belongs to an attempt that died mid-call.
                if await claim_operations(conn, tenant_id=tenant_id, subject_id=subject_id,
                                          claims=[(key, req_hash)], lease=self.lease):
                    break
            if not waited:  # once per wait: an operator sees why a retry is slow
                log.warning("operation %s is claimed by another attempt; waiting for its result or for its "
                            "claim to lapse (lease %ss)", operation_id, int(self.lease.total_seconds()))
            waited = True
            await asyncio.sleep(CLAIM_POLL_SECONDS)
        if waited:
            log.warning("operation %s: claimed after waiting", operation_id)
        try:
            async with renewed_claims(self._pool, tenant_id, [operation_id], lease=self.lease):
                result = await call()
        except Exception as exc:
            await record_failed(self._pool, tenant_id, [operation_id], exc)
            raise
        async with subject_scope(self._pool, self.keyring, tenant_id, subject_id, Mode.WRITE) as scope:
            await record_succeeded(scope.conn, tenant_id=tenant_id, subject_id=subject_id, key=key,
                                   req_hash=req_hash, result=result)
        if self.after_record is not None:
            await self.after_record(key)
        return result, False

    async def load(self, tenant_id: str, subject_id: str, operation_id: str, result_type: type[R]) -> R:
        # An erased subject raises (erasure deleted the results).
        async with subject_scope(self._pool, self.keyring, tenant_id, subject_id, Mode.WRITE) as scope:
            cur = await scope.conn.execute(
                "SELECT result FROM operations WHERE tenant_id = %s AND operation_id = %s AND status = 'succeeded'",
                (tenant_id, operation_id))
            row = await cur.fetchone()
        if row is None:
            raise RecordNotFoundError(f"operation {operation_id} has no recorded result")
        return result_type.model_validate(row[0])
