"""The vector route's two ways: exact for a small subject, HNSW with iterative scan for a
large one. Both find the subject's own nearest vectors; the exact one matches a brute force."""

from __future__ import annotations

import math
import random
import re
import uuid

import psycopg
import pytest
from pgvector import Vector

from agent_memory.recall.vector_search import (
    EXACT_UP_TO,
    HNSW_VISIT_COST,
    PARTITION_SIZE_SQL,
    SUBJECT_SIZE_SQL,
    candidate_list_size,
    exact_scan_limit,
    nearest,
    subject_is_large,
)
from agent_memory.store.db import tenant_transaction

MODEL = "bench-model"


def _unit(rng: random.Random, width: int = 384) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(width)]
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


async def _store_vectors(conn, tenant: str, count: int, kind: str, rng: random.Random, subject: str = "lin") -> None:
    for _ in range(count):
        await conn.execute(
            "INSERT INTO memory_vectors (tenant_id, subject_id, memory_id, memory_kind, version, model, embedding) "
            "VALUES (%s, %s, %s, %s, 1, %s, %s)", (tenant, subject, uuid.uuid4(), kind, MODEL, Vector(_unit(rng))))


async def test_exact_and_indexed_routes_find_the_subjects_nearest_vectors(services, tenant):
    rng = random.Random(7)
    stored: dict[str, list[float]] = {}
    async with tenant_transaction(services.pool, tenant) as conn:
        for subject, count in (("lin", 300), ("kim", 300)):
            for _ in range(count):
                memory_id, vector = uuid.uuid4(), _unit(rng)
                if subject == "lin":
                    stored[str(memory_id)] = vector
                await conn.execute(
                    "INSERT INTO memory_vectors (tenant_id, subject_id, memory_id, memory_kind, version, model, "
                    "embedding) VALUES (%s, %s, %s, 'episode', 1, %s, %s)",
                    (tenant, subject, memory_id, MODEL, Vector(vector)))
    query = _unit(rng)
    brute = sorted(stored, key=lambda m: 1 - sum(a * b for a, b in zip(stored[m], query, strict=True)))[:10]
    async with tenant_transaction(services.pool, tenant) as conn:
        assert not await subject_is_large(conn, tenant, "lin", MODEL)
        assert await subject_is_large(conn, tenant, "lin", MODEL, exact_up_to=299)
        exact = await nearest(conn, tenant, "lin", MODEL, query, ("episode",), 10)
        indexed = await nearest(conn, tenant, "lin", MODEL, query, ("episode",), 10, exact_up_to=0, visit_cost=0)
        none = await nearest(conn, tenant, "lin", MODEL, query, ("observation",), 10, exact_up_to=0, visit_cost=0)
    assert [m for m, *_ in exact] == brute
    assert [d for *_, d in exact] == sorted(d for *_, d in exact)
    assert {m for m, *_ in indexed} <= set(stored)  # only lin's vectors, whatever the index found
    assert len({m for m, *_ in indexed} & set(brute)) >= 8  # approximate, but close
    assert [d for *_, d in indexed] == sorted(d for *_, d in indexed)
    assert none == []


async def test_the_indexed_route_searches_with_a_candidate_list_past_the_limit(services, tenant):
    """One HNSW search holding a third more candidates than `limit` instead of an iterative scan
    growing the default list of 40: all `limit` rows come back, nearest first."""
    rng = random.Random(11)
    async with tenant_transaction(services.pool, tenant) as conn:
        await _store_vectors(conn, tenant, 200, "episode", rng)
    async with tenant_transaction(services.pool, tenant) as conn:
        rows = await nearest(conn, tenant, "lin", MODEL, _unit(rng), ("episode",), 120, exact_up_to=0, visit_cost=0)
        setting = await (await conn.execute("SHOW hnsw.ef_search")).fetchone()
    assert setting == ("160",)
    assert [candidate_list_size(n) for n in (10, 60, 150, 900)] == [40, 80, 200, 1000]
    assert len(rows) == 120 and [d for *_, d in rows] == sorted(d for *_, d in rows)


async def test_pooled_connections_plan_each_statement_with_its_parameters(services, tenant):
    """No generic plan shared by every subject once psycopg prepares a statement."""
    async with tenant_transaction(services.pool, tenant) as conn:
        for _ in range(8):  # past psycopg's prepare threshold
            cur = await conn.execute("SHOW plan_cache_mode")
            assert (await cur.fetchone())[0] == "force_custom_plan"


async def test_the_size_check_reads_the_index_alone(services, tenant):
    """Choosing the route must not read the subject's vectors: 17 ms at 50k memories through the
    (tenant, subject) index and the heap, 1.4 ms as an index-only scan (migration 024)."""
    rng = random.Random(3)
    async with tenant_transaction(services.pool, tenant) as conn:
        await _store_vectors(conn, tenant, 50, "observation", rng)
    async with await psycopg.AsyncConnection.connect(services.settings.database_admin_url, autocommit=True) as admin:
        await admin.execute("VACUUM (ANALYZE) memory_vectors")  # as autovacuum would: a partition's first rows
    async with tenant_transaction(services.pool, tenant) as conn:
        await conn.execute("SET LOCAL enable_seqscan = off")  # a 50-row table would be scanned otherwise
        cur = await conn.execute("EXPLAIN " + SUBJECT_SIZE_SQL, (tenant, "lin", MODEL, 20_001))
        plan = "\n".join(row[0] for row in await cur.fetchall())
    # One partition's index (the subject's partition, pruned to at plan time), read alone.
    assert re.search(r"Index Only Scan using memory_vectors_p\d+_subject_model on memory_vectors_p\d+", plan), plan
    assert plan.count("Index Only Scan") == 1, plan


async def test_the_graph_size_is_the_subjects_partition(services, tenant):
    """The share rule's N is the row count of the subject's partition (migration 029), not of the
    store: other partitions' vectors do not push a large subject to the exact scan."""
    rng = random.Random(5)
    subjects = [f"s{n}" for n in range(40)]
    async with tenant_transaction(services.pool, tenant) as conn:
        for subject in subjects:
            await _store_vectors(conn, tenant, 5, "episode", rng, subject=subject)
    async with await psycopg.AsyncConnection.connect(services.settings.database_admin_url, autocommit=True) as admin:
        await admin.execute("ANALYZE memory_vectors")
        cur = await admin.execute("SELECT subject_id, tableoid::regclass::text FROM memory_vectors WHERE tenant_id = %s",
                                  (tenant,))
        partition_of = dict(await cur.fetchall())
        cur = await admin.execute(
            "SELECT c.oid::regclass::text, greatest(c.reltuples, 0)::bigint FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'public.memory_vectors'::regclass")
        partition_rows = dict(await cur.fetchall())
    assert len(partition_rows) == 256 and len(set(partition_of.values())) > 1
    async with tenant_transaction(services.pool, tenant) as conn:
        for subject in subjects[:5]:
            cur = await conn.execute(PARTITION_SIZE_SQL, (tenant, subject, MODEL))
            assert (await cur.fetchone())[0] == partition_rows[partition_of[subject]]
        cur = await conn.execute(PARTITION_SIZE_SQL, (tenant, "nobody", MODEL))
        assert await cur.fetchone() is None  # no vectors yet (counted as 0: searched exactly)


async def test_the_partition_lookup_reads_one_index_entry_wherever_the_rows_lie(services, tenant):
    """A subject whose vectors lie after other subjects' in its partition's heap (it grew late):
    the lookup of its partition takes one entry of memory_vectors_subject_model. Left to itself the
    planner took LIMIT 1 from a sequential scan, which read 45k other rows per context at 1M rows."""
    rng = random.Random(13)
    async with await psycopg.AsyncConnection.connect(services.settings.database_admin_url, autocommit=True) as admin:
        # 48 subjects that hash to lin's partition, whatever the tenant and the partition count.
        cur = await admin.execute(
            "WITH parent AS (SELECT 'public.memory_vectors'::regclass AS oid, (SELECT count(*)::int FROM pg_inherits "
            "  WHERE inhparent = 'public.memory_vectors'::regclass) AS modulus), "
            "lin AS (SELECT r FROM parent, generate_series(0, parent.modulus - 1) r "
            "  WHERE satisfies_hash_partition(parent.oid, parent.modulus, r, %(t)s::text, 'lin'::text)) "
            "SELECT 'early' || n FROM parent, lin, generate_series(0, 99999) n "
            " WHERE satisfies_hash_partition(parent.oid, parent.modulus, lin.r, %(t)s::text, 'early' || n) "
            " ORDER BY n LIMIT 48", {"t": tenant})
        subjects = [subject for (subject,) in await cur.fetchall()]
    assert len(subjects) == 48
    async with tenant_transaction(services.pool, tenant) as conn:
        async with conn.cursor() as cur:  # narrow vectors: the lookup never reads them
            await cur.executemany(
                "INSERT INTO memory_vectors (tenant_id, subject_id, memory_id, memory_kind, version, model, embedding) "
                "VALUES (%s, %s, %s, 'episode', 1, %s, %s)",
                [(tenant, subject, uuid.uuid4(), MODEL, Vector([rng.random(), rng.random(), 1.0]))
                 for subject in subjects for _ in range(100)]
                + [(tenant, "lin", uuid.uuid4(), MODEL, Vector([rng.random(), rng.random(), 1.0])) for _ in range(1500)])
    async with await psycopg.AsyncConnection.connect(services.settings.database_admin_url, autocommit=True) as admin:
        await admin.execute("ANALYZE memory_vectors")  # what autovacuum keeps
        cur = await admin.execute("SELECT count(*) FROM memory_vectors v WHERE v.tableoid = (SELECT tableoid FROM "
                                  "memory_vectors WHERE tenant_id = %s AND subject_id = 'lin' LIMIT 1) "
                                  "AND v.subject_id <> 'lin'", (tenant,))
        assert (await cur.fetchone())[0] >= 100  # other subjects' rows share lin's partition
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("EXPLAIN (ANALYZE, COSTS OFF) " + PARTITION_SIZE_SQL, (tenant, "lin", MODEL))
        plan = "\n".join(row[0] for row in await cur.fetchall())
    assert "Seq Scan" not in plan, plan
    assert re.search(r"Index (Only )?Scan using memory_vectors_p\d+_subject_model", plan), plan


async def test_the_application_cannot_reach_a_partition_directly(services, tenant):
    """The partitions are in a schema the application role cannot use: it reads and writes the
    vectors through public.memory_vectors, under its row-level security, only."""
    async with services.pool.connection() as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="agent_memory_partitions"):
            await conn.execute("SELECT count(*) FROM agent_memory_partitions.memory_vectors_p000")


def test_a_subject_is_searched_exactly_until_the_index_would_cost_more():
    """n² > visit_cost × limit × N: a 50k-memory subject alone in its index goes to HNSW (3.2 ms
    against 40 ms exact), beside 950k vectors of other subjects it is scanned exactly (50 ms
    against 95 ms through the filtered index). A 10k subject alone in its partition goes to HNSW
    (7.5 against 16.3 ms exact); one of at most 4,000 vectors is scanned exactly, as is every
    subject up to the floor in a partition Postgres has not estimated yet."""
    assert exact_scan_limit(0, 150) == EXACT_UP_TO  # the floor: a partition not estimated yet
    assert exact_scan_limit(3_000, 150) == EXACT_UP_TO  # exact results for small subjects
    assert exact_scan_limit(10_006, 150) == 6_125 < 10_006  # alone in its graph: HNSW
    assert exact_scan_limit(50_000, 150) == 13_693 < 50_000
    assert exact_scan_limit(1_000_000, 150) == 61_237
    assert 50_000 < exact_scan_limit(1_000_000, 150) < 100_000
    assert exact_scan_limit(1_000_000, 150, visit_cost=0, exact_up_to=0) == 0


async def test_past_the_floor_a_subject_that_is_most_of_its_partition_goes_through_hnsw(services, tenant):
    """With the defaults: a subject of EXACT_UP_TO vectors is scanned exactly (the default
    candidate list untouched); one of a few hundred more, most of its partition, goes through its
    partition's graph (the list set a third past the limit)."""
    rng = random.Random(11)
    sizes = {"small": EXACT_UP_TO, "big": EXACT_UP_TO + 400}
    async with tenant_transaction(services.pool, tenant) as conn:
        async with conn.cursor() as cur:
            for subject, count in sizes.items():
                await cur.executemany(
                    "INSERT INTO memory_vectors (tenant_id, subject_id, memory_id, memory_kind, version, model, "
                    "embedding) VALUES (%s, %s, %s, 'episode', 1, %s, %s)",
                    [(tenant, subject, uuid.uuid4(), MODEL, Vector(_unit(rng))) for _ in range(count)])
    async with await psycopg.AsyncConnection.connect(services.settings.database_admin_url, autocommit=True) as admin:
        await admin.execute("ANALYZE memory_vectors")  # what autovacuum keeps: the partitions' row counts
    query = _unit(rng)
    routes = {}
    for subject in sizes:
        async with tenant_transaction(services.pool, tenant) as conn:
            rows = await nearest(conn, tenant, subject, MODEL, query, ("episode",), 60)
            routes[subject] = (await (await conn.execute("SHOW hnsw.ef_search")).fetchone(), len(rows))
    assert routes == {"small": (("40",), 60), "big": (("80",), 60)}


async def test_the_route_follows_the_subjects_share_of_the_index(services, tenant):
    """A subject past the size floor but a small share of the index is scanned exactly (the
    HNSW settings are never made); the same subject with the index's cost ignored goes through it."""
    rng = random.Random(5)
    async with tenant_transaction(services.pool, tenant) as conn:
        await _store_vectors(conn, tenant, 300, "episode", rng)
        await _store_vectors(conn, tenant, 1500, "episode", rng, subject="kim")
    async with await psycopg.AsyncConnection.connect(services.settings.database_admin_url, autocommit=True) as admin:
        await admin.execute("ANALYZE memory_vectors")  # what autovacuum keeps: the index's row count
    query = _unit(rng)
    routes = {}
    for visit_cost in (HNSW_VISIT_COST, 0):
        async with tenant_transaction(services.pool, tenant) as conn:
            rows = await nearest(conn, tenant, "lin", MODEL, query, ("episode",), 60, exact_up_to=0,
                                 visit_cost=visit_cost)
            routes[visit_cost] = (await (await conn.execute("SHOW hnsw.ef_search")).fetchone(), len(rows))
    # 300² < 25 × 60 × 1,800+: exact (the default candidate list untouched); without the cost: HNSW.
    assert routes == {HNSW_VISIT_COST: (("40",), 60), 0: (("80",), 60)}
