"""The entity route of recall: the subject's entities named in the question (by name or alias)
expand to the notes of the messages that mention them. Episodes are left to the other routes: a
session's summary is long and mostly about other things, and brought in by one mention it would
crowd the notes out of the budget.

A question about "Caroline's adoption agency" reaches the note of the session where the agency
was named even when the note says "the agency" and never "Caroline": the mention links them. A
memory linked to several of the named entities ranks first; then an entity mentioned in few of
the subject's sessions counts more than a common one, and one mentioned in half of them or more
(a speaker's own name) links nothing; then the newer memory first; then by session and message,
so any store holding the same conversations gives the same list (memory ids are keyed per subject).

One hop of relations: when the question also asks about a relation of a named entity ("Where
does Caroline work?", "What did Melanie's husband build?", 小美的妈妈), the entities at the other
end of that entity's current edges of that type (agent_memory.memory.relations) count as named
too, so the notes that mention the employer, the husband, the mother are linked though the
question never names them.
"""

from __future__ import annotations

import re
import uuid

import psycopg

from agent_memory.core.entities import fold
from agent_memory.core.models import RelationType
from agent_memory.memory.relations import current_edges

Pointer = tuple[str, str, int]  # (memory_id, kind, version)
MIN_LATIN_NAME = 3  # shorter Latin names ("Al", "Jo") match too many words to be worth a link
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")

# The words by which a question asks about a relation, by type. English words are matched whole
# (and in the plural); Chinese ones as substrings.
RELATION_WORDS: dict[RelationType, tuple[str, ...]] = {
    "family": ("sister", "brother", "sibling", "mother", "mom", "mum", "father", "dad", "parent", "son",
               "daughter", "kid", "child", "children", "aunt", "uncle", "cousin", "grandmother", "grandma",
               "grandfather", "grandpa", "niece", "nephew", "family",
               "姐姐", "妹妹", "哥哥", "弟弟", "妈妈", "爸爸", "母亲", "父亲", "儿子", "女儿", "孩子", "家人"),
    "partner": ("husband", "wife", "boyfriend", "girlfriend", "partner", "spouse", "fiance", "fiancee",
                "老公", "老婆", "丈夫", "妻子", "男朋友", "女朋友", "对象"),
    "friend": ("friend", "buddy", "朋友"),
    "colleague": ("colleague", "coworker", "boss", "manager", "teammate", "同事", "老板", "领导"),
    "works_at": ("work", "working", "job", "company", "employer", "office", "工作", "上班", "公司"),
    "studies_at": ("study", "school", "university", "college", "class", "学校", "大学", "上学", "读书"),
    "lives_in": ("live", "living", "home", "move", "moved", "city", "住", "搬", "家乡"),
    "member_of": ("member", "club", "team", "group", "join", "joined", "俱乐部", "社团", "队"),
    "owns": ("pet", "dog", "cat", "puppy", "kitten", "宠物", "狗", "猫"),
    "attended": ("attend", "attended", "event", "concert", "conference", "festival", "参加", "活动"),
    "visited": ("visit", "visited", "trip", "travel", "travelled", "traveled", "去过", "旅行", "旅游"),
}
_RELATION_PATTERNS: dict[RelationType, re.Pattern[str]] = {
    relation: re.compile("|".join(
        re.escape(w) if _CJK.search(w) else rf"(?<!\w){re.escape(w)}(?:s|es)?(?!\w)"
        for w in sorted(words, key=lambda w: (-len(w), w))))
    for relation, words in RELATION_WORDS.items()
}


def follows(query: str) -> set[RelationType]:
    """The relation types a question asks about, by its words."""
    folded = fold(query)
    return {relation for relation, pattern in _RELATION_PATTERNS.items() if pattern.search(folded)}


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
 GROUP BY x.memory_id, x.version, x.happened_at, x.session_id, x.message_id
ORDER BY entities DESC, score DESC, happened_at DESC, x.session_id, x.message_id, memory_id
LIMIT %(limit)s
"""


async def entity_hits(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, query: str,
                      limit: int) -> list[Pointer]:
    """The notes linked to the entities `query` names and to those one asked-about relation away,
    best first (see the module)."""
    cur = await conn.execute(_CANDIDATE_ENTITIES_SQL, {"tenant": tenant_id, "subject": subject_id,
                                                       "query": fold(query)})
    named = [memory_id for memory_id, name, aliases in await cur.fetchall() if named_in(query, [name, *aliases])]
    if not named:
        return []
    named += await _one_hop(conn, tenant_id, subject_id, named, follows(query))
    cur = await conn.execute(_LINKED_SQL, {"tenant": tenant_id, "subject": subject_id, "entities": named,
                                           "limit": limit})
    return [(memory_id, kind, version) for memory_id, kind, version, *_ in await cur.fetchall()]


async def _one_hop(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, named: list[uuid.UUID],
                   relations: set[RelationType]) -> list[uuid.UUID]:
    """The other ends of the named entities' current edges of the asked-about types, not named themselves."""
    if not relations:
        return []
    edges = await current_edges(conn, tenant_id, subject_id, named)
    return list(dict.fromkeys(e.other_entity_id for e in edges
                              if e.relation in relations and e.other_entity_id not in named))
