"""Relations: edges between a subject's entities ("Lin works at Acme", "my sister Mia", "we moved
to Suzhou"), held over time like facts.

A consolidation's extraction lists the edges its session states (`ExtractedRelation`, by entity
name). The commit resolves both names to the subject's entities, with the same name fold the
entities use (a speaker is an entity named by the speaker's name); an edge whose names do not
resolve to one entity each is left out. Each edge (source, relation, target) is a memory of its
own; every interval in which it held is one row of `relations`:

- "assert" opens an interval from `observed_at` (`RelationNoted`), unless the edge holds already
  (saying it again changes nothing). A single-valued relation (partner, works_at, studies_at,
  lives_in) has one current target per source: asserting another closes the source's current
  edge of that type at `observed_at` (`RelationClosed`, "replaced") — unless that edge started
  after the observation (an older session consolidated late does not undo a newer move);
- "end" closes the matching current edge (`RelationClosed`, "ended"); an empty target closes
  whatever edge of that type the source has now.

Nothing is overwritten: an interval gains an end, the next one is a new row. Resolution happens
at commit, so applying an event reads no other memory's rows and a rebuild replays the same
projection.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import psycopg
from psycopg.rows import class_row
from pydantic import BaseModel

from agent_memory.core.entities import fold
from agent_memory.core.models import SINGLE_VALUED_RELATIONS, ExtractedEntity, ExtractedRelation, RelationType
from agent_memory.memory.entities import EntityRow, current_entities
from agent_memory.memory.events import MemoryEvent, RelationClosed, RelationNoted, memory_version
from agent_memory.memory.forgotten import forgotten_state, writable_version
from agent_memory.security.crypto import SubjectKey

NAMESPACE = "relation"

# The entity types a relation's target usually has: a name two entities share (a person and a
# place called "Paris") resolves to the one of the expected type.
_TARGET_TYPES: dict[str, tuple[str, ...]] = {
    "family": ("person", "pet"), "partner": ("person",), "friend": ("person",), "colleague": ("person",),
    "works_at": ("organisation",), "studies_at": ("organisation",), "member_of": ("organisation",),
    "lives_in": ("place",), "visited": ("place",), "attended": ("event",), "owns": ("pet", "thing"),
}
_SOURCE_TYPES = ("person",)



class RelationView(BaseModel):
    """One interval of an edge between two entities, by their names (valid_to None: it holds now)."""

    relation_id: uuid.UUID
    memory_id: uuid.UUID
    source_entity_id: uuid.UUID
    source_name: str
    relation: str
    role: str
    target_entity_id: uuid.UUID
    target_name: str
    valid_from: datetime
    valid_to: datetime | None
    evidence_message_ids: list[str]


async def list_relations(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, *,
                         history: bool = False) -> list[RelationView]:
    """The edges that hold now between the subject's entities, the oldest first; with `history`,
    every interval of every edge, ended ones too."""
    async with conn.cursor(row_factory=class_row(RelationView)) as cur:
        await cur.execute(
            "SELECT r.relation_id, r.memory_id, r.source_entity_id, s.name AS source_name, r.relation, r.role, "
            "r.target_entity_id, t.name AS target_name, r.valid_from, r.valid_to, r.evidence_message_ids "
            "FROM relations r "
            "JOIN entities s ON s.tenant_id = r.tenant_id AND s.memory_id = r.source_entity_id "
            "JOIN entities t ON t.tenant_id = r.tenant_id AND t.memory_id = r.target_entity_id "
            "WHERE r.tenant_id = %s AND r.subject_id = %s AND (%s OR r.valid_to IS NULL) "
            "ORDER BY r.valid_from, r.relation_id", (tenant_id, subject_id, history))
        return await cur.fetchall()

@dataclass(frozen=True)
class Edge:
    """A current edge of an entity, seen from it: `outgoing` when the entity is the edge's source
    ("Lin works_at Acme" from Lin), incoming when it is the target (the same edge from Acme)."""

    entity_id: uuid.UUID
    relation: RelationType
    role: str
    other_entity_id: uuid.UUID
    other_name: str
    outgoing: bool


@dataclass
class _Current:
    memory_id: uuid.UUID
    target_entity_id: uuid.UUID
    role: str
    valid_from: datetime


def edge_name(source_id: uuid.UUID, relation: str, target_id: uuid.UUID) -> str:
    """The edge's name within the subject (its memory id and key digest derive from it)."""
    return f"{source_id}\x1f{relation}\x1f{target_id}"


async def current_edges(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                        entity_ids: Sequence[uuid.UUID]) -> list[Edge]:
    """The edges that hold now of each of `entity_ids`, in both directions, with the other end's
    name. A forgotten edge, or one whose other end is forgotten, has no row and is not listed."""
    if not entity_ids:
        return []
    ids = list(dict.fromkeys(entity_ids))
    cur = await conn.execute(
        """
        SELECT r.source_entity_id, r.relation, r.role, r.target_entity_id, s.name, t.name
          FROM relations r
          JOIN entities s ON s.tenant_id = r.tenant_id AND s.memory_id = r.source_entity_id
          JOIN entities t ON t.tenant_id = r.tenant_id AND t.memory_id = r.target_entity_id
         WHERE r.tenant_id = %s AND r.subject_id = %s AND r.valid_to IS NULL AND r.valid_from <= now()
           AND (r.source_entity_id = ANY(%s) OR r.target_entity_id = ANY(%s))
         ORDER BY r.valid_from, r.relation_id
        """, (tenant_id, subject_id, ids, ids))
    wanted = set(ids)
    edges: list[Edge] = []
    for source, relation, role, target, source_name, target_name in await cur.fetchall():
        if source in wanted:
            edges.append(Edge(source, relation, role, target, target_name, True))
        if target in wanted:
            edges.append(Edge(target, relation, role, source, source_name, False))
    order = {entity_id: i for i, entity_id in enumerate(ids)}
    return sorted(edges, key=lambda e: order[e.entity_id])


class _Resolver:
    """Entity names to the subject's entities: by name or alias, folded; a name the session's
    extraction gives a type is looked up under that type; a name still shared by several entities
    is resolved to the one of the type expected in its place, else not at all."""

    def __init__(self, rows: list[EntityRow], extracted: list[ExtractedEntity]) -> None:
        self._by_name: dict[str, list[EntityRow]] = {}
        for row in rows:
            for name in dict.fromkeys(fold(n) for n in (row.name, *row.aliases)):
                self._by_name.setdefault(name, []).append(row)
        self._types: dict[str, set[str]] = {}
        for entity in extracted:
            for name in (entity.name, *entity.aliases):
                self._types.setdefault(fold(name), set()).add(entity.entity_type)

    def __call__(self, name: str, expected: tuple[str, ...]) -> uuid.UUID | None:
        found = self._by_name.get(fold(name), [])
        typed = [r for r in found if r.entity_type in self._types.get(fold(name), set())]
        found = typed or found
        if len(found) > 1:
            found = [r for r in found if r.entity_type in expected]
        return found[0].memory_id if len(found) == 1 else None


async def _current_from(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, source_id: uuid.UUID,
                        relation: str) -> list[_Current]:
    async with conn.cursor(row_factory=class_row(_Current)) as cur:
        await cur.execute("SELECT memory_id, target_entity_id, role, valid_from FROM relations "
                          "WHERE tenant_id = %s AND subject_id = %s AND source_entity_id = %s AND relation = %s "
                          "AND valid_to IS NULL ORDER BY valid_from, memory_id",
                          (tenant_id, subject_id, source_id, relation))
        return await cur.fetchall()


async def relation_events(conn: psycopg.AsyncConnection, key: SubjectKey, *, session_id: str,
                          relations: list[ExtractedRelation], entities: list[ExtractedEntity],
                          operation_id: str) -> AsyncIterator[MemoryEvent]:
    """The events the session's edges make (see the module), in observation order. Yielded one at
    a time: each is recorded before the next is decided, so two edges of one session (a move and
    the next move) see each other. Run after the session's entities are recorded, so an entity
    the session introduces resolves. A forgotten edge takes no new interval until restored or
    swept."""
    if not relations:
        return
    resolve = _Resolver(await current_entities(conn, key.tenant_id, key.subject_id), entities)
    tenant_id, subject_id = key.tenant_id, key.subject_id

    async def event(memory_id: uuid.UUID, name: str, relation: ExtractedRelation,
                    payload: RelationNoted | RelationClosed) -> MemoryEvent | None:
        version = writable_version(await forgotten_state(conn, tenant_id, memory_id),
                                   await memory_version(conn, tenant_id, memory_id), relation.observed_at)
        if version is None:
            return None
        return MemoryEvent(memory_id=memory_id, version=version + 1, namespace=NAMESPACE, name=name,
                           occurred_at=relation.observed_at, source_message_ids=tuple(relation.evidence_message_ids),
                           operation_id=operation_id, payload=payload)

    def closing(edge: _Current, source_id: uuid.UUID, relation: ExtractedRelation,
                reason: Literal["ended", "replaced"]) -> tuple[uuid.UUID, str, RelationNoted | RelationClosed]:
        return (edge.memory_id, edge_name(source_id, relation.relation, edge.target_entity_id),
                RelationClosed(session_id=session_id, reason=reason))

    for relation in sorted(relations, key=lambda r: r.observed_at):
        source_id = resolve(relation.source, _SOURCE_TYPES)
        target_id = resolve(relation.target, _TARGET_TYPES[relation.relation]) if relation.target.strip() else None
        if source_id is None or (target_id is None and (relation.operation == "assert" or relation.target.strip())):
            continue
        role = " ".join(relation.role.split())
        current = await _current_from(conn, tenant_id, subject_id, source_id, relation.relation)
        if relation.operation == "end":
            steps = [closing(edge, source_id, relation, "ended") for edge in current
                     if (target_id is None or edge.target_entity_id == target_id)
                     and edge.valid_from <= relation.observed_at]
        else:
            assert target_id is not None
            if target_id == source_id:
                continue
            same = next((edge for edge in current if edge.target_entity_id == target_id), None)
            if same is not None and role in ("", same.role):
                continue  # the edge holds already
            others = [edge for edge in current if edge.target_entity_id != target_id] \
                if relation.relation in SINGLE_VALUED_RELATIONS else []
            if any(edge.valid_from > relation.observed_at for edge in others) or \
                    (same is not None and same.valid_from > relation.observed_at):
                continue  # a newer statement holds: this older one does not undo it
            name = edge_name(source_id, relation.relation, target_id)
            memory_id = key.memory_id(NAMESPACE, name)
            if writable_version(await forgotten_state(conn, tenant_id, memory_id), 0, relation.observed_at) is None:
                continue  # a forgotten edge
            # Another role for the same edge: the interval with the old role ends, one with the new starts.
            steps = [closing(edge, source_id, relation, "replaced") for edge in [*others, *([same] if same else [])]]
            steps.append((memory_id, name, RelationNoted(
                session_id=session_id, source_entity_id=source_id, relation=relation.relation,
                target_entity_id=target_id, role=role)))
        for memory_id, name, payload in steps:
            recorded = await event(memory_id, name, relation, payload)
            if recorded is not None:
                yield recorded
