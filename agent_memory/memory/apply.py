"""`apply_event`: the one function that writes the relational projections from an event.

Every projection row of memory — facts (bi-temporal intervals), episodes, observations, entities
and their mentions, the relations between entities (bi-temporal intervals), the review's stale
marks, the lexical index (`memory_search`) and the vector outbox (`projection_outbox`) — is written here
and nowhere else. A commit appends an event and applies it in the same transaction; a rebuild
replays the log through this same function into scratch tables and compares digests, so the
live and the rebuilt projection cannot drift apart by construction.

`apply_event` hands each event to its event type's handler (`HANDLERS`, one per type, registered
with `@_handles`): what an event writes is read in that one function.

Vectors are the one projection not written here: they need a model call, so `apply_event`
leaves an outbox row and the projector embeds it (agent_memory/projection/projector.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb
from pydantic import BaseModel

from agent_memory.core.fact_text import fact_text
from agent_memory.memory.events import (
    LIVE_WRITE,
    CandidateHeld,
    CandidatePromoted,
    EntityNoted,
    EpisodeCreated,
    EventLogError,
    FactConfirmed,
    FactCorrected,
    FactCreated,
    FactEnded,
    FactSuperseded,
    MemoryEvent,
    MemoryForgotten,
    MemoryMarkedStale,
    MemoryRestored,
    ObservationCreated,
    RelationClosed,
    RelationNoted,
    StaleMarkResolved,
)
from agent_memory.store.lexical import indexed_text, search_text, term_count


@dataclass(frozen=True)
class ProjectionTables:
    """Where `apply_event` writes: the live tables, or a rebuild's scratch copies."""

    facts: str = "facts"
    episodes: str = "episodes"
    observations: str = "observations"
    entities: str = "entities"
    entity_mentions: str = "entity_mentions"
    relations: str = "relations"
    memory_search: str = "memory_search"
    projection_outbox: str = "projection_outbox"
    stale_marks: str = "stale_marks"


LIVE = ProjectionTables()


def fact_id(memory_id: uuid.UUID, version: int) -> uuid.UUID:
    """The id of the fact interval opened by the memory's event `version`."""
    return uuid.uuid5(memory_id, f"fact-{version}")


def relation_id(memory_id: uuid.UUID, version: int) -> uuid.UUID:
    """The id of the edge interval opened by the edge memory's event `version`."""
    return uuid.uuid5(memory_id, f"relation-{version}")


@dataclass(frozen=True)
class _Target:
    """What one event is applied to: the caller's transaction, the tables, the subject, the event."""

    conn: psycopg.AsyncConnection
    tables: ProjectionTables
    tenant_id: str
    subject_id: str
    event: MemoryEvent


_Handler = Callable[[_Target, Any], Awaitable[None]]
# The projection handler of each event type: exactly one per payload class of events.EventPayload
# (tests/memory/test_apply.py checks that none is missing).
HANDLERS: dict[type[BaseModel], _Handler] = {}
_H = TypeVar("_H", bound=_Handler)


def _handles(*payload_types: type[BaseModel]) -> Callable[[_H], _H]:
    """Register the decorated function as the projection handler of these event types."""
    def register(handler: _H) -> _H:
        for payload_type in payload_types:
            if payload_type in HANDLERS:
                raise TypeError(f"{payload_type.__name__} already has a projection handler")
        HANDLERS.update(dict.fromkeys(payload_types, handler))
        return handler
    return register


async def apply_event(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, event: MemoryEvent,
                      tables: ProjectionTables = LIVE) -> None:
    """Apply one event to the projections, in the caller's transaction."""
    handler = HANDLERS.get(type(event.payload))
    if handler is None:
        raise EventLogError(f"memory {event.memory_id} v{event.version}: no projection for a "
                            f"{type(event.payload).__name__} event")
    await handler(_Target(conn, tables, tenant_id, subject_id, event), event.payload)


# --- facts and candidates ---------------------------------------------------------------------


@_handles(FactCreated, CandidateHeld)
async def _fact_created(t: _Target, p: FactCreated | CandidateHeld) -> None:
    await _insert_fact(t, p)
    await _set_memory_version(t)


@_handles(FactSuperseded)
async def _fact_superseded(t: _Target, p: FactSuperseded) -> None:
    # The current interval closes at the new observation, and the new value opens there.
    await _close_active_fact(t, p.reason)
    await _insert_fact(t, p)
    await _set_memory_version(t)


@_handles(FactEnded)
async def _fact_ended(t: _Target, p: FactEnded) -> None:
    if p.voided:
        # The key itself was a mistake: the interval is voided (empty), and nothing opens.
        await _void_active_fact(t, p.reason)
    else:
        # Closed like a supersession, but nothing opens: the key has no current value after it.
        await _close_active_fact(t, p.reason)
    await _set_memory_version(t)


@_handles(FactCorrected)
async def _fact_corrected(t: _Target, p: FactCorrected) -> None:
    # The mistaken value was never true: an empty interval (valid_to = valid_from), so no
    # as-of read returns it; the corrected value opens at the voided interval's start.
    await _void_active_fact(t, p.reason)
    await _insert_fact(t, p)
    await _set_memory_version(t)


@_handles(FactConfirmed)
async def _fact_confirmed(t: _Target, p: FactConfirmed) -> None:
    # greatest(): a session consolidated late may restate the value at an earlier time than a
    # confirmation already on record; the fact was last confirmed at the later of the two.
    await t.conn.execute(sql.SQL(
        "UPDATE {} SET evidence_message_ids = evidence_message_ids || %s::text[], "
        "last_confirmed_at = greatest(last_confirmed_at, %s) "
        "WHERE tenant_id = %s AND memory_id = %s AND status = 'active'").format(sql.Identifier(t.tables.facts)),
        (list(t.event.source_message_ids), t.event.occurred_at, t.tenant_id, t.event.memory_id))
    await _set_memory_version(t)


@_handles(CandidatePromoted)
async def _candidate_promoted(t: _Target, p: CandidatePromoted) -> None:
    await t.conn.execute(sql.SQL(
        "UPDATE {} SET status = 'promoted', valid_to = %s, superseded_at = now(), close_reason = %s "
        "WHERE tenant_id = %s AND memory_id = %s AND status = 'candidate'").format(sql.Identifier(t.tables.facts)),
        (t.event.occurred_at, p.reason, t.tenant_id, t.event.memory_id))
    await _set_memory_version(t)


# --- episodes and observations ----------------------------------------------------------------


@_handles(EpisodeCreated)
async def _episode_created(t: _Target, p: EpisodeCreated) -> None:
    event = t.event
    if event.version != 1:
        raise EventLogError(f"episode {event.memory_id}: unexpected version {event.version}")
    await t.conn.execute(sql.SQL(
        """
        INSERT INTO {} (memory_id, tenant_id, subject_id, session_id, version, summary, sentences, importance,
                        happened_at, source_message_ids, operation_id, private_to)
        VALUES (%s, %s, %s, %s, 1, %s, %s, %s, %s, %s, %s, %s)
        """).format(sql.Identifier(t.tables.episodes)),
        (event.memory_id, t.tenant_id, t.subject_id, p.session_id, p.summary, Jsonb(p.sentences), p.importance,
         event.occurred_at, list(event.source_message_ids), event.operation_id, p.private_to))
    await _index(t, "episode", p.summary)
    await _outbox(t, "episode")


@_handles(ObservationCreated)
async def _observation_created(t: _Target, p: ObservationCreated) -> None:
    event = t.event
    if event.version != 1:
        raise EventLogError(f"observation {event.memory_id}: unexpected version {event.version}")
    await t.conn.execute(sql.SQL(
        """
        INSERT INTO {} (memory_id, tenant_id, subject_id, session_id, message_id, text, happened_at,
                        source_message_ids, operation_id, private_to)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
        """).format(sql.Identifier(t.tables.observations)),
        (event.memory_id, t.tenant_id, t.subject_id, p.session_id, event.source_message_ids[0], p.text,
         event.occurred_at, list(event.source_message_ids), event.operation_id, p.private_to))
    await _index(t, "observation", p.text, p.answers)
    await _outbox(t, "observation")


# --- entities and relations -------------------------------------------------------------------


@_handles(EntityNoted)
async def _entity_noted(t: _Target, p: EntityNoted) -> None:
    # The first event creates the entity; each later one (a session that mentions it again, or
    # the first after a sweep's tombstone) carries its names as of then. Its mentions are rows.
    event = t.event
    await t.conn.execute(sql.SQL(
        """
        INSERT INTO {} AS e (memory_id, tenant_id, subject_id, version, name, entity_type, aliases,
                             first_seen_at, last_seen_at, operation_id)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
        ON CONFLICT (tenant_id, memory_id) DO UPDATE SET
            version = excluded.version, name = excluded.name, entity_type = excluded.entity_type,
            aliases = excluded.aliases, operation_id = excluded.operation_id,
            first_seen_at = least(e.first_seen_at, excluded.first_seen_at),
            last_seen_at = greatest(e.last_seen_at, excluded.last_seen_at)
        """).format(sql.Identifier(t.tables.entities)),
        (event.memory_id, t.tenant_id, t.subject_id, event.version, p.name, p.entity_type, p.aliases,
         p.first_mentioned_at or event.occurred_at, event.occurred_at, event.operation_id))
    async with t.conn.cursor() as cur:
        await cur.executemany(sql.SQL(
            "INSERT INTO {} (tenant_id, subject_id, memory_id, message_id, session_id, version) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING").format(sql.Identifier(t.tables.entity_mentions)),
            [(t.tenant_id, t.subject_id, event.memory_id, message_id, p.session_id, event.version)
             for message_id in event.source_message_ids])


@_handles(RelationNoted)
async def _relation_noted(t: _Target, p: RelationNoted) -> None:
    # A new interval of the edge; an open one is closed first by its own RelationClosed event.
    event = t.event
    await t.conn.execute(sql.SQL(
        """
        INSERT INTO {} (relation_id, tenant_id, subject_id, memory_id, source_entity_id, relation, role,
                        target_entity_id, valid_from, version, started_event_id, evidence_message_ids,
                        operation_id)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
        ON CONFLICT (tenant_id, relation_id) DO NOTHING
        """).format(sql.Identifier(t.tables.relations)),
        (relation_id(event.memory_id, event.version), t.tenant_id, t.subject_id, event.memory_id,
         p.source_entity_id, p.relation, p.role, p.target_entity_id, event.occurred_at, event.version,
         event.event_id, list(event.source_message_ids), event.operation_id))


@_handles(RelationClosed)
async def _relation_closed(t: _Target, p: RelationClosed) -> None:
    # Closed, never overwritten: the interval keeps its start and gains its end (not before its start).
    event = t.event
    await t.conn.execute(sql.SQL(
        "UPDATE {} SET valid_to = greatest(valid_from, %s), closed_version = %s, closed_event_id = %s "
        "WHERE tenant_id = %s AND memory_id = %s AND valid_to IS NULL").format(sql.Identifier(t.tables.relations)),
        (event.occurred_at, event.version, event.event_id, t.tenant_id, event.memory_id))


# --- the review's stale marks -----------------------------------------------------------------


@_handles(MemoryMarkedStale)
async def _memory_marked_stale(t: _Target, p: MemoryMarkedStale) -> None:
    # The mark's own aggregate: one row per mark, opened again by a later review's mark.
    event = t.event
    await t.conn.execute(sql.SQL(
        """
        INSERT INTO {} (tenant_id, subject_id, memory_id, marked_memory_id, marked_kind, fact_id, reason,
                        related_memory_ids, confirmed_at, state, marked_at, version, operation_id)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 'open', %s, %s, %s)
        ON CONFLICT (tenant_id, memory_id) DO UPDATE SET
            marked_memory_id = excluded.marked_memory_id, marked_kind = excluded.marked_kind,
            fact_id = excluded.fact_id, reason = excluded.reason,
            related_memory_ids = excluded.related_memory_ids, confirmed_at = excluded.confirmed_at,
            state = 'open', marked_at = excluded.marked_at, resolved_at = NULL, resolution = NULL,
            version = excluded.version, operation_id = excluded.operation_id
        """).format(sql.Identifier(t.tables.stale_marks)),
        (t.tenant_id, t.subject_id, event.memory_id, p.marked_memory_id, p.marked_kind, p.fact_id, p.reason,
         p.related_memory_ids, p.confirmed_at, event.occurred_at, event.version, event.operation_id))


@_handles(StaleMarkResolved)
async def _stale_mark_resolved(t: _Target, p: StaleMarkResolved) -> None:
    event = t.event
    await t.conn.execute(sql.SQL(
        "UPDATE {} SET state = 'resolved', resolved_at = %s, resolution = %s, version = %s, operation_id = %s "
        "WHERE tenant_id = %s AND memory_id = %s").format(sql.Identifier(t.tables.stale_marks)),
        (event.occurred_at, p.resolution, event.version, event.operation_id, t.tenant_id, event.memory_id))


# --- forget and restore -----------------------------------------------------------------------


@_handles(MemoryForgotten)
async def _memory_forgotten(t: _Target, p: MemoryForgotten) -> None:
    await drop_memory_rows(t.conn, t.tables, t.tenant_id, t.event.memory_id)


@_handles(MemoryRestored)
async def _memory_restored(t: _Target, p: MemoryRestored) -> None:
    # The restored memory's earlier events are applied again by the caller (a replay skips the
    # forget): the restore itself only carries the memory's version.
    await _set_memory_version(t)


def written_by(event: MemoryEvent) -> str | None:
    """What wrote the value an event opens, as the fact shows it (`extracted_by`): the extractor
    and its version ("rule-extractor/8"), or for a direct write "live-write:" and the kind of
    writer ("live-write:agent"); None for an event recorded without its extractor."""
    if event.extractor is None:
        return None
    name, version = event.extractor
    if name == LIVE_WRITE[0]:
        return f"{name}:{event.actor}"
    return f"{name}/{version}"


async def drop_memory_rows(conn: psycopg.AsyncConnection, tables: ProjectionTables, tenant_id: str,
                           memory_id: uuid.UUID) -> int:
    """Remove one memory from the projections `apply_event` writes (a forget, a sweep). The
    outbox row goes first: its row lock orders this against a projector about to write the
    memory's vector (which marks the row processed before it inserts the vector)."""
    removed = 0
    for table in (tables.projection_outbox, tables.memory_search, tables.relations, tables.entity_mentions,
                  tables.entities, tables.observations, tables.episodes, tables.facts, tables.stale_marks):
        cur = await conn.execute(sql.SQL("DELETE FROM {} WHERE tenant_id = %s AND memory_id = %s").format(
            sql.Identifier(table)), (tenant_id, memory_id))
        removed += cur.rowcount
    return removed


async def _insert_fact(t: _Target, p: FactCreated | FactSuperseded | FactCorrected | CandidateHeld) -> None:
    """Open the fact interval (or hold the candidate) the event's value makes."""
    event = t.event
    candidate = isinstance(p, CandidateHeld)
    valid_from = p.corrects_from if isinstance(p, FactCorrected) else event.occurred_at
    await t.conn.execute(sql.SQL(
        """
        INSERT INTO {} (fact_id, tenant_id, subject_id, memory_id, namespace, key, value, version, memory_version,
                        status, valid_from, valid_to, valid_until, confidence, claim_type, permanence,
                        task_session_id, source_kind, evidence_message_ids, operation_id, metadata,
                        last_confirmed_at, extracted_by)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
        """).format(sql.Identifier(t.tables.facts)),
        (fact_id(event.memory_id, event.version), t.tenant_id, t.subject_id, event.memory_id, p.namespace, p.key,
         p.value, event.version, event.version, "candidate" if candidate else "active", valid_from, p.valid_until,
         p.valid_until, p.confidence, p.claim_type, p.permanence,
         p.session_id if p.permanence == "task_local" else None,
         "user_statement" if p.claim_type == "explicit" else "model_inference",
         list(event.source_message_ids), event.operation_id, Jsonb(getattr(p, "metadata", {})),
         # Confirmed when it was said: a correction's value holds from the voided start, but was
         # stated (and so last confirmed) at the correction.
         event.occurred_at, written_by(event)))
    if not candidate:  # a held candidate is recalled only by vector, never by keyword
        await _index(t, "fact", fact_text(p.namespace, p.key, p.value), happened_at=valid_from)
    await _outbox(t, "fact")


async def _close_active_fact(t: _Target, reason: str) -> None:
    """Close the memory's active interval at the event's time."""
    # least() ignores NULL: an open interval closes at the event; a temporary fact that already
    # ended keeps its earlier end.
    await t.conn.execute(sql.SQL(
        "UPDATE {} SET valid_to = least(valid_to, %s), superseded_at = now(), status = 'closed', "
        "close_reason = %s WHERE tenant_id = %s AND memory_id = %s AND status = 'active'").format(
        sql.Identifier(t.tables.facts)), (t.event.occurred_at, reason, t.tenant_id, t.event.memory_id))


async def _void_active_fact(t: _Target, reason: str) -> None:
    """Void the memory's active interval: it becomes empty (valid_to = valid_from)."""
    await t.conn.execute(sql.SQL(
        "UPDATE {} SET valid_to = valid_from, superseded_at = now(), status = 'voided', close_reason = %s "
        "WHERE tenant_id = %s AND memory_id = %s AND status = 'active'").format(
        sql.Identifier(t.tables.facts)), (reason, t.tenant_id, t.event.memory_id))


async def _set_memory_version(t: _Target) -> None:
    """One version per memory: every interval of the memory shows the memory's version."""
    await t.conn.execute(sql.SQL("UPDATE {} SET memory_version = %s WHERE tenant_id = %s AND memory_id = %s").format(
        sql.Identifier(t.tables.facts)), (t.event.version, t.tenant_id, t.event.memory_id))


async def _index(t: _Target, kind: str, text: str, hint: str | None = None, *,
                 happened_at: datetime | None = None) -> None:
    """The lexical index row of an item; `hint` (the question a message answers) is searchable too."""
    indexed = indexed_text(text, hint)
    await t.conn.execute(sql.SQL(
        """
        INSERT INTO {} (tenant_id, subject_id, memory_id, memory_kind, version, search_text, term_count, happened_at)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
        """).format(sql.Identifier(t.tables.memory_search)),
        (t.tenant_id, t.subject_id, t.event.memory_id, kind, t.event.version, search_text(indexed),
         term_count(indexed), happened_at or t.event.occurred_at))


async def _outbox(t: _Target, kind: str) -> None:
    """The vector projection's work item for this version of the memory."""
    await t.conn.execute(sql.SQL(
        "INSERT INTO {} (tenant_id, subject_id, memory_id, memory_kind, version, operation_id) "
        "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING").format(sql.Identifier(t.tables.projection_outbox)),
        (t.tenant_id, t.subject_id, t.event.memory_id, kind, t.event.version, t.event.operation_id))
