"""Physical compaction after erasure: what DELETE leaves behind, removed.

A deleted row stays in its heap page (VACUUM only marks the space free; the bytes stay until
reused), in index pages (GIN never drops entry keys on vacuum) and in `pg_statistic` (ANALYZE
keeps old statistics when it samples no rows). Rewriting a table (CLUSTER, the copy VACUUM FULL
makes) puts its live rows and all its indexes into new files (the old ones are truncated at
commit), and clearing a table's column statistics before ANALYZE means no erased value survives
there even when the table is now empty. Redis keeps deleted keys in its append-only file and RDB
snapshot until they are rewritten.

A rewrite takes an ACCESS EXCLUSIVE lock for as long as it copies the table, so it is kept off
the erasure's critical path: an erasure files a ticket (table names only), and the compaction
Schedule compacts every pending ticket in one batch. The application holds no maintenance
privilege: it CALLs the procedures of migration 031 (`compact_table` for a table of the fixed
list `compaction_tables`, `compact_statistics` for pg_statistic), whose definer functions, owned
by the NOLOGIN role agent_memory_maintainer, do the work and whose COMMIT after each relation
releases the locks; the connection bounds lock waits and statement time.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from datetime import UTC, datetime
from typing import Literal

import psycopg
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from agent_memory.core.run_inputs import RunInput
from agent_memory.core.tables import erasure_tables

# A compaction statement waits this long at most for its lock (the definer functions pin the
# same), and one table's rewrite (all its partitions) runs this long at most.
COMPACTION_LOCK_TIMEOUT = "30s"
COMPACTION_STATEMENT_TIMEOUT = "1h"
# Every table an erasure deletes from or rewrites (event redaction and the cleared subject ids
# of requests and tombstones leave dead tuples too), from the table registry.
ERASURE_TABLES: tuple[str, ...] = erasure_tables()
# Arbitrary constant: one compaction at a time.
COMPACTION_LOCK_ID = 7_331_004_214


class CompactionInput(RunInput):
    kind: Literal["physical-compaction"] = "physical-compaction"
    # True: compact every erasure table even with no pending ticket (an operator's choice).
    force: bool = False

    def beyond_schedule(self) -> bool:
        return self.force  # the Schedule compacts the tables of pending tickets only


class TableCompaction(BaseModel):
    table: str
    seconds: float
    size_before_bytes: int
    size_after_bytes: int
    # Deleted rows the rewrite had to copy because a snapshot older than their deletion still
    # exists (a long transaction, pg_dump, a standby's feedback): they are still in the files.
    dead_rows_kept: int = 0


class CompactionResult(BaseModel):
    compaction_id: str
    tickets: int
    tables: list[TableCompaction]
    redis: dict[str, str]
    elapsed_seconds: float
    # Tickets are closed only when nothing erased can be left: no dead row kept, every Redis
    # file rewritten (or off). Otherwise they stay pending for the next run, which says why.
    tickets_closed: int = 0
    deferred_because: str | None = None


async def request_compaction(conn: psycopg.AsyncConnection, tables: tuple[str, ...]) -> uuid.UUID:
    """File a ticket inside the caller's transaction; returns its id for the receipt."""
    ticket = uuid.uuid4()
    await conn.execute("INSERT INTO compaction_tickets (ticket_id, tables) VALUES (%s, %s)", (ticket, list(tables)))
    return ticket


async def pending_tickets(pool: AsyncConnectionPool) -> list[tuple[uuid.UUID, list[str]]]:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT ticket_id, tables FROM compaction_tickets WHERE compacted_at IS NULL "
                                 "ORDER BY requested_at LIMIT 10000")
        rows = await cur.fetchall()
        await conn.commit()
    return [(row[0], list(row[1])) for row in rows]


async def compact_pending(pool: AsyncConnectionPool, redis: Redis, database_url: str, *,
                          force: bool = False) -> CompactionResult:
    """Compact every table named by a pending ticket (all erasure tables with force=True), then
    mark those tickets done. Re-running after a crash compacts again; that is only slower."""
    started = time.monotonic()
    compaction_id = datetime.now(UTC).strftime("compaction-%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:6]
    tickets = await pending_tickets(pool)
    wanted = set(ERASURE_TABLES) if force else {t for _, ts in tickets for t in ts}
    tables = [t for t in ERASURE_TABLES if t in wanted]  # only known names reach SQL
    done: list[TableCompaction] = []
    statistics_kept = 0
    if tables:
        # The procedures commit after each relation, which they can only outside a transaction
        # block: a connection of its own, in autocommit.
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute("SELECT pg_advisory_lock(%s)", (COMPACTION_LOCK_ID,))
            await conn.execute("SELECT set_config('lock_timeout', %s, false), set_config('statement_timeout', %s, false)",
                               (COMPACTION_LOCK_TIMEOUT, COMPACTION_STATEMENT_TIMEOUT))
            kept = _DeadRowsKept()
            conn.add_notice_handler(kept)
            for table in tables:
                done.append(await _compact_table(conn, table, kept))
            # ANALYZE replaced the statistics rows; the old versions (holding sampled values) are
            # dead tuples of pg_statistic until it is rewritten too.
            kept.count = 0
            await conn.execute("CALL public.compact_statistics()")
            statistics_kept = kept.count
    redis_report = await compact_redis(redis) if (tickets or force) else {}
    reasons = [f"{t.table} kept {t.dead_rows_kept} deleted rows" for t in done if t.dead_rows_kept]
    if statistics_kept:
        reasons.append(f"pg_statistic kept {statistics_kept} old rows")
    if reasons:
        reasons.insert(0, "a snapshot older than the deletions exists (long transaction, pg_dump, standby feedback)")
    reasons += [f"redis {name}: {state}" for name, state in redis_report.items() if state not in ("rewritten", "off")]
    closed = 0
    if tickets and not reasons:
        async with pool.connection() as conn:
            await conn.execute("UPDATE compaction_tickets SET compacted_at = now(), compaction_id = %s "
                               "WHERE ticket_id = ANY(%s)", (compaction_id, [t for t, _ in tickets]))
            await conn.commit()
        closed = len(tickets)
    return CompactionResult(compaction_id=compaction_id, tickets=len(tickets), tables=done, redis=redis_report,
                            elapsed_seconds=round(time.monotonic() - started, 3), tickets_closed=closed,
                            deferred_because="; ".join(reasons) or None)


class _DeadRowsKept:
    """Counts what CLUSTER VERBOSE reports it could not remove ("N dead row versions cannot be
    removed yet"): rows deleted after the oldest snapshot, still copied into the new files."""

    PATTERN = re.compile(r"(\d+) dead row versions cannot be removed yet")

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, diagnostic: psycopg.errors.Diagnostic) -> None:
        for text in (diagnostic.message_primary, diagnostic.message_detail):
            if text and (match := self.PATTERN.search(text)):
                self.count += int(match.group(1))


# A table and, when it is partitioned, its partitions (pg_partition_tree lists nothing for a
# table that is not).
_RELATIONS = ("SELECT %(table)s::regclass AS relid UNION "
              "SELECT relid FROM pg_catalog.pg_partition_tree(%(table)s::regclass)")


async def _compact_table(conn: psycopg.AsyncConnection, table: str, kept: _DeadRowsKept) -> TableCompaction:
    started = time.monotonic()
    size_before = await _size(conn, table)
    kept.count = 0
    # The table and, when it is partitioned (memory_vectors, migration 027), each partition in a
    # transaction of its own: statistics cleared, rows rewritten, statistics sampled again.
    await conn.execute("CALL public.compact_table(%s)", (table,))
    return TableCompaction(table=table, seconds=round(time.monotonic() - started, 3), size_before_bytes=size_before,
                           size_after_bytes=await _size(conn, table), dead_rows_kept=kept.count)


async def _size(conn: psycopg.AsyncConnection, table: str) -> int:
    cur = await conn.execute(f"SELECT sum(pg_catalog.pg_total_relation_size(relid))::bigint FROM ({_RELATIONS}) t",
                             {"table": f"public.{table}"})
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def compact_redis(redis: Redis) -> dict[str, str]:
    """Rewrite Redis' persistence files so deleted keys leave them: the AOF where it is on, the
    RDB snapshot where saving is configured. A server that forbids CONFIG says so."""
    report: dict[str, str] = {}
    try:
        config = await redis.config_get("appendonly") | await redis.config_get("save")
    except ResponseError as exc:
        return {"error": f"CONFIG GET refused ({exc}); rewrite the AOF/RDB on the server yourself"}
    if config.get("appendonly") == "yes":
        await _wait_persistence(redis, "aof_rewrite_in_progress")  # one already running predates the deletions
        await redis.bgrewriteaof()
        report["aof"] = "rewritten" if await _wait_persistence(redis, "aof_rewrite_in_progress") else "rewrite running"
    else:
        report["aof"] = "off"
    if config.get("save"):
        # A save already running was forked before the deletions: let it finish, then save anew.
        await _wait_persistence(redis, "rdb_bgsave_in_progress")
        try:
            await redis.bgsave()
            report["rdb"] = "rewritten" if await _wait_persistence(redis, "rdb_bgsave_in_progress") else "snapshot running"
        except ResponseError as exc:
            report["rdb"] = f"snapshot not started: {exc}"
    else:
        report["rdb"] = "off"
    return report


async def _wait_persistence(redis: Redis, flag: str, timeout: float = 60.0) -> bool:
    """Wait (bounded) for a background rewrite to finish; False if it is still running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        info = await redis.info("persistence")
        if not int(info.get(flag, 0)) and not int(info.get("aof_rewrite_scheduled", 0)):
            return True
    return False
