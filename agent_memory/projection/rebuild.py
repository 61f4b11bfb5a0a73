"""Rebuild of a subject's projections from the event log, proved by a content hash.

The event log (`memory_events`) is the source of truth; facts, episodes, observations, entities
and the relations between them, the lexical index (`memory_search`) and the vector projection
(`memory_vectors`) are derived from it. `rebuild_subject` replays the subject's events (decrypted with the subject key) into
scratch tables through the write path's own `apply.apply_event`, hashes the
live and the rebuilt rows with the same query (`projection_digest`), and swaps the differing
tables in — in the same transaction, under the exclusive subject lock — only when the digests
differ (or when forced). Vectors are never re-computed by the provider when an `embed/...`
operation is recorded: the recorded result is reused; a live vector whose (memory, version,
model) still matches a replayed item is kept; an item whose vector and recorded embedding are
both lost (and that is not in flight in the outbox) is embedded once, as a recorded operation,
before the locked pass.

An erased subject (tombstone, or its key shredded) is skipped: tombstones win over replay.
recorded_at / superseded_at / created_at are bookkeeping timestamps: excluded from the digest
and carried over from the live rows when a table is swapped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

import psycopg
from pgvector import Vector
from psycopg import sql
from psycopg.rows import class_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from agent_memory.core import tables
from agent_memory.core.models import EmbeddingResult, SubjectRebuild
from agent_memory.core.operation_keys import EmbedKey
from agent_memory.memory.apply import ProjectionTables, apply_event
from agent_memory.memory.events import EventLogError, MemoryEvent, effective_events, read_subject_events
from agent_memory.memory.memory_store import subject_key
from agent_memory.memory.operations import OperationRecorder, SubjectErasedError, request_hash
from agent_memory.projection.projector import memory_text
from agent_memory.projection.reembedding import embedder_model
from agent_memory.providers.base import Embedder
from agent_memory.providers.metering import metered
from agent_memory.security.keyring import KeyRing
from agent_memory.store.db import fetch_one, tenant_transaction
from agent_memory.store.scope import Mode, SubjectScope, is_subject_digest, subject_scope

# The projections a rebuild replays, in digest order, each with the columns the digest covers
# (bookkeeping timestamps — recorded_at, superseded_at, created_at — left out) and the columns
# written when a rebuilt table is swapped in: declared in the table registry (tables.py).
DIGEST_COLUMNS: dict[str, tuple[str, ...]] = tables.digest_columns()
TABLES: tuple[str, ...] = tuple(DIGEST_COLUMNS)
WRITE_COLUMNS: dict[str, tuple[str, ...]] = tables.write_columns()
# Scratch copies live in the rebuilding transaction only.
SCRATCH: dict[str, str] = {t: f"rebuild_{t}" for t in TABLES}
SCRATCH_TABLES = ProjectionTables(facts=SCRATCH["facts"], episodes=SCRATCH["episodes"],
                                  observations=SCRATCH["observations"], entities=SCRATCH["entities"],
                                  entity_mentions=SCRATCH["entity_mentions"], relations=SCRATCH["relations"],
                                  memory_search=SCRATCH["memory_search"],
                                  projection_outbox="rebuild_projection_outbox",
                                  stale_marks=SCRATCH["stale_marks"])
EMBEDDING_DECIMALS = 6


class SwapVerificationError(EventLogError):
    """The projection swapped in does not hash to the rebuilt digest (the swap is rolled back)."""


# --- digest ----------------------------------------------------------------------------------


def _canonical(value: Any, *, embedding: bool = False) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, list):
        if embedding:
            return [f"{round(float(x), EMBEDDING_DECIMALS):.{EMBEDDING_DECIMALS}f}" for x in value]
        return [_canonical(v) for v in value]
    if isinstance(value, float):
        return repr(value)
    return value


async def _table_digests(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                         tables: dict[str, str] | None = None) -> tuple[dict[str, str], dict[str, int]]:
    """Per table: sha256 of the sorted canonical rows, and the row count."""
    digests: dict[str, str] = {}
    counts: dict[str, int] = {}
    for table, columns in DIGEST_COLUMNS.items():
        name = (tables or {}).get(table, table)
        query = sql.SQL("SELECT {} FROM {} WHERE tenant_id = %s AND subject_id = %s").format(
            sql.SQL(", ").join(sql.SQL(c) for c in columns), sql.Identifier(name))
        cur = await conn.execute(query, (tenant_id, subject_id))
        lines = sorted(
            json.dumps([_canonical(v, embedding=(table == "memory_vectors" and i == len(columns) - 1))
                        for i, v in enumerate(row)], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
            for row in await cur.fetchall())
        h = hashlib.sha256()
        for line in lines:
            h.update(line.encode())
            h.update(b"\n")
        digests[table], counts[table] = h.hexdigest(), len(lines)
    return digests, counts


# Tables added to the digest after digests were first recorded: hashed into the combined digest
# only when the subject has rows there, so a subject without any keeps the digest it had.
LATER_TABLES: frozenset[str] = frozenset({"stale_marks"})
_EMPTY = hashlib.sha256(b"").hexdigest()


def combine_digests(digests: dict[str, str]) -> str:
    return hashlib.sha256("".join(f"{t}:{digests[t]}\n" for t in TABLES
                                  if t not in LATER_TABLES or digests[t] != _EMPTY).encode()).hexdigest()


async def projection_digest(conn_or_pool: psycopg.AsyncConnection | AsyncConnectionPool, tenant_id: str,
                            subject_id: str) -> str:
    """sha256 over a canonical, sorted serialization of the subject's projection rows (facts,
    episodes, observations, lexical index, vectors rounded to 6 decimals). A connection must
    already be in a tenant-scoped transaction."""
    if isinstance(conn_or_pool, AsyncConnectionPool):
        async with tenant_transaction(conn_or_pool, tenant_id) as conn:
            digests, _ = await _table_digests(conn, tenant_id, subject_id)
    else:
        digests, _ = await _table_digests(conn_or_pool, tenant_id, subject_id)
    return combine_digests(digests)


# --- replay ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class VectorItem:
    """One row the vector projection embeds (an outbox row of the rebuilt projection)."""

    memory_id: uuid.UUID
    kind: str
    version: int
    text: str
    operation_id: str


@dataclass(frozen=True)
class _OutboxRow:
    """A rebuilt outbox row joined to the text it embeds."""

    memory_id: uuid.UUID
    memory_kind: str
    version: int
    operation_id: str
    namespace: str | None  # facts only
    key: str | None
    text: str  # every rebuilt outbox row has the row it was written for


@dataclass
class Replayed:
    """A subject's log, applied to the scratch tables."""

    events: int = 0
    vector_items: list[VectorItem] = field(default_factory=list)


async def replay_subject(scope: SubjectScope, keyring: KeyRing) -> Replayed | None:
    """Read the subject's events, decrypted and typed, and apply them with the write path's own
    `apply_event` into the scratch tables. None when the subject is erased (the scope found its
    tombstone; a subject listed by its digest always has one) or its key is shredded."""
    if scope.erased:
        return None
    conn, tenant_id, subject_id = scope.conn, scope.tenant_id, scope.subject_id
    key = await subject_key(conn, keyring, tenant_id, subject_id, create=False)
    if key is None:
        cur = await conn.execute("SELECT 1 FROM memory_events WHERE tenant_id = %s AND subject_id = %s LIMIT 1",
                                 (tenant_id, subject_id))
        # Shredded: unreadable, so nothing can be rebuilt; a subject that never wrote has nothing to replay.
        return None if await cur.fetchone() is not None else await _replay(conn, tenant_id, subject_id, [])
    # Forgotten memories have no projection (a forget undone by a restore replays as if never made).
    return await _replay(conn, tenant_id, subject_id, effective_events(await read_subject_events(conn, key)))


async def _replay(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                  events: list[MemoryEvent]) -> Replayed:
    await _create_scratch(conn)
    for event in events:
        await apply_event(conn, tenant_id, subject_id, event, SCRATCH_TABLES)
    return Replayed(events=len(events), vector_items=await _outbox_items(conn))


async def _outbox_items(conn: psycopg.AsyncConnection) -> list[VectorItem]:
    """The rebuilt outbox rows with the text each one embeds (as the projector reads it live)."""
    async with conn.cursor(row_factory=class_row(_OutboxRow)) as cur:
        await cur.execute(
            """
            SELECT o.memory_id, o.memory_kind, o.version, o.operation_id, f.namespace, f.key,
                   CASE o.memory_kind WHEN 'episode' THEN e.summary WHEN 'observation' THEN ob.text
                        ELSE f.value END AS text
              FROM rebuild_projection_outbox o
              LEFT JOIN rebuild_facts f ON o.memory_kind = 'fact' AND f.memory_id = o.memory_id
                                       AND f.version = o.version
              LEFT JOIN rebuild_episodes e ON o.memory_kind = 'episode' AND e.memory_id = o.memory_id
              LEFT JOIN rebuild_observations ob ON o.memory_kind = 'observation' AND ob.memory_id = o.memory_id
             ORDER BY o.memory_id, o.version
            """)
        return [VectorItem(r.memory_id, r.memory_kind, r.version,
                           memory_text(r.memory_kind, r.namespace or r.memory_kind, r.key, r.text), r.operation_id)
                for r in await cur.fetchall()]


# --- scratch tables, vectors, swap -----------------------------------------------------------


async def _create_scratch(conn: psycopg.AsyncConnection) -> None:
    """Transaction-local copies of the projections. The row tables keep their unique indexes, so
    a replay that breaks an invariant (two active intervals of one memory) fails as live would."""
    for table, scratch in {**SCRATCH, "projection_outbox": SCRATCH_TABLES.projection_outbox}.items():
        indexes = sql.SQL("" if table == "memory_vectors" else " INCLUDING INDEXES")
        await conn.execute(sql.SQL("CREATE TEMP TABLE {} (LIKE {} INCLUDING DEFAULTS{}) ON COMMIT DROP").format(
            sql.Identifier(scratch), sql.Identifier(table), indexes))
    await conn.execute("CREATE TEMP TABLE rebuild_items (memory_id uuid, memory_kind text, version integer, "
                       "operation_id text, has_vector boolean NOT NULL DEFAULT false) ON COMMIT DROP")


async def _insert(conn: psycopg.AsyncConnection, table: str, tenant_id: str, subject_id: str,
                  rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    columns = ["tenant_id", "subject_id", *rows[0]]
    query = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns)),
        sql.SQL(", ").join(sql.Placeholder() * len(columns)))
    async with conn.cursor() as cur:
        await cur.executemany(query, [(tenant_id, subject_id, *row.values()) for row in rows])


@dataclass(frozen=True)
class _EmbedRecord:
    """A succeeded embed operation: its key's columns, its request hash and its result."""

    operation_id: str
    memory_id: uuid.UUID | None
    memory_version: int | None
    model: str | None
    model_version: str | None
    key_digest: str | None
    request_hash: str
    result: dict[str, Any]

    def keys(self) -> list[EmbedKey]:
        """The key it was recorded under; for a row recorded without model columns (before
        migration 010, or by a worker not yet upgraded) every key its id may stand for."""
        if (self.memory_id is None or self.memory_version is None or self.model is None
                or self.model_version is None or self.key_digest is None):
            return EmbedKey.legacy_candidates(self.operation_id)
        return [EmbedKey(self.memory_id, self.memory_version, self.model, self.model_version, self.key_digest)]


async def _recorded_embeddings(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                               items: list[VectorItem]) -> tuple[list[dict[str, Any]], int]:
    """Vectors from recorded embed operations whose request is this item's rebuilt text.
    Per (memory, version, model) the earliest record wins, as the live upsert does nothing on
    conflict. Returns (rows, recorded operations that did not match the rebuilt text)."""
    by_key = {(i.memory_id, i.version): i for i in items}
    async with conn.cursor(row_factory=class_row(_EmbedRecord)) as cur:
        # Rows without a memory id were recorded by a worker older than migration 010.
        await cur.execute(
            """
            SELECT operation_id, memory_id, memory_version, model, model_version, key_digest, request_hash, result
              FROM operations
             WHERE tenant_id = %s AND subject_id = %s AND kind = 'embed' AND status = 'succeeded'
               AND (memory_id = ANY(%s) OR memory_id IS NULL)
             ORDER BY created_at, operation_id
            """, (tenant_id, subject_id, list({i.memory_id for i in items})))
        records = await cur.fetchall()
    # The models the tenant reads or is re-embedding into; a retired model's records stay (they
    # are recorded calls) but its vectors were dropped at the switch and are not rebuilt.
    models_cur = await conn.execute("SELECT model FROM embedding_models WHERE tenant_id = %s AND state <> 'retired'",
                                    (tenant_id,))
    models = {row[0] for row in await models_cur.fetchall()}
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    unmatched = 0
    for record in records:
        keys = record.keys()
        item = by_key.get((keys[0].memory_id, keys[0].version)) if keys else None
        if item is None:
            continue  # an embedding of a memory version the log does not project
        if not any(request_hash(key.request(item.text)) == record.request_hash for key in keys):
            unmatched += 1
            continue
        embedding = EmbeddingResult.model_validate(record.result)
        if models and embedding.model not in models:
            continue
        rows.setdefault((item.memory_id, item.version, embedding.model), {
            "memory_id": item.memory_id, "memory_kind": item.kind, "version": item.version,
            "model": embedding.model, "embedding": Vector(embedding.vectors[0])})
    return list(rows.values()), unmatched


async def _build_scratch(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                         replayed: Replayed) -> dict[str, int]:
    vectors, unmatched = await _recorded_embeddings(conn, tenant_id, subject_id, replayed.vector_items)
    await _insert(conn, SCRATCH["memory_vectors"], tenant_id, subject_id, vectors)
    async with conn.cursor() as cur:
        await cur.executemany("INSERT INTO rebuild_items (memory_id, memory_kind, version, operation_id) "
                              "VALUES (%s, %s, %s, %s)",
                              [(i.memory_id, i.kind, i.version, i.operation_id) for i in replayed.vector_items])
    # A live vector of a replayed item under a model with no recorded operation is kept as is.
    cur = await conn.execute(
        """
        INSERT INTO rebuild_memory_vectors (tenant_id, subject_id, memory_id, memory_kind, version, model, embedding)
        SELECT l.tenant_id, l.subject_id, l.memory_id, l.memory_kind, l.version, l.model, l.embedding
          FROM memory_vectors l
          JOIN rebuild_items i ON i.memory_id = l.memory_id AND i.version = l.version AND i.memory_kind = l.memory_kind
         WHERE l.tenant_id = %s AND l.subject_id = %s
           AND NOT EXISTS (SELECT 1 FROM rebuild_memory_vectors r
                            WHERE r.memory_id = l.memory_id AND r.version = l.version AND r.model = l.model)
        """, (tenant_id, subject_id))
    kept = cur.rowcount
    await conn.execute("UPDATE rebuild_items i SET has_vector = true WHERE EXISTS "
                       "(SELECT 1 FROM rebuild_memory_vectors r WHERE r.memory_id = i.memory_id "
                       "AND r.version = i.version)")
    cur = await conn.execute("SELECT count(*) FROM rebuild_items WHERE NOT has_vector")
    missing = (await fetch_one(cur))[0]
    # Bookkeeping timestamps are carried over from the live rows (they are not derivable).
    await conn.execute(
        """
        UPDATE rebuild_facts s SET recorded_at = l.recorded_at,
               superseded_at = CASE WHEN s.status IN ('closed', 'promoted') THEN coalesce(l.superseded_at, now()) END
          FROM facts l WHERE l.tenant_id = %s AND l.fact_id = s.fact_id
        """, (tenant_id,))
    await conn.execute("UPDATE rebuild_facts SET superseded_at = now() WHERE status IN ('closed', 'promoted') "
                       "AND superseded_at IS NULL")
    for table in ("episodes", "observations", "entities"):
        await conn.execute(sql.SQL("UPDATE {} s SET recorded_at = l.recorded_at FROM {} l "
                                   "WHERE l.tenant_id = %s AND l.memory_id = s.memory_id").format(
            sql.Identifier(SCRATCH[table]), sql.Identifier(table)), (tenant_id,))
    await conn.execute("UPDATE rebuild_relations s SET recorded_at = l.recorded_at FROM relations l "
                       "WHERE l.tenant_id = %s AND l.relation_id = s.relation_id", (tenant_id,))
    # Named by subject, as every read of memory_vectors: the planner opens its partition only.
    await conn.execute("UPDATE rebuild_memory_vectors s SET created_at = l.created_at FROM memory_vectors l "
                       "WHERE l.tenant_id = %s AND l.subject_id = %s AND l.memory_id = s.memory_id "
                       "AND l.version = s.version AND l.model = s.model", (tenant_id, subject_id))
    return {"from_operations": len(vectors), "kept": kept, "missing": missing, "unmatched_operations": unmatched}


async def _swap(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, tables: list[str]) -> None:
    for table in tables:
        await conn.execute(sql.SQL("DELETE FROM {} WHERE tenant_id = %s AND subject_id = %s").format(
            sql.Identifier(table)), (tenant_id, subject_id))
        columns = sql.SQL(", ").join(map(sql.Identifier, WRITE_COLUMNS[table]))
        await conn.execute(sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {}").format(
            sql.Identifier(table), columns, columns, sql.Identifier(SCRATCH[table])))
    # The outbox follows the rebuilt projection: every replayed item has its row, processed when
    # it has a vector, pending (for the vector projection to embed) when it has none.
    await conn.execute(
        """
        INSERT INTO projection_outbox (tenant_id, subject_id, memory_id, memory_kind, version, operation_id,
                                       processed_at)
        SELECT %s, %s, memory_id, memory_kind, version, operation_id, CASE WHEN has_vector THEN now() END
          FROM rebuild_items
        ON CONFLICT (tenant_id, memory_id, version) DO UPDATE
           SET processed_at = CASE WHEN EXCLUDED.processed_at IS NULL THEN NULL
                                   ELSE coalesce(projection_outbox.processed_at, EXCLUDED.processed_at) END
        """, (tenant_id, subject_id))


async def embed_missing(pool: AsyncConnectionPool, keyring: KeyRing, recorder: OperationRecorder,
                        embedder: Embedder, tenant_id: str, subject_id: str) -> int:
    """Embed replayed items that have no vector, no recorded embedding and no pending outbox row
    (a pending row is in flight: the vector projection owns it). Each is a recorded operation,
    so the provider is called at most once per item however often this runs. Returns how many
    were embedded by a provider call (a result recorded under the same id is reused)."""
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.READ) as scope:
        conn = scope.conn
        replayed = await replay_subject(scope, keyring)
        if not replayed or not replayed.vector_items:
            return 0
        items = {(i.memory_id, i.version): i for i in replayed.vector_items}
        cur = await conn.execute(
            """
            SELECT i.memory_id, i.version FROM unnest(%(ids)s::uuid[], %(versions)s::int[]) AS i(memory_id, version)
             WHERE NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.tenant_id = %(t)s AND v.subject_id = %(s)s
                                  AND v.memory_id = i.memory_id AND v.version = i.version
                                  AND (%(model)s::text IS NULL OR v.model = %(model)s))
               AND NOT EXISTS (SELECT 1 FROM operations o WHERE o.tenant_id = %(t)s AND o.memory_id = i.memory_id
                                  AND o.memory_version = i.version AND o.kind = 'embed' AND o.status = 'succeeded'
                                  AND (o.model IS NULL OR (o.model = %(name)s AND o.model_version = %(version)s)))
               AND NOT EXISTS (SELECT 1 FROM projection_outbox b WHERE b.tenant_id = %(t)s
                                  AND b.memory_id = i.memory_id AND b.version = i.version AND b.processed_at IS NULL)
            """, {"ids": [k[0] for k in items], "versions": [k[1] for k in items], "t": tenant_id,
                  "s": subject_id,
                  # This embedder's vectors and records only: another model's do not count.
                  "model": embedder_model(embedder), "name": embedder.name, "version": embedder.version})
        missing = [items[(memory_id, version)] for memory_id, version in await cur.fetchall()]
    embedded = 0
    for item in missing:
        # A row recorded without key columns (by a worker older than migration 010) is found here,
        # by its id, when it was embedded by this embedder: reused, not counted.
        key = EmbedKey.for_text(item.memory_id, item.version, embedder, item.text)
        _, reused = await recorder.run(tenant_id=tenant_id, subject_id=subject_id, key=key,
                                       request=key.request(item.text), result_type=EmbeddingResult,
                                       call=partial(_embed, tenant_id, embedder, item.text))
        embedded += not reused
    return embedded


async def _embed(tenant_id: str, embedder: Embedder, text: str) -> EmbeddingResult:
    return await metered(tenant_id, embedder, "embed", embedder.embed([text]))


async def rebuild_subject(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str, *,
                          force: bool = False, recorder: OperationRecorder | None = None,
                          embedder: Embedder | None = None, request_id: str | None = None) -> SubjectRebuild:
    """Replay, compare, and repair one subject, all in one transaction under the exclusive
    subject lock (commits and erasure wait; the result is a consistent snapshot). With an
    embedder, replayed items whose vector is lost with no recorded embedding are embedded first
    (recorded), so the rebuilt projection has them and the swap puts them back. With a
    request id, the subject's report is written to `rebuild_reports` in the same transaction
    (an erased subject's under its keyed digest, so no report outlives an erasure in clear)."""
    started = time.monotonic()
    reembedded = 0
    if recorder is not None and embedder is not None:
        # Erased meanwhile: the locked pass below sees the tombstone and skips the subject.
        with contextlib.suppress(SubjectErasedError):
            reembedded = await embed_missing(pool, keyring, recorder, embedder, tenant_id, subject_id)
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.EXCLUSIVE) as scope:
        conn = scope.conn
        live, counts = await _table_digests(conn, tenant_id, subject_id)
        live_digest = combine_digests(live)
        replayed = await replay_subject(scope, keyring)
        if replayed is None:
            # Tombstones win: nothing is replayed or written; the rebuilt projection is empty.
            empty = combine_digests({t: hashlib.sha256(b"").hexdigest() for t in TABLES})
            skipped = SubjectRebuild(subject=subject_id, live_digest=live_digest, rebuilt_digest=empty,
                                     equal=live_digest == empty, rows=0, skipped_erased=True,
                                     elapsed_ms=int((time.monotonic() - started) * 1000))
            if request_id is not None:
                reported = subject_id if is_subject_digest(subject_id) else keyring.subject_digest(tenant_id,
                                                                                                 subject_id)
                await _write_report(conn, tenant_id, request_id, skipped.model_copy(update={"subject": reported}))
            return skipped
        vectors = await _build_scratch(conn, tenant_id, subject_id, replayed)
        rebuilt, rebuilt_counts = await _table_digests(conn, tenant_id, subject_id, SCRATCH)
        rebuilt_digest = combine_digests(rebuilt)
        differing = [t for t in TABLES if live[t] != rebuilt[t]]
        to_swap = list(TABLES) if force else differing
        if to_swap:
            await _swap(conn, tenant_id, subject_id, to_swap)
            after, _ = await _table_digests(conn, tenant_id, subject_id)
            if combine_digests(after) != rebuilt_digest:  # rolls the swap back
                raise SwapVerificationError(f"subject {subject_id}: the swapped-in projection does not hash to "
                                            f"the rebuilt digest {rebuilt_digest}")
        entry = SubjectRebuild(
            subject=subject_id, live_digest=live_digest, rebuilt_digest=rebuilt_digest,
            equal=live_digest == rebuilt_digest, rows=sum(rebuilt_counts.values()), repaired=bool(to_swap),
            events=replayed.events, tables_differing=differing, rows_by_table=rebuilt_counts,
            live_rows_by_table=counts, vectors_from_operations=vectors["from_operations"],
            vectors_kept=vectors["kept"], vectors_missing=vectors["missing"], vectors_reembedded=reembedded,
            unmatched_operations=vectors["unmatched_operations"],
            elapsed_ms=int((time.monotonic() - started) * 1000))
        if request_id is not None:
            await _write_report(conn, tenant_id, request_id, entry)
    return entry


async def _write_report(conn: psycopg.AsyncConnection, tenant_id: str, request_id: str,
                        entry: SubjectRebuild) -> None:
    """The subject's report for this request (a retried or re-run request overwrites it)."""
    await conn.execute(
        """
        INSERT INTO rebuild_reports (tenant_id, request_id, subject_id, equal, repaired, skipped_erased, report)
        VALUES (%s, %s, %s, %s, %s, %s, %s)
        ON CONFLICT (tenant_id, request_id, subject_id) DO UPDATE
           SET equal = EXCLUDED.equal, repaired = EXCLUDED.repaired, skipped_erased = EXCLUDED.skipped_erased,
               report = EXCLUDED.report, recorded_at = now()
        """, (tenant_id, request_id, entry.subject, entry.equal, entry.repaired, entry.skipped_erased,
              Jsonb(entry.model_dump(mode="json"))))


async def rebuild_reports(pool: AsyncConnectionPool, tenant_id: str, request_id: str, *,
                          limit: int) -> tuple[list[SubjectRebuild], int]:
    """A request's subject reports, those an operator must see first (differed, then repaired),
    at most `limit`; and how many reports the request has in all."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            "SELECT report FROM rebuild_reports WHERE tenant_id = %s AND request_id = %s "
            "ORDER BY equal, NOT repaired, subject_id LIMIT %s", (tenant_id, request_id, limit))
        reports = [SubjectRebuild.model_validate(r) for (r,) in await cur.fetchall()]
        cur = await conn.execute("SELECT count(*) FROM rebuild_reports WHERE tenant_id = %s AND request_id = %s",
                                 (tenant_id, request_id))
        total = int((await fetch_one(cur))[0])
    return reports, total


def listed_tables() -> tuple[str, ...]:
    """Where a subject shows that it has memory: the event log and every projection (registry)."""
    return tuple(t.name for t in tables.TABLES if t.role in ("event_log", "projection") and t.subject_column)


async def list_subjects(pool: AsyncConnectionPool, tenant_id: str, *, after: str | None = None,
                        limit: int | None = None) -> list[str]:
    """Subjects of the tenant with events, projection rows or a tombstone, in id order: those
    after `after`, at most `limit` (a keyset page). An erased subject is listed by its keyed
    digest ('erased:…'): erasure keeps no clear id."""
    parts: list[sql.Composable] = [
        sql.SQL("SELECT subject_id FROM {} WHERE tenant_id = %(t)s").format(sql.Identifier(t))
        for t in listed_tables()]
    parts.append(sql.SQL("SELECT coalesce(subject_digest, subject_id) FROM tombstones WHERE tenant_id = %(t)s"))
    query = (sql.SQL("SELECT subject_id FROM (") + sql.SQL(" UNION ").join(parts)
             + sql.SQL(") s WHERE subject_id > %(after)s ORDER BY 1 LIMIT %(limit)s"))
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(query, {"t": tenant_id, "after": after or "", "limit": limit})
        return [row[0] for row in await cur.fetchall()]
