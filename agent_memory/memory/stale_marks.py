"""Stale marks: what the daily review (agent_memory/lifecycle/review.py) found may have gone
stale, as memory state.

A mark is an aggregate of its own in the event log: its id is keyed on the marked memory and
the reason (`mark_memory_id`), a `MemoryMarkedStale` event opens it (again), a
`StaleMarkResolved` event closes it, and `apply.apply_event` projects both into `stale_marks`
(migration 051), so a rebuild reproduces every mark. Nothing is deleted or changed by a mark:
the marked memory stays readable, down-weighted in recall and the context (STALE_WEIGHT,
agent_memory/recall/recall_policy.py) and listed for review.

A mark is in force while it is open and what it was made against still holds: the same fact
interval current (or the same candidate held, the same note kept) and, for a shelf-life mark, no
confirmation since (`last_confirmed_at` unchanged). A fact said again, corrected or forgotten
stops being marked at once; the next review records the mark's end (resolution `obsolete`).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Literal

import psycopg
from psycopg.rows import class_row
from pydantic import BaseModel, ConfigDict, Field

from agent_memory.memory.events import MemoryEvent, Resolution, StaleMarkResolved, StaleReason
from agent_memory.security.crypto import SubjectKey

MARK_NAMESPACE = "review"
MARK_KIND = "stale-mark"
REASONS: tuple[StaleReason, ...] = ("stale", "contradicted", "duplicate", "candidate_expiring")
MARK_LIST_MAX = 1000

# The SQL condition of a mark `s` in force (see the module's docstring).
IN_FORCE = """s.state = 'open' AND CASE s.marked_kind
    WHEN 'observation' THEN EXISTS (SELECT 1 FROM observations o WHERE o.tenant_id = s.tenant_id
                                       AND o.memory_id = s.marked_memory_id)
    ELSE EXISTS (SELECT 1 FROM facts f WHERE f.tenant_id = s.tenant_id AND f.fact_id = s.fact_id
                    AND f.status = CASE s.marked_kind WHEN 'fact' THEN 'active' ELSE 'candidate' END
                    AND (s.reason <> 'stale' OR f.last_confirmed_at = s.confirmed_at)) END"""


class StaleMark(BaseModel):
    """One mark, as listed: ids, the reason and times; never the marked memory's text."""

    model_config = ConfigDict(extra="forbid")

    mark_id: str = Field(description="the mark's id: what `review resolve` takes")
    subject_id: str
    memory_id: str = Field(description="the marked memory (a fact, a candidate or a note)")
    memory_kind: Literal["fact", "candidate", "observation"]
    fact_id: str | None = Field(default=None, description="the fact interval marked (None for a note)")
    reason: StaleReason = Field(description=(
        "stale: a current fact past its namespace's shelf life, not confirmed since; contradicted: later "
        "values held as candidates contradict it; duplicate: a note near-identical to an earlier one; "
        "candidate_expiring: a candidate close to its retention expiry"))
    related_memory_ids: list[str] = Field(default_factory=list, description=(
        "the contradicting candidates, or the earlier note it duplicates"))
    confirmed_at: datetime | None = Field(default=None, description="the fact's last confirmation when marked")
    marked_at: datetime
    state: Literal["open", "resolved"]
    in_force: bool = Field(description="open and what it was made against still holds")
    resolved_at: datetime | None = None
    resolution: Resolution | None = None
    version: int


class MarkCounts(BaseModel):
    """What `agent-memory stats` shows of the review, per tenant: marks in force by reason."""

    in_force: dict[str, int] = Field(default_factory=dict)
    resolved: int = 0


def mark_memory_id(skey: SubjectKey, marked_memory_id: uuid.UUID, reason: str) -> uuid.UUID:
    """The mark's aggregate id: one mark per marked memory and reason, keyed like every memory id."""
    return skey.memory_id(MARK_KIND, mark_name(marked_memory_id, reason))


def mark_name(marked_memory_id: uuid.UUID, reason: str) -> str:
    return f"{marked_memory_id}/{reason}"


_SELECT = f"""
    SELECT s.memory_id::text AS mark_id, s.subject_id, s.marked_memory_id::text AS memory_id,
           s.marked_kind AS memory_kind, s.fact_id::text, s.reason, s.related_memory_ids::text[],
           s.confirmed_at, s.marked_at, s.state, ({IN_FORCE}) AS in_force, s.resolved_at, s.resolution, s.version
      FROM stale_marks s"""


async def list_marks(conn: psycopg.AsyncConnection, tenant_id: str, *, subject_id: str | None = None,
                     include_resolved: bool = False, limit: int = MARK_LIST_MAX) -> list[StaleMark]:
    """The tenant's marks in force (or every mark, with `include_resolved`), newest first."""
    where = ["s.tenant_id = %(t)s"]
    if subject_id is not None:
        where.append("s.subject_id = %(s)s")
    if not include_resolved:
        where.append(f"({IN_FORCE})")
    async with conn.cursor(row_factory=class_row(StaleMark)) as cur:
        await cur.execute(f"{_SELECT} WHERE {' AND '.join(where)} ORDER BY s.marked_at DESC, s.memory_id LIMIT %(n)s",
                          {"t": tenant_id, "s": subject_id, "n": limit})
        return await cur.fetchall()


async def read_mark(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                    mark_id: uuid.UUID) -> StaleMark | None:
    async with conn.cursor(row_factory=class_row(StaleMark)) as cur:
        await cur.execute(f"{_SELECT} WHERE s.tenant_id = %s AND s.subject_id = %s AND s.memory_id = %s",
                          (tenant_id, subject_id, mark_id))
        return await cur.fetchone()


async def mark_counts(conn: psycopg.AsyncConnection, tenant_id: str) -> MarkCounts:
    cur = await conn.execute(
        f"SELECT s.reason, count(*) FILTER (WHERE {IN_FORCE}), count(*) FILTER (WHERE s.state = 'resolved') "
        "FROM stale_marks s WHERE s.tenant_id = %s GROUP BY s.reason", (tenant_id,))
    counts = MarkCounts()
    for reason, in_force, resolved in await cur.fetchall():
        if in_force:
            counts.in_force[reason] = int(in_force)
        counts.resolved += int(resolved)
    return counts


async def resolution_events(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                            marked_memory_id: uuid.UUID, resolution: Resolution, *, occurred_at: datetime,
                            operation_id: str, actor: str, actor_id: str | None = None,
                            reason: str | None = None, only: uuid.UUID | None = None) -> AsyncIterator[MemoryEvent]:
    """StaleMarkResolved for each open mark of the memory (or only the mark `only`), in the
    caller's commit: a correction resolves the marks of the fact it corrects."""
    cur = await conn.execute(
        "SELECT memory_id, version, reason FROM stale_marks WHERE tenant_id = %s AND subject_id = %s "
        "AND marked_memory_id = %s AND state = 'open' AND (%s::uuid IS NULL OR memory_id = %s) ORDER BY memory_id",
        (tenant_id, subject_id, marked_memory_id, only, only))
    for mark_id, version, mark_reason in await cur.fetchall():
        yield MemoryEvent(memory_id=mark_id, version=int(version) + 1, namespace=MARK_NAMESPACE,
                          name=mark_name(marked_memory_id, mark_reason), occurred_at=occurred_at,
                          source_message_ids=(), operation_id=operation_id,
                          payload=StaleMarkResolved(resolution=resolution, reason=reason), actor=actor,
                          actor_id=actor_id)
