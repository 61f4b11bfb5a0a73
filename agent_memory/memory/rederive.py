"""Re-derivation: a session's stored evidence read again by the current extractor, and the
differences with the subject's facts applied as ordinary memory events.

When the extractor improves, the facts an older version wrote stay as they were. A re-derivation
takes a consolidated session, the current extractor's recorded extraction of its messages (the
consolidation's own `extract_facts` step, so a model's answer is recorded before anything is
written from it), and compares it with the current facts:

- **added**: a key the session states that the subject has never had a value of (no event of
  that fact at all, not forgotten): a `FactCreated` event.
- **changed**: this session's statement opened the current value (later sessions may have
  said it again) and the current extractor reads another one: a `FactCorrected` event (the old
  value was an extraction mistake, so it is voided and the new one holds from the voided
  interval's start).
- **unsupported**: a current value this session opened that the current extractor no longer
  finds there (or reads differently where another session set the value): listed, never ended.
  Whether a value is wrong or merely phrased beyond the new extractor cannot be told from one
  extraction; an operator who agrees forgets it (`agent-memory forget`).
- **kept_confirmed**: a value a person (or an agent or app) wrote or confirmed directly: any
  live-write event of the fact protects it. Listed, never changed.
- **withheld**: the tenant's write policy keeps the new value out (a namespace not stored, a
  consent missing, a key whose new values wait for a confirmation or a second session).

Only permanent, explicit statements confident enough to be current are compared: temporary and
task-local facts belong to their session's own consolidation, an inference or a low-confidence
reading would only wait in the candidate area, and a session private to an agent adds nothing to
the shared profile. A key whose value was ended, corrected away or forgotten is left as it is. A
value that another session's statement opened is not this session's to correct.

Each session's re-derivation is one transaction recorded in the operations ledger under its
request (`RederiveKey`): the differences (a dry run writes no event) or the differences and the
events that applied them. A retried activity or a resumed run finds the record and does nothing
again; the record also says which sessions the current extractor has re-derived.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from agent_memory.core.fact_text import normalise_value
from agent_memory.core.models import (
    ExtractedFact,
    ExtractionResult,
    RederiveChange,
    RederiveChangeKind,
    SessionRederive,
    SubjectRederive,
)
from agent_memory.core.operation_keys import RederiveKey, Versioned, request_hash
from agent_memory.memory.conflicts import MIN_CURRENT_CONFIDENCE
from agent_memory.memory.events import (
    LIVE_WRITE,
    FactCorrected,
    FactCreated,
    MemoryEvent,
    VersionConflictError,
    memory_version,
)
from agent_memory.memory.forgotten import forgotten_state
from agent_memory.memory.memory_store import record_event, session_private_to
from agent_memory.memory.operations import record_succeeded, recorded_result
from agent_memory.memory.write_policy import WritePolicy, active_consents, read_write_policy
from agent_memory.security.crypto import SubjectKey
from agent_memory.security.keyring import KeyRing
from agent_memory.store.db import tenant_transaction
from agent_memory.store.scope import Mode, subject_scope

log = logging.getLogger(__name__)
# A comparison whose events meet a concurrent writer's (a consolidation committing meanwhile) is
# made again from the start, at most this often.
CONFLICT_ROUNDS = 5
REDERIVE_REASON = "re-derived: the current extractor reads the session's messages so"


def extractor_tag(extractor: Versioned) -> str:
    """How a fact names its writer (`extracted_by`): "rule-extractor/9"."""
    return f"{extractor.name}/{extractor.version}"


async def sessions_to_rederive(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str,
                               extractor: Versioned, *, all_sessions: bool = False) -> list[str]:
    """The subject's consolidated sessions that the current extractor has not re-derived and whose
    consolidation wrote facts with another extractor (an older version, another model); with
    `all_sessions`, every consolidated session (those whose consolidation found no fact too)."""
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.READ) as scope:
        if scope.erased:
            return []
        cur = await scope.conn.execute(
            """
            SELECT o.session_id FROM operations o
             WHERE o.tenant_id = %(t)s AND o.subject_id = %(s)s AND o.kind = 'commit' AND o.status = 'succeeded'
               AND o.session_id IS NOT NULL
             GROUP BY o.session_id
            HAVING %(all)s OR (
                   bool_or(EXISTS (
                       SELECT 1 FROM memory_events e
                        WHERE e.tenant_id = %(t)s AND e.subject_id = %(s)s AND e.operation_id = o.operation_id AND e.extractor_name IS NOT NULL
                          AND e.extractor_name <> %(live)s
                          AND (e.extractor_name, coalesce(e.extractor_version, '')) <> (%(name)s, %(version)s)))
               AND NOT EXISTS (
                       SELECT 1 FROM operations r
                        WHERE r.tenant_id = %(t)s AND r.subject_id = %(s)s AND r.kind = 'rederive'
                          AND r.status = 'succeeded' AND r.session_id = o.session_id
                          AND r.model = %(name)s AND r.model_version = %(version)s))
             ORDER BY o.session_id
            """, {"t": tenant_id, "s": subject_id, "all": all_sessions, "live": LIVE_WRITE[0],
                  "name": extractor.name, "version": extractor.version})
        return [row[0] for row in await cur.fetchall()]


class _Current(BaseModel):
    namespace: str
    key: str
    value: str
    memory_id: uuid.UUID
    valid_from: datetime
    evidence_message_ids: list[str]
    opened_by: list[str]

    def opened_in(self, said: set[str]) -> bool:
        """Whether this session's statement opened the value (other sessions may have said it since)."""
        return bool(self.opened_by) and set(self.opened_by) <= said


def _derived_values(extraction: ExtractionResult) -> dict[tuple[str, str], ExtractedFact]:
    """The value the session leaves each permanent key at: its last explicit statement of the key
    that a consolidation would make current (states said in order: "from Hangzhou to Shanghai"
    leaves Shanghai)."""
    last: dict[tuple[str, str], tuple[datetime, int, ExtractedFact]] = {}
    for index, fact in enumerate(extraction.facts):
        if fact.operation == "end" or fact.permanence != "permanent" or not fact.value.strip():
            continue
        if fact.claim_type != "explicit" or fact.confidence < MIN_CURRENT_CONFIDENCE:
            continue  # a consolidation would only hold it as a candidate
        name = (fact.namespace, fact.key)
        if name not in last or (fact.observed_at, index) >= last[name][:2]:
            last[name] = (fact.observed_at, index, fact)
    return {name: fact for name, (_, _, fact) in last.items()}


def _gate(policy: WritePolicy, consents: dict[str, str], namespace: str, key: str) -> str | None:
    """Why the tenant's write policy keeps a new value of the key out, if it does."""
    reason = policy.withheld_reason(namespace, consents)
    if reason is not None:
        return reason
    if policy.needs_confirmation(namespace, key):
        return "confirm_keys: a new value waits for a confirmation"
    if policy.needs_corroboration(namespace, key):
        return "corroborate_keys: a new value waits for a second session"
    return None


async def differences(conn: psycopg.AsyncConnection, skey: SubjectKey, session_id: str,
                      extraction: ExtractionResult, policy: WritePolicy,
                      consents: dict[str, str]) -> list[RederiveChange]:
    """The session's facts against its extraction by the current extractor (the module's rules),
    read in the caller's transaction."""
    tenant_id, subject_id = skey.tenant_id, skey.subject_id
    cur = await conn.execute("SELECT message_id FROM messages WHERE tenant_id = %s AND subject_id = %s "
                             "AND session_id = %s", (tenant_id, subject_id, session_id))
    said = {row[0] for row in await cur.fetchall()}
    # A fact any live write touched (a person's, an agent's or an app's value or confirmation).
    cur = await conn.execute("SELECT DISTINCT memory_id FROM memory_events WHERE tenant_id = %s AND subject_id = %s "
                             "AND extractor_name = %s", (tenant_id, subject_id, LIVE_WRITE[0]))
    protected = {row[0] for row in await cur.fetchall()}
    async with conn.cursor(row_factory=class_row(_Current)) as rows:
        # The messages whose statement opened each current value: its opening event's (later
        # sessions that said it again only add evidence).
        await rows.execute(
            "SELECT f.namespace, f.key, f.value, f.memory_id, f.valid_from, f.evidence_message_ids, "
            "coalesce(e.source_message_ids, '{}') AS opened_by FROM facts f "
            "LEFT JOIN memory_events e ON e.tenant_id = f.tenant_id AND e.memory_id = f.memory_id "
            "AND e.aggregate_version = f.version "
            "WHERE f.tenant_id = %s AND f.subject_id = %s AND f.status = 'active' AND f.valid_to IS NULL "
            "AND f.permanence = 'permanent'", (tenant_id, subject_id))
        current = {(f.namespace, f.key): f for f in await rows.fetchall()}
    derived = _derived_values(extraction)

    def change(kind: RederiveChangeKind, namespace: str, key: str, memory_id: uuid.UUID, *,
               now: _Current | None, new: ExtractedFact | None, reason: str) -> RederiveChange:
        return RederiveChange(change=kind, namespace=namespace, key=key, memory_id=str(memory_id),
                              current_value=now.value if now else None, derived_value=new.value if new else None,
                              reason=reason)

    changes: list[RederiveChange] = []
    for (namespace, key), fact in sorted(derived.items()):
        memory_id = skey.memory_id("fact", f"{namespace}/{key}")
        now = current.get((namespace, key))
        gate = _gate(policy, consents, namespace, key)
        if now is None:
            if await memory_version(conn, tenant_id, memory_id) > 0 or \
                    await forgotten_state(conn, tenant_id, memory_id) is not None:
                continue  # ended, corrected away or forgotten: its history stands
            changes.append(change("withheld" if gate else "added", namespace, key, memory_id, now=None, new=fact,
                                  reason=gate or "a key the session states, with no value yet"))
            continue
        if normalise_value(now.value) == normalise_value(fact.value):
            continue
        if not set(now.evidence_message_ids) & said:
            continue  # another session's value: not this session's to correct
        if now.memory_id in protected:
            changes.append(change("kept_confirmed", namespace, key, memory_id, now=now, new=fact,
                                  reason="written or confirmed directly: never changed by a re-derivation"))
        elif not now.opened_in(said):
            changes.append(change("unsupported", namespace, key, memory_id, now=now, new=fact,
                                  reason="read differently here; the value was set by another session"))
        elif gate:
            changes.append(change("withheld", namespace, key, memory_id, now=now, new=fact, reason=gate))
        else:
            changes.append(change("changed", namespace, key, memory_id, now=now, new=fact,
                                  reason="the session's value, extracted again"))
    for (namespace, key), now in sorted(current.items()):
        if (namespace, key) in derived or not now.opened_in(said):
            continue
        if now.memory_id in protected:
            changes.append(change("kept_confirmed", namespace, key, now.memory_id, now=now, new=None,
                                  reason="written or confirmed directly: never changed by a re-derivation"))
        else:
            changes.append(change("unsupported", namespace, key, now.memory_id, now=now, new=None,
                                  reason="learned from this session, which the current extractor no longer reads so"))
    return changes


async def _change_events(conn: psycopg.AsyncConnection, skey: SubjectKey, session_id: str,
                         extraction: ExtractionResult, changes: list[RederiveChange], operation_id: str,
                         policy: WritePolicy, consents: dict[str, str]) -> list[MemoryEvent]:
    """The events that apply the added and changed values (nothing else is written)."""
    derived = _derived_values(extraction)
    events: list[MemoryEvent] = []
    for c in changes:
        if c.change not in ("added", "changed"):
            continue
        fact = derived[(c.namespace, c.key)]
        memory_id = uuid.UUID(c.memory_id)
        fields: dict[str, Any] = {
            "namespace": c.namespace, "key": c.key, "value": fact.value, "claim_type": fact.claim_type,
            "permanence": fact.permanence, "confidence": fact.confidence, "valid_until": fact.valid_until,
            "session_id": session_id, "reason": REDERIVE_REASON}
        occurred_at = fact.observed_at
        payload: FactCreated | FactCorrected
        if c.change == "changed":
            cur = await conn.execute("SELECT valid_from FROM facts WHERE tenant_id = %s AND memory_id = %s "
                                     "AND status = 'active'", (skey.tenant_id, memory_id))
            row = await cur.fetchone()
            corrects_from: datetime = row[0] if row else fact.observed_at
            occurred_at = max(occurred_at, corrects_from)
            payload = FactCorrected.model_validate({**fields, "corrects_from": corrects_from})
        else:
            payload = FactCreated.model_validate(fields)
        version = await memory_version(conn, skey.tenant_id, memory_id)
        events.append(MemoryEvent(
            memory_id=memory_id, version=version + 1, namespace=c.namespace, name=f"{c.namespace}/{c.key}",
            occurred_at=occurred_at, source_message_ids=tuple(fact.evidence_message_ids), operation_id=operation_id,
            actor="operator", extractor=(extraction.extractor, extraction.extractor_version),
            consent_id=policy.consent_for(c.namespace, consents), payload=payload))
    return events


async def rederive_session(pool: AsyncConnectionPool, keyring: KeyRing, *, tenant_id: str, subject_id: str,
                           session_id: str, request_id: str, extraction_operation_id: str,
                           extraction: ExtractionResult, dry_run: bool) -> tuple[str, SessionRederive, bool]:
    """One session's differences (and, unless `dry_run`, their events), recorded once under the
    request: (operation id, record, whether it was recorded already)."""
    key = RederiveKey(request_id, subject_id, session_id, extraction.extractor, extraction.extractor_version,
                      dry_run)
    req_hash = request_hash({"request": request_id, "session": session_id, "extraction": extraction_operation_id,
                             "dry_run": dry_run})
    for _ in range(CONFLICT_ROUNDS - 1):
        try:
            return await _rederive_once(pool, keyring, key, req_hash, tenant_id, subject_id, session_id, extraction,
                                        dry_run)
        except VersionConflictError:  # another writer changed a fact meanwhile: compare again
            log.info("facts of %s changed during its re-derivation: comparing again", session_id)
    return await _rederive_once(pool, keyring, key, req_hash, tenant_id, subject_id, session_id, extraction, dry_run)


async def _rederive_once(pool: AsyncConnectionPool, keyring: KeyRing, key: RederiveKey, req_hash: str,
                         tenant_id: str, subject_id: str, session_id: str, extraction: ExtractionResult,
                         dry_run: bool) -> tuple[str, SessionRederive, bool]:
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.WRITE) as scope:
        conn = scope.conn
        done = await recorded_result(conn, tenant_id, key, req_hash, SessionRederive)
        if done is not None:
            return key.operation_id, done, True
        record = SessionRederive(subject_id=subject_id, session_id=session_id,
                                 extractor=f"{extraction.extractor}/{extraction.extractor_version}",
                                 dry_run=dry_run, changes=[])
        skey = await keyring.subject_key(conn, tenant_id, subject_id, create=False)
        # A subject without a key has no memory to compare; a session private to an agent adds
        # nothing to the shared profile (as in its consolidation).
        if skey is not None and await session_private_to(conn, tenant_id, subject_id, session_id) is None:
            policy = await read_write_policy(conn, tenant_id)
            consents = await active_consents(conn, tenant_id, subject_id)
            record.changes = await differences(conn, skey, session_id, extraction, policy, consents)
            if not dry_run:
                for event in await _change_events(conn, skey, session_id, extraction, record.changes,
                                                  key.operation_id, policy, consents):
                    await record_event(conn, skey, event)
                    record.events_appended += 1
        await record_succeeded(conn, tenant_id=tenant_id, subject_id=subject_id, key=key, req_hash=req_hash,
                               result=record)
    return key.operation_id, record, False


async def rederive_report(pool: AsyncConnectionPool, tenant_id: str, request_id: str,
                          dry_run: bool) -> list[SubjectRederive]:
    """A request's differences per subject, read from its sessions' records (an erased subject's
    are gone with it)."""
    kind = "rederive-dry" if dry_run else "rederive"
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            "SELECT subject_id, result FROM operations WHERE tenant_id = %s AND kind = %s AND key_digest = %s "
            "AND status = 'succeeded' ORDER BY subject_id, session_id", (tenant_id, kind, request_id))
        rows = await cur.fetchall()
    subjects: dict[str, SubjectRederive] = {}
    for subject_id, result in rows:
        record = SessionRederive.model_validate(result)
        entry = subjects.setdefault(subject_id, SubjectRederive(subject_id=subject_id, sessions=[]))
        entry.sessions.append(record.session_id)
        for c in record.changes:
            getattr(entry, c.change).append(c)
    return list(subjects.values())
