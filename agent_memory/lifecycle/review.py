"""The review: what went stale is marked, never deleted, and resolved by an operator or the agent.

Run daily by the `agent-memory/review` Schedule (workflows/review.py) over every tenant, at the
workflow's own time (`as_of`). Per tenant it finds, under the tenant's retention policy
(agent_memory/lifecycle/retention.py):

1. `stale`: a current fact whose namespace has a shelf life (`shelf_life_days`; location 180 days,
   work 365, travel 30, none for profile, identity or names) and that was not said again or
   confirmed within it (`facts.last_confirmed_at`, migration 050);
2. `contradicted`: a current fact with later values of its key held as candidates that differ
   from it (a weak later statement did not close it: memory/conflicts.py);
3. `duplicate`: a note near-identical to an earlier note of the same subject: the normalized
   token sets (NFKC, case-folded words) have a Jaccard similarity of at least
   DUPLICATE_JACCARD (0.9), both with at least DUPLICATE_MIN_TOKENS tokens. Deterministic and
   cheap; the later note is marked, the earlier one is its related memory;
4. `candidate_expiring`: a candidate within `candidate_review_days` (14) of its retention
   expiry (`candidate_days`, 90).

Each finding becomes a `MemoryMarkedStale` event of the mark's own aggregate
(memory/stale_marks.py), recorded per subject in one commit under the subject's write lock with
a deterministic operation id (`ReviewKey` of the subject's findings): a review of unchanged data
finds its recorded outcome, and a finding whose mark already holds the same basis (the same
interval, confirmation time and related memories, open or resolved) appends nothing. An open
mark whose memory changed since (said again, corrected, forgotten) is closed as `obsolete`.

Resolution (`resolve_mark`): `keep` confirms a marked fact (a `FactConfirmed` event, so
`last_confirmed_at` moves) and closes the mark; `forget` forgets the marked memory (restorable
in the grace period) and closes the mark; a correction through the `correct` path (HTTP, MCP,
CLI) closes the marks of the fact it corrects in its own commit.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

import psycopg
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, ConfigDict, Field

from agent_memory.core.errors import Conflict, InvalidInput, NotFound
from agent_memory.core.fact_text import normalise_value
from agent_memory.core.models import CommitOutcome, check_identifier
from agent_memory.core.operation_keys import ReviewKey
from agent_memory.core.run_inputs import RunInput
from agent_memory.lifecycle.forgetting import DEFAULT_GRACE, MAX_REASON_CHARS, forget_memory
from agent_memory.lifecycle.retention import RetentionPolicy, read_retention
from agent_memory.memory.events import (
    FactConfirmed,
    MarkedKind,
    MemoryEvent,
    MemoryMarkedStale,
    StaleReason,
    memory_version,
)
from agent_memory.memory.memory_store import commit_events
from agent_memory.memory.stale_marks import (
    IN_FORCE,
    MARK_LIST_MAX,
    MARK_NAMESPACE,
    MarkCounts,
    StaleMark,
    list_marks,
    mark_counts,
    mark_memory_id,
    mark_name,
    read_mark,
    resolution_events,
)
from agent_memory.security.crypto import SubjectKey
from agent_memory.security.keyring import KeyRing
from agent_memory.store.db import registered_tenants, tenant_transaction
from agent_memory.store.scope import SubjectErasedError

DUPLICATE_JACCARD = 0.9
DUPLICATE_MIN_TOKENS = 3
# The notes of a subject compared for duplicates at most (the newest).
DUPLICATE_NOTES_MAX = 2000
KEEP_REASON = "kept at review: the value still holds"
ReviewActor = Literal["operator", "agent", "user"]
_WORD = re.compile(r"\w+")


class ReviewInput(RunInput):
    kind: Literal["review"] = "review"
    # One tenant (`agent-memory review run`); None: every tenant (the daily Schedule).
    tenant_id: str | None = None
    # Findings marked per tenant and run at most (the next day's run takes the rest).
    limit_per_tenant: int = Field(default=5000, ge=1)


class TenantReviewInput(BaseModel):
    """One tenant's review, at the workflow's time: ids and a time only."""

    model_config = ConfigDict(extra="forbid")

    tenant_id: str
    as_of: datetime
    limit: int = Field(default=5000, ge=1)


class TenantReviewResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenant_id: str
    subjects: int = 0
    marked: dict[str, int] = Field(default_factory=dict)  # per reason: marks opened by this run
    obsolete: int = 0  # open marks closed because their memory changed since
    skipped_erased: int = 0


class ReviewTenants(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenant_ids: list[str]


class ReviewResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenants: int = 0
    marked: dict[str, int] = Field(default_factory=dict)
    obsolete: int = 0
    skipped_erased: int = 0


@dataclass(frozen=True)
class Finding:
    """What one mark is made against (its basis): a review that finds the same basis again
    appends nothing."""

    subject_id: str
    marked_memory_id: uuid.UUID
    marked_kind: MarkedKind
    reason: StaleReason
    fact_id: uuid.UUID | None = None
    related: tuple[uuid.UUID, ...] = ()
    confirmed_at: datetime | None = None

    def request(self) -> list[str]:
        return [str(self.marked_memory_id), self.reason, str(self.fact_id), *map(str, self.related),
                self.confirmed_at.isoformat() if self.confirmed_at else ""]


class MarkNotFoundError(NotFound):
    """No mark of this id for this subject."""


class MarkNotOpenError(Conflict):
    """A resolution of a mark already resolved."""


def note_tokens(text: str) -> frozenset[str]:
    """A note's words as compared for duplicates: NFKC, case-folded."""
    return frozenset(_WORD.findall(unicodedata.normalize("NFKC", text).casefold()))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


# --- finding --------------------------------------------------------------------------------------


async def _stale_facts(conn: psycopg.AsyncConnection, tenant_id: str, policy: RetentionPolicy,
                       as_of: datetime) -> list[Finding]:
    shelf = {ns: days for ns, days in policy.shelf_life_days.items() if days is not None}
    if not shelf:
        return []
    cur = await conn.execute(
        """
        SELECT f.subject_id, f.memory_id, f.fact_id, f.last_confirmed_at
          FROM facts f JOIN unnest(%s::text[], %s::int[]) AS p(namespace, days) ON p.namespace = f.namespace
         WHERE f.tenant_id = %s AND f.status = 'active'
           AND f.last_confirmed_at < %s - make_interval(days => p.days)
         ORDER BY f.subject_id, f.memory_id
        """, (list(shelf), list(shelf.values()), tenant_id, as_of))
    return [Finding(s, m, "fact", "stale", fact_id=f, confirmed_at=c) for s, m, f, c in await cur.fetchall()]


async def _contradicted_facts(conn: psycopg.AsyncConnection, tenant_id: str) -> list[Finding]:
    cur = await conn.execute(
        """
        SELECT f.subject_id, f.memory_id, f.fact_id, f.value, c.memory_id, c.value
          FROM facts f
          JOIN facts c ON c.tenant_id = f.tenant_id AND c.subject_id = f.subject_id AND c.namespace = f.namespace
                      AND c.key = f.key AND c.status = 'candidate' AND c.valid_from > f.valid_from
         WHERE f.tenant_id = %s AND f.status = 'active'
         ORDER BY f.subject_id, f.memory_id, c.memory_id
        """, (tenant_id,))
    against: dict[tuple[str, uuid.UUID, uuid.UUID], list[uuid.UUID]] = defaultdict(list)
    for subject, memory, fact, value, candidate, candidate_value in await cur.fetchall():
        if normalise_value(candidate_value) != normalise_value(value):
            against[(subject, memory, fact)].append(candidate)
    return [Finding(s, m, "fact", "contradicted", fact_id=f, related=tuple(c)) for (s, m, f), c in against.items()]


async def _expiring_candidates(conn: psycopg.AsyncConnection, tenant_id: str, policy: RetentionPolicy,
                               as_of: datetime) -> list[Finding]:
    if policy.candidate_days is None:
        return []
    due = max(0, policy.candidate_days - policy.candidate_review_days)
    cur = await conn.execute(
        "SELECT subject_id, memory_id, fact_id FROM facts WHERE tenant_id = %s AND status = 'candidate' "
        "AND valid_from < %s - make_interval(days => %s) ORDER BY subject_id, memory_id", (tenant_id, as_of, due))
    return [Finding(s, m, "candidate", "candidate_expiring", fact_id=f) for s, m, f in await cur.fetchall()]


async def _duplicate_notes(conn: psycopg.AsyncConnection, tenant_id: str) -> list[Finding]:
    cur = await conn.execute(
        """
        SELECT subject_id, memory_id, text FROM (
            SELECT subject_id, memory_id, text, happened_at,
                   row_number() OVER (PARTITION BY subject_id ORDER BY happened_at DESC, memory_id) AS n
              FROM observations WHERE tenant_id = %s) newest
         WHERE n <= %s ORDER BY subject_id, happened_at, memory_id
        """, (tenant_id, DUPLICATE_NOTES_MAX))
    findings: list[Finding] = []
    earlier: dict[str, list[tuple[uuid.UUID, frozenset[str]]]] = defaultdict(list)
    for subject, memory, text in await cur.fetchall():
        tokens = note_tokens(text)
        if len(tokens) >= DUPLICATE_MIN_TOKENS:
            for other, other_tokens in earlier[subject]:
                # |a ∩ b| / |a ∪ b| ≥ t needs min/max size ≥ t: most pairs are ruled out by size alone.
                if (min(len(tokens), len(other_tokens)) >= DUPLICATE_JACCARD * max(len(tokens), len(other_tokens))
                        and jaccard(tokens, other_tokens) >= DUPLICATE_JACCARD):
                    findings.append(Finding(subject, memory, "observation", "duplicate", related=(other,)))
                    break
        earlier[subject].append((memory, tokens))
    return findings


async def _obsolete_marks(conn: psycopg.AsyncConnection, tenant_id: str) -> list[tuple[str, uuid.UUID, uuid.UUID]]:
    cur = await conn.execute(
        f"SELECT s.subject_id, s.marked_memory_id, s.memory_id FROM stale_marks s WHERE s.tenant_id = %s "
        f"AND s.state = 'open' AND NOT ({IN_FORCE}) ORDER BY s.subject_id, s.memory_id", (tenant_id,))
    return [(s, m, k) for s, m, k in await cur.fetchall()]


async def tenant_findings(pool: AsyncConnectionPool, tenant_id: str, as_of: datetime) -> list[Finding]:
    """Every finding of the tenant at `as_of`, in a deterministic order."""
    async with tenant_transaction(pool, tenant_id) as conn:
        policy = await read_retention(conn, tenant_id)
        findings = [*await _stale_facts(conn, tenant_id, policy, as_of), *await _contradicted_facts(conn, tenant_id),
                    *await _duplicate_notes(conn, tenant_id),
                    *await _expiring_candidates(conn, tenant_id, policy, as_of)]
    return sorted(findings, key=lambda f: (f.subject_id, str(f.marked_memory_id), f.reason))


# --- marking --------------------------------------------------------------------------------------


async def _same_basis(conn: psycopg.AsyncConnection, tenant_id: str, mark_id: uuid.UUID, finding: Finding) -> bool:
    cur = await conn.execute(
        "SELECT fact_id, related_memory_ids, confirmed_at FROM stale_marks WHERE tenant_id = %s AND memory_id = %s",
        (tenant_id, mark_id))
    row = await cur.fetchone()
    return row is not None and (row[0], tuple(row[1]), row[2]) == (finding.fact_id, finding.related,
                                                                    finding.confirmed_at)


async def _now(conn: psycopg.AsyncConnection) -> datetime:
    cur = await conn.execute("SELECT now()")
    row = await cur.fetchone()
    assert row is not None
    return row[0]


async def review_subject(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str,
                         findings: list[Finding], obsolete: list[tuple[uuid.UUID, uuid.UUID]],
                         as_of: datetime, result: TenantReviewResult) -> None:
    """One subject's marks and obsolete marks, in one commit (see the module)."""
    request = {"review": subject_id, "findings": [f.request() for f in findings],
               "obsolete": [[str(m), str(k)] for m, k in obsolete]}
    key = ReviewKey.for_request(request)
    counted: dict[str, int] = {}

    async def decide(conn: psycopg.AsyncConnection, skey: SubjectKey) -> AsyncIterator[MemoryEvent]:
        counted.clear()  # a retried transaction decides again
        # The review's time, never after the transaction's (a time-skipped or early clock).
        occurred = min(as_of, await _now(conn))
        for finding in findings:
            mark_id = mark_memory_id(skey, finding.marked_memory_id, finding.reason)
            if await _same_basis(conn, tenant_id, mark_id, finding):
                continue
            counted[finding.reason] = counted.get(finding.reason, 0) + 1
            yield MemoryEvent(
                memory_id=mark_id, version=await memory_version(conn, tenant_id, mark_id) + 1,
                namespace=MARK_NAMESPACE, name=mark_name(finding.marked_memory_id, finding.reason),
                occurred_at=occurred, source_message_ids=(), operation_id=key.operation_id, actor="review",
                payload=MemoryMarkedStale(marked_memory_id=finding.marked_memory_id, marked_kind=finding.marked_kind,
                                          fact_id=finding.fact_id, reason=finding.reason,
                                          related_memory_ids=list(finding.related),
                                          confirmed_at=finding.confirmed_at))
        for marked_memory_id, mark_id in obsolete:
            cur = await conn.execute(f"SELECT 1 FROM stale_marks s WHERE s.tenant_id = %s AND s.memory_id = %s "
                                     f"AND s.state = 'open' AND NOT ({IN_FORCE})", (tenant_id, mark_id))
            if await cur.fetchone() is None:
                continue
            async for event in resolution_events(conn, tenant_id, subject_id, marked_memory_id, "obsolete",
                                                 occurred_at=occurred, operation_id=key.operation_id,
                                                 actor="review", only=mark_id):
                counted["obsolete"] = counted.get("obsolete", 0) + 1
                yield event

    await commit_events(pool, keyring, tenant_id=tenant_id, subject_id=subject_id, key=key, request=request,
                        decide=decide, outcome=lambda recorded: CommitOutcome(
                            operation_id=key.operation_id, session_id="review", events_appended=len(recorded),
                            facts_written=0, episode_written=False, outbox_rows=0))
    result.obsolete += counted.pop("obsolete", 0)
    for reason, n in counted.items():
        result.marked[reason] = result.marked.get(reason, 0) + n


async def review_tenant(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, as_of: datetime, *,
                        limit: int = 5000,
                        progress: Callable[[TenantReviewResult], None] | None = None) -> TenantReviewResult:
    """Mark what went stale in one tenant at `as_of` (at most `limit` findings); idempotent."""
    # At most one review of a tenant at a time, whichever run it belongs to (the Schedule's, or
    # one started by hand): a session lock held while this review runs.
    async with pool.connection() as lock:
        await lock.execute("SELECT pg_advisory_lock(%s)", (review_lock_key(tenant_id),))
        try:
            return await _review_tenant(pool, keyring, tenant_id, as_of, limit, progress)
        finally:
            await lock.execute("SELECT pg_advisory_unlock(%s)", (review_lock_key(tenant_id),))


def review_lock_key(tenant_id: str) -> int:
    return int.from_bytes(hashlib.sha256(f"review\x1f{tenant_id}".encode()).digest()[:8], "big", signed=True)


async def _review_tenant(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, as_of: datetime, limit: int,
                         progress: Callable[[TenantReviewResult], None] | None) -> TenantReviewResult:
    result = TenantReviewResult(tenant_id=tenant_id)
    findings = (await tenant_findings(pool, tenant_id, as_of))[:limit]
    async with tenant_transaction(pool, tenant_id) as conn:
        obsolete = await _obsolete_marks(conn, tenant_id)
    by_subject: dict[str, tuple[list[Finding], list[tuple[uuid.UUID, uuid.UUID]]]] = defaultdict(lambda: ([], []))
    for finding in findings:
        by_subject[finding.subject_id][0].append(finding)
    for subject, marked, mark in obsolete:
        by_subject[subject][1].append((marked, mark))
    for subject_id in sorted(by_subject):
        subject_findings, subject_obsolete = by_subject[subject_id]
        result.subjects += 1
        try:
            await review_subject(pool, keyring, tenant_id, subject_id, subject_findings, subject_obsolete, as_of,
                                 result)
        except SubjectErasedError:
            result.skipped_erased += 1
        if progress is not None:
            progress(result)
    return result


async def review_tenants(pool: AsyncConnectionPool) -> ReviewTenants:
    return ReviewTenants(tenant_ids=await registered_tenants(pool))


async def tenant_marks(pool: AsyncConnectionPool, tenant_id: str, *, subject_id: str | None = None,
                       include_resolved: bool = False, limit: int = MARK_LIST_MAX) -> list[StaleMark]:
    check_identifier("tenant", tenant_id)
    if subject_id is not None:
        check_identifier("subject", subject_id)
    if not 1 <= limit <= MARK_LIST_MAX:
        raise InvalidInput(f"limit: {limit} is outside 1 to {MARK_LIST_MAX}")
    async with tenant_transaction(pool, tenant_id) as conn:
        return await list_marks(conn, tenant_id, subject_id=subject_id, include_resolved=include_resolved,
                                limit=limit)


async def tenant_mark_counts(pool: AsyncConnectionPool, tenant_id: str) -> MarkCounts:
    check_identifier("tenant", tenant_id)
    async with tenant_transaction(pool, tenant_id) as conn:
        return await mark_counts(conn, tenant_id)


# --- resolving ------------------------------------------------------------------------------------


class ResolveResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mark: StaleMark
    confirmed: bool = Field(description="keep: the fact counted as confirmed (its last_confirmed_at moved)")
    forgotten: bool = Field(description="forget: the marked memory was forgotten (restorable in the grace period)")


def parse_mark_id(mark_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(mark_id)
    except ValueError:
        raise InvalidInput(f"mark_id {mark_id[:80]!r} is not a UUID: pass a mark_id as `review list --json` "
                           "prints it") from None


async def _open_mark(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, mark_id: uuid.UUID) -> StaleMark:
    mark = await read_mark(conn, tenant_id, subject_id, mark_id)
    if mark is None:
        raise MarkNotFoundError(f"no mark {mark_id} of subject {subject_id!r}: `agent-memory review list` lists them")
    if mark.state != "open":
        raise MarkNotOpenError(f"mark {mark_id} is already resolved ({mark.resolution}): nothing to do")
    return mark


async def resolve_mark(pool: AsyncConnectionPool, keyring: KeyRing, *, tenant_id: str, subject_id: str,
                       mark_id: str, resolution: Literal["keep", "forget"], actor: ReviewActor = "operator",
                       actor_id: str | None = None, reason: str | None = None,
                       grace: timedelta = DEFAULT_GRACE) -> ResolveResult:
    """Keep (a marked fact counts as confirmed) or forget the marked memory, and close the mark.
    A correction is made through the `correct` path, which closes the marks of the fact it corrects."""
    check_identifier("tenant", tenant_id)
    check_identifier("subject", subject_id)
    mid = parse_mark_id(mark_id)
    if resolution not in ("keep", "forget"):
        raise InvalidInput(f"resolution {str(resolution)[:40]!r} is not keep or forget: to correct a fact, write "
                           "its right value with `correct` (it resolves the fact's marks)")
    if reason is not None and len(reason) > MAX_REASON_CHARS:
        raise InvalidInput(f"reason has {len(reason)} characters: keep it under {MAX_REASON_CHARS}")
    async with tenant_transaction(pool, tenant_id) as conn:
        mark = await _open_mark(conn, tenant_id, subject_id, mid)
    forgotten = False
    if resolution == "forget":
        try:
            await forget_memory(pool, keyring, tenant_id=tenant_id, subject_id=subject_id,
                                memory_id=mark.memory_id, reason=reason or f"review: {mark.reason}",
                                actor=actor, actor_id=actor_id, grace=grace)
            forgotten = True
        except LookupError:
            pass  # gone already (forgotten and swept): the mark is closed all the same
    request = {"resolve": str(mid), "version": mark.version, "resolution": resolution, "subject": subject_id}
    key = ReviewKey.for_request(request)
    confirmed = False

    async def decide(conn: psycopg.AsyncConnection, skey: SubjectKey) -> AsyncIterator[MemoryEvent]:
        nonlocal confirmed
        current = await _open_mark(conn, tenant_id, subject_id, mid)
        now = await _now(conn)
        if resolution == "keep" and current.memory_kind == "fact":
            cur = await conn.execute(
                "SELECT namespace, key, value, claim_type, permanence, confidence, valid_until FROM facts "
                "WHERE tenant_id = %s AND memory_id = %s AND status = 'active'", (tenant_id, uuid.UUID(current.memory_id)))
            row = await cur.fetchone()
            if row is not None:
                namespace, fact_key, value, claim_type, permanence, confidence, valid_until = row
                marked = uuid.UUID(current.memory_id)
                confirmed = True
                yield MemoryEvent(
                    memory_id=marked, version=await memory_version(conn, tenant_id, marked) + 1, namespace=namespace,
                    name=f"{namespace}/{fact_key}", occurred_at=now, source_message_ids=(),
                    operation_id=key.operation_id, actor=actor, actor_id=actor_id,
                    payload=FactConfirmed(namespace=namespace, key=fact_key, value=value, claim_type=claim_type,
                                          permanence=permanence, confidence=confidence, valid_until=valid_until,
                                          session_id="review", reason=KEEP_REASON))
        async for event in resolution_events(conn, tenant_id, subject_id, uuid.UUID(current.memory_id), resolution,
                                             occurred_at=now, operation_id=key.operation_id, actor=actor,
                                             actor_id=actor_id, reason=reason, only=mid):
            yield event

    await commit_events(pool, keyring, tenant_id=tenant_id, subject_id=subject_id, key=key, request=request,
                        decide=decide, outcome=lambda recorded: CommitOutcome(
                            operation_id=key.operation_id, session_id="review", events_appended=len(recorded),
                            facts_written=0, episode_written=False, outbox_rows=0))
    async with tenant_transaction(pool, tenant_id) as conn:
        resolved = await read_mark(conn, tenant_id, subject_id, mid)
    assert resolved is not None
    return ResolveResult(mark=resolved, confirmed=confirmed, forgotten=forgotten)

