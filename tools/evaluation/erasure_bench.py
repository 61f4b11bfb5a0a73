"""`python -m tools.cli bench erasure`: what physical compaction and key rotation cost, measured.

Builds a synthetic memory store on a private embedded stack with the product's own write path
(append_messages + commit_consolidation: messages, sessions, events, observations, episodes,
lexical index, outbox, operations, one subject key per subject), erases a few subjects, then
times the two follow-up jobs side by side in one run:
- compaction (each erasure table rewritten, its statistics cleared and sampled again),
- key rotation (re-wrap every subject key under a new KEK, destroy the old one).
Figures are seconds, and seconds per 10k memories / per 10k subject keys.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel

from agent_memory.api.services import Services
from agent_memory.core import contract
from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import (
    ConflictPlan,
    ExtractionResult,
    ImportanceResult,
    Message,
    Observation,
    Session,
    SummaryResult,
    SummarySentence,
)
from agent_memory.core.operation_keys import CommitKey
from agent_memory.core.projection_models import ProjectionPolicy
from agent_memory.core.settings import Settings
from agent_memory.lifecycle.compaction import compact_pending
from agent_memory.lifecycle.erasure import (
    STORES,
    begin_erasure,
    complete_erasure,
    erase_store,
    register_erasure_request,
    scan_residue,
    shred_subject_key,
)
from agent_memory.memory.evidence import append_messages
from agent_memory.memory.memory_store import commit_consolidation
from agent_memory.projection.projector import OutboxProjector
from agent_memory.providers.hashing import HashingEmbedder

TENANT = "bench"
WORDS = ("harbour", "violin", "lantern", "orchard", "glacier", "saffron", "meadow", "compass", "pepper", "canyon")


class ErasureBenchReport(BaseModel):
    subjects: int
    memories: int
    rows_in_erasure_tables: int
    load_seconds: float
    erased_subjects: int
    erase_seconds_per_subject: float  # every store, the shred, the residue check and the receipt
    compaction_seconds: float
    compaction_seconds_per_10k_memories: float
    slowest_tables: list[tuple[str, float]]
    rotation_seconds: float
    rotation_seconds_per_10k_subject_keys: float
    rewrapped_subject_keys: int

    def render(self) -> str:
        return "\n".join([
            f"store: {self.subjects} subjects, {self.memories} memories (observations), "
            f"{self.rows_in_erasure_tables} rows in the erasure tables; built in {self.load_seconds:.1f} s",
            f"erasure (logical, {self.erased_subjects} subjects): {self.erase_seconds_per_subject:.3f} s per subject",
            f"compaction: {self.compaction_seconds:.2f} s = {self.compaction_seconds_per_10k_memories:.2f} s per 10k "
            f"memories; slowest: " + ", ".join(f"{t} {s:.2f} s" for t, s in self.slowest_tables),
            f"key rotation: {self.rotation_seconds:.2f} s for {self.rewrapped_subject_keys} subject keys"
            + (f" = {self.rotation_seconds_per_10k_subject_keys:.2f} s per 10k subject keys"
               if self.rewrapped_subject_keys else ""),
        ])


SESSION_SIZE = 500  # a subject's memories come in sessions of at most this many messages


def _session(subject: int, part: int, first: int, count: int, start: datetime) -> Session:
    messages = [Message(message_id=f"m{i}", turn_index=i - first, role="user", speaker="user",
                        content=f"Note {i} of subject {subject}: the {WORDS[i % len(WORDS)]} near the "
                                f"{WORDS[(i + subject) % len(WORDS)]} was lovely, item {i}.",
                        created_at=start + timedelta(minutes=i)) for i in range(first, first + count)]
    return Session(session_id=f"s{subject}-{part}", started_at=messages[0].created_at, messages=messages)


async def _load(services: Services, subjects: int, per_subject: int, *, vectors: bool) -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    projector = OutboxProjector(services.pool, services.keyring, HashingEmbedder(), ProjectionPolicy())
    for n in range(subjects):
        subject = f"subject-{n}"
        for part, first in enumerate(range(0, per_subject, SESSION_SIZE)):
            session = _session(n, part, first, min(SESSION_SIZE, per_subject - first), start)
            await append_messages(services.pool, None, TENANT, subject, session,
                                  subject_digest=services.keyring.subject_digest(TENANT, subject))
            summary = SummaryResult(
                sentences=[SummarySentence(text=session.messages[0].content,
                                           source_message_ids=[session.messages[0].message_id])], token_count=20,
                observations=[Observation(text=m.content, source_message_ids=[m.message_id],
                                          happened_at=m.created_at) for m in session.messages])
            await commit_consolidation(
                services.pool, services.keyring, tenant_id=TENANT, subject_id=subject, session_id=session.session_id,
                key=CommitKey.for_request(session.session_id, {"n": n, "part": part}), request={"n": n, "part": part},
                extraction=ExtractionResult(extractor="bench", extractor_version="1", facts=[]),
                plan=ConflictPlan(decisions=[]), importance=ImportanceResult(importance=5), summary=summary,
                happened_at=session.messages[0].created_at)
            # The projector's batches (the cheap hashing embedder): vectors to erase as well.
            while vectors and (await projector.project_batch(TENANT, subject)).selected:
                pass


async def _erase(services: Services, subject: str) -> None:
    request_id = f"bench-{subject}"
    await register_erasure_request(services.pool, services.keyring, TENANT, subject, request_id, "benchmark")
    await begin_erasure(services.pool, services.keyring, TENANT, subject, request_id,
                        workflow_id=contract.erasure_workflow_id(TENANT, subject, request_id), run_id="erasure-bench")
    for store in STORES:
        await erase_store(services.pool, services.redis, services.keyring, TENANT, subject, request_id, store)
    await shred_subject_key(services.pool, TENANT, subject, request_id)
    residue = await scan_residue(services.pool, services.redis, TENANT, subject)
    await complete_erasure(services.pool, services.keyring, TENANT, subject, request_id, residue)


async def run_erasure_bench(services: Services, *, memories: int, per_subject: int, erase: int,
                            vectors: bool = False) -> ErasureBenchReport:
    """vectors: project every memory (hashing embedder) before the erasure."""
    subjects = max(1, memories // per_subject)
    t0 = time.monotonic()
    await _load(services, subjects, per_subject, vectors=vectors)
    load_seconds = time.monotonic() - t0
    async with services.pool.connection() as conn:
        cur = await conn.execute(
            # memory_vectors counts through its partitions (migration 027).
            "SELECT sum(n_live_tup) FROM pg_stat_user_tables WHERE relname = ANY(%s) "
            "OR schemaname = 'agent_memory_partitions'",
            (["messages", "sessions", "memory_events", "observations", "episodes", "entities", "entity_mentions",
              "relations", "memory_search", "memory_postings",
              "lexical_statistics", "lexical_frequencies", "memory_vectors", "projection_outbox", "operations",
              "subject_keys"],))
        row = await cur.fetchone()
        await conn.commit()
    t0 = time.monotonic()
    for n in range(erase):
        await _erase(services, f"subject-{n}")
    erase_seconds = time.monotonic() - t0
    assert services.settings.database_url is not None
    compaction = await compact_pending(services.pool, services.redis, services.settings.database_url)
    rotation = await services.keyring.rotate(services.pool, force=True)
    total = subjects * per_subject
    return ErasureBenchReport(
        subjects=subjects, memories=total, rows_in_erasure_tables=int(row[0] or 0) if row else 0,
        load_seconds=round(load_seconds, 1), erased_subjects=erase,
        erase_seconds_per_subject=round(erase_seconds / max(erase, 1), 3),
        compaction_seconds=compaction.elapsed_seconds,
        compaction_seconds_per_10k_memories=round(compaction.elapsed_seconds * 10_000 / total, 3),
        slowest_tables=[(t.table, t.seconds) for t in sorted(compaction.tables, key=lambda t: -t.seconds)[:4]],
        rotation_seconds=rotation.elapsed_seconds,
        rotation_seconds_per_10k_subject_keys=round(
            rotation.elapsed_seconds * 10_000 / max(rotation.rewrapped_subject_keys, 1), 3),
        rewrapped_subject_keys=rotation.rewrapped_subject_keys)


async def bench_command(args: argparse.Namespace, settings: Settings) -> int:
    from workers.runtime import scratch_stack

    if args.memories < 1 or args.per_subject < 1 or args.erase < 0:
        raise InvalidInput("--memories and --per-subject must be positive and --erase not negative")
    async with scratch_stack(settings, "bench", embedded_only=True) as services:
        report = await run_erasure_bench(services, memories=args.memories, per_subject=args.per_subject,
                                         erase=args.erase, vectors=args.bench_name == "erase")
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        print(report.render())
    return 0

