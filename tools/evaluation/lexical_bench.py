"""`python -m tools.cli bench lexical`: BM25 search latency at growing memory counts of one subject,
the indexed search (agent_memory.store.lexical: the postings of migration 026) beside the full scan of
every item's tsvector it replaced, in one run, with the plan each one got.

The lexical index is loaded by COPY with rows shaped exactly like the write path's
(`memory_search`: search text with CJK bigrams, term count, kind, version, happened_at; its
triggers write the postings and statistics, as for every write), for the
measured subject and, with --total-rows, for filler subjects of the same tenant, so the figures
show growth in the subject's size and (not) in the database's. Both queries see the same rows,
the same queries and the same windows, interleaved query by query, and return the same ranking
(the same scores rank by rank; tests/store/test_lexical_index.py compares the rankings on a random
corpus).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta

import psycopg
from pydantic import BaseModel

from agent_memory.api.services import Services
from agent_memory.core.errors import InvalidInput
from agent_memory.core.settings import Settings
from agent_memory.store.db import fetch_one, tenant_transaction
from agent_memory.store.lexical import (
    BM25_WINDOW_SQL,
    K1,
    TIES_CAP,
    B,
    bm25_search,
    query_lexemes,
    search_text,
    term_count,
)

TENANT, SUBJECT = "bench-lexical", "bench-subject"
# Text with a natural word-frequency curve: 5,000 pseudo-words drawn by Zipf's law (s = 1.1), so
# a few words are in many items and most in few, as in conversation notes.
_SYLLABLES = ("ka", "lo", "mi", "ren", "tas", "vo", "shi", "dun", "pel", "ar", "gio", "nu", "bra", "cel", "fy",
              "hom", "jix", "qua", "sor", "wen")
VOCABULARY = [a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in ("", "ta", "rin", "lo", "mek", "su", "dor",
                                                                          "vak", "zel", "pim", "nor", "quo", "ith")][:5000]
_WEIGHTS = [1 / (rank + 1) ** 1.1 for rank in range(len(VOCABULARY))]
NAMES = ("Ana", "Bo", "Chen", "Dara", "Eli", "Farah", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lena")

# The query the indexed search replaced: every posting of the subject's items in the window.
FULL_SCAN_SQL = """
    WITH q AS (
        SELECT DISTINCT lexeme FROM unnest(to_tsvector('english', %(query)s))
    ), docs AS (
        SELECT memory_id, memory_kind, version, tsv, term_count FROM memory_search
         WHERE tenant_id = %(tenant)s AND subject_id = %(subject)s
           AND happened_at <= coalesce(%(as_of)s::timestamptz, 'infinity')
           AND happened_at >= coalesce(%(since)s::timestamptz, '-infinity')
           AND memory_kind = ANY(%(kinds)s)
    ), stats AS (
        SELECT count(*)::float8 AS n, greatest(avg(term_count), 1)::float8 AS avgdl FROM docs
    ), postings AS (
        SELECT d.memory_id, d.memory_kind, d.version, d.term_count, t.lexeme,
               coalesce(array_length(t.positions, 1), 1)::float8 AS tf
          FROM docs d, unnest(d.tsv) AS t
         WHERE t.lexeme IN (SELECT lexeme FROM q)
    ), df AS (
        SELECT lexeme, count(*)::float8 AS df FROM postings GROUP BY lexeme
    )
    SELECT p.memory_id::text, p.memory_kind, p.version,
           sum(ln(1 + (s.n - df.df + 0.5) / (df.df + 0.5))
               * p.tf * (%(k1)s + 1) / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.term_count / s.avgdl))) AS score
      FROM postings p JOIN df USING (lexeme) CROSS JOIN stats s
     GROUP BY p.memory_id, p.memory_kind, p.version
     ORDER BY score DESC, p.memory_id
     LIMIT %(limit)s
"""
KINDS = ["fact", "episode", "observation"]
START = datetime(2022, 1, 1, tzinfo=UTC)


class LexicalRow(BaseModel):
    memories: int
    search: str  # indexed | full-scan
    queries: int
    p50_ms: float
    p95_ms: float
    p99_ms: float


class LexicalBenchReport(BaseModel):
    total_rows: int  # memory_search rows of every subject at the end
    rows: list[LexicalRow]
    plans: dict[str, str]  # "{size}/{search}" -> the plan's scan nodes at that size
    same_ranking: bool  # every query returned the same scores, rank by rank, through both

    def render(self) -> str:
        lines = [f"lexical bench: BM25 top 50 of one subject, {self.total_rows:,} index rows in all; milliseconds",
                 f"{'memories':>9} {'search':<10} {'n':>4} {'p50':>8} {'p95':>8} {'p99':>8}"]
        lines += [f"{r.memories:>9} {r.search:<10} {r.queries:>4} {r.p50_ms:>8.1f} {r.p95_ms:>8.1f} {r.p99_ms:>8.1f}"
                  for r in self.rows]
        for size in sorted({r.memories for r in self.rows}):
            by = {r.search: r for r in self.rows if r.memories == size}
            lines.append(f"{size:>9} indexed/full-scan p50 {by['indexed'].p50_ms / by['full-scan'].p50_ms:.2f}, "
                         f"p99 {by['indexed'].p99_ms / by['full-scan'].p99_ms:.2f}")
        sizes = sorted({r.memories for r in self.rows})
        if len(sizes) > 1:
            small, large = ({r.search: r for r in self.rows if r.memories == s} for s in (sizes[0], sizes[-1]))
            lines.append(f"growth {sizes[0]} → {sizes[-1]} (p99 ratio): indexed "
                         f"{large['indexed'].p99_ms / small['indexed'].p99_ms:.1f}×, full scan "
                         f"{large['full-scan'].p99_ms / small['full-scan'].p99_ms:.1f}×")
        lines.append(f"same scores rank by rank through both: {self.same_ranking}")
        lines += [f"plan {name}: {plan}" for name, plan in sorted(self.plans.items())]
        return "\n".join(lines)


def _text(rng: random.Random) -> str:
    return f"{rng.choice(NAMES)}: " + " ".join(rng.choices(VOCABULARY, _WEIGHTS, k=rng.randint(6, 24)))


def _query(rng: random.Random) -> str:
    words = rng.choices(VOCABULARY, _WEIGHTS, k=3)
    return f"what did they say about the {words[0]} and {words[1]} at {words[2]}?"


async def _load(admin_url: str, subject: str, count: int, rng: random.Random) -> None:
    """`count` more index rows of `subject`, shaped like the write path's. By COPY as the owner:
    COPY FROM is not available under row-level security."""
    async with await psycopg.AsyncConnection.connect(admin_url) as conn:
        async with conn.cursor().copy(
                "COPY memory_search (tenant_id, subject_id, memory_id, memory_kind, version, search_text, term_count, "
                "happened_at) FROM STDIN") as copy:
            for _ in range(count):
                text = _text(rng)
                await copy.write_row((TENANT, subject, uuid.uuid4(), rng.choice(KINDS), 1, search_text(text),
                                      term_count(text), START + timedelta(minutes=rng.randrange(1_500_000))))
        await conn.commit()


def _scan_nodes(plan: dict) -> list[str]:
    """The plan's scan nodes, outermost first ("Index Only Scan on memory_postings_pkey", ...)."""
    found = []
    node_type = plan.get("Node Type", "")
    if "Scan" in node_type:
        found.append(f"{node_type} on {plan.get('Index Name') or plan.get('Relation Name')}")
    for child in plan.get("Plans", []):
        found += _scan_nodes(child)
    return found


def _stats(times: list[float]) -> tuple[float, float, float]:
    ordered = sorted(times)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return statistics.median(ordered), pick(0.95), pick(0.99)


async def run_lexical_bench(services: Services, *, sizes: list[int], queries: int,
                            total_rows: int = 0) -> LexicalBenchReport:
    """On the services' database; the owner's URL loads rows and refreshes planner statistics."""
    admin_url = services.settings.database_admin_url
    if admin_url is None:
        raise InvalidInput("the lexical bench loads its rows as the owner role: set DATABASE_ADMIN_URL")

    async def analyze() -> None:
        async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
            await admin.execute("VACUUM ANALYZE memory_search, memory_postings")

    rng = random.Random(13)
    if total_rows > max(sizes):  # filler subjects of the same tenant, 5,000 items each
        filler = total_rows - max(sizes)
        for n in range(0, filler, 5_000):
            await _load(admin_url, f"filler-{n // 5_000}", min(5_000, filler - n), rng)
    rows: list[LexicalRow] = []
    plans: dict[str, str] = {}
    same = True
    loaded = 0
    for size in sorted(sizes):
        await _load(admin_url, SUBJECT, size - loaded, rng)
        loaded = size
        await analyze()
        asked = [(_query(rng), START + timedelta(days=rng.randrange(0, 800))) for _ in range(queries)]
        times: dict[str, list[float]] = {"indexed": [], "full-scan": []}
        async with tenant_transaction(services.pool, TENANT) as conn:
            for n, (query, since) in enumerate(asked):
                params = {"query": search_text(query), "tenant": TENANT, "subject": SUBJECT, "as_of": None,
                          "since": since, "kinds": KINDS, "k1": K1, "b": B, "limit": 50}
                order = ("indexed", "full-scan") if n % 2 == 0 else ("full-scan", "indexed")
                got: dict[str, list] = {}
                for search in order:
                    started = time.perf_counter()
                    if search == "indexed":
                        hits = await bm25_search(conn, TENANT, SUBJECT, query, as_of=None, since=since, limit=50)
                        got[search] = [h[3] for h in hits][:50]  # past the 50th: the items tied with it
                    else:
                        cur = await conn.execute(FULL_SCAN_SQL, params)
                        got[search] = [float(r[3]) for r in await cur.fetchall()]
                    times[search].append((time.perf_counter() - started) * 1000)
                # The same scores, rank by rank (items tied within rounding may swap places).
                same = same and len(got["indexed"]) == len(got["full-scan"]) and all(
                    math.isclose(a, b, rel_tol=1e-9) for a, b in zip(got["indexed"], got["full-scan"], strict=True))
            query, since = asked[0]
            params = {"query": search_text(query), "tenant": TENANT, "subject": SUBJECT, "as_of": None,
                      "since": since, "kinds": KINDS, "k1": K1, "b": B, "limit": 50}
            lexemes = await query_lexemes(conn, query)
            indexed_params = {**params, "lexemes": lexemes, "cap": 50 * TIES_CAP}
            for search, text, bound in (("indexed", BM25_WINDOW_SQL, indexed_params), ("full-scan", FULL_SCAN_SQL, params)):
                cur = await conn.execute("EXPLAIN (FORMAT JSON) " + text, bound)
                plans[f"{size}/{search}"] = ", ".join(dict.fromkeys(_scan_nodes((await fetch_one(cur))[0][0]["Plan"])))
        for search, measured in times.items():
            p50, p95, p99 = _stats(measured)
            rows.append(LexicalRow(memories=size, search=search, queries=len(measured), p50_ms=round(p50, 2),
                                   p95_ms=round(p95, 2), p99_ms=round(p99, 2)))
    async with tenant_transaction(services.pool, TENANT) as conn:
        cur = await conn.execute("SELECT count(*) FROM memory_search WHERE tenant_id = %s", (TENANT,))
        total = int((await fetch_one(cur))[0])
    return LexicalBenchReport(total_rows=total, rows=rows, plans=plans, same_ranking=same)


async def lexical_bench_command(args: argparse.Namespace, settings: Settings) -> int:
    from workers.runtime import scratch_stack

    sizes = sorted(set(args.memories))
    if any(s < 10 for s in sizes) or args.queries < 2:
        raise InvalidInput("--memories must be at least 10 each and --queries at least 2")
    async with scratch_stack(settings, "bench-lexical", embedded_only=True) as services:
        report = await run_lexical_bench(services, sizes=sizes, queries=args.queries, total_rows=args.total_rows)
    print(json.dumps(report.model_dump(mode="json"), indent=2) if args.json else report.render())
    return 0
