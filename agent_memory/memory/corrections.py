"""Live writes: a user (or an agent on the user's behalf) states a fact directly, outside a
consolidation, with an expected-version condition.

A live write is one event (`FactCreated`, or `FactSuperseded` when a fact exists) recorded
through the same `record_event` as a consolidation's (append to the log + apply to every
projection), so it is versioned, replayable and erasable like any other memory. The version it
expects is the one every read model shows (`FactRow.version`); a consolidation planned against
the old version fails its commit with a version conflict, re-reads and re-decides.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Literal

import psycopg
from psycopg_pool import AsyncConnectionPool

from agent_memory.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from agent_memory.core.models import (
    METADATA_MAX_KEYS,
    CommitOutcome,
    ExtractedFact,
    MetadataValue,
    check_identifier,
    check_metadata,
)
from agent_memory.core.operation_keys import LiveWriteKey
from agent_memory.memory.events import (
    LIVE_WRITE,
    FactCreated,
    FactSuperseded,
    MemoryEvent,
    VersionConflictError,
    memory_version,
)
from agent_memory.memory.forgotten import forgotten_state, writable_version
from agent_memory.memory.memory_store import commit_events, promoted_candidate_event
from agent_memory.memory.operations import request_hash
from agent_memory.memory.stale_marks import resolution_events
from agent_memory.memory.write_policy import NAMESPACE_NOT_ALLOWED, NO_CONSENT, active_consents, read_write_policy
from agent_memory.security.crypto import SubjectKey
from agent_memory.security.keyring import KeyRing

LIVE_SESSION = "live-write"
LIVE_REASON = "live write: the user stated it directly"


# How long a fact written with an expiry may hold: from a minute to ten years.
TTL_MIN_SECONDS = 60
TTL_MAX_SECONDS = 10 * 365 * 24 * 3600

LiveActor = Literal["user", "agent", "operator"]
_REFUSALS = {
    NAMESPACE_NOT_ALLOWED: "namespace {namespace!r} is not stored in this tenant (its write policy's "
                           "stored_namespaces): nothing was written",
    NO_CONSENT: "namespace {namespace!r} is stored only with the subject's consent: record it first "
                "(agent-memory consent grant) — nothing was written"}


class MemoryForgottenError(Conflict):
    """A live write of a fact an operator forgot (in its grace period)."""


class WriteRefusedError(Forbidden):
    """The tenant's write policy does not let this fact be stored (namespace, consent)."""


class CandidateNotFoundError(NotFound):
    """No candidate of this id for the subject."""


def fact_expiry(observed: datetime, expires_at: datetime | None, ttl_seconds: int | None) -> datetime | None:
    """The end a writer gives a fact ("remember this for a week"): `expires_at`, or `ttl_seconds`
    after `observed`; None for a fact that holds until it changes. InvalidInput names the field."""
    if expires_at is not None and ttl_seconds is not None:
        raise InvalidInput("expires_at, ttl_seconds: give one of them (or neither, for a fact that holds until "
                           "it changes), not both")
    if ttl_seconds is not None:
        if not TTL_MIN_SECONDS <= ttl_seconds <= TTL_MAX_SECONDS:
            raise InvalidInput(f"ttl_seconds: {ttl_seconds} is outside {TTL_MIN_SECONDS} (a minute) to "
                               f"{TTL_MAX_SECONDS} (ten years)")
        return observed + timedelta(seconds=ttl_seconds)
    if expires_at is None:
        return None
    if expires_at.tzinfo is None:
        raise InvalidInput(f"expires_at: {expires_at.isoformat()} has no UTC offset: send e.g. 2024-05-08T09:00:00Z")
    if expires_at <= observed:
        raise InvalidInput(f"expires_at: {expires_at.isoformat()} is not after observed_at {observed.isoformat()}: "
                           "a fact must hold for a while before it expires")
    if expires_at - observed > timedelta(seconds=TTL_MAX_SECONDS):
        raise InvalidInput(f"expires_at: {expires_at.isoformat()} is more than ten years after observed_at "
                           f"{observed.isoformat()}")
    return expires_at


async def write_fact(pool: AsyncConnectionPool, keyring: KeyRing, *, tenant_id: str, subject_id: str,
                     namespace: str, key: str, value: str, expected_version: int,
                     evidence_message_ids: list[str], observed_at: datetime | None = None,
                     expires_at: datetime | None = None, ttl_seconds: int | None = None,
                     actor: LiveActor = "user", actor_id: str | None = None,
                     metadata: dict[str, MetadataValue] | None = None) -> CommitOutcome:
    """Set namespace/key to value if the fact is still at expected_version (0: no fact yet);
    else VersionConflictError. With the same observed_at, repeating a write returns the recorded
    outcome; without one, a repeat finds the version moved on and conflicts — never a duplicate.

    With an expiry (`expires_at`, or `ttl_seconds` after observed_at) the fact is temporary: it
    ends then, and from that moment no read returns it (facts, recall, context, prompt); the
    memory sweep later forgets it under the tenant's retention of temporary facts. `metadata`
    (bounded like a message's) is stored on the version it writes."""
    check_identifier("tenant", tenant_id)
    metadata = check_metadata("metadata", dict(metadata or {}))
    if len(metadata) > METADATA_MAX_KEYS:
        raise InvalidInput(f"metadata has {len(metadata)} keys: use at most {METADATA_MAX_KEYS}")
    check_identifier("subject", subject_id)
    if not namespace.strip() or not key.strip():
        raise InvalidInput("namespace and key must not be empty: name the fact, e.g. namespace 'location', key 'home_city'")
    if not value.strip():
        raise InvalidInput("value is empty: to end a fact, erase or supersede it with a new value")
    if not evidence_message_ids:
        raise InvalidInput("evidence_message_ids is empty: cite the message in which the user said it")
    if expected_version < 0:
        raise InvalidInput("expected_version is negative: pass 0 for a new fact, or the version a read returned")
    observed = observed_at or datetime.now(UTC)
    expiry = fact_expiry(observed, expires_at, ttl_seconds)
    # The extraction model's validation: namespace, key and value limits, evidence ids.
    fact = ExtractedFact(namespace=namespace, key=key, value=value, claim_type="explicit", confidence=1.0,
                         permanence="permanent" if expiry is None else "temporary", valid_until=expiry,
                         evidence_message_ids=evidence_message_ids, observed_at=observed)
    request = {"namespace": namespace, "key": key, "value": value, "expected_version": expected_version,
               "evidence": evidence_message_ids, "observed_at": observed.isoformat(), "subject": subject_id,
               **({"expires_at": expiry.isoformat()} if expiry is not None else {}),
               **({"actor": actor, "actor_id": actor_id} if actor != "user" or actor_id else {}),
               **({"metadata": metadata} if metadata else {})}
    op = LiveWriteKey.for_request_hash(request_hash(request))
    name = f"{namespace}/{key}"

    async def decide(conn: psycopg.AsyncConnection, skey: SubjectKey) -> AsyncIterator[MemoryEvent]:
        policy = await read_write_policy(conn, tenant_id)
        consents = await active_consents(conn, tenant_id, subject_id)
        if (gate := policy.withheld_reason(namespace, consents)) is not None:
            raise WriteRefusedError(_REFUSALS[gate].format(namespace=namespace))
        memory_id = skey.memory_id("fact", name)
        current = await memory_version(conn, tenant_id, memory_id)
        expected = writable_version(await forgotten_state(conn, tenant_id, memory_id), expected_version, observed)
        if expected is None:
            raise MemoryForgottenError(f"fact {namespace}/{key} (memory {memory_id}) is forgotten: restore it "
                                       "(agent-memory restore) or wait for the sweeper before writing it again")
        if current != expected:
            raise VersionConflictError(f"memory {memory_id}: expected version {expected_version}, found {current}")
        fields = {"namespace": fact.namespace, "key": fact.key, "value": fact.value, "claim_type": fact.claim_type,
                  "permanence": fact.permanence, "confidence": fact.confidence, "valid_until": fact.valid_until,
                  "session_id": LIVE_SESSION, "reason": LIVE_REASON, "metadata": metadata}
        yield MemoryEvent(memory_id=memory_id, version=current + 1, namespace=namespace, name=name,
                          occurred_at=observed, source_message_ids=tuple(evidence_message_ids),
                          operation_id=op.operation_id, actor=actor, actor_id=actor_id,
                          consent_id=policy.consent_for(namespace, consents), extractor=LIVE_WRITE,
                          payload=(FactCreated if expected_version == 0 else FactSuperseded).model_validate(fields))
        # A correction resolves the review's marks of the fact it corrects (memory/stale_marks.py).
        async for resolved in resolution_events(conn, tenant_id, subject_id, memory_id, "correct",
                                                occurred_at=observed, operation_id=op.operation_id, actor=actor,
                                                actor_id=actor_id):
            yield resolved

    return await commit_events(
        pool, keyring, tenant_id=tenant_id, subject_id=subject_id, key=op, request=request, decide=decide,
        outcome=lambda recorded: CommitOutcome(operation_id=op.operation_id, session_id=LIVE_SESSION,
                                               events_appended=len(recorded), facts_written=1,
                                               episode_written=False, outbox_rows=1))


async def confirm_candidate(pool: AsyncConnectionPool, keyring: KeyRing, *, tenant_id: str, subject_id: str,
                            candidate_memory_id: str, actor: LiveActor = "user",
                            actor_id: str | None = None) -> CommitOutcome:
    """Confirm a value waiting in the candidate area (a sensitive key's new value, an
    inference): it becomes the current fact — superseding the current value, if any — and
    leaves the candidate area. Confirming the same candidate again returns the recorded outcome."""
    try:
        candidate_id = uuid.UUID(candidate_memory_id)
    except ValueError:
        raise InvalidInput(f"candidate id {candidate_memory_id[:80]!r} is not a UUID: pass a memory_id of "
                           "`facts --candidates --json` whose status is candidate") from None
    request = {"confirm": str(candidate_id), "subject": subject_id}
    op = LiveWriteKey.for_request_hash(request_hash(request))

    async def decide(conn: psycopg.AsyncConnection, skey: SubjectKey) -> AsyncIterator[MemoryEvent]:
        cur = await conn.execute(
            "SELECT namespace, key, value, permanence, valid_until, evidence_message_ids FROM facts "
            "WHERE tenant_id = %s AND subject_id = %s AND memory_id = %s AND status = 'candidate'",
            (tenant_id, subject_id, candidate_id))
        row = await cur.fetchone()
        if row is None:
            raise CandidateNotFoundError(f"no candidate {candidate_id} of subject {subject_id!r}: "
                                         "`agent-memory facts --candidates --json` lists the candidate area")
        namespace, key, value, permanence, valid_until, evidence = row
        # The write gate as it is now: a consent revoked (or a namespace dropped) since the
        # candidate was held refuses its confirmation.
        policy = await read_write_policy(conn, tenant_id)
        consents = await active_consents(conn, tenant_id, subject_id)
        if (gate := policy.withheld_reason(namespace, consents)) is not None:
            raise WriteRefusedError(_REFUSALS[gate].format(namespace=namespace))
        name = f"{namespace}/{key}"
        memory_id = skey.memory_id("fact", name)
        now = datetime.now(UTC)
        current = await memory_version(conn, tenant_id, memory_id)
        if writable_version(await forgotten_state(conn, tenant_id, memory_id), current, now) is None:
            raise MemoryForgottenError(f"fact {name} (memory {memory_id}) is forgotten: restore it first")
        cur = await conn.execute("SELECT 1 FROM facts WHERE tenant_id = %s AND memory_id = %s AND status = 'active'",
                                 (tenant_id, memory_id))
        active = await cur.fetchone() is not None
        fields = {"namespace": namespace, "key": key, "value": value, "claim_type": "explicit",
                  "permanence": permanence, "confidence": 1.0, "valid_until": valid_until,
                  "session_id": LIVE_SESSION, "reason": "confirmed: the candidate becomes the current value"}
        if not active:
            fields["promoted"] = True
        yield MemoryEvent(memory_id=memory_id, version=current + 1, namespace=namespace, name=name, occurred_at=now,
                          source_message_ids=tuple(evidence), operation_id=op.operation_id, actor=actor,
                          actor_id=actor_id, consent_id=policy.consent_for(namespace, consents),
                          extractor=LIVE_WRITE,
                          payload=(FactSuperseded if active else FactCreated).model_validate(fields))
        promoted = await promoted_candidate_event(conn, skey, namespace, key, value, now, op.operation_id)
        if promoted is not None:
            yield promoted

    return await commit_events(
        pool, keyring, tenant_id=tenant_id, subject_id=subject_id, key=op, request=request, decide=decide,
        outcome=lambda recorded: CommitOutcome(operation_id=op.operation_id, session_id=LIVE_SESSION,
                                               events_appended=len(recorded), facts_written=1,
                                               episode_written=False, outbox_rows=1))
