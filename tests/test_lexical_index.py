"""Lexical search through its index (issue 13): candidates from the (tenant, subject, tsv) GIN
index give the same BM25 ranking as the scan over every posting of the subject it replaced. Both
queries run on the real Postgres over a random corpus; the old one is kept as the benchmark's
reference (workers/evaluation/lexical_bench.py)."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from agent_memory.db import tenant_transaction
from agent_memory.lexical import K1, B, bm25_search, search_text, term_count
from workers.evaluation.lexical_bench import FULL_SCAN_SQL

WORDS = ("oslo rome cat dog pixel rex jazz tea coffee peanut allergic moved lives travel trip budget dollars "
         "doctor appointment sister brother birthday running marathon guitar piano sushi vegan won't it's "
         "o'brien back\\slash café naïve 2024 #42").split()
CJK = ("我住在杭州", "我搬到了上海", "喜欢喝茶", "下周去北京出差")


def _text(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(1, 14))]
    if rng.random() < 0.2:
        words.append(rng.choice(CJK))
    return " ".join(words)


@pytest.mark.parametrize("seed", [1, 2])
async def test_indexed_bm25_ranks_exactly_like_the_full_scan(services, tenant, seed):
    rng = random.Random(seed)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    async with tenant_transaction(services.pool, tenant) as conn:
        for subject in ("lin", "kim"):  # kim's items must never count in lin's statistics
            for n in range(400):
                # One long item: past 256 positions of a lexeme and past position 16,383, where
                # Postgres caps what a tsvector keeps (the index's tf must still agree).
                text = " ".join(rng.choice(WORDS) for _ in range(20_000)) if n == 7 else _text(rng)
                await conn.execute(
                    "INSERT INTO memory_search (tenant_id, subject_id, memory_id, memory_kind, version, search_text, "
                    "term_count, happened_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    (tenant, subject, uuid.UUID(int=rng.getrandbits(128)), rng.choice(("fact", "episode", "observation")),
                     rng.randint(1, 3), search_text(text), term_count(text), start + timedelta(days=n)))
    queries = ["where does she live? oslo or rome", "peanut allergy", "won't O'Brien back\\slash", "我住在哪里 杭州",
               "the a of", "", "café naïve #42 2024", "jazz guitar piano marathon sushi vegan tea coffee"]
    windows = [(None, None), (start + timedelta(days=100), None), (start + timedelta(days=50), start + timedelta(days=300))]
    kinds_options = [("fact", "episode", "observation"), ("episode",), ("fact", "observation")]
    compared = 0
    async with tenant_transaction(services.pool, tenant) as conn:
        for query in queries:
            for since, as_of in windows:
                for kinds in kinds_options:
                    cur = await conn.execute(FULL_SCAN_SQL, {
                        "query": search_text(query), "tenant": tenant, "subject": "lin", "as_of": as_of,
                        "since": since, "kinds": list(kinds), "k1": K1, "b": B, "limit": 30})
                    expected = [(m, k, v, float(s)) for m, k, v, s in await cur.fetchall()]
                    got = await bm25_search(conn, tenant, "lin", query, as_of=as_of, since=since, limit=30,
                                            kinds=kinds)
                    # The same scores rank by rank; items whose scores tie (within float rounding of a
                    # sum taken in another order) may swap places, so ids are compared above the cut.
                    assert [g[3] for g in got] == pytest.approx([e[3] for e in expected], rel=1e-9), query
                    cut = expected[-1][3] * (1 + 1e-9) if expected else 0
                    assert {g[:3] for g in got if g[3] > cut} == {e[:3] for e in expected if e[3] > cut}, (
                        query, since, as_of, kinds)
                    compared += bool(expected)
    assert compared > 40  # most combinations match something: the comparison is not vacuous
