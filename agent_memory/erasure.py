"""Erasure of a subject from every store, with a tombstone first and a residue scan last.

Each store's removed count is recorded in the erasure request the first time it is erased, so a
retried or repeated request reports the same receipt.
"""

from __future__ import annotations

from datetime import datetime, timezone

from psycopg import sql
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel
from redis.asyncio import Redis

from agent_memory.db import lock_subject, tenant_transaction
from agent_memory.evidence import redis_prefix
from agent_memory.models import ErasureReceipt

# Order matters: derived projections first, evidence last, so a crash midway leaves nothing
# derived without its source. Each entry: store name → SQL tables deleted for the subject.
SQL_STORES: dict[str, tuple[str, ...]] = {
    "vectors": ("memory_vectors",),
    "search_index": ("memory_search",),
    "outbox": ("projection_outbox",),
    "observations": ("observations",),
    "episodes": ("episodes",),
    "facts": ("facts",),
    "operations": ("operations",),
    "messages": ("messages", "sessions"),
}
# Last: the event log's clear-text metadata (the payloads are crypto-shredded with the key).
STORES: tuple[str, ...] = ("working_memory", *SQL_STORES, "event_metadata")


class ErasureRequestConflictError(Exception):
    """The request id is taken by an erasure of another subject."""


class ErasureStarted(BaseModel):
    requested_at: datetime
    tombstoned_at: datetime
    completed_receipt: ErasureReceipt | None = None


async def begin_erasure(pool: AsyncConnectionPool, tenant_id: str, subject_id: str, request_id: str,
                        reason: str) -> ErasureStarted:
    """Register the request and write the tombstone (exclusive subject lock: in-flight writers
    finish first, later ones see the tombstone)."""
    async with tenant_transaction(pool, tenant_id) as conn:
        await lock_subject(conn, tenant_id, subject_id, exclusive=True)
        await conn.execute(
            "INSERT INTO erasure_requests (tenant_id, request_id, subject_id, reason, status) "
            "VALUES (%s, %s, %s, %s, 'started') ON CONFLICT (tenant_id, request_id) DO NOTHING",
            (tenant_id, request_id, subject_id, reason))
        await conn.execute(
            "INSERT INTO tombstones (tenant_id, subject_id, request_id) VALUES (%s, %s, %s) "
            "ON CONFLICT (tenant_id, subject_id) DO NOTHING", (tenant_id, subject_id, request_id))
        cur = await conn.execute(
            "SELECT r.requested_at, t.created_at, r.status, r.receipt, r.subject_id FROM erasure_requests r "
            "JOIN tombstones t ON t.tenant_id = r.tenant_id AND t.subject_id = r.subject_id "
            "WHERE r.tenant_id = %s AND r.request_id = %s", (tenant_id, request_id))
        requested_at, tombstoned_at, status, receipt, owner = await cur.fetchone()
    if owner != subject_id:
        raise ErasureRequestConflictError(f"erasure request {request_id!r} already exists for another subject; "
                                          "use a new request id")
    return ErasureStarted(requested_at=requested_at, tombstoned_at=tombstoned_at,
                          completed_receipt=ErasureReceipt.model_validate(receipt) if status == "completed" else None)


async def _recorded_count(conn, tenant_id: str, request_id: str, store: str) -> int | None:
    cur = await conn.execute("SELECT receipt -> 'removed' -> %s FROM erasure_requests "
                             "WHERE tenant_id = %s AND request_id = %s", (store, tenant_id, request_id))
    row = await cur.fetchone()
    return None if row is None or row[0] is None else int(row[0])


async def _record_count(conn, tenant_id: str, request_id: str, store: str, removed: int) -> None:
    await conn.execute(
        "UPDATE erasure_requests SET receipt = jsonb_set(coalesce(receipt, '{\"removed\": {}}'::jsonb), "
        "ARRAY['removed', %s], %s) WHERE tenant_id = %s AND request_id = %s",
        (store, Jsonb(removed), tenant_id, request_id))


async def _subject_redis_keys(redis: Redis, tenant_id: str, subject_id: str) -> list:
    return [key async for key in redis.scan_iter(match=f"{redis_prefix(tenant_id, subject_id)}*", count=500)]


async def erase_store(pool: AsyncConnectionPool, redis: Redis, tenant_id: str, subject_id: str, request_id: str,
                      store: str) -> int:
    """Remove the subject from one store; return the count removed by the first successful pass."""
    if store == "working_memory":
        keys = await _subject_redis_keys(redis, tenant_id, subject_id)
        async with tenant_transaction(pool, tenant_id) as conn:
            recorded = await _recorded_count(conn, tenant_id, request_id, store)
            if recorded is None:  # count before deleting, so a retry after a crash keeps the figure
                await _record_count(conn, tenant_id, request_id, store, len(keys))
        if keys:
            await redis.delete(*keys)
        return len(keys) if recorded is None else recorded
    async with tenant_transaction(pool, tenant_id) as conn:
        recorded = await _recorded_count(conn, tenant_id, request_id, store)
        removed = 0
        if store == "event_metadata":
            cur = await conn.execute("SELECT redact_subject_events(%s, %s)", (tenant_id, subject_id))
            removed = (await cur.fetchone())[0]
        for table in SQL_STORES.get(store, ()):
            cur = await conn.execute(
                sql.SQL("DELETE FROM {} WHERE tenant_id = %s AND subject_id = %s").format(sql.Identifier(table)),
                (tenant_id, subject_id))
            removed += cur.rowcount
        if recorded is None:
            await _record_count(conn, tenant_id, request_id, store, removed)
            return removed
        return recorded


async def shred_subject_key(pool: AsyncConnectionPool, tenant_id: str, subject_id: str, request_id: str) -> bool:
    """Delete the subject's data key: every event payload of the subject becomes unreadable."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute("DELETE FROM subject_keys WHERE tenant_id = %s AND subject_id = %s",
                                 (tenant_id, subject_id))
        recorded = await _recorded_count(conn, tenant_id, request_id, "subject_key")
        if recorded is None:
            await _record_count(conn, tenant_id, request_id, "subject_key", cur.rowcount)
            return cur.rowcount > 0
        return recorded > 0


async def scan_residue(pool: AsyncConnectionPool, redis: Redis, tenant_id: str, subject_id: str) -> dict[str, int]:
    """Count what is left of the subject in every store; every figure must be 0."""
    residue: dict[str, int] = {"working_memory": len(await _subject_redis_keys(redis, tenant_id, subject_id))}
    async with tenant_transaction(pool, tenant_id) as conn:
        for store, tables in SQL_STORES.items():
            total = 0
            for table in tables:
                cur = await conn.execute(
                    sql.SQL("SELECT count(*) FROM {} WHERE tenant_id = %s AND subject_id = %s").format(
                        sql.Identifier(table)), (tenant_id, subject_id))
                total += (await cur.fetchone())[0]
            residue[store] = total
        cur = await conn.execute("SELECT count(*) FROM subject_keys WHERE tenant_id = %s AND subject_id = %s",
                                 (tenant_id, subject_id))
        residue["subject_key"] = (await cur.fetchone())[0]
        # Events stay as ciphertext; with the key gone, none of them is readable.
        cur = await conn.execute(
            "SELECT count(*) FROM memory_events e JOIN subject_keys k USING (tenant_id, subject_id) "
            "WHERE e.tenant_id = %s AND e.subject_id = %s", (tenant_id, subject_id))
        residue["readable_events"] = (await cur.fetchone())[0]
        cur = await conn.execute("SELECT count(*) FROM memory_events WHERE tenant_id = %s AND subject_id = %s "
                                 "AND operation_id <> 'erased'", (tenant_id, subject_id))
        residue["event_metadata"] = (await cur.fetchone())[0]
    return residue


async def complete_erasure(pool: AsyncConnectionPool, tenant_id: str, subject_id: str, request_id: str,
                           residue: dict[str, int]) -> ErasureReceipt:
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            "SELECT r.reason, r.requested_at, t.created_at, r.status, r.receipt FROM erasure_requests r "
            "JOIN tombstones t ON t.tenant_id = r.tenant_id AND t.subject_id = r.subject_id "
            "WHERE r.tenant_id = %s AND r.request_id = %s FOR UPDATE OF r", (tenant_id, request_id))
        reason, requested_at, tombstoned_at, status, stored = await cur.fetchone()
        if status == "completed":
            return ErasureReceipt.model_validate(stored)
        removed = dict((stored or {}).get("removed", {}))
        receipt = ErasureReceipt(
            request_id=request_id, tenant_id=tenant_id, subject_id=subject_id, reason=reason,
            removed={k: v for k, v in removed.items() if k != "subject_key"}, residue=residue,
            residue_total=sum(residue.values()), key_shredded=residue.get("subject_key") == 0,
            requested_at=requested_at, tombstoned_at=tombstoned_at, completed_at=datetime.now(timezone.utc))
        await conn.execute(
            "UPDATE erasure_requests SET status = 'completed', completed_at = %s, receipt = %s "
            "WHERE tenant_id = %s AND request_id = %s",
            (receipt.completed_at, Jsonb(receipt.model_dump(mode="json")), tenant_id, request_id))
    return receipt
