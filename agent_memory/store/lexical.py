"""The lexical index: Okapi BM25 computed in Postgres over `memory_search`, read through its
inverted postings (`memory_postings`).

Postgres' English configuration stems and drops stop words; Chinese text is indexed as
character bigrams appended to the searchable text, since no built-in parser segments it.
"""

from __future__ import annotations

import itertools
import re
from datetime import datetime

import psycopg

CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
WORD = re.compile(r"\w+")
K1, B = 1.2, 0.75

# A query's postings are the index ranges of its lexemes in the subject's inverted index
# (memory_postings, kept by memory_search's triggers, migration 026), read by an index-only scan
# carrying each posting's kind, tf, item length and time: no item is read and no tsvector unnested,
# so the cost follows the postings of the query's lexemes, not the subject's size.
#
# Without a window, BM25's statistics are read, not counted: the item count and total length from
# one row (lexical_statistics, migration 025) and each query lexeme's document frequency from its
# row (lexical_frequencies, migration 028), both kept by the same triggers. A lexeme's weight
# (idf) is computed once, not per posting. With a window, the items inside it are counted (an
# index-only scan) and a lexeme's df counts its postings in the window by a window function as
# they stream out of the index in lexeme order (a materialised CTE aggregated and joined back cost
# 15% more at 50k items). Either way the scores are those of BM25 over the whole window.
#
# The statistics are a materialised CTE: inlined, the planner folded their numeric division and
# casts into the per-posting score, computed again for each of a query's ~10k postings (p50/p99 of
# the search at 50k items 0.75x/0.58x materialised, the same results).
_KINDS_SUM = """sum(CASE WHEN 'fact' = ANY(%(kinds)s) THEN fact_{column} ELSE 0 END
                       + CASE WHEN 'episode' = ANY(%(kinds)s) THEN episode_{column} ELSE 0 END
                       + CASE WHEN 'observation' = ANY(%(kinds)s) THEN observation_{column} ELSE 0 END)"""
# The same value as avg(term_count) over the items (numeric division, then float8).
_KEPT_STATISTICS = f"""
    SELECT coalesce(items, 0)::float8 AS n, greatest(terms::numeric / nullif(items, 0), 1)::float8 AS avgdl
      FROM (SELECT {_KINDS_SUM.format(column="items")} AS items,
                   {_KINDS_SUM.format(column="terms")} AS terms
              FROM lexical_statistics WHERE tenant_id = %(tenant)s AND subject_id = %(subject)s) AS kept"""
# The per-posting term is written as the windowed form's, operation for operation, so both give
# the same floating-point scores. Equal scores (short notes sharing one query word, messages of one
# import sharing a time) are common, and memory ids are keyed by the subject's key, so no id may
# decide which of them make the cut: the search reads up to TIES_CAP times the limit by score and
# time, bm25_search keeps the items tied with the last one kept, and the caller orders ties by
# what they are (agent_memory.recall.context). FETCH ... WITH TIES would do the same in SQL, but
# it sorts every candidate where LIMIT keeps a bounded heap.
_SCORED = """
SELECT p.memory_id::text, p.memory_kind, p.version,
       sum({idf} * p.tf * (%(k1)s + 1) / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.term_count / s.avgdl))) AS score,
       max(p.happened_at) AS happened_at
  FROM {postings} CROSS JOIN stats s
 GROUP BY p.memory_id, p.memory_kind, p.version
 ORDER BY score DESC, happened_at DESC
 LIMIT %(cap)s
"""
TIES_CAP = 2  # read at most this many times `limit` items, the ties at the cut included
_POSTINGS_WHERE = """tenant_id = %(tenant)s AND subject_id = %(subject)s AND lexeme = ANY(%(lexemes)s::text[])
       AND happened_at <= coalesce(%(as_of)s::timestamptz, 'infinity')
       AND happened_at >= coalesce(%(since)s::timestamptz, '-infinity')
       AND memory_kind = ANY(%(kinds)s)"""
BM25_SQL = f"""
WITH stats AS MATERIALIZED ({_KEPT_STATISTICS}
), weights AS MATERIALIZED (
    SELECT f.lexeme, ln(1 + (s.n - f.df + 0.5) / (f.df + 0.5)) AS idf
      FROM (SELECT lexeme, {_KINDS_SUM.format(column="items")}::float8 AS df FROM lexical_frequencies
             WHERE tenant_id = %(tenant)s AND subject_id = %(subject)s AND lexeme = ANY(%(lexemes)s::text[])
             GROUP BY lexeme) AS f CROSS JOIN stats s
), postings AS (
    SELECT memory_id, memory_kind, version, term_count, tf::float8 AS tf, happened_at, lexeme FROM memory_postings
     WHERE {_POSTINGS_WHERE}
)""" + _SCORED.format(idf="w.idf", postings="postings p JOIN weights w ON w.lexeme = p.lexeme")
BM25_WINDOW_SQL = """
WITH stats AS MATERIALIZED (
    SELECT count(*)::float8 AS n, greatest(avg(term_count), 1)::float8 AS avgdl FROM memory_search
     WHERE tenant_id = %(tenant)s AND subject_id = %(subject)s
       AND happened_at <= coalesce(%(as_of)s::timestamptz, 'infinity')
       AND happened_at >= coalesce(%(since)s::timestamptz, '-infinity')
       AND memory_kind = ANY(%(kinds)s)
), postings AS (""" + f"""
    SELECT memory_id, memory_kind, version, term_count, tf::float8 AS tf, happened_at,
           count(*) OVER (PARTITION BY lexeme)::float8 AS df FROM memory_postings
     WHERE {_POSTINGS_WHERE}
)""" + _SCORED.format(idf="ln(1 + (s.n - p.df + 0.5) / (p.df + 0.5))", postings="postings p")


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
    among those that happened between `since` and `as_of` (the statistics cover the same items):
    the best `limit`, and the items tied with the last of them (equal score and time), best first."""
    lexemes = await query_lexemes(conn, query)
    if not lexemes:  # stop words or punctuation only: nothing matches
        return []
    windowed = as_of is not None or since is not None
    cur = await conn.execute(BM25_WINDOW_SQL if windowed else BM25_SQL, {
        "lexemes": lexemes, "tenant": tenant_id, "subject": subject_id,
        "as_of": as_of, "since": since, "kinds": list(kinds), "k1": K1, "b": B, "cap": limit * TIES_CAP})
    rows = await cur.fetchall()
    if len(rows) > limit:  # the best `limit`, then those tied with the last of them
        last = rows[limit - 1][3:]
        rows = rows[:limit] + list(itertools.takewhile(lambda row: row[3:] == last, rows[limit:]))
    return [(mid, kind, version, float(score)) for mid, kind, version, score, _ in rows]
