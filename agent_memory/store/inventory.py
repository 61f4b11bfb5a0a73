"""What a tenant holds, listed for an operator: its subjects, and a subject's sessions.

`agent-memory subjects --tenant T` and `agent-memory sessions --tenant T --subject S` read these,
so an operator finds a subject or a session without SQL. Counts come from the relational rows
under the tenant's row-level security; nothing here decrypts a payload. An erased subject has no
rows left and its tombstone keeps only a keyed digest of its id, so erased subjects are counted,
not named (`sessions --subject S` still says whether S was erased)."""

from __future__ import annotations

from datetime import datetime

from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, ConfigDict

from agent_memory.core.models import check_identifier
from agent_memory.store.db import fetch_one, tenant_transaction


class SubjectSummary(BaseModel):
    subject_id: str
    sessions: int
    messages: int
    current_facts: int
    episodes: int
    last_message_at: datetime | None
    last_consolidated_at: datetime | None  # the last successful consolidation commit of any session


class SubjectListing(BaseModel):
    tenant_id: str
    subjects: list[SubjectSummary]
    erased_subjects: int  # tombstones: their ids are not kept


IMPORTANCE_SCORES = range(1, 11)
# This many episodes or more all scored alike: the scores say nothing, the scorer is suspect.
COLLAPSED_AT_EPISODES = 5


class ImportanceSpread(BaseModel):
    """How a tenant's episodes are scored for importance (1–10). Recall ranks episodes partly by
    importance, so a scorer that answers one value for everything (a broken model, a parse that
    falls back to a default) silently flattens that ranking: `warning` says so."""

    model_config = ConfigDict(extra="forbid")

    episodes: int
    per_score: dict[int, int]  # episodes per score, every score 1–10
    min: int | None
    median: float | None
    max: int | None
    collapsed: bool  # at least COLLAPSED_AT_EPISODES episodes and one distinct score
    warning: str | None

    @classmethod
    def of(cls, counts: dict[int, int]) -> ImportanceSpread:
        per_score = {score: counts.get(score, 0) for score in IMPORTANCE_SCORES}
        scores = [score for score in IMPORTANCE_SCORES for _ in range(per_score[score])]
        total = len(scores)
        median = None if not scores else (scores[(total - 1) // 2] + scores[total // 2]) / 2
        used = [score for score, n in per_score.items() if n]
        collapsed = total >= COLLAPSED_AT_EPISODES and len(used) == 1
        warning = (f"importance collapsed to {used[0]} for all {total} episodes: the importance provider may be "
                   "broken" if collapsed else None)
        return cls(episodes=total, per_score=per_score, min=min(scores, default=None), median=median,
                   max=max(scores, default=None), collapsed=collapsed, warning=warning)


async def importance_spread(pool: AsyncConnectionPool, tenant_id: str) -> ImportanceSpread:
    """The tenant's episodes per importance score (under its row-level security, every agent's)."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute("SELECT importance, count(*)::int FROM episodes WHERE tenant_id = %s "
                                 "GROUP BY importance", (tenant_id,))
        return ImportanceSpread.of(dict(await cur.fetchall()))


class SessionSummary(BaseModel):
    session_id: str
    messages: int
    first_message_at: datetime | None
    last_message_at: datetime | None
    last_consolidated_at: datetime | None
    unconsolidated: int  # messages recorded after everything its consolidations covered
    episode_importance: int | None  # the session's episode, when one was written


async def list_subjects(pool: AsyncConnectionPool, tenant_id: str, limit: int = 1000) -> SubjectListing:
    """The tenant's subjects with sessions, most recently active first, and how many were erased."""
    async with tenant_transaction(pool, tenant_id) as conn:
        async with conn.cursor(row_factory=class_row(SubjectSummary)) as cur:
            await cur.execute(
                """
                WITH subjects AS (SELECT DISTINCT subject_id FROM sessions WHERE tenant_id = %(t)s)
                SELECT s.subject_id,
                       (SELECT count(*) FROM sessions x WHERE x.tenant_id = %(t)s AND x.subject_id = s.subject_id)::int
                           AS sessions,
                       (SELECT count(*) FROM messages m WHERE m.tenant_id = %(t)s AND m.subject_id = s.subject_id)::int
                           AS messages,
                       (SELECT count(*) FROM facts f WHERE f.tenant_id = %(t)s AND f.subject_id = s.subject_id
                           AND f.status = 'active' AND f.valid_to IS NULL)::int AS current_facts,
                       (SELECT count(*) FROM episodes e WHERE e.tenant_id = %(t)s AND e.subject_id = s.subject_id)::int
                           AS episodes,
                       (SELECT max(m.created_at) FROM messages m
                         WHERE m.tenant_id = %(t)s AND m.subject_id = s.subject_id) AS last_message_at,
                       (SELECT max(o.updated_at) FROM operations o
                         WHERE o.tenant_id = %(t)s AND o.subject_id = s.subject_id AND o.kind = 'commit'
                           AND o.status = 'succeeded') AS last_consolidated_at
                  FROM subjects s
                 ORDER BY last_message_at DESC NULLS LAST, s.subject_id
                 LIMIT %(limit)s
                """, {"t": tenant_id, "limit": limit})
            subjects = await cur.fetchall()
        cur2 = await conn.execute("SELECT count(*) FROM tombstones WHERE tenant_id = %s", (tenant_id,))
        erased = int((await fetch_one(cur2))[0])
    return SubjectListing(tenant_id=tenant_id, subjects=subjects, erased_subjects=erased)


async def list_sessions(pool: AsyncConnectionPool, tenant_id: str, subject_id: str,
                        limit: int = 1000) -> list[SessionSummary]:
    """The subject's sessions, most recent first."""
    check_identifier("subject", subject_id)
    async with tenant_transaction(pool, tenant_id) as conn:
        async with conn.cursor(row_factory=class_row(SessionSummary)) as cur:
            await cur.execute(
                """
                SELECT s.session_id,
                       count(m.message_id)::int AS messages,
                       min(m.created_at) AS first_message_at,
                       max(m.created_at) AS last_message_at,
                       c.last_consolidated_at,
                       (count(m.message_id) FILTER (
                           WHERE m.recorded_at > coalesce(c.through, '-infinity')))::int AS unconsolidated,
                       (SELECT e.importance FROM episodes e
                         WHERE e.tenant_id = %(t)s AND e.subject_id = %(s)s AND e.session_id = s.session_id)
                           AS episode_importance
                  FROM sessions s
                  LEFT JOIN messages m ON m.tenant_id = s.tenant_id AND m.session_id = s.session_id
                                      AND m.subject_id = s.subject_id
                  LEFT JOIN LATERAL (
                       SELECT max(o.updated_at) AS last_consolidated_at,
                              max((o.result ->> 'through')::timestamptz) AS through
                         FROM operations o
                        WHERE o.tenant_id = %(t)s AND o.subject_id = %(s)s AND o.kind = 'commit'
                          AND o.status = 'succeeded' AND o.session_id = s.session_id) c ON true
                 WHERE s.tenant_id = %(t)s AND s.subject_id = %(s)s
                 GROUP BY s.session_id, c.last_consolidated_at, c.through
                 ORDER BY last_message_at DESC NULLS LAST, s.session_id
                 LIMIT %(limit)s
                """, {"t": tenant_id, "s": subject_id, "limit": limit})
            return await cur.fetchall()
