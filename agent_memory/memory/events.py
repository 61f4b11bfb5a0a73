"""The memory event log: typed events, and appending and reading them encrypted.

The log is the only write path of memory: a commit decides, turns its decisions into events,
appends them and applies each with `apply.apply_event` in the same transaction; a rebuild reads
them back with `read_subject_events` and applies them with the same function into scratch tables.

Events written before typed payloads existed (`MemoryCreated` / `MemoryUpdated` / `MemoryClosed`
with an `action` in the payload) are read through `upcast`, so old logs replay unchanged.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

import psycopg
from cryptography.exceptions import InvalidTag
from psycopg.errors import UniqueViolation
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from agent_memory.core.errors import AgentMemoryError, Conflict
from agent_memory.core.models import EntityType, RelationType
from agent_memory.security.crypto import SubjectKey, event_aad


class EventLogError(AgentMemoryError):
    """The subject's event log cannot be replayed (unreadable payload, gap, unknown event)."""


class VersionConflictError(Conflict):
    """A memory changed since the decision was made: re-read and re-decide."""


# The extractor of a value an agent, an app or an operator wrote directly (not extracted).
LIVE_WRITE = ("live-write", "1")


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class _FactFields(_Payload):
    namespace: str
    key: str
    value: str
    claim_type: str
    permanence: str
    confidence: float
    valid_until: datetime | None = None
    session_id: str
    reason: str
    # What the agent or app that wrote it knows about it (a live write's metadata; bounded like a
    # message's, agent_memory.core.models.check_metadata). Empty for an extracted fact.
    metadata: dict[str, Any] = {}


class FactCreated(_FactFields):
    """A fact opens its first interval (`promoted`: from a corroborated candidate)."""

    type: Literal["FactCreated"] = "FactCreated"
    promoted: bool = False


class FactSuperseded(_FactFields):
    """A new value closes the current interval at the new observation and opens the next."""

    type: Literal["FactSuperseded"] = "FactSuperseded"


class FactConfirmed(_FactFields):
    """The current value said again: its evidence grows, no interval opens."""

    type: Literal["FactConfirmed"] = "FactConfirmed"


class FactEnded(_Payload):
    """The fact is no longer true from the event's time, with no new value (a retraction, a
    negation of the current value, a pet that died): its interval closes."""

    type: Literal["FactEnded"] = "FactEnded"
    namespace: str
    key: str
    value: str  # the value that ended
    session_id: str
    reason: str
    # The value was never true under this key (the key was a mistake: a misspelt pet's name, the
    # right name asserted beside it): the interval is voided, not closed, so no as-of read returns it.
    voided: bool = False


class FactCorrected(_FactFields):
    """The current value was never true: its interval is voided, and the corrected value holds
    from the voided interval's start."""

    type: Literal["FactCorrected"] = "FactCorrected"
    corrects_from: datetime


class CandidateHeld(_FactFields):
    """A value too weak to change the current fact, kept in the candidate area."""

    type: Literal["CandidateHeld"] = "CandidateHeld"


class CandidatePromoted(_Payload):
    """A held candidate, corroborated later, leaves the candidate area for the current fact."""

    type: Literal["CandidatePromoted"] = "CandidatePromoted"
    namespace: str
    key: str
    reason: str


class EpisodeCreated(_Payload):
    type: Literal["EpisodeCreated"] = "EpisodeCreated"
    session_id: str
    summary: str
    importance: float
    sentences: list[dict[str, Any]]
    private_to: str | None = None  # the agent a private session belongs to (None: shared)


class ObservationCreated(_Payload):
    type: Literal["ObservationCreated"] = "ObservationCreated"
    session_id: str
    text: str
    answers: str | None = None
    private_to: str | None = None  # the agent a private session belongs to (None: shared)


class EntityNoted(_Payload):
    """A session mentions one of the subject's entities (a person, a pet, a place…): the first
    time, it is created; later, the session's mentions are added and the names it used join the
    aliases. The event's source_message_ids are the session's mentioning messages; the name and
    aliases are the entity's full set after this event (resolved at commit, so applying it reads
    no other memory's rows)."""

    type: Literal["EntityNoted"] = "EntityNoted"
    session_id: str
    name: str
    entity_type: EntityType
    aliases: list[str]
    # When the first of these mentions was written; the event occurs at the last. None: at the event.
    first_mentioned_at: datetime | None = None


class RelationNoted(_Payload):
    """An edge between two of the subject's entities starts to hold at the event's time ("Lin
    works at Acme"): a new interval of the edge opens. The entities are resolved at commit, so
    applying the event reads no other memory's rows."""

    type: Literal["RelationNoted"] = "RelationNoted"
    session_id: str
    source_entity_id: uuid.UUID
    relation: RelationType
    target_entity_id: uuid.UUID
    role: str = ""


class RelationClosed(_Payload):
    """The edge's open interval ends at the event's time: the session said it ended ("ended"),
    or a single-valued relation moved to another target ("replaced")."""

    type: Literal["RelationClosed"] = "RelationClosed"
    session_id: str
    reason: Literal["ended", "replaced"]


class MemoryForgotten(_Payload):
    """An operator (or a retention rule) forgot the memory: it leaves every projection at once;
    a restore within the grace period brings it back, the sweeper removes it for good after."""

    type: Literal["MemoryForgotten"] = "MemoryForgotten"
    memory_kind: Literal["fact", "episode", "observation", "entity", "relation"]
    reason: str | None = None


class MemoryRestored(_Payload):
    """A forgotten memory restored within its grace period: its earlier events apply again."""

    type: Literal["MemoryRestored"] = "MemoryRestored"
    reason: str | None = None


StaleReason = Literal["stale", "contradicted", "duplicate", "candidate_expiring"]
MarkedKind = Literal["fact", "candidate", "observation"]
Resolution = Literal["keep", "correct", "forget", "obsolete"]


class MemoryMarkedStale(_Payload):
    """The review found a memory that may have gone stale (agent_memory/lifecycle/review.py): the
    mark opens, or opens again, on the mark's own aggregate. Ids, a reason code and times only."""

    type: Literal["MemoryMarkedStale"] = "MemoryMarkedStale"
    marked_memory_id: uuid.UUID
    marked_kind: MarkedKind
    fact_id: uuid.UUID | None = None  # the fact interval marked (None for a note)
    reason: StaleReason
    # The memories behind the reason: the contradicting candidates, the earlier near-duplicate note.
    related_memory_ids: list[uuid.UUID] = []
    confirmed_at: datetime | None = None  # the fact's last confirmation the mark was made against


class StaleMarkResolved(_Payload):
    """An operator or the agent resolved the mark (keep, correct, forget), or the review found its
    memory changed since (obsolete)."""

    type: Literal["StaleMarkResolved"] = "StaleMarkResolved"
    resolution: Resolution
    reason: str | None = None


MARK_EVENTS = (MemoryMarkedStale, StaleMarkResolved)
LIFECYCLE_EVENTS = (MemoryForgotten, MemoryRestored)
EventPayload = Annotated[FactCreated | FactSuperseded | FactConfirmed | FactEnded | FactCorrected | CandidateHeld
                         | CandidatePromoted | EpisodeCreated | ObservationCreated | EntityNoted | RelationNoted
                         | RelationClosed | MemoryForgotten | MemoryRestored | MemoryMarkedStale
                         | StaleMarkResolved, Field(discriminator="type")]
FACT_EVENTS = (FactCreated, FactSuperseded, FactConfirmed, FactEnded, FactCorrected, CandidateHeld, CandidatePromoted)
_PAYLOAD: TypeAdapter[EventPayload] = TypeAdapter(EventPayload)
_LEGACY_FACT_ACTIONS = {"create": "FactCreated", "promote": "FactCreated", "supersede": "FactSuperseded",
                        "confirm": "FactConfirmed", "candidate": "CandidateHeld"}


def upcast(event_type: str, namespace: str, payload: dict[str, Any]) -> EventPayload:
    """The typed payload of a stored event, including those written before typed events."""
    if event_type in ("MemoryCreated", "MemoryUpdated", "MemoryClosed"):
        if "action" in payload:
            action = payload["action"]
            if action not in _LEGACY_FACT_ACTIONS:
                raise EventLogError(f"unknown fact action {action!r}")
            payload = {**payload, "type": _LEGACY_FACT_ACTIONS[action], "promoted": action == "promote"}
        elif event_type == "MemoryClosed":
            payload = {**payload, "type": "CandidatePromoted", "namespace": namespace, "key": ""}
        elif namespace == "episode":
            payload = {**payload, "type": "EpisodeCreated"}
        elif namespace == "observation":
            payload = {**payload, "type": "ObservationCreated"}
        else:
            raise EventLogError(f"cannot read a {event_type} event in namespace {namespace!r}")
    elif payload.get("type") != event_type:
        payload = {**payload, "type": event_type}
    try:
        return _PAYLOAD.validate_python(payload)
    except ValidationError as exc:
        # Field names only: the payload holds user content.
        fields = sorted({".".join(map(str, err["loc"])) for err in exc.errors()})
        raise EventLogError(f"a {event_type} event does not match its schema (fields: {', '.join(fields)})") from None


@dataclass(frozen=True)
class MemoryEvent:
    """One event of one memory: the envelope columns and the typed payload."""

    memory_id: uuid.UUID
    version: int  # the memory's version this event makes (1 for the first)
    namespace: str
    occurred_at: datetime
    source_message_ids: tuple[str, ...]
    operation_id: str
    payload: EventPayload
    # The memory's name within the subject (hashed into key_digest; never stored in clear).
    name: str = ""
    actor: str = "consolidation"
    actor_id: str | None = None
    consent_id: str | None = None  # the subject's consent a consent-only namespace was stored under
    # What wrote it: the extractor's name and version, or LIVE_WRITE (clear-text envelope columns:
    # a fact's projection names its writer from them, `apply.written_by`).
    extractor: tuple[str, str] | None = None
    # A lifecycle event (forget, restore) does not know the memory's name: it repeats the
    # memory's stored key digest instead.
    key_digest: str | None = None

    @property
    def event_id(self) -> uuid.UUID:
        # Deterministic: a replayed commit cannot append the same event twice.
        return uuid.uuid5(self.memory_id, f"{self.version}")


async def memory_version(conn: psycopg.AsyncConnection, tenant_id: str, memory_id: uuid.UUID) -> int:
    """The memory's version: its latest event's, or its sweep tombstone's when the sweeper removed
    its events (0: no event yet). A late commit that expects 0 can then never re-create a swept
    episode or note."""
    cur = await conn.execute("SELECT greatest((SELECT max(aggregate_version) FROM memory_events "
                             "WHERE tenant_id = %s AND memory_id = %s), (SELECT greatest(CASE WHEN state = 'swept' "
                             "THEN version END, swept_before_version) FROM forgotten_memories "
                             "WHERE tenant_id = %s AND memory_id = %s), 0)",
                             (tenant_id, memory_id, tenant_id, memory_id))
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def append_event(conn: psycopg.AsyncConnection, key: SubjectKey, event: MemoryEvent) -> None:
    """Append one encrypted event; its (memory, version) is unique, so a concurrent writer that
    decided against the same version makes one of the two fail with VersionConflictError."""
    event_type = event.payload.type
    payload = event.payload.model_dump(mode="json", exclude={"type"})
    ciphertext, nonce = key.encrypt(payload, event_aad(key.tenant_id, key.subject_id, event.event_id,
                                                       event.memory_id, event.version, event_type))
    try:
        await conn.execute(
            """
            INSERT INTO memory_events (event_id, tenant_id, subject_id, memory_id, namespace, key_digest, event_type,
                                       payload_ciphertext, payload_nonce, aggregate_version, occurred_at, actor,
                                       actor_id, consent_id, source_message_ids, extractor_name,
                                       extractor_version, operation_id, aad_version)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 2)
            """,
            (event.event_id, key.tenant_id, key.subject_id, event.memory_id, event.namespace,
             event.key_digest or key.digest(f"{event.namespace}/{event.name}"), event_type, ciphertext, nonce, event.version,
             event.occurred_at, event.actor, event.actor_id, event.consent_id, list(event.source_message_ids),
             event.extractor[0] if event.extractor else None, event.extractor[1] if event.extractor else None,
             event.operation_id))
    except UniqueViolation as exc:
        # Ids and versions only: the name may hold a value, and this message reaches workflow history.
        raise VersionConflictError(f"memory {event.memory_id} already has version {event.version}") from exc


async def read_subject_events(conn: psycopg.AsyncConnection, key: SubjectKey, *,
                              memory_id: uuid.UUID | None = None) -> list[MemoryEvent]:
    """The subject's events (or one memory's), decrypted and typed, per memory in version order;
    a gap, a payload that does not decrypt or an unknown event raises EventLogError (a rebuild
    must fail loudly rather than diverge silently from the write path). A swept memory's events
    are gone up to its tombstone's version: a later life of the memory starts after it."""
    # The version a swept memory's surviving log starts after (a later life forgotten again
    # keeps its first sweep in swept_before_version).
    cur = await conn.execute(
        "SELECT memory_id, CASE WHEN state = 'swept' THEN version ELSE swept_before_version END "
        "FROM forgotten_memories WHERE tenant_id = %s AND subject_id = %s "
        "AND (state = 'swept' OR swept_before_version IS NOT NULL) AND (%s::uuid IS NULL OR memory_id = %s)",
        (key.tenant_id, key.subject_id, memory_id, memory_id))
    last: dict[uuid.UUID, int] = {m: int(v) for m, v in await cur.fetchall()}
    cur = await conn.execute(
        "SELECT memory_id, namespace, event_type, aggregate_version, occurred_at, source_message_ids, operation_id, "
        "payload_ciphertext, payload_nonce, event_id, aad_version, actor, actor_id, extractor_name, extractor_version "
        "FROM memory_events "
        "WHERE tenant_id = %s AND subject_id = %s AND (%s::uuid IS NULL OR memory_id = %s) "
        "ORDER BY memory_id, aggregate_version",
        (key.tenant_id, key.subject_id, memory_id, memory_id))
    events: list[MemoryEvent] = []
    for (mid, namespace, event_type, version, occurred_at, sources, operation_id, ciphertext, nonce, event_id,
         aad_version, actor, actor_id, extractor_name, extractor_version) in await cur.fetchall():
        if version != last.get(mid, 0) + 1:
            raise EventLogError(f"memory {mid}: version {version} follows {last.get(mid, 0)} "
                                "(gap or duplicate in the log)")
        last[mid] = version
        if ciphertext is None or nonce is None:
            raise EventLogError(f"memory {mid} v{version}: payload missing")
        aad = key.legacy_aad() if aad_version == 1 else event_aad(key.tenant_id, key.subject_id, event_id, mid,
                                                                    version, event_type)
        try:
            raw = key.decrypt(bytes(ciphertext), bytes(nonce), aad)
        except InvalidTag as exc:
            raise EventLogError(f"memory {mid} v{version}: payload does not decrypt") from exc
        try:
            payload = upcast(event_type, namespace, raw)
        except EventLogError as exc:
            raise EventLogError(f"memory {mid} v{version}: {exc}") from None
        events.append(MemoryEvent(memory_id=mid, version=version, namespace=namespace,
                                  occurred_at=occurred_at, source_message_ids=tuple(sources),
                                  operation_id=operation_id, payload=payload, actor=actor, actor_id=actor_id,
                                  extractor=None if extractor_name is None else (extractor_name,
                                                                                 extractor_version or "")))
    return events


def effective_events(events: Sequence[MemoryEvent]) -> list[MemoryEvent]:
    """The events a replay applies: a memory whose last lifecycle event is MemoryForgotten has no
    projection (none of its events); a forget undone by a restore is skipped (the restore only
    carries the memory's version). The live forget and restore produce exactly this."""
    forgotten: set[uuid.UUID] = set()
    for event in events:  # per memory in version order: the last lifecycle event wins
        if isinstance(event.payload, MemoryForgotten):
            forgotten.add(event.memory_id)
        elif isinstance(event.payload, MemoryRestored):
            forgotten.discard(event.memory_id)
    return [e for e in events if e.memory_id not in forgotten and not isinstance(e.payload, MemoryForgotten)]


def fact_events(events: Sequence[MemoryEvent]) -> list[MemoryEvent]:
    return [e for e in events if isinstance(e.payload, FACT_EVENTS)]
