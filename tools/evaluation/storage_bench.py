"""`python -m tools.cli bench storage`: bytes per message and per memory on the real schema.

On a private embedded stack, `--sessions` synthetic sessions (10 messages each, one subject each:
the `bench consolidate` sessions) are stored and consolidated by the consolidation's own activity
code (the direct pipeline of `bench consolidate`, offline providers, the hashing embedder: 384
dimensions, the width of e5-small), then every tenant table's size is read: heap, indexes and
TOAST, summed over partitions (`pg_partition_tree`). A memory is a row of `memory_search` (every
fact, episode and note is indexed there once); its bytes are those of every table a
consolidation writes (facts, episodes, notes, entities, the event log, the lexical index, the
vectors and their HNSW graphs, the outbox and the recorded operations); a message's are those of
`messages` and `sessions`. Each table's bytes are those its rows added to the empty schema's
(256 vector partitions hold empty indexes of their own). docs/scaling.md sizes a deployment from
these figures.

`--copies K` then copies every subject's rows K times under new subject ids, in SQL: consolidating
a million memories one session at a time takes hours here, while per-row bytes depend on how many
rows a table holds (B-tree and graph depth, partitions filling their pages), which the copies
give. A copy keeps each row's size: its ids are remapped consistently across tables (a uuid to
the md5 of itself and the copy's number, an operation id suffixed), its ciphertexts and vectors
copied; the lexical postings and frequencies are written by memory_search's own triggers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
import uuid
from collections.abc import Callable

import psycopg
from psycopg import sql
from pydantic import BaseModel

from activities.consolidation import ConsolidationActivities
from agent_memory.api.services import Services
from agent_memory.core.errors import InvalidInput
from agent_memory.core.projection_models import ProjectionPolicy
from agent_memory.core.settings import Settings
from agent_memory.core.tables import TABLES
from agent_memory.projection.projector import OutboxProjector
from agent_memory.store.db import tenant_transaction
from tools.evaluation.consolidate_bench import _direct, _store, delayed_providers

EVIDENCE = ("messages", "sessions")
# Kept by memory_search's triggers (migrations 025, 026, 028): copying memory_search writes them.
DERIVED = frozenset({"memory_postings", "lexical_frequencies", "lexical_statistics"})
# Copied before the tables whose foreign keys point at them.
FIRST = ("sessions", "entities")


class TableSize(BaseModel):
    table: str
    rows: int
    bytes: int  # heap + indexes + TOAST over every partition, less the empty schema's
    bytes_per_row: float


class StorageBenchReport(BaseModel):
    sessions: int
    consolidated_sessions: int  # stored and consolidated; the rest are copies of them (--copies)
    messages: int
    memories: int  # rows of memory_search: facts, episodes and notes
    vectors: int
    load_seconds: float
    tables: list[TableSize]
    bytes_per_message: float  # messages + sessions over the messages
    bytes_per_memory: float  # every other table with rows over the memories

    def render(self) -> str:
        copied = self.sessions - self.consolidated_sessions
        how = (f"{self.consolidated_sessions:,} stored and consolidated, {copied:,} copied, in {self.load_seconds:.0f} s"
               if copied else f"stored and consolidated in {self.load_seconds:.0f} s")
        lines = [f"storage bench: {self.sessions:,} sessions, {self.messages:,} messages, {self.memories:,} memories, "
                 f"{self.vectors:,} vectors ({how})",
                 f"  {'table':<22} {'rows':>10} {'MB':>9} {'bytes/row':>10}"]
        for t in self.tables:
            lines.append(f"  {t.table:<22} {t.rows:>10,} {t.bytes / 2**20:>9.1f} {t.bytes_per_row:>10.0f}")
        lines.append(f"  bytes per message {self.bytes_per_message:,.0f}, per memory {self.bytes_per_memory:,.0f}")
        return "\n".join(lines)


async def _table_bytes(services: Services) -> dict[str, int]:
    """Every tenant table's bytes, vacuumed first: heap, indexes and TOAST, summed over its
    partitions (a partitioned table's own size is 0)."""
    admin_url = services.settings.database_admin_url
    assert admin_url is not None  # a scratch stack always has one
    names = [t.name for t in TABLES]
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        await conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.SQL(", ").join(map(sql.Identifier, names))))
        cur = await conn.execute(
            "SELECT t, pg_total_relation_size(t::regclass) + coalesce((SELECT sum(pg_total_relation_size(relid)) "
            "FROM pg_partition_tree(t::regclass) WHERE relid <> t::regclass), 0) FROM unnest(%s::text[]) t", (names,))
        return {name: int(size) for name, size in await cur.fetchall()}


async def _sizes(services: Services, tenant: str, empty: dict[str, int]) -> list[TableSize]:
    """Each tenant table's rows (the bench's tenant, the only one of its stack) and the bytes they
    added to the empty schema's (`empty`: a partition's empty indexes are pages of their own)."""
    sizes = await _table_bytes(services)
    found = []
    async with tenant_transaction(services.pool, tenant) as conn:
        for name, size in sizes.items():
            cur = await conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(name)))
            row = await cur.fetchone()
            rows = int(row[0]) if row else 0
            if rows:
                grown = max(size - empty.get(name, 0), 0)
                found.append(TableSize(table=name, rows=rows, bytes=grown, bytes_per_row=round(grown / rows, 1)))
    return sorted(found, key=lambda t: -t.bytes)


async def _copy_expressions(conn: psycopg.AsyncConnection, table: str) -> tuple[sql.Composable, sql.Composable]:
    """A table's insertable columns and what a copy writes in each: the subject id and operation
    ids suffixed with the copy's number, every uuid remapped (a uuid maps to the same new one in
    every table, so the copies' references hold), everything else as it is."""
    cur = await conn.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = %s::regclass "
        "AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum", (table,))
    columns: list[sql.Composable] = []
    values: list[sql.Composable] = []
    for name, kind in await cur.fetchall():
        column = sql.Identifier("original", name)
        columns.append(sql.Identifier(name))
        if name in ("subject_id", "operation_id"):
            values.append(sql.SQL("{} || '~' || copy_number").format(column))
        elif kind == "uuid":
            values.append(sql.SQL("md5({}::text || '~' || copy_number)::uuid").format(column))
        else:
            values.append(column)
    return sql.SQL(", ").join(columns), sql.SQL(", ").join(values)


async def copy_subjects(services: Services, tenant: str, copies: int, progress: Callable[[int], None]) -> None:
    """Every subject of `tenant` copied `copies` times under new subject ids (see the module),
    one transaction a copy; `progress(k)` after the k-th."""
    admin_url = services.settings.database_admin_url
    assert admin_url is not None  # a scratch stack always has one
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        statements = []
        for table in sorted((t.name for t in TABLES if t.subject_column and t.name not in DERIVED),
                            key=lambda name: FIRST.index(name) if name in FIRST else len(FIRST)):
            cur = await conn.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {} WHERE tenant_id = %s)").format(
                sql.Identifier(table)), (tenant,))
            row = await cur.fetchone()
            if not (row and row[0]):
                continue
            columns, values = await _copy_expressions(conn, table)
            statements.append(sql.SQL(
                "INSERT INTO {table} ({columns}) SELECT {values} FROM {table} AS original "
                "CROSS JOIN (SELECT %(copy)s::text AS copy_number) AS copy "
                "WHERE original.tenant_id = %(tenant)s AND strpos(original.subject_id, '~') = 0").format(
                table=sql.Identifier(table), columns=columns, values=values))
        for k in range(1, copies + 1):
            async with conn.transaction():
                for statement in statements:
                    await conn.execute(statement, {"tenant": tenant, "copy": str(k)})
            progress(k)


async def run_storage_bench(services: Services, *, sessions: int, copies: int = 0, concurrency: int = 8,
                            seed: int = 11, progress: Callable[[int], None] = lambda k: None) -> StorageBenchReport:
    providers = delayed_providers(0, "hashing")
    tenant = f"bench-storage-{uuid.uuid4().hex[:8]}"
    subjects = [f"u{n}" for n in range(sessions)]
    empty = await _table_bytes(services)
    started = time.perf_counter()
    await _store(services, tenant, subjects, random.Random(seed))
    activities = ConsolidationActivities(services.pool, services.keyring, providers.extractor, providers.scorer,
                                         providers.summarizer, providers.embedder)
    projector = OutboxProjector(services.pool, services.keyring, providers.embedder, ProjectionPolicy())
    gate = asyncio.Semaphore(concurrency)

    async def consolidate(n: int) -> None:
        async with gate:
            await _direct(activities, projector, tenant, subjects[n], f"s{n}")

    await asyncio.gather(*(consolidate(n) for n in range(sessions)))
    if copies:
        await copy_subjects(services, tenant, copies, progress)
    load_seconds = time.perf_counter() - started
    tables = await _sizes(services, tenant, empty)
    by_name = {t.table: t for t in tables}
    messages = by_name["messages"].rows
    memories = by_name["memory_search"].rows
    return StorageBenchReport(
        sessions=sessions * (copies + 1), consolidated_sessions=sessions, messages=messages, memories=memories,
        vectors=by_name["memory_vectors"].rows if "memory_vectors" in by_name else 0,
        load_seconds=round(load_seconds, 1), tables=tables,
        bytes_per_message=round(sum(by_name[n].bytes for n in EVIDENCE if n in by_name) / max(messages, 1), 1),
        bytes_per_memory=round(sum(t.bytes for t in tables if t.table not in EVIDENCE) / max(memories, 1), 1))


async def storage_bench_command(args: argparse.Namespace, settings: Settings) -> int:
    from workers.runtime import scratch_stack

    if args.sessions < 1:
        raise InvalidInput("--sessions must be at least 1")
    if args.copies < 0:
        raise InvalidInput("--copies must be 0 or more")

    def progress(k: int) -> None:
        print(f"copied the subjects {k} of {args.copies} times", file=sys.stderr, flush=True)

    async with scratch_stack(settings, "bench-storage", embedded_only=True) as services:
        report = await run_storage_bench(services, sessions=args.sessions, copies=args.copies, progress=progress)
    print(json.dumps(report.model_dump(mode="json"), indent=2) if args.json else report.render())
    return 0

