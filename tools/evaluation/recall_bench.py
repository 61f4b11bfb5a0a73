"""`python -m tools.cli bench recall`: context and prompt assembly latency at 1k, 10k and 50k memories of
one subject, measured side by side in one run.

The store is built with the product's own write path (append_messages + commit_consolidation:
messages, events, observations, episodes, lexical index, outbox; live fact writes for the
profile) and the vector projection (OutboxProjector, the configured embedder), grown in place
from one size to the next. At each size the same queries run, interleaved, through:
- context, routes in parallel (what ships: profile, lexical and vector routes with asyncio.gather),
- context, routes one after another (a single route at a time, for comparison),
- prompt (context plus the live session's turns from working memory),
- with --access-off, context with the access term off as well (routes in parallel, access_weight 0,
  nothing recorded): the read as it is without access statistics, beside the default policy's
  (access term on, each read's memories recorded in Redis as the client does, the Services'
  flusher adding them to Postgres every 30 s). Before measuring at a size, the subject gets
  access statistics: the memories of 50 earlier contexts and 10% of the others, recorded over the
  past 30 days and flushed.
Figures are milliseconds (p50/p95/p99) and the parallel/sequential (and on/off) ratio. With --total-rows, the
tenant also holds filler memories of other subjects (5,000 each: an index row and a vector each,
loaded by COPY with rows shaped like the write path's, before the measured subject grows; the
vectors are their texts' embeddings when the embedder is fast enough, else random), so the
figures show whether the database's size matters beside the subject's.

Before measuring at a size, planner statistics are refreshed (what autovacuum does for a store
that grows over days) and the process's heap is frozen as the servers freeze theirs at start-up
(workers/heap.py), so the figures are the product's, not a fresh bulk load's or a collector's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import psycopg
from pgvector.psycopg import register_vector_async
from psycopg import sql
from pydantic import BaseModel

from agent_memory.api.services import Services
from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import (
    ConflictPlan,
    ExtractionResult,
    ImportanceResult,
    Message,
    Observation,
    Session,
    SummaryResult,
    SummarySentence,
)
from agent_memory.core.operation_keys import CommitKey
from agent_memory.core.projection_models import ProjectionPolicy
from agent_memory.core.settings import Settings
from agent_memory.memory.corrections import write_fact
from agent_memory.memory.evidence import append_messages
from agent_memory.memory.memory_store import commit_consolidation
from agent_memory.projection.projector import OutboxProjector
from agent_memory.providers.base import Embedder
from agent_memory.providers.embedders import local_embedder
from agent_memory.providers.factory import providers_for
from agent_memory.recall.context import assemble_context
from agent_memory.recall.prompt import build_prompt
from agent_memory.recall.recall_policy import DEFAULT_POLICY
from agent_memory.store.access import access_rows, record_access
from agent_memory.store.db import tenant_transaction
from agent_memory.store.lexical import search_text, term_count
from workers.heap import startup_heap_frozen

TENANT, SUBJECT = "bench", "bench-subject"
PER_SESSION = 100
ROUTES = ("context-parallel", "context-sequential", "prompt")
ACCESS_OFF_ROUTE = "context-access-off"
ACCESS_OFF_POLICY = DEFAULT_POLICY.model_copy(update={"access_weight": 0.0})
SEEDING_CONTEXTS, SEEDED_SHARE, SEEDING_DAYS = 50, 0.1, 30
NAMES = ("Ana", "Bo", "Chen", "Dara", "Eli", "Farah", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lena")
VERBS = ("fixed", "painted", "sold", "borrowed", "cleaned", "photographed", "planted", "repaired", "cooked", "found")
NOUNS = ("bicycle", "violin", "lantern", "garden", "canoe", "kitchen", "telescope", "piano", "quilt", "greenhouse",
         "camera", "orchard", "kayak", "bookshelf", "fence", "aquarium")
PLACES = ("harbour", "market", "cabin", "library", "studio", "park", "lake", "workshop", "museum", "bakery")
FACTS = (("location", "home_city", "Lisbon"), ("work", "job", "architect"), ("pet", "biscuit", "dog"),
         ("diet", "restriction", "vegetarian"), ("profile", "name", "Lin"), ("relationship", "partner", "Sam"))


class LatencyRow(BaseModel):
    memories: int
    route: str  # context-parallel | context-sequential | prompt | context-access-off
    queries: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_items: float


class RecallBenchReport(BaseModel):
    embedder: str
    filler_memories: int = 0  # memories of other subjects in the tenant (--total-rows)
    filler_vectors: str = ""  # "embedded" (their own texts' embeddings) or "random" (a model too slow for that)
    rows: list[LatencyRow]
    load_seconds: dict[int, float]  # size -> seconds to grow the store to it (write path + vectors)
    # Passages embedded per second by each offline embedder, batches of 32 interleaved in one run.
    embedding_throughput: dict[str, float] = {}
    access_rows: dict[int, int] = {}  # size -> the subject's access statistics when measured

    def render(self) -> str:
        filler = (f", beside {self.filler_memories:,} memories of other subjects ({self.filler_vectors} vectors)"
                  if self.filler_memories else "")
        lines = [f"recall bench: one subject{filler}, embedder {self.embedder}, policy default; milliseconds",
                 f"{'memories':>9} {'route':<20} {'n':>4} {'p50':>8} {'p95':>8} {'p99':>8} {'items':>6}"]
        for r in self.rows:
            lines.append(f"{r.memories:>9} {r.route:<20} {r.queries:>4} {r.p50_ms:>8.1f} {r.p95_ms:>8.1f} "
                         f"{r.p99_ms:>8.1f} {r.mean_items:>6.1f}")
        sizes = sorted({r.memories for r in self.rows})
        for size in sizes:
            by = {r.route: r for r in self.rows if r.memories == size}
            if "context-parallel" in by and "context-sequential" in by:
                p, s = by["context-parallel"], by["context-sequential"]
                lines.append(f"{size:>9} parallel/sequential p50 {p.p50_ms / s.p50_ms:.2f}, p95 {p.p95_ms / s.p95_ms:.2f}")
            if "context-parallel" in by and ACCESS_OFF_ROUTE in by:
                on, off = by["context-parallel"], by[ACCESS_OFF_ROUTE]
                lines.append(f"{size:>9} access on/off p50 {on.p50_ms / off.p50_ms:.2f}, p95 {on.p95_ms / off.p95_ms:.2f}, "
                             f"p99 {on.p99_ms / off.p99_ms:.2f}")
        if self.access_rows:
            lines.append("memories with access statistics: " + ", ".join(
                f"{size}: {rows}" for size, rows in sorted(self.access_rows.items())))
        lines.append("store growth (write path + vectors): " + ", ".join(
            f"{size}: {secs:.1f} s" for size, secs in sorted(self.load_seconds.items())))
        if self.embedding_throughput:
            lines.append("embedding throughput (passages/s, batches of 32, interleaved): " + ", ".join(
                f"{name} {rate:.0f}" for name, rate in self.embedding_throughput.items()))
        return "\n".join(lines)


async def embedding_throughput(texts: list[str], batch: int = 32) -> dict[str, float]:
    """Each offline embedder on the same batches, alternating, so the machine's noise hits both."""
    embedders = {name: local_embedder(name) for name in ("hashing", "e5-small")}
    seconds = dict.fromkeys(embedders, 0.0)
    for start in range(0, len(texts), batch):
        chunk = texts[start:start + batch]
        for name, embedder in embedders.items():
            assert embedder is not None
            t = time.perf_counter()
            await embedder.embed(chunk)
            seconds[name] += time.perf_counter() - t
    return {name: round(len(texts) / max(secs, 1e-9), 1) for name, secs in seconds.items()}


def _sentence(rng: random.Random) -> str:
    return (f"I {rng.choice(VERBS)} the {rng.choice(NOUNS)} with {rng.choice(NAMES)} at the {rng.choice(PLACES)}, "
            f"and {rng.choice(NAMES)} said the {rng.choice(NOUNS)} looked {rng.choice(('new', 'old', 'odd', 'fine'))}.")


def _query(rng: random.Random) -> str:
    return rng.choice((f"when did I {rng.choice(VERBS).rstrip('ed')} the {rng.choice(NOUNS)}?",
                       f"what happened at the {rng.choice(PLACES)} with {rng.choice(NAMES)}?",
                       f"tell me about the {rng.choice(NOUNS)}"))


async def _grow(services: Services, projector: OutboxProjector, start_session: int, sessions: int,
                rng: random.Random, tenant: str = TENANT) -> None:
    origin = datetime(2024, 1, 1, tzinfo=UTC)
    for n in range(start_session, start_session + sessions):
        began = origin + timedelta(hours=6 * n)
        messages = [Message(message_id=f"s{n}:{i}", turn_index=i, role="user", speaker="Lin", content=_sentence(rng),
                            created_at=began + timedelta(seconds=i)) for i in range(PER_SESSION)]
        session = Session(session_id=f"s{n}", started_at=began, messages=messages)
        await append_messages(services.pool, None, tenant, SUBJECT, session,
                              subject_digest=services.keyring.subject_digest(tenant, SUBJECT))
        summary = SummaryResult(
            sentences=[SummarySentence(text=m.content, source_message_ids=[m.message_id]) for m in messages[:3]],
            token_count=60,
            observations=[Observation(text=f"Lin: {m.content}", source_message_ids=[m.message_id],
                                      happened_at=m.created_at) for m in messages[: PER_SESSION - 1]])
        await commit_consolidation(
            services.pool, services.keyring, tenant_id=tenant, subject_id=SUBJECT, session_id=session.session_id,
            key=CommitKey.for_request(session.session_id, {"n": n}), request={"n": n},
            extraction=ExtractionResult(extractor="bench", extractor_version="1", facts=[]),
            plan=ConflictPlan(decisions=[]), importance=ImportanceResult(importance=rng.randint(2, 9)),
            summary=summary, happened_at=began)
    while (await projector.project_batch(tenant, SUBJECT)).selected:
        pass


async def _vacuum_analyze(services: Services) -> None:
    """Planner statistics and visibility maps as autovacuum keeps them in a store that grew over
    time; this one grew in seconds: stale estimates (one row for a 10k-memory subject) picked plans
    that scan the subject, and the lexical postings' index-only scans went to the heap for pages
    not yet marked all-visible. By the owner role, which VACUUM and ANALYZE need."""
    admin_url = services.settings.database_admin_url
    if admin_url is None:
        raise InvalidInput("the recall bench refreshes planner statistics as the owner role: set DATABASE_ADMIN_URL")
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
        await admin.execute("VACUUM (ANALYZE)")


async def _measure(services: Services, embedder: Embedder, queries: int, rng: random.Random,
                   routes: dict[str, tuple[list[float], list[int]]]) -> None:
    for _ in range(queries):
        query = _query(rng)
        for route, (times, items) in routes.items():  # interleaved: the machine's noise hits all three
            t = time.perf_counter()
            if route == "prompt":
                built = await build_prompt(services.pool, services.keyring, services.redis, embedder, TENANT,
                                           SUBJECT, "live", query, policy=DEFAULT_POLICY)
                count = len(built.cited_item_ids)
            elif route == ACCESS_OFF_ROUTE:
                ctx = await assemble_context(services.pool, services.keyring, embedder, TENANT, SUBJECT, query,
                                             policy=ACCESS_OFF_POLICY)
                count = len(ctx.items)
            else:
                ctx = await assemble_context(services.pool, services.keyring, embedder, TENANT, SUBJECT, query,
                                             policy=DEFAULT_POLICY, parallel=route == "context-parallel")
                if route == "context-parallel":  # what the client does after a read
                    services.access.record(TENANT, SUBJECT, (i.memory_id for i in ctx.items))
                count = len(ctx.items)
            times.append((time.perf_counter() - t) * 1000)
            items.append(count)


async def _seed_access(services: Services, embedder: Embedder, rng: random.Random) -> int:
    """Access statistics as a subject in use has them: the memories of earlier contexts and a
    share of the others, recorded over the past SEEDING_DAYS days, then flushed; returns the rows."""
    now = datetime.now(UTC)

    def past() -> datetime:
        return now - timedelta(days=rng.uniform(0, SEEDING_DAYS))

    for _ in range(SEEDING_CONTEXTS):
        ctx = await assemble_context(services.pool, services.keyring, embedder, TENANT, SUBJECT, _query(rng),
                                     policy=ACCESS_OFF_POLICY)
        await record_access(services.redis, TENANT, SUBJECT, [i.memory_id for i in ctx.items], at=past())
    async with tenant_transaction(services.pool, TENANT) as conn:
        cur = await conn.execute("SELECT memory_id::text FROM observations WHERE tenant_id = %(t)s AND subject_id = %(s)s "
                                 "UNION ALL SELECT memory_id::text FROM episodes WHERE tenant_id = %(t)s "
                                 "AND subject_id = %(s)s", {"t": TENANT, "s": SUBJECT})
        ids = [row[0] for row in await cur.fetchall()]
    chosen = rng.sample(ids, int(len(ids) * SEEDED_SHARE))
    for start in range(0, len(chosen), 50):
        await record_access(services.redis, TENANT, SUBJECT, chosen[start:start + 50], at=past())
    await services.access.flush()
    return await access_rows(services.pool, TENANT, SUBJECT)


def _row(size: int, route: str, times: list[float], items: list[int]) -> LatencyRow:
    cuts = statistics.quantiles(times, n=100, method="inclusive")
    return LatencyRow(memories=size, route=route, queries=len(times), p50_ms=round(statistics.median(times), 2),
                      p95_ms=round(cuts[94], 2), p99_ms=round(cuts[98], 2), mean_items=round(statistics.fmean(items), 1))


FILLER_PER_SUBJECT = 5_000
FILLER_EMBED_BATCH = 256
FILLER_EMBED_SECONDS = 300.0


async def _load_filler(services: Services, embedder: Embedder, memories: int, rng: random.Random) -> str:
    """`memories` episodes of filler subjects: their index rows and vectors, by COPY as the owner
    (COPY FROM is not available under RLS). Returns how the vectors were made: "embedded" (the
    embeddings of the filler's own texts, when the embedder does them all within
    FILLER_EMBED_SECONDS: the hashing one) or "random" (unit vectors of the model's width, for a
    model too slow for that). Random vectors lie apart from every text's, so other subjects'
    vectors are no longer among the measured subject's: a filtered HNSW scan's worst case."""
    admin_url = services.settings.database_admin_url
    if admin_url is None:
        raise InvalidInput("--total-rows loads its filler as the owner role: set DATABASE_ADMIN_URL")
    started = time.perf_counter()
    probe = await embedder.embed([_sentence(rng) for _ in range(FILLER_EMBED_BATCH)])
    embedded = memories * (time.perf_counter() - started) / FILLER_EMBED_BATCH <= FILLER_EMBED_SECONDS
    model, width = probe.model, len(probe.vectors[0])
    numbers = np.random.default_rng(rng.randrange(2**32))
    happened = datetime(2024, 1, 1, tzinfo=UTC)
    async with await psycopg.AsyncConnection.connect(admin_url) as conn:
        # A bulk load, loaded as pgvector advises: the HNSW indexes are dropped, the rows copied and
        # the indexes built again, in memory (a graph insert per row would take an hour at 1M rows).
        cur = await conn.execute(
            "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = 'public.memory_vectors'::regclass AND a.amname = 'hnsw'")
        hnsw_indexes = await cur.fetchall()
        await register_vector_async(conn)
        for name, _ in hnsw_indexes:
            await conn.execute(sql.SQL("DROP INDEX public.{}").format(sql.Identifier(name)))
        for start in range(0, memories, FILLER_PER_SUBJECT):
            subject = f"filler-{start // FILLER_PER_SUBJECT}"
            count = min(FILLER_PER_SUBJECT, memories - start)
            ids = [uuid.UUID(int=rng.getrandbits(128), version=4) for _ in range(count)]
            texts = [_sentence(rng) for _ in range(count)]
            if embedded:
                vectors = np.asarray([v for at in range(0, count, FILLER_EMBED_BATCH)
                                      for v in (await embedder.embed(texts[at:at + FILLER_EMBED_BATCH])).vectors],
                                     dtype=np.float32)
            else:
                vectors = numbers.standard_normal((count, width)).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            async with conn.cursor().copy(
                    "COPY memory_search (tenant_id, subject_id, memory_id, memory_kind, version, search_text, "
                    "term_count, happened_at) FROM STDIN") as copy:
                for memory_id, text in zip(ids, texts, strict=True):
                    await copy.write_row((TENANT, subject, memory_id, "episode", 1, search_text(text), term_count(text),
                                          happened))
            async with conn.cursor().copy(
                    "COPY memory_vectors (tenant_id, subject_id, memory_id, memory_kind, version, model, embedding) "
                    "FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["text", "text", "uuid", "text", "int4", "text", "vector"])
                for memory_id, vector in zip(ids, vectors, strict=True):
                    await copy.write_row((TENANT, subject, memory_id, "episode", 1, model, vector))
            await conn.commit()
        # The graph built in memory (1M vectors of 384 floats: about 2 GB), within a quarter of the RAM.
        ram_mb = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20
        await conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(
            sql.Literal(f"{max(64, min(4096, ram_mb // 4))}MB")))
        for name, definition in hnsw_indexes:
            # pg_get_indexdef's own text (names and expression as migrated); a partitioned table's
            # reads "ON ONLY", which would build no partition's graph.
            await conn.execute(definition.replace(" ON ONLY ", " ON ", 1))
            await _name_partition_indexes(conn, name)
        await conn.commit()
    return "embedded" if embedded else "random"


async def _name_partition_indexes(conn: psycopg.AsyncConnection, parent_index: str) -> None:
    """The partitions' indexes of `parent_index` named as migration 027 names them
    (memory_vectors_p003_hnsw_384), so that plans read the same as in a migrated store."""
    cur = await conn.execute(
        "SELECT n.nspname, child.relname, part.relname FROM pg_catalog.pg_inherits h "
        "JOIN pg_catalog.pg_class child ON child.oid = h.inhrelid "
        "JOIN pg_catalog.pg_namespace n ON n.oid = child.relnamespace "
        "JOIN pg_catalog.pg_index x ON x.indexrelid = child.oid JOIN pg_catalog.pg_class part ON part.oid = x.indrelid "
        "WHERE h.inhparent = %s::regclass", (f"public.{parent_index}",))
    for schema, child, partition in await cur.fetchall():
        wanted = partition + parent_index.removeprefix("memory_vectors")
        if child != wanted:
            await conn.execute(sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                sql.Identifier(schema, child), sql.Identifier(wanted)))


async def run_recall_bench(services: Services, *, sizes: list[int], queries: int, embedder: Embedder | None = None,
                           seed: int = 7, throughput_texts: int = 512, total_rows: int = 0,
                           access_off: bool = False) -> RecallBenchReport:
    rng = random.Random(seed)
    embedder = embedder or providers_for(services.settings).embedder
    filler_vectors = ""
    if total_rows > max(sizes):
        filler_vectors = await _load_filler(services, embedder, total_rows - max(sizes), rng)
    projector = OutboxProjector(services.pool, services.keyring, embedder, ProjectionPolicy())  # the worker's batches
    live = Session(session_id="live", started_at=datetime(2025, 1, 1, tzinfo=UTC), messages=[
        Message(message_id=f"live:{i}", turn_index=i, role="user" if i % 2 == 0 else "assistant",
                content=_sentence(rng), created_at=datetime(2025, 1, 1, tzinfo=UTC) + timedelta(minutes=i))
        for i in range(12)])
    await append_messages(services.pool, services.redis, TENANT, SUBJECT, live,
                          subject_digest=services.keyring.subject_digest(TENANT, SUBJECT))
    for ns, key, value in FACTS:  # the profile, said in the live session
        await write_fact(services.pool, services.keyring, tenant_id=TENANT, subject_id=SUBJECT, namespace=ns, key=key,
                         value=value, expected_version=0, evidence_message_ids=["live:0"])
    rows: list[LatencyRow] = []
    load_seconds: dict[int, float] = {}
    access: dict[int, int] = {}
    stored = 0
    for size in sorted(sizes):
        # Each session adds its episode and PER_SESSION - 1 notes: PER_SESSION memories.
        sessions = max(0, (size - stored) // PER_SESSION)
        t0 = time.perf_counter()
        await _grow(services, projector, stored // PER_SESSION, sessions, rng)
        load_seconds[size] = round(time.perf_counter() - t0, 1)
        stored += sessions * PER_SESSION
        access[stored] = await _seed_access(services, embedder, rng)
        await _vacuum_analyze(services)
        measured = (*ROUTES, ACCESS_OFF_ROUTE) if access_off else ROUTES
        routes: dict[str, tuple[list[float], list[int]]] = {route: ([], []) for route in measured}
        with startup_heap_frozen():
            await _measure(services, embedder, queries, rng, routes)
        rows += [_row(stored, route, times, items) for route, (times, items) in routes.items()]
    throughput = await embedding_throughput([_sentence(rng) for _ in range(throughput_texts)]) if throughput_texts else {}
    return RecallBenchReport(embedder=getattr(embedder, "name", type(embedder).__name__),
                             filler_memories=max(0, total_rows - max(sizes)), filler_vectors=filler_vectors, rows=rows,
                             load_seconds=load_seconds, embedding_throughput=throughput, access_rows=access)


async def recall_bench_command(args: argparse.Namespace, settings: Settings) -> int:
    from workers.runtime import scratch_stack

    sizes = sorted(set(args.sizes))
    if any(s < 100 for s in sizes) or args.queries < 2 or args.total_rows < 0 or args.throughput_texts < 0:
        raise InvalidInput("--memories must be at least 100 each, --queries at least 2, and --total-rows and "
                           "--throughput-texts 0 or more")
    async with scratch_stack(settings, "bench-recall", embedded_only=True) as services:
        report = await run_recall_bench(services, sizes=sizes, queries=args.queries,
                                        embedder=local_embedder(args.embedder), total_rows=args.total_rows,
                                        throughput_texts=args.throughput_texts, access_off=args.access_off)
    print(json.dumps(report.model_dump(mode="json"), indent=2) if args.json else report.render())
    return 0
