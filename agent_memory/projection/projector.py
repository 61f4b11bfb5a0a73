"""The vector projection: embeds outbox rows and upserts them into memory_vectors.

Each embedding is a recorded operation keyed by (memory id, version, model), so a crash after
the provider call and before the upsert resumes without calling the embedder again.

`project_outbox_batch` is the projector's step (workflows/projector.py): one provider call
embeds up to `ProjectionPolicy.batch_size` due rows. Each item's `embed/...` operation is claimed
(with the recorder's lease, renewed while the call runs) before the call and recorded, with the
item's vector, right after it in one transaction, together with an `embed-batch/...` record that
carries the call's provider request id, tokens and cost. A retry finds the per-item records and
writes from them: no second provider call, and the vector upsert does nothing on conflict (no
duplicate row).
Transient failures back off per row (attempts, next_attempt_at, a short content-free
last_error); a permanent failure of a single item, or max attempts, dead-letters the row. A
permanent failure of a batch of several items is retried item by item, so one bad text does not
dead-letter its neighbours. `project_vectors` (whole outbox, one item per call) is the step of
consolidation runs recorded before the projector existed.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

from pgvector import Vector
from psycopg import sql
from psycopg_pool import AsyncConnectionPool
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from agent_memory.core import contract
from agent_memory.core.fact_text import fact_text
from agent_memory.core.hooks import fault_point
from agent_memory.core.models import EmbeddingResult, ProjectionOutcome, check_identifier
from agent_memory.core.operation_keys import EmbedBatchKey, EmbedKey
from agent_memory.core.projection_models import ProjectionLag, ProjectionPolicy, ProjectorBatchOutcome, ProjectorInput
from agent_memory.memory.operations import (
    CLAIM_LEASE,
    OperationRecorder,
    claim_operations,
    ensure_not_erased,
    record_failed,
    record_succeeded,
    record_succeeded_many,
    recorded_results,
    renewed_claims,
    request_hash,
)
from agent_memory.providers.base import Embedder
from agent_memory.providers.errors import ProviderOutputInvalid, ProviderPermanentError
from agent_memory.providers.policy import namespaces_kept_from, shielded_embed
from agent_memory.security.keyring import KeyRing
from agent_memory.store.db import fetch_one, tenant_transaction

BATCH_SIZE = 64


def memory_text(kind: str, namespace: str, key: str | None, value: str) -> str:
    return fact_text(namespace, key, value) if kind == "fact" and key else value


async def pending_rows(pool: AsyncConnectionPool, tenant_id: str, subject_id: str) -> list[tuple[Any, ...]]:
    """Outbox rows still to project, due or not (the inline path of runs started before the
    projector): (memory id, kind, version, text or None if gone, namespace, key)."""
    rows = await _outbox_rows(pool, tenant_id, subject_id, BATCH_SIZE, due_only=False)
    return [(memory_id, kind, version, value, namespace, key)
            for memory_id, kind, version, _attempts, value, namespace, key in rows]


async def project_vectors(pool: AsyncConnectionPool, recorder: OperationRecorder, embedder: Embedder,
                          tenant_id: str, subject_id: str) -> ProjectionOutcome:
    upserted = done = skipped = 0
    kept = await namespaces_kept_from(pool, tenant_id, embedder)
    while rows := await pending_rows(pool, tenant_id, subject_id):
        for memory_id, kind, version, value, namespace, key in rows:
            if kind == "fact" and namespace in kept:
                value = None  # never sent to this embedder (the tenant's provider policy)
            if value is not None:
                text = memory_text(kind, namespace, key, value)
                op = EmbedKey.for_text(memory_id, version, embedder, text)
                embedding, _ = await recorder.run(
                    tenant_id=tenant_id, subject_id=subject_id, key=op, request=op.request(text),
                    result_type=EmbeddingResult, call=partial(shielded_embed, pool, tenant_id, embedder, [text]))
            async with tenant_transaction(pool, tenant_id) as conn:
                await ensure_not_erased(conn, tenant_id, subject_id,
                                        recorder.keyring.subject_digest(tenant_id, subject_id))
                if value is not None:
                    cur = await conn.execute(
                        """
                        INSERT INTO memory_vectors (tenant_id, subject_id, memory_id, memory_kind, version, model,
                                                    embedding)
                        VALUES (%s, %s, %s, %s, %s, %s, %s)
                        ON CONFLICT (tenant_id, memory_id, version, model, subject_id) DO NOTHING
                        """,
                        (tenant_id, subject_id, memory_id, kind, version, embedding.model,
                         Vector(embedding.vectors[0])))
                    upserted += cur.rowcount
                else:
                    skipped += 1  # the row was removed (erasure) or replaced; nothing to project
                await conn.execute(
                    "UPDATE projection_outbox SET processed_at = now() "
                    "WHERE tenant_id = %s AND memory_id = %s AND version = %s",
                    (tenant_id, memory_id, version))
                done += 1
            fault_point("mid_projection", when=memory_id == rows[0][0])
    return ProjectionOutcome(vectors_upserted=upserted, outbox_done=done, skipped=skipped)


# --- the projector's step -------------------------------------------------------------------

@dataclass
class _Item:
    memory_id: Any
    kind: str
    version: int
    attempts: int
    text: str | None
    key: EmbedKey | None = None  # set for live items (with a text)
    req_hash: str = ""
    vector: list[float] | None = None
    model: str = ""


async def due_rows(pool: AsyncConnectionPool, tenant_id: str, subject_id: str, limit: int) -> list[tuple[Any, ...]]:
    """Pending rows that are due (not dead, next_attempt_at passed), oldest first, with their text."""
    return await _outbox_rows(pool, tenant_id, subject_id, limit, due_only=True)


async def _outbox_rows(pool: AsyncConnectionPool, tenant_id: str, subject_id: str, limit: int, *,
                       due_only: bool) -> list[tuple[Any, ...]]:
    """Pending, not dead-lettered outbox rows joined to the text of the row they point at (None
    if gone): (memory id, kind, version, attempts, text, namespace, key)."""
    due = sql.SQL("AND o.next_attempt_at <= now()" if due_only else "")
    order = sql.SQL("o.next_attempt_at, o.created_at, o.memory_id" if due_only else "o.created_at, o.memory_id")
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(sql.SQL(
            """
            SELECT o.memory_id, o.memory_kind, o.version, o.attempts,
                   CASE o.memory_kind WHEN 'episode' THEN e.summary WHEN 'observation' THEN ob.text
                        ELSE f.value END,
                   coalesce(f.namespace, o.memory_kind), f.key
              FROM projection_outbox o
              LEFT JOIN facts f ON o.memory_kind = 'fact' AND f.tenant_id = o.tenant_id
                               AND f.memory_id = o.memory_id AND f.version = o.version
              LEFT JOIN episodes e ON o.memory_kind = 'episode' AND e.tenant_id = o.tenant_id
                                  AND e.memory_id = o.memory_id AND e.version = o.version
              LEFT JOIN observations ob ON o.memory_kind = 'observation' AND ob.tenant_id = o.tenant_id
                                       AND ob.memory_id = o.memory_id AND ob.version = o.version
             WHERE o.tenant_id = %s AND o.subject_id = %s AND o.processed_at IS NULL
               AND o.dead_lettered_at IS NULL {}
             ORDER BY {}
             LIMIT %s
            """).format(due, order), (tenant_id, subject_id, limit))
        return await cur.fetchall()


def short_error(exc: BaseException) -> str:
    """What an outbox row keeps of a failure: the error type and HTTP status, never provider text
    (which may quote the input)."""
    status = getattr(exc, "status_code", None)
    return (type(exc).__name__ + (f" (HTTP {status})" if status else ""))[:200]


def backoff_seconds(policy: ProjectionPolicy, attempts_before: int) -> float:
    return float(min(policy.backoff_initial_seconds * 2 ** min(attempts_before, 32), policy.backoff_max_seconds))


def _key(item: _Item) -> EmbedKey:
    assert item.key is not None  # only live items (with a text) reach the recorded operations
    return item.key


def _operation_ids(items: list[_Item]) -> list[str]:
    return [_key(i).operation_id for i in items]


def _keys(items: list[_Item]) -> dict[str, list[Any]]:
    return {"ids": [i.memory_id for i in items], "versions": [i.version for i in items]}


class OutboxProjector:
    """Drains one subject's outbox in bounded batches (see the module docstring)."""

    def __init__(self, pool: AsyncConnectionPool, keyring: KeyRing, embedder: Embedder,
                 policy: ProjectionPolicy | None = None, *, lease: timedelta = CLAIM_LEASE):
        self.pool = pool
        self.keyring = keyring
        self.embedder = embedder
        self.policy = policy or ProjectionPolicy()
        self.lease = lease  # of the embedding calls' claims, renewed while a call runs
        # Called after a batch's embeddings are recorded, before anything is written from them
        # (the crash suite's after_record hook; tests simulate a crash there).
        self.after_record: Callable[[EmbedKey], Awaitable[None]] | None = None

    def _digest(self, tenant_id: str, subject_id: str) -> str:
        return self.keyring.subject_digest(tenant_id, subject_id)

    async def _recorded(self, tenant_id: str, subject_id: str, items: list[_Item]) -> None:
        """Fill in the vectors of items whose embedding is already recorded."""
        async with tenant_transaction(self.pool, tenant_id) as conn:
            await ensure_not_erased(conn, tenant_id, subject_id, self._digest(tenant_id, subject_id))
            found = await recorded_results(conn, tenant_id, {_key(i).operation_id: i.req_hash for i in items})
        for item in items:
            if (op := _key(item).operation_id) in found:
                embedding = EmbeddingResult.model_validate(found[op])
                item.vector, item.model = embedding.vectors[0], embedding.model

    async def _claim(self, tenant_id: str, subject_id: str, items: list[_Item]) -> list[_Item]:
        """Claim each item's operation as OperationRecorder.run does, for the batch at once: a live
        claim of another attempt is respected (its item left for later), a lapsed one taken over.
        Returns the items claimed."""
        if not items:
            return []
        async with tenant_transaction(self.pool, tenant_id) as conn:
            await ensure_not_erased(conn, tenant_id, subject_id, self._digest(tenant_id, subject_id))
            won = await claim_operations(conn, tenant_id=tenant_id, subject_id=subject_id,
                                         claims=[(_key(i), i.req_hash) for i in items], lease=self.lease)
        return [item for item in items if _key(item).operation_id in won]

    async def _release_failed(self, tenant_id: str, items: list[_Item], exc: BaseException) -> None:
        await record_failed(self.pool, tenant_id, _operation_ids(items), exc)

    async def _call(self, tenant_id: str, items: list[_Item]) -> EmbeddingResult:
        """One provider call for the claimed items, its output checked before anything is
        recorded; a remote embedder gets the texts with the tenant's identifiers redacted."""
        texts = [i.text or "" for i in items]
        result = await shielded_embed(self.pool, tenant_id, self.embedder, texts)
        problems = []
        if len(result.vectors) != len(texts):
            problems.append(f"{len(result.vectors)} vectors for {len(texts)} texts")
        elif any(len(v) != self.embedder.dimensions for v in result.vectors):
            problems.append(f"a vector does not have {self.embedder.dimensions} dimensions")
        elif not all(math.isfinite(x) for v in result.vectors for x in v):
            problems.append("a vector has a non-finite component")
        if problems:
            raise ProviderOutputInvalid("", problems)
        return result

    async def _record(self, tenant_id: str, subject_id: str, items: list[_Item], result: EmbeddingResult) -> None:
        """The call's results, recorded in one transaction: each item's `embed/...` operation with
        its vector, and the call's bookkeeping (provider request id, tokens, cost) once, on an
        `embed-batch/...` record."""
        keys = [_key(i) for i in items]
        batch = EmbedBatchKey.for_operations(keys)
        async with tenant_transaction(self.pool, tenant_id) as conn:
            await ensure_not_erased(conn, tenant_id, subject_id, self._digest(tenant_id, subject_id))
            await record_succeeded(conn, tenant_id=tenant_id, subject_id=subject_id, key=batch,
                                   req_hash=request_hash(EmbedBatchKey.request(keys)),
                                   result=EmbeddingResult(provider=result.provider,
                                                          provider_request_id=result.provider_request_id,
                                                          input_tokens=result.input_tokens,
                                                          output_tokens=result.output_tokens,
                                                          cost_usd=result.cost_usd, redacted=result.redacted,
                                                          model=result.model, vectors=[]))
            await record_succeeded_many(conn, tenant_id=tenant_id, subject_id=subject_id, records=[
                (key, item.req_hash, EmbeddingResult(provider=result.provider,
                                                     provider_request_id=result.provider_request_id,
                                                     model=result.model, vectors=[vector]))
                for key, item, vector in zip(keys, items, result.vectors, strict=True)])
        if self.after_record is not None:
            await self.after_record(keys[0])
        for item, vector in zip(items, result.vectors, strict=True):
            item.vector, item.model = vector, result.model

    async def _embed(self, tenant_id: str, subject_id: str, items: list[_Item], outcome: ProjectorBatchOutcome,
                     failures: dict[str, list[tuple[_Item, BaseException]]]) -> None:
        if not items:
            return
        outcome.provider_calls += 1
        try:
            async with renewed_claims(self.pool, tenant_id, _operation_ids(items), lease=self.lease):
                result = await self._call(tenant_id, items)
        except (ProviderPermanentError, ProviderOutputInvalid) as exc:
            await self._release_failed(tenant_id, items, exc)
            if len(items) == 1:
                failures["permanent"].append((items[0], exc))
                return
            # One bad text fails the whole call: find it by embedding each item on its own.
            for item in items:
                if await self._claim(tenant_id, subject_id, [item]):
                    await self._embed(tenant_id, subject_id, [item], outcome, failures)
                else:
                    outcome.in_flight += 1
            return
        except Exception as exc:  # transient: ProviderRetryableError, a timeout, a network error
            await self._release_failed(tenant_id, items, exc)
            failures["transient"].extend((item, exc) for item in items)
            return
        # Outside the try: a failure to record is the activity's (Temporal retries it), not the row's.
        await self._record(tenant_id, subject_id, items, result)
        outcome.embedded += len(items)

    async def project_batch(self, tenant_id: str, subject_id: str) -> ProjectorBatchOutcome:
        outcome = ProjectorBatchOutcome()
        rows = await due_rows(self.pool, tenant_id, subject_id, self.policy.batch_size)
        outcome.selected = len(rows)
        # A fact of a namespace the tenant keeps from this (remote) embedder is done without a
        # vector, as a removed row is: keyword recall still finds it.
        kept = await namespaces_kept_from(self.pool, tenant_id, self.embedder) if rows else frozenset()
        items = [_Item(memory_id, kind, version, attempts,
                       memory_text(kind, namespace, key, value)
                       if value is not None and not (kind == "fact" and namespace in kept) else None)
                 for memory_id, kind, version, attempts, value, namespace, key in rows]
        live = [i for i in items if i.text is not None]
        for item in live:
            assert item.text is not None
            item.key = EmbedKey.for_text(item.memory_id, item.version, self.embedder, item.text)
            item.req_hash = request_hash(item.key.request(item.text))
        failures: dict[str, list[tuple[_Item, BaseException]]] = {"transient": [], "permanent": []}
        if live:
            await self._recorded(tenant_id, subject_id, live)
            outcome.reused = sum(i.vector is not None for i in live)
            claimed = await self._claim(tenant_id, subject_id, [i for i in live if i.vector is None])
            outcome.in_flight = sum(i.vector is None for i in live) - len(claimed)
            await self._embed(tenant_id, subject_id, claimed, outcome, failures)
        done = [i for i in items if i.text is None or i.vector is not None]
        async with tenant_transaction(self.pool, tenant_id) as conn:
            await ensure_not_erased(conn, tenant_id, subject_id, self._digest(tenant_id, subject_id))
            # Marked first, then written: the row lock orders this batch against a forget, which
            # deletes the outbox row before the vectors; a row a forget removed is not returned,
            # so no vector of a forgotten memory is written after its forget.
            pending: set[tuple[Any, int]] = set()
            if done:
                cur = await conn.execute(
                    """
                    UPDATE projection_outbox SET processed_at = now(), last_error = NULL
                     WHERE tenant_id = %(t)s AND processed_at IS NULL
                       AND (memory_id, version) IN (SELECT * FROM unnest(%(ids)s::uuid[], %(versions)s::int[]))
                    RETURNING memory_id, version
                    """, {"t": tenant_id, **_keys(done)})
                pending = {(m, int(v)) for m, v in await cur.fetchall()}
            writes = [item for item in done if item.vector is not None and (item.memory_id, item.version) in pending]
            outcome.skipped += len(done) - len(writes)  # rows removed (erasure, forget) or replaced: nothing to project
            if writes:
                cur = await conn.execute(
                    """
                    INSERT INTO memory_vectors (tenant_id, subject_id, memory_id, memory_kind, version, model, embedding)
                    SELECT %(t)s, %(u)s, v.memory_id, v.kind, v.version, v.model, v.embedding
                      FROM unnest(%(ids)s::uuid[], %(kinds)s::text[], %(versions)s::int[], %(models)s::text[],
                                  %(vectors)s::vector[]) AS v(memory_id, kind, version, model, embedding)
                    ON CONFLICT (tenant_id, memory_id, version, model, subject_id) DO NOTHING
                    """, {"t": tenant_id, "u": subject_id, "ids": [i.memory_id for i in writes],
                          "kinds": [i.kind for i in writes], "versions": [i.version for i in writes],
                          "models": [i.model for i in writes],
                          "vectors": [Vector(i.vector) for i in writes if i.vector is not None]})
                outcome.vectors_upserted += cur.rowcount
            for item, exc in failures["transient"]:
                dead = item.attempts + 1 >= self.policy.max_attempts
                await conn.execute(
                    """
                    UPDATE projection_outbox
                       SET attempts = attempts + 1, last_error = %s,
                           next_attempt_at = now() + make_interval(secs => %s),
                           dead_lettered_at = CASE WHEN %s THEN now() END
                     WHERE tenant_id = %s AND memory_id = %s AND version = %s AND processed_at IS NULL
                    """, (short_error(exc), backoff_seconds(self.policy, item.attempts), dead, tenant_id,
                          item.memory_id, item.version))
                outcome.dead_lettered += dead
                outcome.retried += not dead
            for item, exc in failures["permanent"]:
                await conn.execute(
                    """
                    UPDATE projection_outbox SET attempts = attempts + 1, last_error = %s, dead_lettered_at = now()
                     WHERE tenant_id = %s AND memory_id = %s AND version = %s AND processed_at IS NULL
                    """, (short_error(exc), tenant_id, item.memory_id, item.version))
                outcome.dead_lettered += 1
        if done:
            fault_point("mid_projection")
        await self._status(tenant_id, subject_id, outcome)
        return outcome

    async def _status(self, tenant_id: str, subject_id: str, outcome: ProjectorBatchOutcome) -> None:
        async with tenant_transaction(self.pool, tenant_id) as conn:
            cur = await conn.execute(
                """
                SELECT count(*) FILTER (WHERE next_attempt_at <= now()), count(*),
                       extract(epoch FROM min(next_attempt_at) FILTER (WHERE next_attempt_at > now()) - now())
                  FROM projection_outbox
                 WHERE tenant_id = %s AND subject_id = %s AND processed_at IS NULL AND dead_lettered_at IS NULL
                """, (tenant_id, subject_id))
            due, pending, next_in = await fetch_one(cur)
        outcome.due, outcome.pending = int(due), int(pending)
        outcome.next_attempt_in_seconds = float(next_in) if next_in is not None else None


# --- lag, and subjects with due rows ----------------------------------------------------------

async def projection_lag(pool: AsyncConnectionPool, tenant_id: str, subject_id: str | None = None) -> ProjectionLag:
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            """
            SELECT count(*) FILTER (WHERE processed_at IS NULL AND dead_lettered_at IS NULL),
                   count(*) FILTER (WHERE processed_at IS NULL AND dead_lettered_at IS NULL
                                      AND next_attempt_at <= now()),
                   count(*) FILTER (WHERE processed_at IS NULL AND dead_lettered_at IS NULL AND attempts > 0),
                   extract(epoch FROM now() - min(created_at) FILTER (WHERE processed_at IS NULL
                                                                         AND dead_lettered_at IS NULL)),
                   count(*) FILTER (WHERE dead_lettered_at IS NOT NULL)
              FROM projection_outbox
             WHERE tenant_id = %s AND (%s::text IS NULL OR subject_id = %s)
            """, (tenant_id, subject_id, subject_id))
        pending, due, retrying, age, dead = await fetch_one(cur)
    return ProjectionLag(tenant_id=tenant_id, subject_id=subject_id, pending=pending, due=due, retrying=retrying,
                         oldest_pending_age_seconds=float(age) if age is not None else None, dead_letters=dead)


async def subjects_with_due_rows(pool: AsyncConnectionPool, tenant_id: str, limit: int) -> list[str]:
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            """
            SELECT subject_id FROM projection_outbox
             WHERE tenant_id = %s AND processed_at IS NULL AND dead_lettered_at IS NULL AND next_attempt_at <= now()
             GROUP BY subject_id ORDER BY min(next_attempt_at) LIMIT %s
            """, (tenant_id, limit))
        return [row[0] for row in await cur.fetchall()]


# A projected row is kept this long: the rebuild and the forget/projector ordering only need rows
# still pending, and an hour leaves any in-flight transaction that saw the row long finished.
PRUNE_PROJECTED_AFTER_SECONDS = 3600


async def prune_projected_rows(pool: AsyncConnectionPool, tenant_id: str, *, limit: int = 10_000,
                               older_than_seconds: float = PRUNE_PROJECTED_AFTER_SECONDS) -> int:
    """Delete up to `limit` of the tenant's outbox rows projected more than `older_than_seconds`
    ago (oldest first); returns how many."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            """
            DELETE FROM projection_outbox o USING (
                SELECT memory_id, version FROM projection_outbox
                 WHERE tenant_id = %(t)s AND processed_at IS NOT NULL
                   AND processed_at < now() - make_interval(secs => %(age)s)
                 ORDER BY processed_at LIMIT %(limit)s) old
             WHERE o.tenant_id = %(t)s AND o.memory_id = old.memory_id AND o.version = old.version
               -- Again on the row as it is now: a rebuild may have made it pending meanwhile.
               AND o.processed_at IS NOT NULL AND o.processed_at < now() - make_interval(secs => %(age)s)
            """, {"t": tenant_id, "age": older_than_seconds, "limit": limit})
        return cur.rowcount


async def requeue_dead_letters(pool: AsyncConnectionPool, tenant_id: str, subject_id: str | None = None) -> list[str]:
    """Give dead-lettered rows a fresh set of attempts (after fixing the provider, say); returns
    the subjects whose projector should be woken."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            """
            UPDATE projection_outbox SET dead_lettered_at = NULL, attempts = 0, next_attempt_at = now()
             WHERE tenant_id = %s AND dead_lettered_at IS NOT NULL AND processed_at IS NULL
               AND (%s::text IS NULL OR subject_id = %s)
            RETURNING subject_id
            """, (tenant_id, subject_id, subject_id))
        return sorted({row[0] for row in await cur.fetchall()})


# --- waking a subject's projector -------------------------------------------------------------

async def wake_projector(temporal: Client, task_queue: str, tenant_id: str, subject_id: str) -> None:
    """Signal-with-start: signals the subject's running projector, or starts the next run (a
    projector completes when nothing is pending)."""
    check_identifier("tenant", tenant_id)
    check_identifier("subject", subject_id)
    await temporal.start_workflow(
        contract.PROJECTOR_WORKFLOW, ProjectorInput(tenant_id=tenant_id, subject_id=subject_id),
        id=contract.projector_workflow_id(tenant_id, subject_id), task_queue=task_queue,
        start_signal=contract.SIGNAL_WAKE,
        search_attributes=TypedSearchAttributes([SearchAttributePair(contract.TENANT_ID, tenant_id),
                                                 SearchAttributePair(contract.SUBJECT_ID, subject_id)]))
