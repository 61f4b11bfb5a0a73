"""What the memory console reads (agent_memory.api.console): read-only queries, each in one tenant's
transaction as the application role, so row-level security scopes every read to that tenant.

Tenants are listed from the tables of tenant ids only (migrations 009 and 033), the one listing
a transaction with no tenant set may make; everything else is read tenant by tenant, and a
subject's rows inside its READ scope (an erased subject reads as erased, never half-erased).
Writes are not made here: the console's actions go through MemoryClient.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel
from temporalio.client import Client, ScheduleActionExecutionStartWorkflow
from temporalio.service import RPCError, RPCStatusCode

from agent_memory.api.limits import BUDGET_MAX_TOKENS, BUDGET_MIN_TOKENS, QUERY_MAX_CHARS
from agent_memory.core import contract
from agent_memory.core.errors import InvalidInput, NotFound
from agent_memory.core.models import FactRow, check_identifier, storable_text
from agent_memory.lifecycle.forgetting import ForgottenMemory
from agent_memory.memory.events import LIFECYCLE_EVENTS, read_subject_events
from agent_memory.memory.memory_store import read_facts, subject_key
from agent_memory.recall.context import AssembledContext, assemble_context
from agent_memory.security.keyring import KeyRing
from agent_memory.store.db import registered_tenants, tenant_transaction
from agent_memory.store.scope import Mode, SubjectScope, subject_scope

if TYPE_CHECKING:
    from agent_memory.api.client import MemoryClient

RowT = TypeVar("RowT", bound=BaseModel)
# Rows a page lists at most (the newest first); the page says when there are more.
PAGE_ROWS = 200


class SubjectSummary(BaseModel):
    subject_id: str
    sessions: int
    facts: int
    candidates: int
    forgotten: int
    last_message_at: datetime | None


class SessionSummary(BaseModel):
    session_id: str
    started_at: datetime | None
    messages: int
    last_message_at: datetime | None
    consolidated_through: datetime | None  # the newest successful commit's coverage
    pending: int  # messages no consolidation has covered


class FactView(BaseModel):
    fact: FactRow
    recorded_to: datetime | None  # when a later write superseded this interval (None: still recorded)
    close_reason: str | None
    operation_id: str
    session_id: str | None  # the consolidated session that wrote it (None: a live write)


class EvidenceMessage(BaseModel):
    session_id: str
    message_id: str
    turn_index: int
    role: str
    speaker: str | None
    content: str
    created_at: datetime


class EpisodeRow(BaseModel):
    memory_id: uuid.UUID
    session_id: str
    summary: str
    importance: int
    happened_at: datetime
    source_message_ids: list[str]


class NoteRow(BaseModel):
    memory_id: uuid.UUID
    session_id: str
    text: str
    happened_at: datetime
    source_message_ids: list[str]


class MemoryDetail(BaseModel):
    memory_id: str
    facts: list[FactView]  # every interval of the memory, candidates included
    episode: EpisodeRow | None
    note: NoteRow | None
    forgotten: ForgottenMemory | None
    evidence: list[EvidenceMessage]


class ForgottenView(BaseModel):
    memory: ForgottenMemory
    restorable_until: datetime | None
    content: list[dict[str, Any]]  # what it held, from its events (in grace only)


class ErasureRow(BaseModel):
    request_id: str
    status: str
    requested_at: datetime
    completed_at: datetime | None
    subject_digest: str
    receipt: dict[str, Any] | None
    redrive_count: int


class ScheduleRun(BaseModel):
    workflow_id: str
    started_at: datetime | None
    status: str | None


class ScheduleView(BaseModel):
    schedule_id: str
    exists: bool
    every_seconds: float | None = None
    paused: bool = False
    next_run: datetime | None = None
    recent: list[ScheduleRun] = []


SCHEDULE_IDS = (contract.KEY_ROTATION_SCHEDULE_ID, contract.COMPACTION_SCHEDULE_ID,
                contract.PROJECTION_SWEEP_SCHEDULE_ID, contract.MEMORY_SWEEP_SCHEDULE_ID,
                contract.ERASURE_REDRIVE_SCHEDULE_ID, contract.IDLE_TIMER_SWEEP_SCHEDULE_ID)


async def list_tenants(pool: AsyncConnectionPool) -> list[str]:
    """Every tenant that ever wrote anything (the tenants registry)."""
    return await registered_tenants(pool)


SUBJECTS_SQL = """
WITH subjects AS (
    SELECT subject_id FROM sessions WHERE tenant_id = %(t)s
    UNION SELECT subject_id FROM facts WHERE tenant_id = %(t)s
    UNION SELECT subject_id FROM forgotten_memories WHERE tenant_id = %(t)s AND state = 'forgotten')
SELECT s.subject_id,
       (SELECT count(*) FROM sessions x WHERE x.tenant_id = %(t)s AND x.subject_id = s.subject_id) AS sessions,
       (SELECT count(*) FROM facts f WHERE f.tenant_id = %(t)s AND f.subject_id = s.subject_id
           AND f.status = 'active') AS facts,
       (SELECT count(*) FROM facts f WHERE f.tenant_id = %(t)s AND f.subject_id = s.subject_id
           AND f.status = 'candidate') AS candidates,
       (SELECT count(*) FROM forgotten_memories g WHERE g.tenant_id = %(t)s AND g.subject_id = s.subject_id
           AND g.state = 'forgotten') AS forgotten,
       (SELECT max(m.recorded_at) FROM messages m WHERE m.tenant_id = %(t)s AND m.subject_id = s.subject_id)
           AS last_message_at
  FROM subjects s
 ORDER BY last_message_at DESC NULLS LAST, s.subject_id
 LIMIT %(limit)s
"""


async def list_subjects(pool: AsyncConnectionPool, tenant_id: str, limit: int = PAGE_ROWS) -> list[SubjectSummary]:
    async with tenant_transaction(pool, tenant_id) as conn:
        return await _rows(conn, SubjectSummary, SUBJECTS_SQL, {"t": tenant_id, "limit": limit})


SESSIONS_SQL = """
SELECT s.session_id, s.started_at, c.messages, c.last_message_at, o.through AS consolidated_through,
       (SELECT count(*) FROM messages m WHERE m.tenant_id = s.tenant_id AND m.subject_id = s.subject_id
           AND m.session_id = s.session_id AND m.recorded_at > coalesce(o.through, '-infinity')) AS pending
  FROM sessions s
 CROSS JOIN LATERAL (SELECT count(*) AS messages, max(m.recorded_at) AS last_message_at FROM messages m
                      WHERE m.tenant_id = s.tenant_id AND m.subject_id = s.subject_id
                        AND m.session_id = s.session_id) c
 CROSS JOIN LATERAL (SELECT max((op.result ->> 'through')::timestamptz) AS through FROM operations op
                      WHERE op.tenant_id = s.tenant_id AND op.subject_id = s.subject_id
                        AND op.session_id = s.session_id AND op.kind = 'commit' AND op.status = 'succeeded') o
 WHERE s.tenant_id = %(t)s AND s.subject_id = %(u)s AND (%(s)s::text IS NULL OR s.session_id = %(s)s)
 ORDER BY c.last_message_at DESC NULLS LAST, s.session_id
 LIMIT %(limit)s
"""


class SubjectOverview(BaseModel):
    erased: bool
    sessions: list[SessionSummary]
    episodes: list[EpisodeRow]
    candidates: list[FactView]
    forgotten: list[ForgottenView]
    current_facts: int


async def subject_overview(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str,
                           grace: timedelta) -> SubjectOverview:
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.READ) as scope:
        if scope.erased:
            return SubjectOverview(erased=True, sessions=[], episodes=[], candidates=[], forgotten=[], current_facts=0)
        params = {"t": tenant_id, "u": subject_id, "s": None, "limit": PAGE_ROWS}
        sessions = await _rows(scope.conn, SessionSummary, SESSIONS_SQL, params)
        episodes = await _rows(scope.conn, EpisodeRow,
                               "SELECT memory_id, session_id, summary, importance, happened_at, source_message_ids "
                               "FROM episodes WHERE tenant_id = %(t)s AND subject_id = %(u)s "
                               "ORDER BY happened_at DESC LIMIT %(limit)s", params)
        facts = await read_facts(scope, include_candidates=True)
        candidates = await _fact_views(scope, [f for f in facts if f.status == "candidate"])
        forgotten = await _forgotten(scope, keyring, grace)
        return SubjectOverview(erased=False, sessions=sessions, episodes=episodes, candidates=candidates,
                               forgotten=forgotten, current_facts=sum(f.status == "active" for f in facts))


async def subject_facts(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str, *,
                        as_of: datetime | None, history: bool) -> tuple[bool, list[FactView]]:
    """(erased, the facts valid at `as_of` (default now), or every interval with `history`) —
    the same selection as `agent-memory facts` and /v1/subjects/{id}/facts."""
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.READ) as scope:
        if scope.erased:
            return True, []
        facts = await read_facts(scope, as_of=as_of, include_history=history)
        return False, await _fact_views(scope, facts)


async def session_messages(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str,
                           session_id: str) -> tuple[SessionSummary, list[EvidenceMessage]]:
    check_identifier("session", session_id)
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.READ) as scope:
        found = [] if scope.erased else await _rows(
            scope.conn, SessionSummary, SESSIONS_SQL, {"t": tenant_id, "u": subject_id, "s": session_id, "limit": 1})
        if not found:
            raise NotFound(f"no session {session_id!r} of subject {subject_id!r} in tenant {tenant_id!r}")
        messages = await _rows(scope.conn, EvidenceMessage,
                               "SELECT session_id, message_id, turn_index, role, speaker, content, created_at "
                               "FROM messages WHERE tenant_id = %s AND subject_id = %s AND session_id = %s "
                               "ORDER BY turn_index, created_at, message_id", (tenant_id, subject_id, session_id))
        return found[0], messages


async def memory_detail(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str,
                        memory_id: str) -> MemoryDetail:
    """One memory of the subject: its intervals (a fact), its episode or note, whether it is
    forgotten, and the messages it cites as evidence."""
    try:
        mid = uuid.UUID(memory_id)
    except ValueError:
        raise InvalidInput(f"memory id {memory_id!r} is not a memory id (a UUID, as the facts page links it)") from None
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.READ) as scope:
        if scope.erased:
            raise NotFound(f"subject {subject_id!r} of tenant {tenant_id!r} was erased: its memories are gone")
        facts = [f for f in await read_facts(scope, include_history=True, include_candidates=True)
                 if f.memory_id == str(mid)]
        params = (tenant_id, subject_id, mid)
        episodes = await _rows(scope.conn, EpisodeRow,
                               "SELECT memory_id, session_id, summary, importance, happened_at, source_message_ids "
                               "FROM episodes WHERE tenant_id = %s AND subject_id = %s AND memory_id = %s", params)
        notes = await _rows(scope.conn, NoteRow,
                            "SELECT memory_id, session_id, text, happened_at, source_message_ids FROM observations "
                            "WHERE tenant_id = %s AND subject_id = %s AND memory_id = %s", params)
        forgotten = await _rows(scope.conn, ForgottenMemory,
                                "SELECT memory_id, subject_id, memory_kind, version, state, forgotten_at, actor, "
                                "actor_id, swept_at, residue FROM forgotten_memories "
                                "WHERE tenant_id = %s AND subject_id = %s AND memory_id = %s", params)
        if not (facts or episodes or notes or forgotten):
            raise NotFound(f"no memory {memory_id!r} of subject {subject_id!r} in tenant {tenant_id!r}")
        cited = sorted({m for f in facts for m in f.evidence_message_ids}
                       | {m for e in episodes for m in e.source_message_ids}
                       | {m for n in notes for m in n.source_message_ids})
        evidence = await _rows(scope.conn, EvidenceMessage,
                               "SELECT session_id, message_id, turn_index, role, speaker, content, created_at "
                               "FROM messages WHERE tenant_id = %s AND subject_id = %s AND message_id = ANY(%s) "
                               "ORDER BY created_at, session_id, turn_index", (tenant_id, subject_id, cited))
        return MemoryDetail(memory_id=str(mid), facts=await _fact_views(scope, facts),
                            episode=episodes[0] if episodes else None, note=notes[0] if notes else None,
                            forgotten=forgotten[0] if forgotten else None, evidence=evidence)


async def erasure_requests(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str,
                           limit: int = PAGE_ROWS) -> list[ErasureRow]:
    """The tenant's erasure requests, newest first, each subject named by its keyed digest only."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            "SELECT request_id, status, requested_at, completed_at, subject_id, subject_digest, receipt, redrive_count "
            "FROM erasure_requests WHERE tenant_id = %s ORDER BY requested_at DESC LIMIT %s", (tenant_id, limit))
        rows = await cur.fetchall()
    return [ErasureRow(request_id=r, status=status, requested_at=requested, completed_at=completed,
                       subject_digest=digest or keyring.subject_digest(tenant_id, subject),
                       receipt={k: v for k, v in receipt.items() if k != "subject_id"} if receipt else None,
                       redrive_count=redrives)
            for r, status, requested, completed, subject, digest, receipt, redrives in rows]


async def erasure_workflow_id(pool: AsyncConnectionPool, temporal: Client, tenant_id: str,
                              request_id: str) -> str:
    """The erasure run of a request: named by the request's subject while it is kept in clear,
    else found among the tenant's erasure runs in Temporal's visibility store."""
    check_identifier("request id", request_id)
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute("SELECT subject_id FROM erasure_requests WHERE tenant_id = %s AND request_id = %s",
                                 (tenant_id, request_id))
        row = await cur.fetchone()
    if row is None:
        raise NotFound(f"no erasure request {request_id!r} in tenant {tenant_id!r}")
    if row[0] is not None:
        return contract.erasure_workflow_id(tenant_id, row[0], request_id)
    query = f"TenantId = '{tenant_id}' AND WorkflowType = '{contract.ERASURE_WORKFLOW}'"
    async for run in temporal.list_workflows(query, limit=1000):
        if run.id.startswith(f"erase/{tenant_id}/") and run.id.endswith(f"/{request_id}"):
            return run.id
    raise NotFound(f"the run of erasure request {request_id!r} is no longer in Temporal (past its retention)")


async def describe_schedules(temporal: Client, recent: int = 3) -> list[ScheduleView]:
    """The deployment's Schedules (contract ids) with their latest runs and those runs' status."""
    views = []
    for schedule_id in SCHEDULE_IDS:
        try:
            described = await temporal.get_schedule_handle(schedule_id).describe()
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            views.append(ScheduleView(schedule_id=schedule_id, exists=False))
            continue
        runs = []
        for action in reversed(described.info.recent_actions[-recent:]):
            if not isinstance(action.action, ScheduleActionExecutionStartWorkflow):
                continue
            status = None
            try:
                found = (await temporal.get_workflow_handle(action.action.workflow_id).describe()).status
                status = found.name.lower() if found else None
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise
            runs.append(ScheduleRun(workflow_id=action.action.workflow_id, started_at=action.started_at,
                                    status=status))
        intervals = described.schedule.spec.intervals
        views.append(ScheduleView(
            schedule_id=schedule_id, exists=True, every_seconds=intervals[0].every.total_seconds() if intervals else None,
            paused=described.schedule.state.paused,
            next_run=described.info.next_action_times[0] if described.info.next_action_times else None, recent=runs))
    return views


async def _fact_views(scope: SubjectScope, facts: list[FactRow]) -> list[FactView]:
    """The facts with what FactRow leaves out: when each interval stopped being recorded, why,
    and the operation (so the run) that wrote it."""
    if not facts:
        return []
    cur = await scope.conn.execute(
        "SELECT f.fact_id::text, f.superseded_at, f.close_reason, f.operation_id, o.session_id FROM facts f "
        "LEFT JOIN operations o ON o.tenant_id = f.tenant_id AND o.operation_id = f.operation_id "
        "WHERE f.tenant_id = %s AND f.subject_id = %s AND f.fact_id = ANY(%s::uuid[])",
        (scope.tenant_id, scope.subject_id, [f.fact_id for f in facts]))
    extra = {row[0]: row[1:] for row in await cur.fetchall()}
    views = []
    for fact in facts:
        superseded, reason, operation_id, session_id = extra.get(fact.fact_id, (None, None, "", None))
        views.append(FactView(fact=fact, recorded_to=superseded, close_reason=reason, operation_id=operation_id,
                              session_id=session_id))
    return views


async def _forgotten(scope: SubjectScope, keyring: KeyRing, grace: timedelta) -> list[ForgottenView]:
    rows = await _rows(scope.conn, ForgottenMemory,
                       "SELECT memory_id, subject_id, memory_kind, version, state, forgotten_at, actor, actor_id, "
                       "swept_at, residue FROM forgotten_memories WHERE tenant_id = %s AND subject_id = %s "
                       "AND state = 'forgotten' ORDER BY forgotten_at DESC, memory_id LIMIT %s",
                       (scope.tenant_id, scope.subject_id, PAGE_ROWS))
    key = await subject_key(scope.conn, keyring, scope.tenant_id, scope.subject_id, create=False) if rows else None
    views = []
    for row in rows:
        content: list[dict[str, Any]] = []
        if key is not None:
            events = await read_subject_events(scope.conn, key, memory_id=row.memory_id)
            content = [e.payload.model_dump(mode="json") for e in events if not isinstance(e.payload, LIFECYCLE_EVENTS)]
        views.append(ForgottenView(memory=row, restorable_until=row.forgotten_at + grace, content=content))
    return views


async def _rows(conn: psycopg.AsyncConnection, model: type[RowT], query: str, params: Any) -> list[RowT]:
    async with conn.cursor(row_factory=class_row(model)) as cur:
        await cur.execute(query, params)
        return await cur.fetchall()


async def explained_context(client: MemoryClient, tenant_id: str, subject_id: str, query: str,
                            budget: int | None) -> AssembledContext:
    """The context `query` would get, every item explained and the candidates below the budget
    listed (agent_memory.recall.context). An operator's look records no access: the subject's
    access statistics, which weigh in its ranking, count what agents read."""
    check_identifier("tenant", tenant_id)
    check_identifier("subject", subject_id)
    if not query.strip():
        raise InvalidInput("query is empty: type what an agent would ask, e.g. \"where does she live?\"")
    if len(query) > QUERY_MAX_CHARS:
        raise InvalidInput(f"query: over {QUERY_MAX_CHARS:,} characters; type a shorter question")
    if budget is not None and not BUDGET_MIN_TOKENS <= budget <= BUDGET_MAX_TOKENS:
        raise InvalidInput(f"budget {budget} is out of range: give {BUDGET_MIN_TOKENS} to {BUDGET_MAX_TOKENS} "
                           "tokens, or leave it empty for the tenant's policy")
    try:
        query = storable_text(query)
    except InvalidInput as exc:
        raise InvalidInput(f"query {exc}") from None
    services = client.services
    return await assemble_context(services.pool, services.keyring, client.embedder, tenant_id, subject_id, query,
                                  token_budget=budget, redis=services.redis, explain=True)
