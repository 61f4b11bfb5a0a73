"""The memory sweeper: memories forgotten longer than the grace period leave every store.

Run hourly by the `agent-memory/memory-sweep` Schedule (workflows/lifecycle.py) over every
tenant, or at once by `agent-memory sweep`. Per memory, in one transaction under the subject's
lock: the `forgotten_memories` row turns `swept` (the tombstone: memory id and version, no
content), and the memory's rows go from the projections (facts, episode or note, lexical
index, outbox, vectors), from the recorded operations that hold its text or vector (its
embeddings; the extraction, plan, importance and summary results of the sessions it came
from — caches, recomputable) and from the event log (a restrictive policy lets the app delete
only a swept memory's events, migration 014). A residue check in a separate transaction counts
what is left of it (0 expected) and stores the count on the tombstone, where `stats` reads it.

Nothing brings a swept memory back: a rebuild has no events of it; a late commit of an old
session finds its version (`memory_version` reads the tombstone) or its forget time
(`memory_store.writable_version`); a projector finds no outbox row. Like erasure's deletions,
the bytes stay in table pages until the compaction Schedule rewrites them (a ticket is filed).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Literal

import psycopg
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field

from agent_memory.core.run_inputs import RunInput
from agent_memory.lifecycle.compaction import request_compaction
from agent_memory.memory.apply import LIVE, drop_memory_rows
from agent_memory.security.keyring import KeyRing
from agent_memory.store.access import delete_memory_access
from agent_memory.store.db import registered_tenants, tenant_transaction
from agent_memory.store.scope import Mode, SubjectErasedError, subject_scope
from agent_memory.telemetry.metrics import SWEPT_MEMORIES
from agent_memory.telemetry.record import count_for_tenant

# Recorded provider results of a session that may quote what the session said.
SESSION_RESULT_KINDS = ["extract", "plan", "importance", "summary", "rederive", "rederive-dry"]
SWEPT_TABLES = ("facts", "episodes", "observations", "entities", "entity_mentions", "relations", "memory_search",
                "projection_outbox", "memory_vectors", "operations", "memory_events")


class MemorySweepInput(RunInput):
    kind: Literal["memory-sweep"] = "memory-sweep"
    # None: the worker's AGENT_MEMORY_FORGET_GRACE_SECONDS (default 24 h).
    grace_seconds: float | None = Field(default=None, ge=0)
    batch_size: int = Field(default=500, ge=1)
    # Forget what each tenant's retention policy expires first (agent_memory/lifecycle/retention.py).
    retention: bool = True
    retention_limit_per_tenant: int = Field(default=1000, ge=1)

    def beyond_schedule(self) -> bool:
        return self.grace_seconds is not None  # the Schedule sweeps after the deployment's grace period


class MemorySweepResult(BaseModel):
    tenants: int = 0
    swept: int = 0
    rows_deleted: int = 0  # projection rows and vectors
    operations_deleted: int = 0
    events_deleted: int = 0
    residue_found: int = 0  # swept memories whose residue check found rows (0 expected)
    skipped_erased: int = 0  # subjects erased meanwhile: their erasure removes everything
    grace_seconds: float = 0
    # Memories this run's retention step forgot, per rule (swept once their grace period is over).
    retention_forgotten: dict[str, int] = Field(default_factory=dict)


class LifecycleCounts(BaseModel):
    """What `agent-memory stats` shows of forgetting, per tenant."""

    forgotten_in_grace: int
    swept: int
    swept_with_residue: int


async def sweep_forgotten(pool: AsyncConnectionPool, keyring: KeyRing, *, grace: timedelta, batch_size: int = 500,
                          progress: Callable[[MemorySweepResult], None] | None = None) -> MemorySweepResult:
    result = MemorySweepResult(grace_seconds=grace.total_seconds())
    swept_any = False
    for tenant_id in await registered_tenants(pool):
        result.tenants += 1
        after: tuple[datetime, uuid.UUID] | None = None
        while True:
            due = await _due(pool, tenant_id, grace, batch_size, after)
            if not due:
                break
            for forgotten_at, memory_id, subject_id in due:
                after = (forgotten_at, memory_id)
                try:
                    swept = await _sweep_one(pool, keyring, tenant_id, subject_id, memory_id, grace, result)
                except SubjectErasedError:
                    result.skipped_erased += 1
                    continue
                if swept is not None:
                    swept_any = True
                    result.swept += 1
                    count_for_tenant(SWEPT_MEMORIES, tenant_id)
                    residue = await _residue(pool, tenant_id, subject_id, memory_id, *swept)
                    result.residue_found += residue > 0
                if progress is not None:
                    progress(result)
    if swept_any:
        async with pool.connection() as conn, conn.transaction():
            await request_compaction(conn, SWEPT_TABLES)
    return result


async def _due(pool: AsyncConnectionPool, tenant_id: str, grace: timedelta, limit: int,
               after: tuple[datetime, uuid.UUID] | None) -> list[tuple[datetime, uuid.UUID, str]]:
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            """
            SELECT forgotten_at, memory_id, subject_id FROM forgotten_memories
             WHERE tenant_id = %s AND state = 'forgotten' AND forgotten_at <= now() - %s
               AND (%s::timestamptz IS NULL OR (forgotten_at, memory_id) > (%s, %s))
             ORDER BY forgotten_at, memory_id LIMIT %s
            """, (tenant_id, grace, after and after[0], after and after[0], after and after[1], limit))
        return [(r[0], r[1], r[2]) for r in await cur.fetchall()]


async def _sweep_one(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str,
                     memory_id: uuid.UUID, grace: timedelta,
                     result: MemorySweepResult) -> tuple[list[str], int] | None:
    """Sweep one memory; None when it was restored (or swept) since it was listed."""
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.WRITE) as scope:
        conn = scope.conn
        cur = await conn.execute(
            "UPDATE forgotten_memories SET state = 'swept', swept_at = now() "
            "WHERE tenant_id = %s AND memory_id = %s AND state = 'forgotten' AND forgotten_at <= now() - %s "
            "RETURNING session_ids, version", (tenant_id, memory_id, grace))
        row = await cur.fetchone()
        if row is None:
            return None
        sessions, version = list(row[0]), int(row[1])
        result.rows_deleted += await drop_memory_rows(conn, LIVE, tenant_id, memory_id)
        # Pruned to the subject's partition (as forgetting does); memory_residue still
        # counts the memory's vectors in every partition.
        cur = await conn.execute("DELETE FROM memory_vectors WHERE tenant_id = %s AND subject_id = %s "
                                 "AND memory_id = %s", (tenant_id, subject_id, memory_id))
        result.rows_deleted += cur.rowcount
        cur = await conn.execute(
            "DELETE FROM operations WHERE tenant_id = %s AND subject_id = %s "
            "AND (memory_id = %s OR (kind = ANY(%s) AND session_id = ANY(%s)))",
            (tenant_id, subject_id, memory_id, SESSION_RESULT_KINDS, sessions))
        result.operations_deleted += cur.rowcount
        result.rows_deleted += await delete_memory_access(conn, tenant_id, subject_id, [memory_id])
        # Only this memory's events up to its forget: the policy allows no other.
        cur = await conn.execute("DELETE FROM memory_events WHERE tenant_id = %s AND memory_id = %s "
                                 "AND aggregate_version <= %s", (tenant_id, memory_id, version))
        result.events_deleted += cur.rowcount
        return sessions, version


async def memory_residue(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, memory_id: uuid.UUID,
                         sessions: list[str], version: int) -> int:
    """Rows still holding the swept memory (or its sessions' recorded provider results)."""
    cur = await conn.execute(
        """
        SELECT (SELECT count(*) FROM facts WHERE tenant_id = %(t)s AND memory_id = %(m)s AND memory_version <= %(v)s)
             + (SELECT count(*) FROM episodes WHERE tenant_id = %(t)s AND memory_id = %(m)s)
             + (SELECT count(*) FROM observations WHERE tenant_id = %(t)s AND memory_id = %(m)s)
             + (SELECT count(*) FROM entities WHERE tenant_id = %(t)s AND memory_id = %(m)s AND version <= %(v)s)
             + (SELECT count(*) FROM entity_mentions WHERE tenant_id = %(t)s AND memory_id = %(m)s
                                                       AND version <= %(v)s)
             + (SELECT count(*) FROM relations WHERE tenant_id = %(t)s AND memory_id = %(m)s AND version <= %(v)s)
             + (SELECT count(*) FROM memory_search WHERE tenant_id = %(t)s AND memory_id = %(m)s AND version <= %(v)s)
             + (SELECT count(*) FROM projection_outbox WHERE tenant_id = %(t)s AND memory_id = %(m)s
                                                         AND version <= %(v)s)
             + (SELECT count(*) FROM memory_vectors WHERE tenant_id = %(t)s AND memory_id = %(m)s AND version <= %(v)s)
             + (SELECT count(*) FROM memory_events WHERE tenant_id = %(t)s AND memory_id = %(m)s
                                                     AND aggregate_version <= %(v)s)
             + (SELECT count(*) FROM memory_access WHERE tenant_id = %(t)s AND subject_id = %(s)s
                                                     AND memory_id = %(m)s)
             + (SELECT count(*) FROM operations WHERE tenant_id = %(t)s AND subject_id = %(s)s
                   AND ((memory_id = %(m)s AND memory_version <= %(v)s)
                        OR (kind = ANY(%(k)s) AND session_id = ANY(%(sessions)s))))
        """, {"t": tenant_id, "s": subject_id, "m": memory_id, "v": version, "k": SESSION_RESULT_KINDS,
              "sessions": sessions})
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def _residue(pool: AsyncConnectionPool, tenant_id: str, subject_id: str, memory_id: uuid.UUID,
                   sessions: list[str], version: int) -> int:
    async with tenant_transaction(pool, tenant_id) as conn:
        residue = await memory_residue(conn, tenant_id, subject_id, memory_id, sessions, version)
        await conn.execute("UPDATE forgotten_memories SET residue = %s WHERE tenant_id = %s AND memory_id = %s",
                           (residue, tenant_id, memory_id))
    return residue


async def lifecycle_counts(pool: AsyncConnectionPool, tenant_id: str) -> LifecycleCounts:
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE state = 'forgotten'), count(*) FILTER (WHERE state = 'swept'), "
            "count(*) FILTER (WHERE state = 'swept' AND residue > 0) FROM forgotten_memories WHERE tenant_id = %s",
            (tenant_id,))
        row = await cur.fetchone()
    assert row is not None
    return LifecycleCounts(forgotten_in_grace=row[0], swept=row[1], swept_with_residue=row[2])
