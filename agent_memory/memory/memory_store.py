"""The memory store: decisions become events, events are recorded (appended and applied).

`commit_consolidation` is the single transaction of the write path: it decides the events of a
consolidation, records each with `record_event` (append to the log + `apply.apply_event`), and
records the commit's own operation, all or nothing. Live writes (corrections.py) record their
events the same way; nothing else writes a projection row.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import class_row, kwargs_row
from psycopg_pool import AsyncConnectionPool

from agent_memory.core.fact_text import normalise_value
from agent_memory.core.models import (
    CommitOutcome,
    ConflictPlan,
    ExtractedFact,
    ExtractionResult,
    FactAction,
    FactDecision,
    FactRow,
    ImportanceResult,
    SummaryResult,
)
from agent_memory.core.operation_keys import CommitKey, LiveWriteKey, OperationKey
from agent_memory.core.relations import with_subject_entity
from agent_memory.memory.apply import apply_event
from agent_memory.memory.conflicts import Candidate, CurrentFact, arrival
from agent_memory.memory.entities import entity_events
from agent_memory.memory.events import (
    CandidateHeld,
    CandidatePromoted,
    EntityNoted,
    EpisodeCreated,
    EventPayload,
    FactConfirmed,
    FactCorrected,
    FactCreated,
    FactEnded,
    FactSuperseded,
    MemoryEvent,
    ObservationCreated,
    RelationClosed,
    RelationNoted,
    VersionConflictError,
    append_event,
    memory_version,
)
from agent_memory.memory.forgotten import forgotten_state, writable_version
from agent_memory.memory.operations import record_succeeded, recorded_result, request_hash
from agent_memory.memory.relations import relation_events
from agent_memory.memory.substance import GATED_COUNTER, EpisodeGate
from agent_memory.memory.webhooks import enqueue_consolidation_completed, enqueue_memory_event
from agent_memory.memory.write_policy import active_consents, count_withheld, read_write_policy
from agent_memory.security.crypto import SubjectKey
from agent_memory.security.keyring import KeyRing
from agent_memory.store.counters import add_counts_in
from agent_memory.store.scope import Mode, SubjectScope, subject_scope

log = logging.getLogger(__name__)
FORGOTTEN = "forgotten"  # a withheld reason: a new value of a forgotten memory

FACT_COLUMNS = ("fact_id::text, memory_id::text, tenant_id, subject_id, namespace, key, value, "
                "memory_version AS version, version AS interval_version, valid_from, valid_to, recorded_at, "
                "confidence, claim_type, permanence, task_session_id, source_kind, status, evidence_message_ids, metadata, "
                "last_confirmed_at, extracted_by, "
                # The review's marks in force on this interval (memory/stale_marks.py IN_FORCE, by interval).
                "ARRAY(SELECT s.reason FROM stale_marks s WHERE s.tenant_id = facts.tenant_id "
                "AND s.fact_id = facts.fact_id AND s.state = 'open' AND facts.status IN ('active', 'candidate') "
                "AND (s.reason <> 'stale' OR s.confirmed_at = facts.last_confirmed_at) ORDER BY s.reason) "
                "AS stale_reasons")


async def subject_key(conn: psycopg.AsyncConnection, keyring: KeyRing, tenant_id: str, subject_id: str,
                      *, create: bool) -> SubjectKey | None:
    return await keyring.subject_key(conn, tenant_id, subject_id, create=create)


def _current_fact(*, evidence_created: list[datetime], evidence_recorded: list[datetime], recorded_at: datetime,
                  written_live: bool, **fields: Any) -> CurrentFact:
    arrivals = [arrival(c, r) for c, r in zip(evidence_created, evidence_recorded, strict=True)]
    if written_live or not arrivals:
        # A live write is a statement of its own, received when it was recorded (the messages it
        # cites came earlier); a value whose messages are gone (retention) arrived by then too.
        arrivals.append(arrival(fields["observed_at"], recorded_at))
    return CurrentFact(**fields, received_at=max(arrivals))


async def current_facts(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str) -> dict[tuple[str, str], CurrentFact]:
    """Active facts with their memory's version (the one a conditional write expects) and where
    their newest evidence stands in the order of receipt (conflicts.arrival)."""
    async with conn.cursor(row_factory=kwargs_row(_current_fact)) as cur:
        # Evidence ids name messages of the subject (any session); one join over the unnested ids,
        # not a scan of the subject's messages per fact.
        await cur.execute(
            """
            SELECT f.namespace, f.key, f.value, f.memory_version AS version, f.claim_type, f.confidence,
                   cardinality(f.evidence_message_ids) AS evidence_count, f.valid_from AS observed_at,
                   f.recorded_at, f.operation_id LIKE %s AS written_live,
                   coalesce(array_agg(m.created_at) FILTER (WHERE m.message_id IS NOT NULL), '{}') AS evidence_created,
                   coalesce(array_agg(m.recorded_at) FILTER (WHERE m.message_id IS NOT NULL), '{}') AS evidence_recorded
              FROM facts f
              LEFT JOIN LATERAL unnest(f.evidence_message_ids) AS e(message_id) ON true
              LEFT JOIN messages m ON m.tenant_id = f.tenant_id AND m.subject_id = f.subject_id
                                  AND m.message_id = e.message_id
             WHERE f.tenant_id = %s AND f.subject_id = %s AND f.status = 'active'
             GROUP BY f.fact_id
            """, (f"{LiveWriteKey.prefix}/%", tenant_id, subject_id))
        return {(f.namespace, f.key): f for f in await cur.fetchall()}


async def evidence_arrivals(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, session_id: str,
                            message_ids: list[str]) -> dict[str, datetime]:
    """Where each of the session's messages named stands in the order of receipt (conflicts.arrival),
    by message id: what `decide` ranks the session's statements by."""
    cur = await conn.execute(
        "SELECT message_id, created_at, recorded_at FROM messages WHERE tenant_id = %s AND subject_id = %s "
        "AND session_id = %s AND message_id = ANY(%s)", (tenant_id, subject_id, session_id, message_ids))
    return {message_id: arrival(created, recorded) for message_id, created, recorded in await cur.fetchall()}


async def ended_fact_versions(conn: psycopg.AsyncConnection, tenant_id: str,
                              subject_id: str) -> dict[tuple[str, str], int]:
    """Facts that exist but have no current value (ended, or every value corrected away): their
    memory's version, which a new value of the key must expect."""
    cur = await conn.execute(
        """
        SELECT namespace, key, max(memory_version) FROM facts
         WHERE tenant_id = %s AND subject_id = %s AND status IN ('active', 'closed', 'voided')
         GROUP BY namespace, key, memory_id
        HAVING NOT bool_or(status = 'active')
        """, (tenant_id, subject_id))
    return {(ns, k): int(v) for ns, k, v in await cur.fetchall()}


def _candidate(*, namespace: str, key: str, value: str, evidence_message_ids: list[str]) -> Candidate:
    return Candidate(namespace, key, value, tuple(evidence_message_ids))


async def current_candidates(conn: psycopg.AsyncConnection, tenant_id: str,
                             subject_id: str) -> dict[tuple[str, str, str], Candidate]:
    """The candidate area: held values, by (namespace, key, normalised value)."""
    async with conn.cursor(row_factory=kwargs_row(_candidate)) as cur:
        await cur.execute(
            "SELECT namespace, key, value, evidence_message_ids FROM facts "
            "WHERE tenant_id = %s AND subject_id = %s AND status = 'candidate'", (tenant_id, subject_id))
        return {(c.namespace, c.key, normalise_value(c.value)): c for c in await cur.fetchall()}


def candidate_name(namespace: str, key: str, value: str) -> str:
    return f"{namespace}/{key}\x1f{normalise_value(value)}"


async def record_event(conn: psycopg.AsyncConnection, key: SubjectKey, event: MemoryEvent) -> MemoryEvent:
    """The write path of memory: append the event, then apply it to every projection; returns
    the event as recorded.

    Nothing is recorded as happening after the transaction that records it: a later
    occurred_at (a statement dated in the future that got past ingest) is clamped to the
    transaction time, so no interval closes, and none opens, at a future date and the key keeps
    a value valid now. The log holds the clamped time, so a rebuild replays the same intervals."""
    cur = await conn.execute("SELECT now()")
    row = await cur.fetchone()
    now: datetime = row[0] if row else event.occurred_at
    if event.occurred_at > now:
        log.warning("memory %s v%d: occurred_at %s is after the transaction time; recorded at %s",
                    event.memory_id, event.version, event.occurred_at.isoformat(), now.isoformat())
        event = replace(event, occurred_at=now)
    if isinstance(event.payload, FactCorrected) and event.payload.corrects_from > now:
        event = replace(event, payload=event.payload.model_copy(update={"corrects_from": now}))
    await append_event(conn, key, event)
    await apply_event(conn, key.tenant_id, key.subject_id, event)
    # The tenant's webhooks hear of it (memory/webhooks.py), in this transaction: an outbox.
    await enqueue_memory_event(conn, key.tenant_id, key.subject_id, event)
    return event


_FACT_EVENT: dict[FactAction, type[FactCreated | FactSuperseded | FactConfirmed | FactCorrected | CandidateHeld]] = {
    "create": FactCreated, "promote": FactCreated, "supersede": FactSuperseded, "confirm": FactConfirmed,
    "candidate": CandidateHeld, "correct": FactCorrected}


async def _fact_payload(conn: psycopg.AsyncConnection, memory_id: uuid.UUID, decision: FactDecision,
                        fact: ExtractedFact, session_id: str) -> EventPayload:
    if decision.action == "end":
        return FactEnded(namespace=decision.namespace, key=decision.key, value=decision.value,
                         session_id=session_id, reason=decision.reason, voided=decision.voided)
    fields: dict[str, Any] = {
        "namespace": decision.namespace, "key": decision.key, "value": fact.value, "reason": decision.reason,
        "claim_type": fact.claim_type, "permanence": fact.permanence, "confidence": fact.confidence,
        "valid_until": fact.valid_until, "session_id": session_id}
    if decision.action == "promote":
        fields["promoted"] = True
    if decision.action == "correct":
        # The corrected value holds from when the voided one was said to hold.
        cur = await conn.execute("SELECT valid_from FROM facts WHERE memory_id = %s AND status = 'active'",
                                 (memory_id,))
        row = await cur.fetchone()
        fields["corrects_from"] = row[0] if row else fact.observed_at
    return _FACT_EVENT[decision.action].model_validate(fields)


async def decide_fact_events(conn: psycopg.AsyncConnection, key: SubjectKey, *, session_id: str,
                             operation_id: str, extraction: ExtractionResult, plan: ConflictPlan,
                             actor: str = "consolidation",
                             withheld: dict[str, int] | None = None) -> AsyncIterator[MemoryEvent]:
    """The events a conflict plan makes, each checked against the memory's version as it is
    now (VersionConflictError if a fact moved since the plan). Yielded one at a time: each is
    recorded before the next is decided, so two decisions on one memory see each other. The
    write gate runs here, in the commit's transaction: a fact of a namespace the tenant's write
    policy does not store, or stores only under a consent the subject has not given, is
    withheld (counted in `withheld` by reason), as is a new value of a forgotten memory."""
    extractor = (extraction.extractor, extraction.extractor_version)
    policy = await read_write_policy(conn, key.tenant_id)
    consents = await active_consents(conn, key.tenant_id, key.subject_id)
    kept_out: dict[str, int] = {} if withheld is None else withheld
    for decision in plan.decisions:
        fact = extraction.facts[decision.fact_index]
        # Only what stores a value is gated: an end (a retraction) always goes through.
        gate = None if decision.action == "end" else policy.withheld_reason(decision.namespace, consents)
        if gate is not None:
            kept_out[gate] = kept_out.get(gate, 0) + 1
            continue
        candidate = decision.action == "candidate"
        name = candidate_name(decision.namespace, decision.key, fact.value) if candidate \
            else f"{decision.namespace}/{decision.key}"
        memory_id = key.memory_id("candidate" if candidate else "fact", name)
        current = await memory_version(conn, key.tenant_id, memory_id)
        # A candidate of a forgotten fact is held back as the fact is (its value is the fact's).
        forgotten = await forgotten_state(conn, key.tenant_id, memory_id) or (
            await forgotten_state(conn, key.tenant_id, key.memory_id("fact", f"{decision.namespace}/{decision.key}"))
            if candidate else None)
        expected = writable_version(forgotten, decision.expected_version, fact.observed_at)
        if expected is None:
            # Ids only in the log line: the value is user content.
            log.info("held back a value of forgotten memory %s (session %s)", memory_id, session_id)
            kept_out[FORGOTTEN] = kept_out.get(FORGOTTEN, 0) + 1
            continue
        if not candidate and current != expected:
            raise VersionConflictError(f"memory {memory_id}: expected version {expected}, found {current}")
        if candidate and current > 0:
            continue  # the same candidate was already recorded by an earlier session
        evidence = list(dict.fromkeys([*decision.promoted_candidate_evidence, *fact.evidence_message_ids]))
        if decision.action == "confirm":
            # A restatement already on record (its session consolidated again) is not evidence twice.
            on_record = await _active_evidence(conn, key.tenant_id, memory_id)
            evidence = [i for i in evidence if i not in on_record]
        yield MemoryEvent(memory_id=memory_id, version=current + 1, namespace=decision.namespace, name=name,
                          occurred_at=fact.observed_at, source_message_ids=tuple(evidence),
                          operation_id=operation_id, actor=actor, extractor=extractor,
                          consent_id=policy.consent_for(decision.namespace, consents),
                          payload=await _fact_payload(conn, memory_id, decision, fact, session_id))
        if decision.promoted_candidate_evidence:
            promoted = await promoted_candidate_event(conn, key, decision.namespace, decision.key, fact.value,
                                                 fact.observed_at, operation_id)
            if promoted is not None:
                yield promoted


async def _active_evidence(conn: psycopg.AsyncConnection, tenant_id: str, memory_id: uuid.UUID) -> set[str]:
    cur = await conn.execute("SELECT evidence_message_ids FROM facts WHERE tenant_id = %s AND memory_id = %s "
                             "AND status = 'active'", (tenant_id, memory_id))
    row = await cur.fetchone()
    return set(row[0]) if row else set()


async def promoted_candidate_event(conn: psycopg.AsyncConnection, key: SubjectKey, namespace: str, fact_key: str,
                              value: str, closed_at: datetime, operation_id: str) -> MemoryEvent | None:
    """A promoted candidate leaves the candidate area (its evidence now backs the current fact)."""
    name = candidate_name(namespace, fact_key, value)
    memory_id = key.memory_id("candidate", name)
    version = await memory_version(conn, key.tenant_id, memory_id)
    if version == 0:
        return None
    return MemoryEvent(memory_id=memory_id, version=version + 1, namespace=namespace, name=name,
                       occurred_at=closed_at, source_message_ids=(), operation_id=operation_id,
                       payload=CandidatePromoted(namespace=namespace, key=fact_key,
                                                 reason="promoted to current fact"))


async def session_private_to(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                             session_id: str) -> str | None:
    """The agent the session is private to (None: shared)."""
    cur = await conn.execute("SELECT private_to FROM sessions WHERE tenant_id = %s AND subject_id = %s "
                             "AND session_id = %s", (tenant_id, subject_id, session_id))
    row = await cur.fetchone()
    return None if row is None else row[0]


async def _episode_event(conn: psycopg.AsyncConnection, key: SubjectKey, session_id: str,
                         importance: ImportanceResult, summary: SummaryResult, happened_at: datetime,
                         operation_id: str, private_to: str | None) -> MemoryEvent | None:
    """The session's episode, once (an episode is written by the first commit of its session)."""
    memory_id = key.memory_id("episode", session_id)
    if not summary.sentences or await memory_version(conn, key.tenant_id, memory_id) > 0:
        return None
    source_ids = sorted({mid for s in summary.sentences for mid in s.source_message_ids})
    return MemoryEvent(memory_id=memory_id, version=1, namespace="episode", name=session_id, occurred_at=happened_at,
                       source_message_ids=tuple(source_ids), operation_id=operation_id,
                       payload=EpisodeCreated(summary=summary.text, importance=importance.importance,
                                              session_id=session_id, private_to=private_to,
                                              sentences=[s.model_dump() for s in summary.sentences]))


async def _observation_events(conn: psycopg.AsyncConnection, key: SubjectKey, session_id: str,
                              summary: SummaryResult, operation_id: str, private_to: str | None) -> list[MemoryEvent]:
    """One observation per noted message, each once."""
    events: list[MemoryEvent] = []
    for note in summary.observations:
        message_id = note.source_message_ids[0]
        memory_id = key.memory_id("observation", f"{session_id}\x1f{message_id}")
        if await memory_version(conn, key.tenant_id, memory_id) > 0:
            continue
        events.append(MemoryEvent(memory_id=memory_id, version=1, namespace="observation",
                                  name=f"{session_id}/{message_id}", occurred_at=note.happened_at,
                                  source_message_ids=tuple(note.source_message_ids), operation_id=operation_id,
                                  payload=ObservationCreated(text=note.text, answers=note.answers,
                                                             session_id=session_id, private_to=private_to)))
    return events


async def _count_gated(conn: psycopg.AsyncConnection, key: SubjectKey, session_id: str, reason: str) -> None:
    """Count a session the substance gate kept from an episode (`agent-memory stats`), once: at the
    commit of its first gated summary, when it has no episode. In the commit's transaction, so a
    retried commit counts nothing twice."""
    if await memory_version(conn, key.tenant_id, key.memory_id("episode", session_id)) > 0:
        return
    cur = await conn.execute(
        "SELECT count(*) FROM operations WHERE tenant_id = %s AND subject_id = %s AND session_id = %s "
        "AND kind = 'summary' AND model = %s AND status = 'succeeded'",
        (key.tenant_id, key.subject_id, session_id, EpisodeGate.name))
    row = await cur.fetchone()
    if row is not None and row[0] == 1:  # this commit's own gated summary, no earlier one
        await add_counts_in(conn, key.tenant_id, {f"{GATED_COUNTER}:{reason}": 1})


def _outcome(operation_id: str, session_id: str, through: datetime | None,
             events: list[MemoryEvent], withheld: dict[str, int]) -> CommitOutcome:
    kinds = [type(e.payload) for e in events]
    facts = sum(k in (FactCreated, FactSuperseded, FactCorrected, CandidateHeld) for k in kinds)
    episodes = kinds.count(EpisodeCreated)
    observations = kinds.count(ObservationCreated)
    return CommitOutcome(operation_id=operation_id, session_id=session_id, through=through,
                         events_appended=len(events), facts_written=facts, episode_written=episodes > 0,
                         observations_written=observations, entities_noted=kinds.count(EntityNoted),
                         relations_noted=kinds.count(RelationNoted) + kinds.count(RelationClosed),
                         outbox_rows=facts + episodes + observations, withheld=withheld)


async def commit_events(pool: AsyncConnectionPool, keyring: KeyRing, *, tenant_id: str, subject_id: str,
                        key: OperationKey, request: dict[str, Any],
                        decide: Callable[[psycopg.AsyncConnection, SubjectKey], AsyncIterator[MemoryEvent]],
                        outcome: Callable[[list[MemoryEvent]], CommitOutcome],
                        completed: Callable[[psycopg.AsyncConnection, CommitOutcome, list[MemoryEvent]],
                                            Awaitable[Any]] | None = None,
                        committed: Callable[[CommitOutcome], None] | None = None) -> CommitOutcome:
    """The write path's one transaction, for every writer: the subject's write scope, the
    recorded outcome of this operation if there is one (a retry returns it), else the events
    `decide` yields, each recorded (appended + applied) before the next is decided, `completed`
    (what else the commit writes about itself) and the operation's own record. `committed` is
    called with the outcome once this call's transaction has committed (never for a retry that
    found the outcome recorded)."""
    req_hash = request_hash(request)
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.WRITE) as scope:
        done = await recorded_result(scope.conn, tenant_id, key, req_hash, CommitOutcome)
        if done is not None:
            return done
        skey = await subject_key(scope.conn, keyring, tenant_id, subject_id, create=True)
        assert skey is not None  # create=True: the row was just inserted, or was already there
        recorded: list[MemoryEvent] = []
        async for event in decide(scope.conn, skey):
            recorded.append(await record_event(scope.conn, skey, event))
        result = outcome(recorded)
        if completed is not None:
            await completed(scope.conn, result, recorded)
        await record_succeeded(scope.conn, tenant_id=tenant_id, subject_id=subject_id, key=key, req_hash=req_hash,
                               result=result)
    if committed is not None:
        committed(result)
    return result


async def commit_consolidation(pool: AsyncConnectionPool, keyring: KeyRing, *, tenant_id: str, subject_id: str,
                               session_id: str, key: CommitKey, request: dict[str, Any], extraction: ExtractionResult,
                               plan: ConflictPlan, importance: ImportanceResult, summary: SummaryResult,
                               happened_at: datetime, through: datetime | None = None,
                               written_at: Mapping[str, datetime] | None = None,
                               committed: Callable[[CommitOutcome], None] | None = None) -> CommitOutcome:
    """A consolidation's commit: its facts' events as planned, then the session's episode,
    observations, the entities it mentions and the edges between them it states (commit_events:
    one transaction, recorded once; `committed` as there)."""
    operation_id = key.operation_id
    withheld: dict[str, int] = {}

    async def decide(conn: psycopg.AsyncConnection, skey: SubjectKey) -> AsyncIterator[MemoryEvent]:
        withheld.clear()  # a retried transaction decides again from the start
        private_to = await session_private_to(conn, tenant_id, subject_id, session_id)
        if private_to is None:  # the profile and the entity graph are shared: a private session adds to neither
            async for event in decide_fact_events(conn, skey, session_id=session_id, operation_id=operation_id,
                                                  extraction=extraction, plan=plan, withheld=withheld):
                yield event
            # What another person sharing the account said about themselves: never the subject's.
            for reason, n in extraction.withheld.items():
                withheld[reason] = withheld.get(reason, 0) + n
            await count_withheld(conn, skey.tenant_id, withheld)
        episode = await _episode_event(conn, skey, session_id, importance, summary, happened_at, operation_id,
                                       private_to)
        if episode is not None:
            yield episode
        elif summary.gated is not None:
            await _count_gated(conn, skey, session_id, summary.gated)
        for event in await _observation_events(conn, skey, session_id, summary, operation_id, private_to):
            yield event
        if private_to is not None:
            return
        entities = with_subject_entity(extraction.entities, extraction.relations)
        for event in await entity_events(conn, skey, session_id=session_id, extracted=entities,
                                         happened_at=happened_at, operation_id=operation_id, written_at=written_at):
            yield event
        async for event in relation_events(conn, skey, session_id=session_id, relations=extraction.relations,
                                           entities=entities, operation_id=operation_id):
            yield event

    async def completed(conn: psycopg.AsyncConnection, result: CommitOutcome, recorded: list[MemoryEvent]) -> None:
        await enqueue_consolidation_completed(conn, tenant_id, subject_id, result, recorded)

    return await commit_events(pool, keyring, tenant_id=tenant_id, subject_id=subject_id, key=key, request=request,
                               decide=decide,
                               outcome=lambda recorded: _outcome(operation_id, session_id, through, recorded,
                                                                 dict(withheld)),
                               completed=completed, committed=committed)


async def list_facts(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str, *,
                     as_of: datetime | None = None, include_history: bool = False,
                     include_candidates: bool = False) -> list[FactRow]:
    """Current facts, or those valid at `as_of`, or every interval with `include_history`."""
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.READ) as scope:
        return await read_facts(scope, as_of=as_of, include_history=include_history,
                                include_candidates=include_candidates)


async def read_facts(scope: SubjectScope, *, as_of: datetime | None = None, include_history: bool = False,
                     include_candidates: bool = False) -> list[FactRow]:
    """`list_facts` inside an open READ scope."""
    if scope.erased:  # an erased subject shows nothing, even while its erasure is still deleting
        return []
    where = ["tenant_id = %s", "subject_id = %s"]
    params: list[Any] = [scope.tenant_id, scope.subject_id]
    # History shows voided values too (what was said and corrected); no as-of read returns them
    # (their interval is empty).
    statuses = ["active", "closed", "voided"] if include_history else ["active", "closed"] if as_of else ["active"]
    if include_candidates:
        statuses += ["candidate", "promoted"]
    where.append("status = ANY(%s)")
    params.append(statuses)
    if not include_history:
        # Valid time: what was true at `as_of` (default now); a temporary fact ends at valid_to.
        where.append("valid_from <= coalesce(%s::timestamptz, now()) AND (valid_to IS NULL OR valid_to > coalesce(%s::timestamptz, now()))")
        params += [as_of, as_of]
    query = f"SELECT {FACT_COLUMNS} FROM facts WHERE {' AND '.join(where)} ORDER BY namespace, key, interval_version"
    async with scope.conn.cursor(row_factory=class_row(FactRow)) as cur:
        await cur.execute(query, params)
        return await cur.fetchall()
