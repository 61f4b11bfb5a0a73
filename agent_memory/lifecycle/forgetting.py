"""Forgetting one memory, and restoring it within the grace period (the operator's path).

A forget appends a `MemoryForgotten` event and applies it like every event: the memory's rows
leave every projection in the same transaction (facts, episode or note, lexical index, outbox),
and its vectors with them, so no read — facts now or as of any time, recall, context, prompt —
can return it after the commit. The other memories of the subject are untouched. The memory's
events stay (encrypted) so a restore within the grace period re-applies them and appends
`MemoryRestored`; forgetting an entity forgets the relations that join it, and restoring the
entity restores them; after the grace period the sweeper (agent_memory/lifecycle/sweeper.py) removes the
events and every other copy and keeps the `forgotten_memories` row as a tombstone.

While a memory is forgotten, the write path holds back new values of it (a consolidation of an
old session must not bring a forgotten fact back): `memory_store.forgotten_state` says which,
and `memory_store.decide_fact_events` skips them. A user saying "forget that I …" is a retraction
the extractor handles, not this.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Literal

import psycopg
from psycopg import sql
from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from agent_memory.core.errors import Conflict, InvalidInput, NotFound
from agent_memory.memory.apply import apply_event
from agent_memory.memory.events import (
    FACT_EVENTS,
    LIFECYCLE_EVENTS,
    CandidateHeld,
    EntityNoted,
    EpisodeCreated,
    MemoryEvent,
    MemoryForgotten,
    MemoryRestored,
    ObservationCreated,
    RelationNoted,
    effective_events,
    read_subject_events,
)
from agent_memory.memory.memory_store import record_event, subject_key
from agent_memory.security.crypto import SubjectKey
from agent_memory.security.keyring import KeyRing
from agent_memory.store.access import delete_memory_access
from agent_memory.store.db import reading_agent
from agent_memory.store.scope import Mode, subject_scope

MemoryKind = Literal["fact", "episode", "observation", "entity", "relation"]
Actor = Literal["operator", "user", "agent", "retention"]
MAX_REASON_CHARS = 1000
DEFAULT_GRACE = timedelta(hours=24)


class MemoryNotFoundError(NotFound):
    """No memory of this id for this subject (in this tenant)."""


class MemoryNotForgottenError(Conflict):
    """A restore of a memory that is not forgotten."""


class EntityForgottenError(Conflict):
    """A restore of a relation one of whose entities is forgotten."""


class RestoreWindowClosedError(Conflict):
    """The grace period ended (or the sweeper already removed the memory)."""


class ForgetResult(BaseModel):
    tenant_id: str
    subject_id: str
    memory_id: str
    memory_kind: MemoryKind
    version: int  # the MemoryForgotten event's
    forgotten_at: datetime
    restorable_until: datetime
    already_forgotten: bool
    projection_rows_removed: int
    vectors_removed: int


class RestoreResult(BaseModel):
    tenant_id: str
    subject_id: str
    memory_id: str
    memory_kind: MemoryKind
    version: int  # the MemoryRestored event's
    events_reapplied: int


class ForgottenMemory(BaseModel):
    """One `forgotten_memories` row: a memory in its grace period, or a swept one's tombstone."""

    memory_id: uuid.UUID
    subject_id: str
    memory_kind: MemoryKind
    version: int
    state: Literal["forgotten", "swept"]
    forgotten_at: datetime
    actor: str
    actor_id: str | None
    swept_at: datetime | None
    residue: int | None


def parse_memory_id(memory_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(memory_id)
    except ValueError:
        raise InvalidInput(f"memory id {memory_id[:80]!r} is not a UUID: pass an id as `facts --json`, `context` "
                           "or `prompt --json` print it") from None


def _check_reason(reason: str | None) -> str | None:
    if reason is not None and len(reason) > MAX_REASON_CHARS:
        raise InvalidInput(f"reason has {len(reason)} characters: keep it under {MAX_REASON_CHARS} (a ticket "
                           "number and a few words)")
    return reason or None


def _kind(events: list[MemoryEvent]) -> MemoryKind:
    first = next(e.payload for e in events if not isinstance(e.payload, LIFECYCLE_EVENTS))
    return "episode" if isinstance(first, EpisodeCreated) else \
        "observation" if isinstance(first, ObservationCreated) else \
        "entity" if isinstance(first, EntityNoted) else \
        "relation" if isinstance(first, RelationNoted) else "fact"


async def _row(conn: psycopg.AsyncConnection, tenant_id: str, memory_id: uuid.UUID) -> ForgottenMemory | None:
    async with conn.cursor(row_factory=class_row(ForgottenMemory)) as cur:
        await cur.execute("SELECT memory_id, subject_id, memory_kind, version, state, forgotten_at, actor, actor_id, "
                          "swept_at, residue FROM forgotten_memories WHERE tenant_id = %s AND memory_id = %s",
                          (tenant_id, memory_id))
        return await cur.fetchone()


async def _latest_event(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                        memory_id: uuid.UUID) -> tuple[str, int, str] | None:
    cur = await conn.execute("SELECT namespace, aggregate_version, key_digest FROM memory_events "
                             "WHERE tenant_id = %s AND subject_id = %s AND memory_id = %s "
                             "ORDER BY aggregate_version DESC LIMIT 1", (tenant_id, subject_id, memory_id))
    row = await cur.fetchone()
    return (row[0], int(row[1]), row[2]) if row else None


async def _visible_to_reader(conn: psycopg.AsyncConnection, tenant_id: str, memory_id: uuid.UUID,
                             namespace: str) -> bool:
    """Whether a reader limited to an agent sees the memory: the log is not confined by agent, the
    episodes and notes are (row-level security hides another agent's private ones)."""
    table = {"episode": "episodes", "observation": "observations"}.get(namespace)
    if reading_agent() is None or table is None:
        return True
    cur = await conn.execute(sql.SQL("SELECT 1 FROM {} WHERE tenant_id = %s AND memory_id = %s").format(
        sql.Identifier(table)), (tenant_id, memory_id))
    return await cur.fetchone() is not None


async def forget_memory(pool: AsyncConnectionPool, keyring: KeyRing, *, tenant_id: str, subject_id: str,
                        memory_id: str, reason: str | None = None, actor: Actor = "operator",
                        actor_id: str | None = None, grace: timedelta = DEFAULT_GRACE) -> ForgetResult:
    """Forget one memory of the subject at once (see the module). Forgetting a forgotten memory
    returns its forget again (`already_forgotten`)."""
    mid = parse_memory_id(memory_id)
    reason = _check_reason(reason)
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.WRITE) as scope:
        conn = scope.conn
        row = await _row(conn, tenant_id, mid)
        if row is not None and row.subject_id == subject_id and row.state == "forgotten":
            return ForgetResult(tenant_id=tenant_id, subject_id=subject_id, memory_id=str(mid),
                                memory_kind=row.memory_kind, version=row.version, forgotten_at=row.forgotten_at,
                                restorable_until=row.forgotten_at + grace, already_forgotten=True,
                                projection_rows_removed=0, vectors_removed=0)
        latest = await _latest_event(conn, tenant_id, subject_id, mid)
        key = await subject_key(conn, keyring, tenant_id, subject_id, create=False)
        if latest is not None and not await _visible_to_reader(conn, tenant_id, mid, latest[0]):
            latest = None  # another agent's private episode or note: not this reader's to forget
        if latest is None or key is None:
            swept = row is not None and row.subject_id == subject_id
            raise MemoryNotFoundError(f"no memory {mid} of subject {subject_id!r} in tenant {tenant_id!r}"
                                      + (" (it was swept: forgotten for good)" if swept else ""))
        now = datetime.now(UTC)
        kind, version, counted, vectors, fact_key = await _forget_one(conn, key, mid, latest, reason, actor, actor_id,
                                                                      now)
        if fact_key is not None:
            # The key's candidate area holds values of the same fact (held, or promoted into it):
            # forgotten with it, or a forgotten value would still be listed, and exported.
            cur = await conn.execute(
                "SELECT DISTINCT f.memory_id FROM facts f WHERE f.tenant_id = %s AND f.subject_id = %s "
                "AND f.namespace = %s AND f.key = %s AND f.status IN ('candidate', 'promoted') AND f.memory_id <> %s",
                (tenant_id, subject_id, fact_key[0], fact_key[1], mid))
            for (candidate_id,) in await cur.fetchall():
                candidate_latest = await _latest_event(conn, tenant_id, subject_id, candidate_id)
                if candidate_latest is not None:
                    await _forget_one(conn, key, candidate_id, candidate_latest, reason, actor, actor_id, now)
        if kind == "entity":
            # An edge joins two entities: it leaves with either (and comes back with it, restore_memory).
            for edge_id in await _edges_of(conn, tenant_id, subject_id, mid):
                edge_latest = await _latest_event(conn, tenant_id, subject_id, edge_id)
                if edge_latest is not None:
                    await _forget_one(conn, key, edge_id, edge_latest, reason, actor, actor_id, now)
    return ForgetResult(tenant_id=tenant_id, subject_id=subject_id, memory_id=str(mid), memory_kind=kind,
                        version=version, forgotten_at=now, restorable_until=now + grace,
                        already_forgotten=False, projection_rows_removed=counted, vectors_removed=vectors)


async def _forget_one(conn: psycopg.AsyncConnection, key: SubjectKey, mid: uuid.UUID, latest: tuple[str, int, str],
                      reason: str | None, actor: Actor, actor_id: str | None,
                      now: datetime) -> tuple[MemoryKind, int, int, int, tuple[str, str] | None]:
    """Forget one memory inside the caller's subject scope: (kind, forget version, projection rows
    removed, vectors removed, the fact's namespace and key when it is a fact)."""
    tenant_id, subject_id = key.tenant_id, key.subject_id
    namespace, version, key_digest = latest
    events = await read_subject_events(conn, key, memory_id=mid)
    kind = _kind(events)
    sessions = sorted({s for e in events if (s := getattr(e.payload, "session_id", None))})
    keys = [(p.namespace, p.key) for e in events if isinstance(p := e.payload, FACT_EVENTS) and p.key]
    # The fact memory itself, not one held value of the candidate area (whose siblings stay).
    candidate = isinstance(events[0].payload, CandidateHeld) if events else False
    fact_key = keys[0] if kind == "fact" and keys and not candidate else None
    # Rows are counted before the forget's own apply removes them (the receipt's figure).
    cur = await conn.execute(
        "SELECT (SELECT count(*) FROM facts WHERE tenant_id = %(t)s AND memory_id = %(m)s)"
        " + (SELECT count(*) FROM episodes WHERE tenant_id = %(t)s AND memory_id = %(m)s)"
        " + (SELECT count(*) FROM observations WHERE tenant_id = %(t)s AND memory_id = %(m)s)"
        " + (SELECT count(*) FROM entities WHERE tenant_id = %(t)s AND memory_id = %(m)s)"
        " + (SELECT count(*) FROM relations WHERE tenant_id = %(t)s AND memory_id = %(m)s)"
        " + (SELECT count(*) FROM memory_search WHERE tenant_id = %(t)s AND memory_id = %(m)s)",
        {"t": tenant_id, "m": mid})
    counted = await cur.fetchone()
    event = MemoryEvent(memory_id=mid, version=version + 1, namespace=namespace, key_digest=key_digest,
                        occurred_at=now, source_message_ids=(), operation_id=f"forget/{mid}/{version + 1}",
                        actor=actor, actor_id=actor_id,
                        payload=MemoryForgotten(memory_kind=kind, reason=reason))
    await record_event(conn, key, event)  # append + apply: the projection rows go (outbox first)
    # With the subject: Postgres prunes to its partition (by memory id alone it opens and locks
    # all 256 partitions and their indexes, 1,286 locks).
    cur = await conn.execute("DELETE FROM memory_vectors WHERE tenant_id = %s AND subject_id = %s AND memory_id = %s",
                             (tenant_id, subject_id, mid))
    vectors = cur.rowcount
    # Its recall statistics are telemetry of a memory no read may serve any more: dropped, not restored.
    await delete_memory_access(conn, tenant_id, subject_id, [mid])
    await conn.execute(
        """
        INSERT INTO forgotten_memories (tenant_id, subject_id, memory_id, memory_kind, version, session_ids,
                                        forgotten_at, actor, actor_id, state)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 'forgotten')
        ON CONFLICT (tenant_id, memory_id) DO UPDATE
           SET swept_before_version = CASE WHEN forgotten_memories.state = 'swept'
                                           THEN forgotten_memories.version
                                           ELSE forgotten_memories.swept_before_version END,
               swept_before_at = CASE WHEN forgotten_memories.state = 'swept' THEN forgotten_memories.forgotten_at
                                      ELSE forgotten_memories.swept_before_at END,
               version = EXCLUDED.version, forgotten_at = EXCLUDED.forgotten_at, actor = EXCLUDED.actor,
               actor_id = EXCLUDED.actor_id, state = 'forgotten', swept_at = NULL, residue = NULL,
               session_ids = ARRAY(SELECT DISTINCT unnest(forgotten_memories.session_ids
                                                          || EXCLUDED.session_ids) ORDER BY 1)
        """, (tenant_id, subject_id, mid, kind, version + 1, sessions, now, actor, actor_id))
    return kind, version + 1, int(counted[0]) if counted else 0, vectors, fact_key


async def restore_memory(pool: AsyncConnectionPool, keyring: KeyRing, *, tenant_id: str, subject_id: str,
                         memory_id: str, reason: str | None = None, actor: Actor = "operator",
                         actor_id: str | None = None, grace: timedelta = DEFAULT_GRACE) -> RestoreResult:
    """Bring a forgotten memory back within the grace period: its events before the forget are
    applied again (the projections come back as they were; the outbox re-queues its vectors,
    which the projector finds recorded) and a `MemoryRestored` event is appended."""
    mid = parse_memory_id(memory_id)
    reason = _check_reason(reason)
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.WRITE) as scope:
        conn = scope.conn
        row = await _row(conn, tenant_id, mid)
        if row is None or row.subject_id != subject_id:
            if await _latest_event(conn, tenant_id, subject_id, mid) is None:
                raise MemoryNotFoundError(f"no memory {mid} of subject {subject_id!r} in tenant {tenant_id!r}")
            raise MemoryNotForgottenError(f"memory {mid} is not forgotten: nothing to restore")
        if row.state == "swept":
            raise RestoreWindowClosedError(f"memory {mid} was swept at {row.swept_at:%Y-%m-%d %H:%M:%S %Z} "
                                           "(forgotten for good): it cannot be restored")
        closes = row.forgotten_at + grace
        if datetime.now(UTC) > closes:
            raise RestoreWindowClosedError(f"memory {mid}: the grace period ended at {closes:%Y-%m-%d %H:%M:%S %Z}; "
                                           "the sweeper removes it at its next run")
        key = await subject_key(conn, keyring, tenant_id, subject_id, create=False)
        assert key is not None  # a forgotten memory has events, so its subject has a key
        if row.memory_kind == "relation":
            ends = _edge_ends(await read_subject_events(conn, key, memory_id=mid))
            if await _missing_entities(conn, tenant_id, ends):
                raise EntityForgottenError(f"relation {mid} joins a forgotten entity: restore the entity, "
                                           "which restores the relations forgotten with it")
        version, reapplied = await _restore_one(conn, key, mid, reason, actor, actor_id)
        if row.memory_kind == "entity":
            # The edges forgotten with the entity come back with it (when their other end is there).
            cur = await conn.execute(
                "SELECT memory_id FROM forgotten_memories WHERE tenant_id = %s AND subject_id = %s "
                "AND memory_kind = 'relation' AND state = 'forgotten' AND forgotten_at = %s ORDER BY memory_id",
                (tenant_id, subject_id, row.forgotten_at))
            for (edge_id,) in await cur.fetchall():
                ends = _edge_ends(await read_subject_events(conn, key, memory_id=edge_id))
                if mid in ends and not await _missing_entities(conn, tenant_id, ends):
                    await _restore_one(conn, key, edge_id, reason, actor, actor_id)
    return RestoreResult(tenant_id=tenant_id, subject_id=subject_id, memory_id=str(mid), memory_kind=row.memory_kind,
                         version=version, events_reapplied=reapplied)


async def _restore_one(conn: psycopg.AsyncConnection, key: SubjectKey, mid: uuid.UUID, reason: str | None,
                       actor: Actor, actor_id: str | None) -> tuple[int, int]:
    """Restore one forgotten memory inside the caller's subject scope: (the MemoryRestored event's
    version, events re-applied)."""
    tenant_id, subject_id = key.tenant_id, key.subject_id
    events = await read_subject_events(conn, key, memory_id=mid)
    # Everything before the last forget, as a rebuild would replay it.
    earlier = effective_events(events[:-1])
    for past in earlier:
        await apply_event(conn, tenant_id, subject_id, past)
    last = events[-1]
    await record_event(conn, key, MemoryEvent(
        memory_id=mid, version=last.version + 1, namespace=last.namespace, key_digest=await _key_digest(conn, mid),
        occurred_at=datetime.now(UTC), source_message_ids=(), operation_id=f"restore/{mid}/{last.version + 1}",
        actor=actor, actor_id=actor_id, payload=MemoryRestored(reason=reason)))
    # A memory swept once before keeps that tombstone (what was said before that sweep stays
    # held back); any other restored memory has no row any more.
    cur = await conn.execute(
        "UPDATE forgotten_memories SET state = 'swept', version = swept_before_version, "
        "forgotten_at = swept_before_at, swept_before_version = NULL, swept_before_at = NULL "
        "WHERE tenant_id = %s AND memory_id = %s AND swept_before_version IS NOT NULL", (tenant_id, mid))
    if cur.rowcount == 0:
        await conn.execute("DELETE FROM forgotten_memories WHERE tenant_id = %s AND memory_id = %s",
                           (tenant_id, mid))
    return last.version + 1, len(earlier)


def _edge_ends(events: list[MemoryEvent]) -> set[uuid.UUID]:
    """The entities an edge memory joins."""
    return {end for e in events if isinstance(p := e.payload, RelationNoted)
            for end in (p.source_entity_id, p.target_entity_id)}


async def _missing_entities(conn: psycopg.AsyncConnection, tenant_id: str, entity_ids: set[uuid.UUID]) -> bool:
    cur = await conn.execute("SELECT count(*) FROM entities WHERE tenant_id = %s AND memory_id = ANY(%s)",
                             (tenant_id, list(entity_ids)))
    row = await cur.fetchone()
    return (int(row[0]) if row else 0) < len(entity_ids)


async def _edges_of(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                    entity_id: uuid.UUID) -> list[uuid.UUID]:
    """The edge memories with a row (any interval) that join the entity."""
    cur = await conn.execute("SELECT DISTINCT memory_id FROM relations WHERE tenant_id = %s AND subject_id = %s "
                             "AND (source_entity_id = %s OR target_entity_id = %s) ORDER BY memory_id",
                             (tenant_id, subject_id, entity_id, entity_id))
    return [r[0] for r in await cur.fetchall()]


async def _key_digest(conn: psycopg.AsyncConnection, memory_id: uuid.UUID) -> str:
    cur = await conn.execute("SELECT key_digest FROM memory_events WHERE memory_id = %s "
                             "ORDER BY aggregate_version DESC LIMIT 1", (memory_id,))
    row = await cur.fetchone()
    assert row is not None
    return str(row[0])


async def list_forgotten(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str,
                         subject_id: str) -> list[ForgottenMemory]:
    """The subject's forgotten memories (in grace) and swept tombstones, newest first."""
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.READ) as scope:
        async with scope.conn.cursor(row_factory=class_row(ForgottenMemory)) as cur:
            await cur.execute("SELECT memory_id, subject_id, memory_kind, version, state, forgotten_at, actor, actor_id, "
                              "swept_at, residue FROM forgotten_memories WHERE tenant_id = %s AND subject_id = %s "
                              "ORDER BY forgotten_at DESC, memory_id", (tenant_id, subject_id))
            return await cur.fetchall()
