"""Export of one subject (the right of access): one JSON document with everything memory holds
about the subject, as a compliance officer hands it to the person who asked.

It holds every fact interval, current and historical, with its validity and the ids and texts of
the messages that are its evidence. It holds the candidate area, the episodes and the notes.
It holds the forgotten memories still in their grace period, with their content read from the
event log, and the swept ones as tombstones without content. It holds the subject's erasure
requests with their receipts. Everything is read in one READ scope, so an erasure cannot
interleave. An erased subject exports as erased, with its receipts and nothing else.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar

import psycopg
from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from agent_memory.core.fact_text import fact_line
from agent_memory.core.models import ErasureStatus, FactRow, MetadataValue
from agent_memory.lifecycle.erasure import erasure_status
from agent_memory.lifecycle.forgetting import ForgottenMemory
from agent_memory.memory.entities import EntityView, list_entities
from agent_memory.memory.events import LIFECYCLE_EVENTS, read_subject_events
from agent_memory.memory.filters import NO_FILTER, MemoryFilter, matching_items
from agent_memory.memory.memory_store import read_facts, subject_key
from agent_memory.memory.relations import RelationView, list_relations
from agent_memory.memory.tool_calls import ToolCall, list_tool_calls
from agent_memory.security.keyring import KeyRing
from agent_memory.store.scope import Mode, SubjectScope, subject_scope

FORMAT = "agent-memory-export/1"


class ExportedMessage(BaseModel):
    session_id: str
    message_id: str
    role: str
    speaker: str | None
    content: str
    created_at: datetime
    metadata: dict[str, MetadataValue] = {}
    agent_id: str | None = None
    app_id: str | None = None
    run_id: str | None = None
    private_to: str | None = None  # the agent whose private session it belongs to


class ExportedEpisode(BaseModel):
    memory_id: uuid.UUID
    session_id: str
    summary: str
    importance: int
    happened_at: datetime
    source_message_ids: list[str]


class ExportedNote(BaseModel):
    memory_id: uuid.UUID
    session_id: str
    text: str
    happened_at: datetime
    source_message_ids: list[str]


class ExportedForgotten(BaseModel):
    memory_id: uuid.UUID
    memory_kind: str
    state: Literal["forgotten", "swept"]
    forgotten_at: datetime
    restorable_until: datetime | None  # None once swept
    actor: str
    # In grace: what the memory held, from its events (payload fields, e.g. namespace, key and
    # value of a fact, or an episode's summary). Swept: nothing is left to show.
    content: list[dict[str, Any]]


class SubjectExport(BaseModel):
    format: str = FORMAT
    tenant_id: str
    subject_id: str
    exported_at: datetime
    erased: bool
    facts: list[FactRow]  # every interval and the candidate area, in namespace/key/version order
    episodes: list[ExportedEpisode]
    notes: list[ExportedNote]
    entities: list[EntityView] = []
    relations: list[RelationView] = []  # every interval of every edge, current and ended
    tool_calls: list[ToolCall] = []  # the agent's recorded side-effecting calls, with their results
    cited_messages: list[ExportedMessage]  # the evidence every fact, episode, note, entity and relation cites
    forgotten: list[ExportedForgotten]
    erasure_requests: list[ErasureStatus]


async def export_subject(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str, *,
                         grace: timedelta, filters: MemoryFilter = NO_FILTER) -> SubjectExport:
    """Everything held about the subject; `filters` narrows its facts, episodes and notes (kinds,
    fact namespaces, categories, a time range, cited messages' metadata and scope). Entities, relations, tool calls,
    forgotten memories and erasure requests stay whole. A key limited to an app exports the
    memories citing that app's messages."""
    filters = filters.within_key_limits()
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.READ) as scope:
        request_ids = await _erasure_request_ids(scope, keyring.subject_digest(tenant_id, subject_id))
        facts: list[FactRow] = []
        episodes: list[ExportedEpisode] = []
        notes: list[ExportedNote] = []
        entities: list[EntityView] = []
        relations: list[RelationView] = []
        tool_calls: list[ToolCall] = []
        cited: list[ExportedMessage] = []
        forgotten: list[ExportedForgotten] = []
        if not scope.erased:
            facts = await read_facts(scope, include_history=True, include_candidates=True)
            episodes = await _rows(scope.conn, ExportedEpisode,
                                   "SELECT memory_id, session_id, summary, importance, happened_at, source_message_ids "
                                   "FROM episodes WHERE tenant_id = %s AND subject_id = %s ORDER BY happened_at",
                                   (tenant_id, subject_id))
            notes = await _rows(scope.conn, ExportedNote,
                                "SELECT memory_id, session_id, text, happened_at, source_message_ids FROM observations "
                                "WHERE tenant_id = %s AND subject_id = %s ORDER BY happened_at, memory_id",
                                (tenant_id, subject_id))
            if filters != NO_FILTER:
                facts = await matching_items(scope.conn, tenant_id, subject_id, filters,
                                             [f for f in facts if filters.fact_matches(f)],
                                             lambda f: f.evidence_message_ids,
                                             lambda f: fact_line(f.namespace, f.key, f.value), lambda f: f.namespace,
                                             lambda f: f.metadata)
                episodes = await matching_items(scope.conn, tenant_id, subject_id, filters,
                                                [e for e in episodes if filters.wants("episode")
                                                 and filters.in_range(e.happened_at)],
                                                lambda e: e.source_message_ids, lambda e: e.summary)
                notes = await matching_items(scope.conn, tenant_id, subject_id, filters,
                                             [n for n in notes if filters.wants("episode")
                                              and filters.in_range(n.happened_at)],
                                             lambda n: n.source_message_ids, lambda n: n.text)
            entities = await list_entities(scope.conn, tenant_id, subject_id)
            relations = await list_relations(scope.conn, tenant_id, subject_id, history=True)
            tool_calls = await list_tool_calls(scope.conn, keyring, tenant_id, subject_id)
            evidence = sorted({m for f in facts for m in f.evidence_message_ids}
                              | {m for e in episodes for m in e.source_message_ids}
                              | {m for n in notes for m in n.source_message_ids}
                              | {m for e in entities for m in e.mentioned_in}
                              | {m for r in relations for m in r.evidence_message_ids})
            cited = await _rows(scope.conn, ExportedMessage,
                                "SELECT session_id, message_id, role, speaker, content, created_at, metadata, agent_id, app_id, "
                                "run_id, private_to FROM messages "
                                "WHERE tenant_id = %s AND subject_id = %s AND message_id = ANY(%s) "
                                "ORDER BY created_at, session_id, turn_index", (tenant_id, subject_id, evidence))
            forgotten = await _forgotten(scope, keyring, grace)
    receipts = [await erasure_status(pool, keyring, tenant_id, r, subject_id) for r in request_ids]
    return SubjectExport(tenant_id=tenant_id, subject_id=subject_id, exported_at=datetime.now(UTC),
                         erased=scope.erased, facts=facts, episodes=episodes, notes=notes, entities=entities,
                         relations=relations, tool_calls=tool_calls, cited_messages=cited,
                         forgotten=forgotten, erasure_requests=receipts)


RowT = TypeVar("RowT", bound=BaseModel)


async def _rows(conn: psycopg.AsyncConnection, model: type[RowT], query: str, params: tuple[Any, ...]) -> list[RowT]:
    cur: psycopg.AsyncCursor[RowT]
    async with conn.cursor(row_factory=class_row(model)) as cur:
        await cur.execute(query, params)
        return await cur.fetchall()


async def _erasure_request_ids(scope: SubjectScope, digest: str) -> list[str]:
    cur = await scope.conn.execute(
        "SELECT request_id FROM erasure_requests WHERE tenant_id = %s AND (subject_id = %s OR subject_digest = %s) "
        "ORDER BY requested_at", (scope.tenant_id, scope.subject_id, digest))
    return [row[0] for row in await cur.fetchall()]


async def _forgotten(scope: SubjectScope, keyring: KeyRing, grace: timedelta) -> list[ExportedForgotten]:
    rows: list[ForgottenMemory] = await _rows(
        scope.conn, ForgottenMemory,
        "SELECT memory_id, subject_id, memory_kind, version, state, forgotten_at, actor, actor_id, swept_at, residue "
        "FROM forgotten_memories WHERE tenant_id = %s AND subject_id = %s ORDER BY forgotten_at, memory_id",
        (scope.tenant_id, scope.subject_id))
    key = await subject_key(scope.conn, keyring, scope.tenant_id, scope.subject_id, create=False)
    exported = []
    for row in rows:
        content: list[dict[str, Any]] = []
        if row.state == "forgotten" and key is not None:
            events = await read_subject_events(scope.conn, key, memory_id=row.memory_id)
            content = [{"version": e.version, "occurred_at": e.occurred_at.isoformat(),
                        **e.payload.model_dump(mode="json")}
                       for e in events if not isinstance(e.payload, LIFECYCLE_EVENTS)]
        exported.append(ExportedForgotten(
            memory_id=row.memory_id, memory_kind=row.memory_kind, state=row.state, forgotten_at=row.forgotten_at,
            restorable_until=row.forgotten_at + grace if row.state == "forgotten" else None, actor=row.actor,
            content=content))
    return exported
