"""The lexical index: Okapi BM25 computed in Postgres over `memory_search`, read through its
inverted postings (`memory_postings`).

Postgres' English configuration stems and drops stop words; Chinese text is indexed as
character bigrams appended to the searchable text, since no built-in parser segments it.
"""

from __future__ import annotations

import re
from datetime import datetime

import psycopg

CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
WORD = re.compile(r"\w+")
K1, B = 1.2, 0.75

# A query's postings are the index ranges of its lexemes in the subject's inverted index
# (memory_postings, kept by memory_search's triggers, migration 026), read by an index-only scan
# carrying each posting's kind, tf, item length and time: no item is read and no tsvector unnested,
# so the cost follows the postings of the query's lexemes, not the subject's size. The statistics
# (n, avgdl) cover every item in the window and the df of a lexeme counts its postings in the
# window, so the scores are those of BM25 over the whole window. Without a window the statistics are
# one row kept by the same triggers (migration 025); with one, the items inside it are counted (an
# index-only scan).
#
# A lexeme's df is counted over its postings by a window function as they stream out of the index
# in lexeme order (a materialised CTE aggregated and joined back cost 15% more at 50k items). The
# statistics are a materialised CTE: inlined, the planner folded their numeric division and casts
# into the per-posting score, computed again for each of a query's ~10k postings (p50/p99 of the
# search at 50k items 0.75x/0.58x materialised, the same results).
_BM25_TEMPLATE = """
WITH stats AS MATERIALIZED ({stats}
), postings AS (
    SELECT memory_id, memory_kind, version, term_count, tf::float8 AS tf,
           count(*) OVER (PARTITION BY lexeme)::float8 AS df FROM memory_postings
     WHERE tenant_id = %(tenant)s AND subject_id = %(subject)s AND lexeme = ANY(%(lexemes)s::text[])
       AND happened_at <= coalesce(%(as_of)s::timestamptz, 'infinity')
       AND happened_at >= coalesce(%(since)s::timestamptz, '-infinity')
       AND memory_kind = ANY(%(kinds)s)
)
SELECT p.memory_id::text, p.memory_kind, p.version,
       sum(ln(1 + (s.n - p.df + 0.5) / (p.df + 0.5))
           * p.tf * (%(k1)s + 1) / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.term_count / s.avgdl))) AS score
  FROM postings p CROSS JOIN stats s
 GROUP BY p.memory_id, p.memory_kind, p.version
 ORDER BY score DESC, p.memory_id
 LIMIT %(limit)s
"""
# The same value as avg(term_count) over the items (numeric division, then float8).
BM25_SQL = _BM25_TEMPLATE.format(stats="""
    SELECT coalesce(items, 0)::float8 AS n, greatest(terms::numeric / nullif(items, 0), 1)::float8 AS avgdl
      FROM (SELECT sum(CASE WHEN 'fact' = ANY(%(kinds)s) THEN fact_items ELSE 0 END
                       + CASE WHEN 'episode' = ANY(%(kinds)s) THEN episode_items ELSE 0 END
                       + CASE WHEN 'observation' = ANY(%(kinds)s) THEN observation_items ELSE 0 END) AS items,
                   sum(CASE WHEN 'fact' = ANY(%(kinds)s) THEN fact_terms ELSE 0 END
                       + CASE WHEN 'episode' = ANY(%(kinds)s) THEN episode_terms ELSE 0 END
                       + CASE WHEN 'observation' = ANY(%(kinds)s) THEN observation_terms ELSE 0 END) AS terms
              FROM lexical_statistics WHERE tenant_id = %(tenant)s AND subject_id = %(subject)s) AS kept""")
BM25_WINDOW_SQL = _BM25_TEMPLATE.format(stats="""
    SELECT count(*)::float8 AS n, greatest(avg(term_count), 1)::float8 AS avgdl FROM memory_search
     WHERE tenant_id = %(tenant)s AND subject_id = %(subject)s
       AND happened_at <= coalesce(%(as_of)s::timestamptz, 'infinity')
       AND happened_at >= coalesce(%(since)s::timestamptz, '-infinity')
       AND memory_kind = ANY(%(kinds)s)""")


def indexed_text(text: str, hint: str | None = None) -> str:
    """What the index holds for an item: its text, plus a hint (the question a note answers)."""
    return f"{text} {hint}" if hint else text


def search_text(text: str) -> str:
    bigrams = [run[i:i + 2] for run in CJK_RUN.findall(text) for i in range(max(1, len(run) - 1))]
    return f"{text} {' '.join(bigrams)}" if bigrams else text


def term_count(text: str) -> int:
    return max(1, len(WORD.findall(CJK_RUN.sub(" ", text))) + sum(len(r) for r in CJK_RUN.findall(text)))


async def query_lexemes(conn: psycopg.AsyncConnection, query: str) -> list[str]:
    """The query's distinct lexemes, as the index's configuration makes them."""
    cur = await conn.execute("SELECT coalesce(array_agg(DISTINCT lexeme ORDER BY lexeme), '{}') "
                             "FROM unnest(to_tsvector('english', %s))", (search_text(query),))
    row = await cur.fetchone()
    return list(row[0]) if row else []


async def bm25_search(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, query: str, *,
                      as_of: datetime | None, limit: int, kinds: tuple[str, ...] = ("fact", "episode", "observation"),
                      since: datetime | None = None) -> list[tuple[str, str, int, float]]:
    """(memory_id, kind, version, score) of the subject's items of `kinds` best matching `query`,
    among those that happened between `since` and `as_of` (the statistics cover the same items)."""
    lexemes = await query_lexemes(conn, query)
    if not lexemes:  # stop words or punctuation only: nothing matches
        return []
    windowed = as_of is not None or since is not None
    cur = await conn.execute(BM25_WINDOW_SQL if windowed else BM25_SQL, {
        "lexemes": lexemes, "tenant": tenant_id, "subject": subject_id,
        "as_of": as_of, "since": since, "kinds": list(kinds), "k1": K1, "b": B, "limit": limit})
    return [(mid, kind, version, float(score)) for mid, kind, version, score in await cur.fetchall()]
