"""The memory store: event log (source of truth) and its relational projections.

`commit_consolidation` is the single transaction of the write path: events, facts projection,
episode and outbox rows, and the commit's own operation record, all or nothing.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import psycopg
from psycopg.errors import UniqueViolation
from psycopg.rows import class_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from agent_memory.conflicts import Candidate, CurrentFact, normalise_value
from agent_memory.crypto import SubjectKey, event_aad
from agent_memory.db import fetch_one, tenant_transaction
from agent_memory.fact_text import fact_text
from agent_memory.keyring import KeyRing
from agent_memory.lexical import index_item
from agent_memory.models import (
    CommitOutcome,
    ConflictPlan,
    ExtractionResult,
    FactRow,
    ImportanceResult,
    SummaryResult,
)
from agent_memory.operations import ensure_not_erased, record_succeeded, recorded_result, request_hash


class VersionConflictError(Exception):
    """A fact changed since the plan was made: re-read and re-decide."""


FACT_COLUMNS = ("fact_id::text, memory_id::text, tenant_id, subject_id, namespace, key, value, version, valid_from, "
                "valid_to, recorded_at, confidence, claim_type, permanence, source_kind, status, evidence_message_ids")


async def subject_key(conn: psycopg.AsyncConnection, keyring: KeyRing, tenant_id: str, subject_id: str,
                      *, create: bool) -> SubjectKey | None:
    return await keyring.subject_key(conn, tenant_id, subject_id, create=create)


async def current_facts(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str) -> dict[tuple[str, str], CurrentFact]:
    """Active facts with their aggregate's latest version (confirmations bump the version)."""
    cur = await conn.execute(
        """
        SELECT f.namespace, f.key, f.value,
               (SELECT max(e.aggregate_version) FROM memory_events e
                 WHERE e.tenant_id = f.tenant_id AND e.memory_id = f.memory_id) AS version,
               f.claim_type, f.confidence, cardinality(f.evidence_message_ids), f.valid_from
          FROM facts f
         WHERE f.tenant_id = %s AND f.subject_id = %s AND f.status = 'active'
        """, (tenant_id, subject_id))
    return {(row[0], row[1]): CurrentFact(*row) for row in await cur.fetchall()}


async def current_candidates(conn: psycopg.AsyncConnection, tenant_id: str,
                             subject_id: str) -> dict[tuple[str, str, str], Candidate]:
    """The candidate area: held values, by (namespace, key, normalised value)."""
    cur = await conn.execute(
        "SELECT namespace, key, value, evidence_message_ids FROM facts "
        "WHERE tenant_id = %s AND subject_id = %s AND status = 'candidate'", (tenant_id, subject_id))
    return {(ns, k, normalise_value(v)): Candidate(ns, k, v, tuple(ev)) for ns, k, v, ev in await cur.fetchall()}


def candidate_name(namespace: str, key: str, value: str) -> str:
    return f"{namespace}/{key}\x1f{normalise_value(value)}"


async def aggregate_version(conn: psycopg.AsyncConnection, tenant_id: str, memory_id: uuid.UUID) -> int:
    cur = await conn.execute("SELECT coalesce(max(aggregate_version), 0) FROM memory_events "
                             "WHERE tenant_id = %s AND memory_id = %s", (tenant_id, memory_id))
    return int((await fetch_one(cur))[0])


async def append_event(conn: psycopg.AsyncConnection, key: SubjectKey, *, memory_id: uuid.UUID, namespace: str,
                       name: str, event_type: str, version: int, occurred_at: datetime, payload: dict[str, Any],
                       source_message_ids: list[str], extractor: tuple[str, str] | None, operation_id: str,
                       actor: str = "consolidation") -> None:
    # Deterministic event id: a replayed commit cannot append the same event twice.
    event_id = uuid.uuid5(memory_id, f"{version}")
    ciphertext, nonce = key.encrypt(payload, event_aad(key.tenant_id, key.subject_id, event_id, memory_id, version,
                                                       event_type))
    try:
        await conn.execute(
            """
            INSERT INTO memory_events (event_id, tenant_id, subject_id, memory_id, namespace, key_digest, event_type,
                                       payload_ciphertext, payload_nonce, aggregate_version, occurred_at, actor,
                                       source_message_ids, extractor_name, extractor_version, operation_id,
                                       aad_version)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 2)
            """,
            (event_id, key.tenant_id, key.subject_id, memory_id, namespace, key.digest(f"{namespace}/{name}"),
             event_type, ciphertext, nonce, version, occurred_at, actor, source_message_ids,
             extractor[0] if extractor else None, extractor[1] if extractor else None, operation_id))
    except UniqueViolation as exc:
        # Ids and versions only: the name may hold a value, and this message reaches workflow history.
        raise VersionConflictError(f"memory {memory_id} already has version {version}") from exc


async def commit_consolidation(pool: AsyncConnectionPool, keyring: KeyRing, *, tenant_id: str, subject_id: str,
                               session_id: str, operation_id: str, request: dict[str, Any], extraction: ExtractionResult,
                               plan: ConflictPlan, importance: ImportanceResult, summary: SummaryResult,
                               happened_at: datetime, through: datetime | None = None) -> CommitOutcome:
    req_hash = request_hash(request)
    async with tenant_transaction(pool, tenant_id) as conn:
        await ensure_not_erased(conn, tenant_id, subject_id, keyring.subject_digest(tenant_id, subject_id))
        done = await recorded_result(conn, tenant_id, operation_id, req_hash, CommitOutcome)
        if done is not None:
            return done
        key = await subject_key(conn, keyring, tenant_id, subject_id, create=True)
        assert key is not None  # create=True: the row was just inserted, or was already there
        extractor = (extraction.extractor, extraction.extractor_version)
        events = facts_written = 0
        outbox: list[tuple[uuid.UUID, str, int]] = []
        for decision in plan.decisions:
            fact = extraction.facts[decision.fact_index]
            kind = "candidate" if decision.action == "candidate" else "fact"
            name = candidate_name(decision.namespace, decision.key, fact.value) if kind == "candidate" \
                else f"{decision.namespace}/{decision.key}"
            memory_id = key.memory_id(kind, name)
            current = await aggregate_version(conn, tenant_id, memory_id)
            if kind == "fact" and current != decision.expected_version:
                raise VersionConflictError(f"memory {memory_id}: expected version {decision.expected_version}, "
                                           f"found {current}")
            if kind == "candidate" and current > 0:
                continue  # the same candidate was already recorded by an earlier session
            version = current + 1
            payload = {"namespace": decision.namespace, "key": decision.key, "value": fact.value,
                       "action": decision.action, "reason": decision.reason, "claim_type": fact.claim_type,
                       "permanence": fact.permanence, "confidence": fact.confidence,
                       "valid_until": fact.valid_until.isoformat() if fact.valid_until else None,
                       "session_id": session_id}
            event_type = "MemoryCreated" if version == 1 else "MemoryUpdated"
            evidence = [*decision.promoted_candidate_evidence,
                        *(i for i in fact.evidence_message_ids if i not in decision.promoted_candidate_evidence)]
            await append_event(conn, key, memory_id=memory_id, namespace=decision.namespace, name=name,
                               event_type=event_type, version=version, occurred_at=fact.observed_at, payload=payload,
                               source_message_ids=evidence, extractor=extractor, operation_id=operation_id)
            events += 1
            if decision.promoted_candidate_evidence:
                events += await _close_candidate(conn, key, decision.namespace, decision.key, fact.value,
                                                 fact.observed_at, operation_id)
            if decision.action == "confirm":
                await conn.execute(
                    "UPDATE facts SET evidence_message_ids = evidence_message_ids || %s::text[] "
                    "WHERE tenant_id = %s AND memory_id = %s AND status = 'active'",
                    (fact.evidence_message_ids, tenant_id, memory_id))
                continue
            if decision.action == "supersede":
                await conn.execute(
                    "UPDATE facts SET valid_to = least(valid_to, %s), superseded_at = now(), status = 'closed', "
                    "close_reason = %s WHERE tenant_id = %s AND memory_id = %s AND status = 'active'",
                    (fact.observed_at, decision.reason, tenant_id, memory_id))
            await conn.execute(
                """
                INSERT INTO facts (fact_id, tenant_id, subject_id, memory_id, namespace, key, value, version, status,
                                   valid_from, valid_to, valid_until, confidence, claim_type, permanence, source_kind,
                                   evidence_message_ids, operation_id)
                VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
                ON CONFLICT (tenant_id, memory_id, version) DO NOTHING
                """,
                (uuid.uuid5(memory_id, f"fact-{version}"), tenant_id, subject_id, memory_id, decision.namespace,
                 decision.key, fact.value, version, "candidate" if kind == "candidate" else "active",
                 fact.observed_at, fact.valid_until, fact.valid_until, fact.confidence, fact.claim_type, fact.permanence,
                 "user_statement" if fact.claim_type == "explicit" else "model_inference",
                 evidence, operation_id))
            facts_written += 1
            if kind == "fact":
                await index_item(conn, tenant_id=tenant_id, subject_id=subject_id, memory_id=memory_id, kind="fact",
                                 version=version, text=fact_text(decision.namespace, decision.key, fact.value),
                                 happened_at=fact.observed_at)
            outbox.append((memory_id, "fact", version))
        episode_written = await _write_episode(conn, key, session_id, importance, summary, happened_at,
                                               operation_id)
        if episode_written:
            events += 1
            outbox.append((key.memory_id("episode", session_id), "episode", 1))
        observations = await _write_observations(conn, key, session_id, summary, operation_id)
        events += len(observations)
        outbox += [(memory_id, "observation", 1) for memory_id in observations]
        for memory_id, kind, version in outbox:
            await conn.execute(
                "INSERT INTO projection_outbox (tenant_id, subject_id, memory_id, memory_kind, version, operation_id) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (tenant_id, subject_id, memory_id, kind, version, operation_id))
        outcome = CommitOutcome(operation_id=operation_id, session_id=session_id, through=through,
                                events_appended=events, facts_written=facts_written,
                                episode_written=episode_written, observations_written=len(observations),
                                outbox_rows=len(outbox))
        await record_succeeded(conn, tenant_id=tenant_id, subject_id=subject_id, operation_id=operation_id,
                               kind="commit", req_hash=req_hash, result=outcome)
    return outcome


async def _close_candidate(conn: psycopg.AsyncConnection, key: SubjectKey, namespace: str, fact_key: str,
                           value: str, closed_at: datetime, operation_id: str) -> int:
    """A promoted candidate leaves the candidate area (its evidence now backs the current fact)."""
    name = candidate_name(namespace, fact_key, value)
    memory_id = key.memory_id("candidate", name)
    version = await aggregate_version(conn, key.tenant_id, memory_id)
    if version == 0:
        return 0
    await append_event(conn, key, memory_id=memory_id, namespace=namespace, name=name, event_type="MemoryClosed",
                       version=version + 1, occurred_at=closed_at, payload={"reason": "promoted to current fact"},
                       source_message_ids=[], extractor=None, operation_id=operation_id)
    await conn.execute(
        "UPDATE facts SET status = 'promoted', valid_to = %s, superseded_at = now(), close_reason = %s "
        "WHERE tenant_id = %s AND memory_id = %s AND status = 'candidate'",
        (closed_at, "promoted to current fact", key.tenant_id, memory_id))
    return 1


async def _write_episode(conn: psycopg.AsyncConnection, key: SubjectKey, session_id: str,
                         importance: ImportanceResult, summary: SummaryResult, happened_at: datetime,
                         operation_id: str) -> bool:
    """The session's episode, once (an episode is written by the first commit of its session)."""
    memory_id = key.memory_id("episode", session_id)
    if not summary.sentences or await aggregate_version(conn, key.tenant_id, memory_id) > 0:
        return False
    source_ids = sorted({mid for s in summary.sentences for mid in s.source_message_ids})
    sentences = [s.model_dump() for s in summary.sentences]
    payload = {"summary": summary.text, "importance": importance.importance, "session_id": session_id,
               "sentences": sentences}
    await append_event(conn, key, memory_id=memory_id, namespace="episode", name=session_id,
                       event_type="MemoryCreated", version=1, occurred_at=happened_at, payload=payload,
                       source_message_ids=source_ids, extractor=None, operation_id=operation_id)
    await conn.execute(
        """
        INSERT INTO episodes (memory_id, tenant_id, subject_id, session_id, version, summary, sentences, importance,
                              happened_at, source_message_ids, operation_id)
        VALUES (%s, %s, %s, %s, 1, %s, %s, %s, %s, %s, %s)
        ON CONFLICT (memory_id) DO NOTHING
        """,
        (memory_id, key.tenant_id, key.subject_id, session_id, summary.text, Jsonb(sentences),
         importance.importance, happened_at, source_ids, operation_id))
    await index_item(conn, tenant_id=key.tenant_id, subject_id=key.subject_id, memory_id=memory_id, kind="episode",
                     version=1, text=summary.text, happened_at=happened_at)
    return True


async def _write_observations(conn: psycopg.AsyncConnection, key: SubjectKey, session_id: str,
                              summary: SummaryResult, operation_id: str) -> list[uuid.UUID]:
    """One observation per noted message, each once; returns the ids written now."""
    written: list[uuid.UUID] = []
    for note in summary.observations:
        message_id = note.source_message_ids[0]
        memory_id = key.memory_id("observation", f"{session_id}\x1f{message_id}")
        if await aggregate_version(conn, key.tenant_id, memory_id) > 0:
            continue
        await append_event(conn, key, memory_id=memory_id, namespace="observation", name=f"{session_id}/{message_id}",
                           event_type="MemoryCreated", version=1, occurred_at=note.happened_at,
                           payload={"text": note.text, "answers": note.answers, "session_id": session_id},
                           source_message_ids=note.source_message_ids, extractor=None, operation_id=operation_id)
        await conn.execute(
            """
            INSERT INTO observations (memory_id, tenant_id, subject_id, session_id, message_id, text, happened_at,
                                      source_message_ids, operation_id)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
            ON CONFLICT (memory_id) DO NOTHING
            """,
            (memory_id, key.tenant_id, key.subject_id, session_id, message_id, note.text, note.happened_at,
             note.source_message_ids, operation_id))
        await index_item(conn, tenant_id=key.tenant_id, subject_id=key.subject_id, memory_id=memory_id,
                         kind="observation", version=1, text=note.text, hint=note.answers,
                         happened_at=note.happened_at)
        written.append(memory_id)
    return written


async def list_facts(pool: AsyncConnectionPool, tenant_id: str, subject_id: str, *, as_of: datetime | None = None,
                     include_history: bool = False, include_candidates: bool = False) -> list[FactRow]:
    """Current facts, or those valid at `as_of`, or every interval with `include_history`."""
    # An erased subject shows nothing, even while its erasure is still deleting.
    where = ["tenant_id = %s", "subject_id = %s",
             "NOT EXISTS (SELECT 1 FROM tombstones t WHERE t.tenant_id = facts.tenant_id "
             "AND t.subject_id = facts.subject_id)"]
    params: list[Any] = [tenant_id, subject_id]
    statuses = ["active", "closed"] if include_history or as_of else ["active"]
    if include_candidates:
        statuses += ["candidate", "promoted"]
    where.append("status = ANY(%s)")
    params.append(statuses)
    if not include_history:
        # Valid time: what was true at `as_of` (default now); a temporary fact ends at valid_to.
        where.append("valid_from <= coalesce(%s::timestamptz, now()) AND (valid_to IS NULL OR valid_to > coalesce(%s::timestamptz, now()))")
        params += [as_of, as_of]
    query = f"SELECT {FACT_COLUMNS} FROM facts WHERE {' AND '.join(where)} ORDER BY namespace, key, version"
    async with tenant_transaction(pool, tenant_id) as conn:
        async with conn.cursor(row_factory=class_row(FactRow)) as cur:
            await cur.execute(query, params)
            return await cur.fetchall()
