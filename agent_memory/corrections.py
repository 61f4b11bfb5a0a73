"""Live writes: a user (or an agent on the user's behalf) states a fact directly, outside a
consolidation, with an expected-version condition.

A live write is committed through the same transaction as consolidation (event, closed old
interval, new row, lexical index, outbox), so it is versioned, replayable and erasable like any
other memory. A consolidation planned against the old version fails its commit with a version
conflict, re-reads and re-decides.
"""

from __future__ import annotations

from datetime import UTC, datetime

from psycopg_pool import AsyncConnectionPool

from agent_memory.keyring import KeyRing
from agent_memory.memory_store import commit_consolidation
from agent_memory.models import (
    CommitOutcome,
    ConflictPlan,
    ExtractedFact,
    ExtractionResult,
    FactAction,
    FactDecision,
    ImportanceResult,
    SummaryResult,
    check_identifier,
)
from agent_memory.operations import request_hash

LIVE_SESSION = "live-write"


async def write_fact(pool: AsyncConnectionPool, keyring: KeyRing, *, tenant_id: str, subject_id: str,
                     namespace: str, key: str, value: str, expected_version: int,
                     evidence_message_ids: list[str], observed_at: datetime | None = None) -> CommitOutcome:
    """Set namespace/key to value if the fact is still at expected_version (0: no fact yet);
    else VersionConflictError. With the same observed_at, repeating a write returns the recorded
    outcome; without one, a repeat finds the version moved on and conflicts — never a duplicate."""
    check_identifier("tenant", tenant_id)
    check_identifier("subject", subject_id)
    if not value.strip():
        raise ValueError("value is empty: to end a fact, erase or supersede it with a new value")
    if not evidence_message_ids:
        raise ValueError("evidence_message_ids is empty: cite the message in which the user said it")
    observed = observed_at or datetime.now(UTC)
    fact = ExtractedFact(namespace=namespace, key=key, value=value, claim_type="explicit", confidence=1.0,
                         evidence_message_ids=evidence_message_ids, observed_at=observed)
    action: FactAction = "create" if expected_version == 0 else "supersede"
    plan = ConflictPlan(decisions=[FactDecision(action=action, namespace=namespace, key=key, value=value,
                                                expected_version=expected_version, fact_index=0,
                                                reason="live write: the user stated it directly")])
    request = {"namespace": namespace, "key": key, "value": value, "expected_version": expected_version,
               "evidence": evidence_message_ids, "observed_at": observed.isoformat(), "subject": subject_id}
    return await commit_consolidation(
        pool, keyring, tenant_id=tenant_id, subject_id=subject_id, session_id=LIVE_SESSION,
        operation_id=f"live/{request_hash(request)[:24]}", request=request,
        extraction=ExtractionResult(provider="user", extractor="live-write", extractor_version="1", facts=[fact]),
        plan=plan, importance=ImportanceResult(importance=1), summary=SummaryResult(sentences=[], token_count=0),
        happened_at=observed)
