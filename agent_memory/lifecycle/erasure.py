"""Erasure of a subject from every store, with a tombstone first and a residue scan last.

Each store's removed count is recorded in the erasure request the first time it is erased, so a
retried or repeated request reports the same receipt. What erasure keeps (the tombstone, the
request and its receipt, the shredded event rows) names the subject only by its keyed digest
once the erasure completes; the reason is stored encrypted under the active key-encryption key.
"""

from __future__ import annotations

import hmac
from datetime import UTC, datetime

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel
from redis.asyncio import Redis

from agent_memory.core import contract, tables
from agent_memory.core.errors import Conflict, InvalidInput, NotFound
from agent_memory.core.models import ErasureReceipt, ErasureStatus
from agent_memory.lifecycle.compaction import ERASURE_TABLES, request_compaction
from agent_memory.memory.webhooks import enqueue_erasure_completed
from agent_memory.security.crypto import decrypt_reason
from agent_memory.security.keyring import KeyRing
from agent_memory.security.operator_requests import AuthorizationClaimedError, UnauthorizedRequestError
from agent_memory.store.access import forget_pending, pending_residue
from agent_memory.store.db import fetch_one, tenant_transaction
from agent_memory.store.redis_keys import delete_subject_keys, registry_key, subject_keys
from agent_memory.store.scope import Mode, subject_scope
from agent_memory.telemetry.metrics import ERASURE_DURATION, ERASURE_RESIDUE
from agent_memory.telemetry.record import count as count_metric
from agent_memory.telemetry.record import observe

# From the table registry (agent_memory/core/tables.py), in its order: derived projections first,
# evidence last, so a crash midway leaves nothing derived without its source. Each entry: store
# name → SQL tables deleted for the subject.
SQL_STORES: dict[str, tuple[str, ...]] = tables.erasure_sql_stores()
# The current workflow version's steps: working memory, the deleting stores, and last the event
# log's clear-text metadata (the payloads are crypto-shredded with the key). Old workflow
# versions erase their own frozen lists (workflows/erasure.py); a test checks the newest one
# equals this.
STORES: tuple[str, ...] = tables.erasure_stores()
MAX_REASON_CHARS = 1000

PHYSICAL_HORIZON = (
    "Rows are deleted at once and unreadable to every query. Their bytes stay in table and index pages "
    "and in planner statistics until the compaction ticket is done (tables rewritten + fresh statistics of "
    "every table erasure touched, Redis AOF/RDB rewrite). Copies in PostgreSQL WAL, WAL archives, base "
    "backups and replicas remain until those age out (checkpoint_timeout, max_wal_size, wal_keep_size "
    "and your archive/backup retention). Event payloads in any such copy become undecryptable when the "
    "key-encryption key that wrapped the subject key is destroyed by the next key rotation "
    "(shred_irreversible_at); plaintext projections in old WAL or backups are not covered by that. "
    "Compaction is done only when no snapshot older than the erasure remains (it waits otherwise). "
    "Temporal keeps the workflow ids and search attributes (tenant, subject) until its retention "
    "removes the runs; their payloads are encrypted under the deployment's payload key.")
NO_ROTATION = ("never by agent-memory: the key-encryption keys come from the environment; replace "
               "AGENT_MEMORY_MASTER_KEY with a new key and re-wrap (or use a key directory or a KMS)")


class ErasureRequestConflictError(Conflict):
    """The request id is taken by an erasure of another subject."""


class ErasureStarted(BaseModel):
    requested_at: datetime
    tombstoned_at: datetime
    completed_receipt: ErasureReceipt | None = None


def check_reason(reason: str) -> str:
    if not reason.strip():
        raise InvalidInput("reason is empty: say why the subject is erased (a ticket reference is best)")
    if len(reason) > MAX_REASON_CHARS:
        raise InvalidInput(f"reason is {len(reason)} characters; the limit is {MAX_REASON_CHARS}: "
                           "give a short reason or a ticket reference")
    if "\x00" in reason:
        raise InvalidInput("reason contains a NUL character: remove it")
    return reason


async def register_erasure_request(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str,
                                   request_id: str, reason: str | None) -> None:
    """Record the request (reason encrypted, the run that may act on it digested) before any
    workflow runs, so neither the reason nor a request id clash reaches workflow history, and so
    the erasure's first activity can tell this request from a start nobody authorized. A request
    id already used for another subject is refused and nothing is written."""
    digest = keyring.subject_digest(tenant_id, subject_id)
    authorization = keyring.request_authorization(
        "erasure", tenant_id, subject_id, request_id, contract.erasure_workflow_id(tenant_id, subject_id, request_id))
    async with tenant_transaction(pool, tenant_id) as conn:
        ciphertext = nonce = kek_id = None
        if reason is not None:
            ciphertext, nonce, kek_id = await keyring.encrypt_reason(conn, tenant_id, request_id, check_reason(reason))
        await conn.execute(
            "INSERT INTO erasure_requests (tenant_id, request_id, subject_id, subject_digest, reason_ciphertext, "
            "reason_nonce, reason_kek_id, authorization_digest, status) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 'started') ON CONFLICT (tenant_id, request_id) DO NOTHING",
            (tenant_id, request_id, subject_id, digest, ciphertext, nonce, kek_id, authorization))
        cur = await conn.execute("SELECT subject_digest, subject_id FROM erasure_requests "
                                 "WHERE tenant_id = %s AND request_id = %s", (tenant_id, request_id))
        owner_digest, owner = await fetch_one(cur)
        if (owner_digest or owner) not in (digest, subject_id):
            raise ErasureRequestConflictError(f"erasure request {request_id!r} already exists for another subject; "
                                              "use a new request id")


async def _check_authorized(conn: psycopg.AsyncConnection, keyring: KeyRing, tenant_id: str, subject_id: str,
                            request_id: str, workflow_id: str) -> None:
    """The request must have been registered by an authorized caller, for this subject and for
    the run executing it; anything else is refused before the tombstone."""
    cur = await conn.execute("SELECT subject_digest, subject_id, authorization_digest FROM erasure_requests "
                             "WHERE tenant_id = %s AND request_id = %s", (tenant_id, request_id))
    row = await cur.fetchone()
    if row is None:
        raise UnauthorizedRequestError(
            f"no erasure request {request_id!r} is registered in tenant {tenant_id!r}: erasures run only for "
            "requests registered by `agent-memory erase` or the API with the erase scope")
    owner_digest, owner, authorization = row
    if (owner_digest or owner) not in (keyring.subject_digest(tenant_id, subject_id), subject_id):
        raise UnauthorizedRequestError(f"erasure request {request_id!r} was registered for another subject: refused")
    expected = keyring.request_authorization("erasure", tenant_id, subject_id, request_id, workflow_id)
    if authorization is not None and not hmac.compare_digest(authorization, expected):
        raise UnauthorizedRequestError(f"erasure request {request_id!r} was not registered for this run "
                                       f"({workflow_id!r}): refused")


async def _claim_for_run(conn: psycopg.AsyncConnection, tenant_id: str, request_id: str, run_id: str) -> None:
    """The run that begins the erasure claims its request (single use, like an operator request:
    agent_memory/security/operator_requests.py). Its own retries pass; a run of a request still
    `started` takes it over (the re-drive Schedule and the ledger's re-apply finish an erasure
    whose run is gone, which the obligation requires); a completed request acts for no other run."""
    cur = await conn.execute(
        "UPDATE erasure_requests SET claimed_by_run_id = %(run)s, "
        "claimed_at = CASE WHEN claimed_by_run_id = %(run)s THEN claimed_at ELSE now() END "
        "WHERE tenant_id = %(t)s AND request_id = %(r)s AND (claimed_by_run_id = %(run)s OR status <> 'completed') "
        "RETURNING 1", {"run": run_id, "t": tenant_id, "r": request_id})
    if await cur.fetchone() is not None:
        return
    cur = await conn.execute("SELECT claimed_by_run_id, claimed_at, completed_at FROM erasure_requests "
                             "WHERE tenant_id = %s AND request_id = %s", (tenant_id, request_id))
    claimant, claimed_at, completed_at = await fetch_one(cur)
    by = f"run {claimant} (claimed {claimed_at:%Y-%m-%d %H:%M:%S %Z})" if claimant else "an earlier run"
    raise AuthorizationClaimedError(
        f"erasure request {request_id!r} was completed at {completed_at:%Y-%m-%d %H:%M:%S %Z} by {by}; run {run_id} "
        "is refused: a completed erasure acts once (`agent-memory erasure status` shows its receipt)")


async def begin_erasure(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str,
                        request_id: str, *, workflow_id: str, run_id: str) -> ErasureStarted:
    """Check the request, claim it for this run and write the tombstone (exclusive subject lock:
    in-flight writers finish first, later ones see the tombstone). A request nobody registered
    for this run, one another run completed, or a clash, is raised before the tombstone and
    leaves nothing behind."""
    digest = keyring.subject_digest(tenant_id, subject_id)
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.EXCLUSIVE) as scope:
        conn = scope.conn  # already tombstoned (scope.erased): a repeat, answered from the request below
        await _check_authorized(conn, keyring, tenant_id, subject_id, request_id, workflow_id)
        await _claim_for_run(conn, tenant_id, request_id, run_id)
        await conn.execute(
            "INSERT INTO tombstones (tenant_id, subject_id, subject_digest, request_id) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (tenant_id, subject_digest) DO NOTHING", (tenant_id, subject_id, digest, request_id))
        cur = await conn.execute(
            "SELECT r.requested_at, t.created_at, r.status, r.receipt FROM erasure_requests r "
            "JOIN tombstones t ON t.tenant_id = r.tenant_id AND t.subject_digest = r.subject_digest "
            "WHERE r.tenant_id = %s AND r.request_id = %s", (tenant_id, request_id))
        requested_at, tombstoned_at, status, receipt = await fetch_one(cur)
    completed = None
    if status == "completed":
        completed = ErasureReceipt.model_validate(receipt)  # kept under the subject's digest
    return ErasureStarted(requested_at=requested_at, tombstoned_at=tombstoned_at, completed_receipt=completed)


async def _recorded_count(conn: psycopg.AsyncConnection, tenant_id: str, request_id: str, store: str) -> int | None:
    cur = await conn.execute("SELECT receipt -> 'removed' -> %s FROM erasure_requests "
                             "WHERE tenant_id = %s AND request_id = %s", (store, tenant_id, request_id))
    row = await cur.fetchone()
    return None if row is None or row[0] is None else int(row[0])


async def _record_count(conn: psycopg.AsyncConnection, tenant_id: str, request_id: str, store: str,
                        removed: int) -> None:
    await conn.execute(
        "UPDATE erasure_requests SET receipt = jsonb_set(coalesce(receipt, '{\"removed\": {}}'::jsonb), "
        "ARRAY['removed', %s], %s) WHERE tenant_id = %s AND request_id = %s",
        (store, Jsonb(removed), tenant_id, request_id))


async def erase_store(pool: AsyncConnectionPool, redis: Redis, keyring: KeyRing, tenant_id: str, subject_id: str,
                      request_id: str, store: str) -> int:
    """Remove the subject from one store; return the count removed by the first successful pass."""
    if store == "working_memory":
        keys = await subject_keys(redis, tenant_id, subject_id)
        async with tenant_transaction(pool, tenant_id) as conn:
            recorded = await _recorded_count(conn, tenant_id, request_id, store)
            if recorded is None:  # count before deleting, so a retry after a crash keeps the figure
                await _record_count(conn, tenant_id, request_id, store, len(keys))
        await delete_subject_keys(redis, tenant_id, subject_id)
        await forget_pending(redis, tenant_id, subject_id)  # its access counts went with its keys
        return len(keys) if recorded is None else recorded
    async with tenant_transaction(pool, tenant_id) as conn:
        recorded = await _recorded_count(conn, tenant_id, request_id, store)
        removed = 0
        if store == "event_metadata":
            # Allowed by a column grant and a restrictive policy: only rows of a subject whose
            # erasure is running, and only to exactly these values (migration 006).
            cur = await conn.execute(
                "UPDATE memory_events SET subject_id = %s, namespace = 'erased', source_message_ids = '{}', "
                "operation_id = 'erased', extractor_name = NULL, extractor_version = NULL, "
                "occurred_at = 'epoch'::timestamptz WHERE tenant_id = %s AND subject_id = %s",
                (keyring.subject_digest(tenant_id, subject_id), tenant_id, subject_id))
            removed = cur.rowcount
        # The store's own table is counted under the store's name, each further table (a message
        # store's session rows, a fact store's consents) under its own: a receipt's "messages"
        # counts messages.
        extra: dict[str, int] = {}
        for n, table in enumerate(SQL_STORES.get(store, ())):
            cur = await conn.execute(
                sql.SQL("DELETE FROM {} WHERE tenant_id = %s AND subject_id = %s").format(sql.Identifier(table)),
                (tenant_id, subject_id))
            if n == 0:
                removed += cur.rowcount
            else:
                extra[table] = cur.rowcount
        if recorded is None:
            await _record_count(conn, tenant_id, request_id, store, removed)
            for table, count in extra.items():
                await _record_count(conn, tenant_id, request_id, table, count)
            return removed
        return recorded


async def shred_subject_key(pool: AsyncConnectionPool, tenant_id: str, subject_id: str, request_id: str) -> bool:
    """Delete the subject's data key: every event payload of the subject becomes unreadable.
    The KEK that wrapped it is noted: old copies of the wrapped key (WAL, backups) stay
    decryptable until a rotation destroys that KEK."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute("DELETE FROM subject_keys WHERE tenant_id = %s AND subject_id = %s RETURNING kek_id",
                                 (tenant_id, subject_id))
        deleted = await cur.fetchone()
        if deleted is not None:
            await conn.execute("UPDATE erasure_requests SET shred_kek_id = %s WHERE tenant_id = %s AND request_id = %s",
                               (deleted[0], tenant_id, request_id))
            await conn.execute("UPDATE key_encryption_keys SET shredded_keys = shredded_keys + 1 WHERE kek_id = %s",
                               (deleted[0],))
        recorded = await _recorded_count(conn, tenant_id, request_id, "subject_key")
        if recorded is None:
            await _record_count(conn, tenant_id, request_id, "subject_key", int(deleted is not None))
            return deleted is not None
        return recorded > 0


async def scan_residue(pool: AsyncConnectionPool, redis: Redis, tenant_id: str, subject_id: str) -> dict[str, int]:
    """Count what is left of the subject in every store; every figure must be 0."""
    residue: dict[str, int] = {"working_memory": len(await subject_keys(redis, tenant_id, subject_id))
                                                  + await redis.exists(registry_key(tenant_id, subject_id))
                                                  + await pending_residue(redis, tenant_id, subject_id)}
    async with tenant_transaction(pool, tenant_id) as conn:
        for store, tables in SQL_STORES.items():
            total = 0
            for table in tables:
                cur = await conn.execute(
                    sql.SQL("SELECT count(*) FROM {} WHERE tenant_id = %s AND subject_id = %s").format(
                        sql.Identifier(table)), (tenant_id, subject_id))
                total += (await fetch_one(cur))[0]
            residue[store] = total
        cur = await conn.execute("SELECT count(*) FROM subject_keys WHERE tenant_id = %s AND subject_id = %s",
                                 (tenant_id, subject_id))
        residue["subject_key"] = (await fetch_one(cur))[0]
        # Events stay as ciphertext (under the digest); with the key gone, none is readable.
        cur = await conn.execute("SELECT count(*) FROM memory_events e WHERE e.tenant_id = %s AND e.subject_id = %s",
                                 (tenant_id, subject_id))
        residue["event_metadata"] = (await fetch_one(cur))[0]
    count_metric(ERASURE_RESIDUE, sum(residue.values()))
    return residue


async def complete_erasure(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str,
                           request_id: str, residue: dict[str, int]) -> ErasureReceipt:
    """Write the receipt, drop the clear subject id from what is kept, and ask for compaction."""
    digest = keyring.subject_digest(tenant_id, subject_id)
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            "SELECT r.requested_at, t.created_at, r.status, r.receipt, r.shred_kek_id FROM erasure_requests r "
            "JOIN tombstones t ON t.tenant_id = r.tenant_id AND t.subject_digest = r.subject_digest "
            "WHERE r.tenant_id = %s AND r.request_id = %s FOR UPDATE OF r", (tenant_id, request_id))
        requested_at, tombstoned_at, status, stored, shred_kek_id = await fetch_one(cur)
        if status == "completed":
            return ErasureReceipt.model_validate(stored)
        removed = dict((stored or {}).get("removed", {}))
        ticket = await request_compaction(conn, ERASURE_TABLES)
        # The receipt names the subject by its digest wherever it is shown (the run's result, the
        # status, the export): it outlives the subject, and the clear id is what erasure removes.
        receipt = ErasureReceipt(
            request_id=request_id, tenant_id=tenant_id, subject_id=digest,
            removed={k: v for k, v in removed.items() if k != "subject_key"}, residue=residue,
            residue_total=sum(residue.values()), key_shredded=residue.get("subject_key") == 0,
            key_wrapped_by=shred_kek_id, requested_at=requested_at, tombstoned_at=tombstoned_at,
            completed_at=datetime.now(UTC), compaction_ticket=str(ticket), physical_horizon=PHYSICAL_HORIZON,
            **({} if keyring.provider.rotatable else {"shred_irreversible_after": NO_ROTATION}))
        kept = receipt.model_dump(mode="json")
        await conn.execute(
            "UPDATE erasure_requests SET status = 'completed', completed_at = %s, receipt = %s, subject_id = NULL, "
            "compaction_ticket = %s WHERE tenant_id = %s AND request_id = %s",
            (receipt.completed_at, Jsonb(kept), ticket, tenant_id, request_id))
        await conn.execute("UPDATE tombstones SET subject_id = NULL WHERE tenant_id = %s AND subject_digest = %s",
                           (tenant_id, digest))
        # The tenant's webhooks hear of it with the receipt's figures, never the subject's id.
        await enqueue_erasure_completed(conn, tenant_id, request_id, {
            "request_id": request_id, "completed_at": receipt.completed_at.isoformat(),
            "residue_total": receipt.residue_total, "key_shredded": receipt.key_shredded,
            "removed": receipt.removed})
    # Committed: registration to receipt, once per erasure (a repeat returned the receipt above).
    observe(ERASURE_DURATION, (receipt.completed_at - requested_at).total_seconds())
    return receipt


def with_reason(receipt: ErasureReceipt, reason: str | None) -> ErasureReceipt:
    """The receipt with the request's reason: the stored receipt and the workflow's result leave it
    out (workflow history carries ids only), the request keeps it encrypted."""
    return receipt if reason is None or receipt.reason is not None else receipt.model_copy(update={"reason": reason})


async def erasure_reason(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, request_id: str) -> str | None:
    """The reason given with the request, decrypted (None for a request without one)."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            "SELECT reason_ciphertext, reason_nonce, reason_kek_id, reason FROM erasure_requests "
            "WHERE tenant_id = %s AND request_id = %s", (tenant_id, request_id))
        row = await cur.fetchone()
    if row is None:
        return None
    reason_ct, reason_nonce, reason_kek, legacy_reason = row
    if reason_ct is None:
        return str(legacy_reason) if legacy_reason is not None else None
    return decrypt_reason(keyring.kek(reason_kek), tenant_id, request_id, bytes(reason_ct), bytes(reason_nonce))


async def erasure_status(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, request_id: str,
                         subject_id: str | None = None) -> ErasureStatus:
    """The request as it stands now: the receipt, whether the shred has become irreversible
    (the KEK that wrapped the key was destroyed) and whether compaction has run. The receipt names
    the subject by its digest; `subject_id`, when given, must be the request's subject."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            "SELECT r.status, r.receipt, r.requested_at, r.completed_at, r.reason_ciphertext, r.reason_nonce, "
            "r.reason_kek_id, r.reason, r.shred_kek_id, k.state, k.destroyed_at, k.destroyed_by, c.compacted_at, "
            "c.compaction_id, r.subject_digest FROM erasure_requests r "
            "LEFT JOIN key_encryption_keys k ON k.kek_id = r.shred_kek_id "
            "LEFT JOIN compaction_tickets c ON c.ticket_id = r.compaction_ticket "
            "WHERE r.tenant_id = %s AND r.request_id = %s", (tenant_id, request_id))
        row = await cur.fetchone()
    if row is None:
        raise NotFound(f"no erasure request {request_id!r} in tenant {tenant_id!r}: check the request id")
    (status, receipt, requested_at, completed_at, reason_ct, reason_nonce, reason_kek, legacy_reason, shred_kek,
     kek_state, destroyed_at, destroyed_by, compacted_at, compaction_id, digest) = row
    reason = legacy_reason
    if reason_ct is not None:
        reason = decrypt_reason(keyring.kek(reason_kek), tenant_id, request_id, bytes(reason_ct), bytes(reason_nonce))
    if subject_id is not None and digest != keyring.subject_digest(tenant_id, subject_id):
        raise NotFound(f"erasure request {request_id!r} of tenant {tenant_id!r} is not one of subject "
                       f"{subject_id!r}: check the subject, or leave it out")
    return ErasureStatus(
        request_id=request_id, tenant_id=tenant_id, status=status, reason=reason, requested_at=requested_at,
        completed_at=completed_at,
        receipt=with_reason(ErasureReceipt.model_validate(receipt), reason) if status == "completed" else None,
        key_wrapped_by=shred_kek, shred_irreversible=kek_state == "destroyed",
        shred_irreversible_at=destroyed_at, shred_irreversible_by_rotation=destroyed_by,
        compacted=compacted_at is not None, compacted_at=compacted_at, compaction_id=compaction_id)
