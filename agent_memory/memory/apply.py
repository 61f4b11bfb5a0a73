"""`apply_event`: the one function that writes the relational projections from an event.

Every projection row of memory — facts (bi-temporal intervals), episodes, observations, entities
and their mentions, the relations between entities (bi-temporal intervals), the review's stale
marks, the lexical index (`memory_search`) and the vector outbox (`projection_outbox`) — is written here
and nowhere else. A commit appends an event and applies it in the same transaction; a rebuild
replays the log through this same function into scratch tables and compares digests, so the
live and the rebuilt projection cannot drift apart by construction.

Vectors are the one projection not written here: they need a model call, so `apply_event`
leaves an outbox row and the projector embeds it (agent_memory/projection/projector.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

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


async def apply_event(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, event: MemoryEvent,
                      tables: ProjectionTables = LIVE) -> None:
    """Apply one event to the projections, in the caller's transaction."""
    p = event.payload
    if isinstance(p, FactSuperseded):
        # least() ignores NULL: an open interval closes at the new observation; a temporary fact
        # that already ended keeps its earlier end.
        await conn.execute(sql.SQL(
            "UPDATE {} SET valid_to = least(valid_to, %s), superseded_at = now(), status = 'closed', "
            "close_reason = %s WHERE tenant_id = %s AND memory_id = %s AND status = 'active'").format(
            sql.Identifier(tables.facts)), (event.occurred_at, p.reason, tenant_id, event.memory_id))
    if isinstance(p, FactEnded) and p.voided:
        # The key itself was a mistake: the interval is voided (empty), and nothing opens.
        await conn.execute(sql.SQL(
            "UPDATE {} SET valid_to = valid_from, superseded_at = now(), status = 'voided', close_reason = %s "
            "WHERE tenant_id = %s AND memory_id = %s AND status = 'active'").format(
            sql.Identifier(tables.facts)), (p.reason, tenant_id, event.memory_id))
    elif isinstance(p, FactEnded):
        # Closed like a supersession, but nothing opens: the key has no current value after it.
        await conn.execute(sql.SQL(
            "UPDATE {} SET valid_to = least(valid_to, %s), superseded_at = now(), status = 'closed', "
            "close_reason = %s WHERE tenant_id = %s AND memory_id = %s AND status = 'active'").format(
            sql.Identifier(tables.facts)), (event.occurred_at, p.reason, tenant_id, event.memory_id))
    elif isinstance(p, FactCorrected):
        # The mistaken value was never true: an empty interval (valid_to = valid_from), so no
        # as-of read returns it; the corrected value opens at the voided interval's start.
        await conn.execute(sql.SQL(
            "UPDATE {} SET valid_to = valid_from, superseded_at = now(), status = 'voided', close_reason = %s "
            "WHERE tenant_id = %s AND memory_id = %s AND status = 'active'").format(
            sql.Identifier(tables.facts)), (p.reason, tenant_id, event.memory_id))
        await _insert_fact(conn, tenant_id, subject_id, event, p, tables)
    elif isinstance(p, FactCreated | FactSuperseded | CandidateHeld):
        await _insert_fact(conn, tenant_id, subject_id, event, p, tables)
    elif isinstance(p, FactConfirmed):
        # greatest(): a session consolidated late may restate the value at an earlier time than a
        # confirmation already on record; the fact was last confirmed at the later of the two.
        await conn.execute(sql.SQL(
            "UPDATE {} SET evidence_message_ids = evidence_message_ids || %s::text[], "
            "last_confirmed_at = greatest(last_confirmed_at, %s) "
            "WHERE tenant_id = %s AND memory_id = %s AND status = 'active'").format(sql.Identifier(tables.facts)),
            (list(event.source_message_ids), event.occurred_at, tenant_id, event.memory_id))
    elif isinstance(p, CandidatePromoted):
        await conn.execute(sql.SQL(
            "UPDATE {} SET status = 'promoted', valid_to = %s, superseded_at = now(), close_reason = %s "
            "WHERE tenant_id = %s AND memory_id = %s AND status = 'candidate'").format(sql.Identifier(tables.facts)),
            (event.occurred_at, p.reason, tenant_id, event.memory_id))
    elif isinstance(p, EpisodeCreated):
        if event.version != 1:
            raise EventLogError(f"episode {event.memory_id}: unexpected version {event.version}")
        await conn.execute(sql.SQL(
            """
            INSERT INTO {} (memory_id, tenant_id, subject_id, session_id, version, summary, sentences, importance,
                            happened_at, source_message_ids, operation_id, private_to)
            VALUES (%s, %s, %s, %s, 1, %s, %s, %s, %s, %s, %s, %s)
            """).format(sql.Identifier(tables.episodes)),
            (event.memory_id, tenant_id, subject_id, p.session_id, p.summary, Jsonb(p.sentences), p.importance,
             event.occurred_at, list(event.source_message_ids), event.operation_id, p.private_to))
        await _index(conn, tables, tenant_id, subject_id, event, "episode", p.summary)
        await _outbox(conn, tables, tenant_id, subject_id, event, "episode")
    elif isinstance(p, ObservationCreated):
        if event.version != 1:
            raise EventLogError(f"observation {event.memory_id}: unexpected version {event.version}")
        await conn.execute(sql.SQL(
            """
            INSERT INTO {} (memory_id, tenant_id, subject_id, session_id, message_id, text, happened_at,
                            source_message_ids, operation_id, private_to)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
            """).format(sql.Identifier(tables.observations)),
            (event.memory_id, tenant_id, subject_id, p.session_id, event.source_message_ids[0], p.text,
             event.occurred_at, list(event.source_message_ids), event.operation_id, p.private_to))
        await _index(conn, tables, tenant_id, subject_id, event, "observation", p.text, p.answers)
        await _outbox(conn, tables, tenant_id, subject_id, event, "observation")
    elif isinstance(p, EntityNoted):
        # The first event creates the entity; each later one (a session that mentions it again, or
        # the first after a sweep's tombstone) carries its names as of then. Its mentions are rows.
        await conn.execute(sql.SQL(
            """
            INSERT INTO {} AS e (memory_id, tenant_id, subject_id, version, name, entity_type, aliases,
                                 first_seen_at, last_seen_at, operation_id)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT (tenant_id, memory_id) DO UPDATE SET
                version = excluded.version, name = excluded.name, entity_type = excluded.entity_type,
                aliases = excluded.aliases, operation_id = excluded.operation_id,
                first_seen_at = least(e.first_seen_at, excluded.first_seen_at),
                last_seen_at = greatest(e.last_seen_at, excluded.last_seen_at)
            """).format(sql.Identifier(tables.entities)),
            (event.memory_id, tenant_id, subject_id, event.version, p.name, p.entity_type, p.aliases,
             p.first_mentioned_at or event.occurred_at, event.occurred_at, event.operation_id))
        async with conn.cursor() as cur:
            await cur.executemany(sql.SQL(
                "INSERT INTO {} (tenant_id, subject_id, memory_id, message_id, session_id, version) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING").format(sql.Identifier(tables.entity_mentions)),
                [(tenant_id, subject_id, event.memory_id, message_id, p.session_id, event.version)
                 for message_id in event.source_message_ids])
    elif isinstance(p, RelationNoted):
        # A new interval of the edge; an open one is closed first by its own RelationClosed event.
        await conn.execute(sql.SQL(
            """
            INSERT INTO {} (relation_id, tenant_id, subject_id, memory_id, source_entity_id, relation, role,
                            target_entity_id, valid_from, version, started_event_id, evidence_message_ids,
                            operation_id)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT (tenant_id, relation_id) DO NOTHING
            """).format(sql.Identifier(tables.relations)),
            (relation_id(event.memory_id, event.version), tenant_id, subject_id, event.memory_id,
             p.source_entity_id, p.relation, p.role, p.target_entity_id, event.occurred_at, event.version,
             event.event_id, list(event.source_message_ids), event.operation_id))
    elif isinstance(p, RelationClosed):
        # Closed, never overwritten: the interval keeps its start and gains its end (not before its start).
        await conn.execute(sql.SQL(
            "UPDATE {} SET valid_to = greatest(valid_from, %s), closed_version = %s, closed_event_id = %s "
            "WHERE tenant_id = %s AND memory_id = %s AND valid_to IS NULL").format(sql.Identifier(tables.relations)),
            (event.occurred_at, event.version, event.event_id, tenant_id, event.memory_id))
    elif isinstance(p, MemoryMarkedStale):
        # The mark's own aggregate: one row per mark, opened again by a later review's mark.
        await conn.execute(sql.SQL(
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
            """).format(sql.Identifier(tables.stale_marks)),
            (tenant_id, subject_id, event.memory_id, p.marked_memory_id, p.marked_kind, p.fact_id, p.reason,
             p.related_memory_ids, p.confirmed_at, event.occurred_at, event.version, event.operation_id))
    elif isinstance(p, StaleMarkResolved):
        await conn.execute(sql.SQL(
            "UPDATE {} SET state = 'resolved', resolved_at = %s, resolution = %s, version = %s, operation_id = %s "
            "WHERE tenant_id = %s AND memory_id = %s").format(sql.Identifier(tables.stale_marks)),
            (event.occurred_at, p.resolution, event.version, event.operation_id, tenant_id, event.memory_id))
    elif isinstance(p, MemoryForgotten):
        await drop_memory_rows(conn, tables, tenant_id, event.memory_id)
    if isinstance(p, FactCreated | FactSuperseded | FactConfirmed | FactEnded | FactCorrected | CandidateHeld
                  | CandidatePromoted | MemoryRestored):
        # One version per memory: every interval of the memory shows the memory's version.
        await conn.execute(sql.SQL("UPDATE {} SET memory_version = %s WHERE tenant_id = %s AND memory_id = %s").format(
            sql.Identifier(tables.facts)), (event.version, tenant_id, event.memory_id))


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


async def _insert_fact(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, event: MemoryEvent,
                       p: FactCreated | FactSuperseded | FactCorrected | CandidateHeld,
                       tables: ProjectionTables) -> None:
    candidate = isinstance(p, CandidateHeld)
    valid_from = p.corrects_from if isinstance(p, FactCorrected) else event.occurred_at
    await conn.execute(sql.SQL(
        """
        INSERT INTO {} (fact_id, tenant_id, subject_id, memory_id, namespace, key, value, version, memory_version,
                        status, valid_from, valid_to, valid_until, confidence, claim_type, permanence,
                        task_session_id, source_kind, evidence_message_ids, operation_id, metadata,
                        last_confirmed_at, extracted_by)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
        """).format(sql.Identifier(tables.facts)),
        (fact_id(event.memory_id, event.version), tenant_id, subject_id, event.memory_id, p.namespace, p.key, p.value,
         event.version, event.version, "candidate" if candidate else "active", valid_from, p.valid_until,
         p.valid_until, p.confidence, p.claim_type, p.permanence,
         p.session_id if p.permanence == "task_local" else None,
         "user_statement" if p.claim_type == "explicit" else "model_inference",
         list(event.source_message_ids), event.operation_id, Jsonb(getattr(p, "metadata", {})),
         # Confirmed when it was said: a correction's value holds from the voided start, but was
         # stated (and so last confirmed) at the correction.
         event.occurred_at, written_by(event)))
    if not candidate:  # a held candidate is recalled only by vector, never by keyword
        await _index(conn, tables, tenant_id, subject_id, event, "fact", fact_text(p.namespace, p.key, p.value),
                     happened_at=valid_from)
    await _outbox(conn, tables, tenant_id, subject_id, event, "fact")


async def _index(conn: psycopg.AsyncConnection, tables: ProjectionTables, tenant_id: str, subject_id: str,
                 event: MemoryEvent, kind: str, text: str, hint: str | None = None, *,
                 happened_at: datetime | None = None) -> None:
    """The lexical index row of an item; `hint` (the question a message answers) is searchable too."""
    indexed = indexed_text(text, hint)
    await conn.execute(sql.SQL(
        """
        INSERT INTO {} (tenant_id, subject_id, memory_id, memory_kind, version, search_text, term_count, happened_at)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
        """).format(sql.Identifier(tables.memory_search)),
        (tenant_id, subject_id, event.memory_id, kind, event.version, search_text(indexed), term_count(indexed),
         happened_at or event.occurred_at))


async def _outbox(conn: psycopg.AsyncConnection, tables: ProjectionTables, tenant_id: str, subject_id: str,
                  event: MemoryEvent, kind: str) -> None:
    """The vector projection's work item for this version of the memory."""
    await conn.execute(sql.SQL(
        "INSERT INTO {} (tenant_id, subject_id, memory_id, memory_kind, version, operation_id) "
        "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING").format(sql.Identifier(tables.projection_outbox)),
        (tenant_id, subject_id, event.memory_id, kind, event.version, event.operation_id))
