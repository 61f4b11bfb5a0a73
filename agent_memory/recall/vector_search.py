"""The nearest vectors of one subject: exact for a small subject, through HNSW for a large one.

The choice is made here, per call, from the subject's size, instead of by the planner's generic
plan (a pooled connection prepares a statement after a few runs, and Postgres then reuses one
plan for every subject):

- up to `EXACT_UP_TO` vectors of the model, or more but a small share of its partition: an
  exact scan of the subject's rows (its btree index, then the distances). The HNSW index cannot
  serve this form of the query.
- more, and a large enough share of the index: the HNSW index of the vectors' width (migration
  016 keeps one partial expression index per width), with pgvector's iterative scan so that the
  subject filter still yields `limit` rows. A filtered scan visits about limit × N / n vectors
  to find `limit` of the subject's n among the index's N, each costing about
  `HNSW_VISIT_COST` exact distances, where the exact scan computes n: the index is used when
  n² > HNSW_VISIT_COST × limit × N. The table is hash-partitioned by (tenant, subject)
  into 256 partitions (migrations 027, 029 and 030), each with its own graph, so N is the row
  count of the subject's partition as Postgres last estimated it (pg_class.reltuples, kept by
  autovacuum): about a 256th of the store.

Both return the same columns, nearest first.
"""

from __future__ import annotations

import math
from typing import Any

import psycopg
from pgvector import Vector
from psycopg import sql

# A subject with at most this many vectors of the model is searched exactly (a few milliseconds
# of distance computations; exact results); past it the share rule below decides. Alone in its
# partition's graph a subject's filtered scan costs about HNSW_VISIT_COST × limit (3,750 exact
# distances for 150 rows). Measured on a 1M-row store with 256 partitions, subjects alone in
# their graphs: 5,000 vectors p50 5.9 against 8.4-8.9 ms exact; 10,000 vectors 7.5 against
# 16.3 ms (p99 10.7 against 18.7); recall of the exact top 150 0.9997. The floor sits just above
# that crossover, so that a partition Postgres has not estimated yet (reltuples 0) sends no
# smaller subject to the graph.
EXACT_UP_TO = 4_000
# Widths that have an HNSW index (migration 016), named memory_vectors_hnsw_<width>.
INDEXED_WIDTHS = frozenset({384})
# What visiting one vector through the filtered HNSW scan costs, in exact distances over the
# subject's rows (measured at 50k vectors of one subject, limit 150, in one unpartitioned graph:
# the subject alone 3.2 ms against an exact scan of 40 ms; beside 950k vectors of other subjects,
# 95 ms against 50 ms).
HNSW_VISIT_COST = 25


def candidate_list_size(limit: int) -> int:
    """hnsw.ef_search for a search of `limit` rows: a third more than the limit. A subject alone in
    its partition's graph meets no other subject's vectors on the way, so a list of exactly
    `limit` finds fewer of the exact top: at 50k vectors its top 150 matched the exact scan's at
    0.993 (0.967 at worst), with a third more at 0.998 (0.987)."""
    return min(max(limit + limit // 3, 40), 1000)

_EXACT = """
    SELECT memory_id::text, memory_kind, version, embedding <=> %(q)s AS distance FROM memory_vectors
     WHERE tenant_id = %(t)s AND subject_id = %(s)s AND model = %(m)s AND memory_kind = ANY(%(kinds)s)
     ORDER BY embedding <=> %(q)s, memory_id LIMIT %(limit)s
"""
_INDEXED = sql.SQL("""
    SELECT memory_id::text, memory_kind, version, embedding::vector({w}) <=> %(q)s::vector({w}) AS distance
      FROM memory_vectors
     WHERE tenant_id = %(t)s AND subject_id = %(s)s AND model = %(m)s AND memory_kind = ANY(%(kinds)s)
       AND vector_dims(embedding) = {w}
     ORDER BY embedding::vector({w}) <=> %(q)s::vector({w}) LIMIT %(limit)s
""")


# An index-only scan of memory_vectors_subject_model (migration 024): no vector is read.
SUBJECT_SIZE_SQL = ("SELECT count(*) FROM (SELECT 1 FROM memory_vectors WHERE tenant_id = %s AND subject_id = %s "
                    "AND model = %s LIMIT %s) AS bounded")


async def subject_is_large(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, model: str,
                           exact_up_to: int = EXACT_UP_TO) -> bool:
    """Whether the subject has more than `exact_up_to` vectors of the model (reads at most that many
    index entries)."""
    cur = await conn.execute(SUBJECT_SIZE_SQL, (tenant_id, subject_id, model, exact_up_to + 1))
    row = await cur.fetchone()
    return bool(row and row[0] > exact_up_to)


# The row count of the partition holding the subject's vectors (none yet: 0). One row of the
# subject is read through memory_vectors_subject_model for its partition's oid. The ORDER BY on
# the index's fourth column is what keeps it on the index: without it (the other three are
# constants, so ordering by them is no ordering) the planner takes LIMIT 1 from a sequential scan,
# expecting a large subject's rows anywhere in the heap; when they lie after other subjects'
# (a subject that grew late) it read 45k rows for one: 14 ms a context at 1M rows, growing with
# the partition. Through the index it is one entry (0.05 ms).
PARTITION_SIZE_SQL = ("SELECT greatest(c.reltuples, 0)::bigint FROM pg_catalog.pg_class c WHERE c.oid = "
                      "(SELECT v.tableoid FROM memory_vectors v WHERE v.tenant_id = %s AND v.subject_id = %s "
                      "AND v.model = %s ORDER BY v.memory_kind LIMIT 1)")


def exact_scan_limit(index_vectors: int, limit: int, *, exact_up_to: int = EXACT_UP_TO,
                     visit_cost: int = HNSW_VISIT_COST) -> int:
    """The most vectors a subject may have and still be searched exactly, in a graph (partition)
    of `index_vectors`: exact scans cost n, filtered HNSW scans about visit_cost × limit × N / n."""
    return max(exact_up_to, math.isqrt(visit_cost * limit * index_vectors))


async def nearest(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, model: str, vector: list[float],
                  kinds: tuple[str, ...], limit: int, *, exact_up_to: int = EXACT_UP_TO,
                  visit_cost: int = HNSW_VISIT_COST) -> list[tuple[str, str, int, float]]:
    """(memory_id, kind, version, cosine distance) of the subject's `limit` nearest vectors of
    `kinds`, nearest first, in the caller's (tenant-scoped) transaction."""
    params: dict[str, Any] = {"q": Vector(vector), "t": tenant_id, "s": subject_id, "m": model,
                              "kinds": list(kinds), "limit": limit}
    width = len(vector)
    indexed = width in INDEXED_WIDTHS
    if indexed:
        row = await (await conn.execute(PARTITION_SIZE_SQL, (tenant_id, subject_id, model))).fetchone()
        bound = exact_scan_limit(row[0] if row else 0, limit, exact_up_to=exact_up_to, visit_cost=visit_cost)
        indexed = await subject_is_large(conn, tenant_id, subject_id, model, bound)
    if indexed:
        # Filtered HNSW scans keep going until enough rows pass the filter (pgvector >= 0.8);
        # relaxed order may return them slightly out of order, so they are sorted again below.
        # The candidate list holds more than `limit` entries (default 40): one search finds them
        # instead of an iterative scan extending a list of 40 four times (p50 0.50x at 50k vectors).
        await conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                           "set_config('hnsw.ef_search', %s, true)", (str(candidate_list_size(limit)),))
        cur = await conn.execute(_INDEXED.format(w=sql.Literal(width)), params)
        rows = [(m, k, v, float(d)) for m, k, v, d in await cur.fetchall()]
        if len(rows) < limit:  # the iterative scan stopped (hnsw.max_scan_tuples) before enough rows
            cur = await conn.execute(_EXACT, params)
            rows = [(m, k, v, float(d)) for m, k, v, d in await cur.fetchall()]
    else:
        cur = await conn.execute(_EXACT, params)
        rows = [(m, k, v, float(d)) for m, k, v, d in await cur.fetchall()]
    return sorted(rows, key=lambda r: (r[3], r[0]))
