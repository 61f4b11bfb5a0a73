"""Entities: the people, pets, places, organisations, events and things a subject's sessions
mention, resolved across sessions by name and alias.

A consolidation's extraction lists the entities its session mentions (`ExtractedEntity`, one
schema for the offline extractor and a model). The commit resolves each to the subject's entity
of the same type that carries that name or alias — else a new one, identified by its type and
name — and records one `EntityNoted` event per entity: the session's mentioning messages and the
entity's names after it. Resolution happens here, at commit, so that applying an event reads no
other memory's rows and a rebuild replays the same projection.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg.rows import class_row
from pydantic import BaseModel

from agent_memory.core.entities import fold
from agent_memory.core.models import ENTITY_ALIASES_MAX, EntityType, ExtractedEntity
from agent_memory.memory.events import EntityNoted, MemoryEvent, memory_version
from agent_memory.memory.forgotten import forgotten_state, writable_version
from agent_memory.security.crypto import SubjectKey


@dataclass
class EntityRow:
    memory_id: uuid.UUID
    name: str
    entity_type: str
    aliases: list[str]


def entity_name(entity_type: str, name: str) -> str:
    """The entity's name within the subject (its memory id and key digest derive from it)."""
    return f"{entity_type}\x1f{fold(name)}"


async def current_entities(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str) -> list[EntityRow]:
    async with conn.cursor(row_factory=class_row(EntityRow)) as cur:
        await cur.execute("SELECT memory_id, name, entity_type, aliases FROM entities "
                          "WHERE tenant_id = %s AND subject_id = %s ORDER BY memory_id", (tenant_id, subject_id))
        return await cur.fetchall()


class EntityView(BaseModel):
    """An entity as a reader sees it: its names and the messages that mention it."""

    memory_id: uuid.UUID
    name: str
    entity_type: str
    aliases: list[str]
    first_seen_at: datetime
    last_seen_at: datetime
    mentioned_in: list[str]  # the messages that mention it, in the order they were noted


async def list_entities(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str) -> list[EntityView]:
    """The subject's entities, the first mentioned first (by name among those first mentioned together)."""
    async with conn.cursor(row_factory=class_row(EntityView)) as cur:
        await cur.execute(
            "SELECT e.memory_id, e.name, e.entity_type, e.aliases, e.first_seen_at, e.last_seen_at, "
            "array(SELECT m.message_id FROM entity_mentions m WHERE m.tenant_id = e.tenant_id "
            "AND m.memory_id = e.memory_id ORDER BY m.version, m.message_id) AS mentioned_in FROM entities e "
            "WHERE e.tenant_id = %s AND e.subject_id = %s ORDER BY e.first_seen_at, e.name, e.memory_id",
            (tenant_id, subject_id))
        return await cur.fetchall()


async def mentioned_messages(conn: psycopg.AsyncConnection, tenant_id: str, memory_id: uuid.UUID) -> set[str]:
    cur = await conn.execute("SELECT message_id FROM entity_mentions WHERE tenant_id = %s AND memory_id = %s",
                             (tenant_id, memory_id))
    return {row[0] for row in await cur.fetchall()}


@dataclass
class _Resolved:
    memory_id: uuid.UUID
    name: str
    entity_type: EntityType
    aliases: list[str]
    message_ids: list[str]


def _merge_names(name: str, aliases: list[str], more: list[str]) -> list[str]:
    """`aliases` plus the names in `more` not yet known (nor the name itself), in order, bounded."""
    known = {fold(name), *map(fold, aliases)}
    merged = list(aliases)
    for alias in more:
        if fold(alias) not in known and len(merged) < ENTITY_ALIASES_MAX:
            merged.append(alias)
            known.add(fold(alias))
    return merged


def resolve(key: SubjectKey, extracted: list[ExtractedEntity], current: list[EntityRow]) -> list[_Resolved]:
    """Each extracted entity matched, by type and by any of its names, to a current entity, else
    identified as a new one; entities of one session that resolve to the same one are merged."""
    by_name: dict[tuple[str, str], EntityRow] = {}
    for row in current:
        for name in (row.name, *row.aliases):
            by_name.setdefault((row.entity_type, fold(name)), row)
    resolved: dict[uuid.UUID, _Resolved] = {}
    for entity in extracted:
        names = [entity.name, *entity.aliases]
        match = next((by_name[(entity.entity_type, fold(n))] for n in names
                      if (entity.entity_type, fold(n)) in by_name), None)
        if match is not None:
            target = resolved.setdefault(match.memory_id, _Resolved(match.memory_id, match.name,
                                                                    entity.entity_type, list(match.aliases), []))
        else:
            memory_id = key.memory_id("entity", entity_name(entity.entity_type, entity.name))
            target = resolved.setdefault(memory_id, _Resolved(memory_id, entity.name, entity.entity_type, [], []))
        target.aliases = _merge_names(target.name, target.aliases, names)
        target.message_ids += [m for m in entity.evidence_message_ids if m not in target.message_ids]
    return list(resolved.values())


async def entity_events(conn: psycopg.AsyncConnection, key: SubjectKey, *, session_id: str,
                        extracted: list[ExtractedEntity], happened_at: datetime,
                        operation_id: str, written_at: Mapping[str, datetime] | None = None) -> list[MemoryEvent]:
    """One EntityNoted event per entity the session mentions in messages not yet recorded as its
    mentions (a session consolidated again adds only its new mentions). A forgotten entity takes
    no mention until restored or swept."""
    if not extracted:
        return []
    events: list[MemoryEvent] = []
    current = await current_entities(conn, key.tenant_id, key.subject_id)
    for entity in resolve(key, extracted, current):
        known = await mentioned_messages(conn, key.tenant_id, entity.memory_id)
        new_mentions = [m for m in entity.message_ids if m not in known]
        if not new_mentions:
            continue
        # Seen when the messages that mention it were written, not when the session ended.
        times = [written_at[m] for m in new_mentions if written_at and m in written_at]
        version = writable_version(await forgotten_state(conn, key.tenant_id, entity.memory_id),
                                   await memory_version(conn, key.tenant_id, entity.memory_id), happened_at)
        if version is None:
            continue
        events.append(MemoryEvent(
            memory_id=entity.memory_id, version=version + 1, namespace="entity",
            name=entity_name(entity.entity_type, entity.name), occurred_at=max(times, default=happened_at),
            source_message_ids=tuple(new_mentions), operation_id=operation_id,
            payload=EntityNoted(session_id=session_id, name=entity.name, entity_type=entity.entity_type,
                                aliases=entity.aliases, first_mentioned_at=min(times, default=None))))
    return events
