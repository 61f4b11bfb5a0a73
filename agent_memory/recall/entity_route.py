"""The entity route of recall: the subject's entities named in the question (by name or alias)
expand to the notes of the messages that mention them. Episodes are left to the other routes: a
session's summary is long and mostly about other things, and brought in by one mention it would
crowd the notes out of the budget.

A question about "Caroline's adoption agency" reaches the note of the session where the agency
was named even when the note says "the agency" and never "Caroline": the mention links them. A
memory linked to several of the named entities ranks first; then an entity mentioned in few of
the subject's sessions counts more than a common one, and one mentioned in half of them or more
(a speaker's own name) links nothing; then the newer memory first; ties by id, so two runs give
the same list.
"""

from __future__ import annotations

import re

import psycopg

from agent_memory.core.entities import fold

Pointer = tuple[str, str, int]  # (memory_id, kind, version)
MIN_LATIN_NAME = 3  # shorter Latin names ("Al", "Jo") match too many words to be worth a link
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def named_in(query: str, names: list[str]) -> bool:
    """Whether any of `names` occurs in `query` as a whole word (CJK names: as a substring,
    Chinese has no spaces between words)."""
    folded = fold(query)
    for name in map(fold, names):
        if _CJK.search(name):
            if name in folded:
                return True
        elif len(name) >= MIN_LATIN_NAME and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", folded):
            return True
    return False


# Entities whose name or an alias occurs in the question: a cheap prefilter by substring (the
# whole-word check is named_in's).
_CANDIDATE_ENTITIES_SQL = """
SELECT memory_id, name, aliases FROM entities
 WHERE tenant_id = %(tenant)s AND subject_id = %(subject)s
   AND (strpos(%(query)s, lower(name)) > 0
        OR EXISTS (SELECT 1 FROM unnest(aliases) a WHERE strpos(%(query)s, lower(a)) > 0))
 ORDER BY memory_id
"""

# The notes of the named entities' mentions. An entity weighs like a word in BM25, by
# the sessions that mention it: ln((N - n + 0.5) / (n + 0.5)), N the subject's sessions, n its
# own; one mentioned in half of them or more (a speaker's own name) says nothing about which
# memory a question is after, and links nothing. A memory scores the weights of the entities its
# messages mention.
_LINKED_SQL = """
WITH total AS (
    SELECT count(*) AS n FROM sessions WHERE tenant_id = %(tenant)s AND subject_id = %(subject)s
), named AS (
    SELECT m.memory_id, ln((t.n - count(DISTINCT m.session_id) + 0.5) / (count(DISTINCT m.session_id) + 0.5))
           AS weight
      FROM entity_mentions m CROSS JOIN total t
     WHERE m.tenant_id = %(tenant)s AND m.memory_id = ANY(%(entities)s::uuid[])
     GROUP BY m.memory_id, t.n
), mentions AS (
    SELECT m.session_id, m.message_id, n.memory_id AS entity_id, n.weight
      FROM entity_mentions m JOIN named n ON n.memory_id = m.memory_id
     WHERE m.tenant_id = %(tenant)s AND m.subject_id = %(subject)s AND n.weight > 0
)
SELECT x.memory_id::text AS memory_id, 'observation' AS kind, x.version,
       count(DISTINCT mn.entity_id) AS entities, sum(mn.weight) AS score, x.happened_at
  FROM mentions mn JOIN observations x
    ON x.tenant_id = %(tenant)s AND x.subject_id = %(subject)s AND x.session_id = mn.session_id
   AND x.message_id = mn.message_id
 GROUP BY x.memory_id, x.version, x.happened_at
ORDER BY entities DESC, score DESC, happened_at DESC, memory_id
LIMIT %(limit)s
"""


async def entity_hits(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, query: str,
                      limit: int) -> list[Pointer]:
    """The notes and episodes linked to the entities `query` names, best first (see the module)."""
    cur = await conn.execute(_CANDIDATE_ENTITIES_SQL, {"tenant": tenant_id, "subject": subject_id,
                                                       "query": fold(query)})
    named = [memory_id for memory_id, name, aliases in await cur.fetchall() if named_in(query, [name, *aliases])]
    if not named:
        return []
    cur = await conn.execute(_LINKED_SQL, {"tenant": tenant_id, "subject": subject_id, "entities": named,
                                           "limit": limit})
    return [(memory_id, kind, version) for memory_id, kind, version, *_ in await cur.fetchall()]
