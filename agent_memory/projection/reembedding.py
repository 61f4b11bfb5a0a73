"""Re-embedding: the vector projection survives an embedding-model change.

Every vector row names its model, and recall compares a query only with vectors of the model
it embedded the query with. Each tenant has an *active* model in `embedding_models`, the one
its recall reads. When the workers' embedder changes (another model, or another width), every
memory must be embedded again under the new one:

1. `begin`: the tenant's active model is recorded if it was not yet (the model most of its
   vectors have). The new model is marked `building`.
2. `batch`, repeated: the next batch of the active model's vectors, by (memory id, version), is
   embedded under the new model. The batch is one embedder call. Each result is recorded as an
   `embed` operation before its vector is written, so a retried batch makes no second call.
   Recall keeps reading the active model meanwhile: the query is embedded by the old model,
   through `embedder_for_model`. Memories made during the re-embedding get the new model's
   vectors from the projector and are found by the lexical route until the switch.
3. `switch`: once no vector of the active model lacks its twin, the new model becomes active
   and the old model's vectors are deleted, in one transaction.

`workflows/reembedding.py` runs these steps as a workflow. Its progress is a query. Workers
start it for every tenant whose vectors are of another model (`reembedding_needed`), and so
does `agent-memory reembed`; either registers the run first, as every run that deletes data
must (agent_memory/security/operator_requests.py).
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import psycopg
from pgvector import Vector
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field
from temporalio.client import Client, WorkflowHandle
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)

from agent_memory.core import contract
from agent_memory.core.errors import AgentMemoryError, InvalidInput
from agent_memory.core.models import EmbeddingResult
from agent_memory.core.operation_keys import EmbedKey
from agent_memory.core.run_inputs import RunInput
from agent_memory.memory.operations import record_succeeded, recorded_result, request_hash
from agent_memory.projection.projector import memory_text
from agent_memory.providers.base import Embedder
from agent_memory.providers.policy import shielded_embed
from agent_memory.security.keyring import KeyRing
from agent_memory.security.operator_requests import (
    DEFAULT_TTL_SECONDS,
    register_operator_request,
    starts_a_new_run,
)
from agent_memory.store.db import fetch_one, registered_tenants, tenant_transaction

log = logging.getLogger(__name__)
_EMBEDDERS: dict[str, Embedder] = {}


class ModelMismatchError(AgentMemoryError):
    """The worker embeds with another model than the re-embedding's target."""


def embedder_model(embedder: Embedder) -> str | None:
    """The model id the embedder writes on its vectors (None: it does not say before a call)."""
    model = getattr(embedder, "model", None)
    return model if isinstance(model, str) else None


def embedder_for_model(model: str, configured: Embedder) -> Embedder | None:
    """An embedder that writes `model` vectors: the configured one, or an offline one this
    process can build (hashing, e5-small). None for a remote model that is not configured."""
    if embedder_model(configured) == model:
        return configured
    if model not in _EMBEDDERS:
        from agent_memory.providers.e5 import E5SmallEmbedder
        from agent_memory.providers.hashing import HashingEmbedder

        for candidate in (HashingEmbedder(), E5SmallEmbedder()):
            if candidate.model == model:
                _EMBEDDERS[model] = candidate
    return _EMBEDDERS.get(model)


async def active_model(conn: psycopg.AsyncConnection, tenant_id: str) -> str | None:
    cur = await conn.execute("SELECT model FROM embedding_models WHERE tenant_id = %s AND state = 'active'",
                             (tenant_id,))
    row = await cur.fetchone()
    return str(row[0]) if row else None


async def reading_embedder(pool: AsyncConnectionPool, tenant_id: str, configured: Embedder) -> Embedder:
    """The embedder recall embeds queries with: the one of the tenant's active model (the old one
    while a re-embedding runs). Falls back to the configured one, with a warning, when the
    active model cannot be built here: recall then finds by keyword until the switch."""
    async with tenant_transaction(pool, tenant_id) as conn:
        active = await active_model(conn, tenant_id)
    if active is None:
        return configured
    found = embedder_for_model(active, configured)
    if found is None:
        log.warning("tenant %s reads model %s, which this process cannot embed with: vector recall is off until "
                    "its re-embedding switches", tenant_id, active)
        return configured
    return found


class BeginReembedInput(RunInput):
    tenant_id: str
    target_model: str
    target_dimensions: int = Field(ge=1)


class BeginReembedResult(BaseModel):
    source_model: str | None  # None: nothing to re-embed (the target is active, or no vectors)
    total: int


class ReembedBatchInput(RunInput):
    tenant_id: str
    source_model: str
    target_model: str
    after_memory_id: str | None = None
    after_version: int | None = None
    batch_size: int = Field(default=64, ge=1, le=1024)


class ReembedBatchResult(BaseModel):
    selected: int
    embedded: int  # by this batch's embedder call
    reused: int  # recorded before (a retried batch)
    written: int
    next_memory_id: str | None
    next_version: int | None
    done: bool


class SwitchModelInput(RunInput):
    tenant_id: str
    source_model: str
    target_model: str


class SwitchModelResult(BaseModel):
    switched: bool
    missing: int  # vectors of the source model still without a target twin
    old_vectors_deleted: int


class ReembedInput(RunInput):
    kind: Literal["reembed"] = "reembed"
    tenant_id: str
    target_model: str
    target_dimensions: int = Field(ge=1)
    batch_size: int = Field(default=64, ge=1, le=1024)
    # Carried across continue-as-new.
    source_model: str | None = None
    total: int = 0
    embedded: int = 0
    reused: int = 0
    after_memory_id: str | None = None
    after_version: int | None = None
    passes: int = 0


class ReembedProgress(BaseModel):
    tenant_id: str
    target_model: str
    source_model: str | None
    state: Literal["starting", "building", "switched", "nothing to do"]
    total: int
    done: int  # source vectors that have their target twin (embedded + reused, this run and before)
    batches: int = 0


async def begin_reembedding(pool: AsyncConnectionPool, request: BeginReembedInput) -> BeginReembedResult:
    tenant_id, target_model = request.tenant_id, request.target_model
    async with tenant_transaction(pool, tenant_id) as conn:
        active = await active_model(conn, tenant_id)
        if active is None:  # the first model change of this tenant: its current vectors' model
            cur = await conn.execute(
                "SELECT model, max(vector_dims(embedding)) FROM memory_vectors WHERE tenant_id = %s AND model <> %s "
                "GROUP BY model ORDER BY count(*) DESC, model LIMIT 1", (tenant_id, target_model))
            row = await cur.fetchone()
            if row is not None:
                active = str(row[0])
                await conn.execute("INSERT INTO embedding_models (tenant_id, model, dimensions, state) "
                                   "VALUES (%s, %s, %s, 'active')", (tenant_id, active, row[1]))
        if active is None or active == target_model:
            if active is None:  # no vectors of another model: the target is simply the tenant's model
                await _mark(conn, tenant_id, target_model, "active", request.target_dimensions)
            return BeginReembedResult(source_model=None, total=0)
        await _mark(conn, tenant_id, target_model, "building", request.target_dimensions)
        cur = await conn.execute("SELECT count(*) FROM memory_vectors WHERE tenant_id = %s AND model = %s",
                                 (tenant_id, active))
        (total,) = await fetch_one(cur)
    return BeginReembedResult(source_model=active, total=total)


async def _mark(conn: psycopg.AsyncConnection, tenant_id: str, model: str, state: str, dimensions: int) -> None:
    await conn.execute(
        "INSERT INTO embedding_models (tenant_id, model, dimensions, state, switched_at) "
        "VALUES (%s, %s, %s, %s, CASE WHEN %s = 'active' THEN now() END) "
        "ON CONFLICT (tenant_id, model) DO UPDATE SET state = EXCLUDED.state, "
        "switched_at = EXCLUDED.switched_at", (tenant_id, model, dimensions, state, state))


# The text a vector embeds, as the projector reads it from the projections.
_ITEMS = """
    SELECT v.memory_id, v.memory_kind, v.version, v.subject_id, f.namespace, f.key,
           CASE v.memory_kind WHEN 'episode' THEN e.summary WHEN 'observation' THEN o.text ELSE f.value END AS text
      FROM memory_vectors v
      LEFT JOIN facts f ON v.memory_kind = 'fact' AND f.tenant_id = v.tenant_id AND f.memory_id = v.memory_id
                       AND f.version = v.version
      LEFT JOIN episodes e ON v.memory_kind = 'episode' AND e.tenant_id = v.tenant_id AND e.memory_id = v.memory_id
      LEFT JOIN observations o ON v.memory_kind = 'observation' AND o.tenant_id = v.tenant_id
                              AND o.memory_id = v.memory_id
     WHERE v.tenant_id = %(t)s AND v.model = %(source)s
       AND NOT EXISTS (SELECT 1 FROM memory_vectors n WHERE n.tenant_id = v.tenant_id AND n.memory_id = v.memory_id
                          AND n.version = v.version AND n.model = %(target)s)
"""


async def reembed_batch(pool: AsyncConnectionPool, embedder: Embedder, request: ReembedBatchInput) -> ReembedBatchResult:
    if embedder_model(embedder) != request.target_model:
        raise ModelMismatchError(f"this worker embeds with {embedder_model(embedder)!r}, the re-embedding targets "
                                 f"{request.target_model!r}: run it on workers configured with that model")
    t = request.tenant_id
    async with tenant_transaction(pool, t) as conn:
        cur = await conn.execute(
            _ITEMS + " AND (%(after)s::uuid IS NULL OR (v.memory_id, v.version) > (%(after)s::uuid, %(version)s::int))"
                     " ORDER BY v.memory_id, v.version LIMIT %(n)s",
            {"t": t, "source": request.source_model, "target": request.target_model, "after": request.after_memory_id,
             "version": request.after_version or 0, "n": request.batch_size})
        rows = await cur.fetchall()
        items = [(memory_id, kind, version, subject, memory_text(kind, namespace or kind, key, text))
                 for memory_id, kind, version, subject, namespace, key, text in rows if text is not None]
        keys = {(m, v): EmbedKey.for_text(m, v, embedder, text) for m, _, v, _, text in items}
        vectors: dict[tuple[Any, int], list[float]] = {}
        for memory_id, _, version, _, text in items:  # recorded by an earlier attempt of this batch
            key = keys[(memory_id, version)]
            done = await recorded_result(conn, t, key, request_hash(key.request(text)), EmbeddingResult)
            if done is not None and done.vectors and done.model == request.target_model:
                vectors[(memory_id, version)] = done.vectors[0]
    reused = len(vectors)
    todo = [i for i in items if (i[0], i[2]) not in vectors]
    if todo:
        result = await shielded_embed(pool, t, embedder, [text for *_, text in todo])
        if result.model != request.target_model or len(result.vectors) != len(todo):
            raise ModelMismatchError(f"the embedder returned {len(result.vectors)} vectors of {result.model!r} for "
                                     f"{len(todo)} texts of {request.target_model!r}")
        # Recorded before anything is written: a retry after a crash reuses these, no second call.
        async with tenant_transaction(pool, t) as conn:
            for (memory_id, _, version, subject, text), vector in zip(todo, result.vectors, strict=True):
                key = keys[(memory_id, version)]
                await record_succeeded(conn, tenant_id=t, subject_id=subject, key=key,
                                       req_hash=request_hash(key.request(text)),
                                       result=EmbeddingResult(provider=result.provider, model=result.model,
                                                              provider_request_id=result.provider_request_id,
                                                              vectors=[vector]))
                vectors[(memory_id, version)] = vector
    written = 0
    async with tenant_transaction(pool, t) as conn:
        for memory_id, kind, version, subject, _ in items:
            # Only while the source vector is still there: a memory forgotten or erased meanwhile
            # is not given a new one (and reads re-check every hit against its row anyway).
            cur = await conn.execute(
                "INSERT INTO memory_vectors (tenant_id, subject_id, memory_id, memory_kind, version, model, embedding) "
                "SELECT %s, %s, %s, %s, %s, %s, %s WHERE EXISTS (SELECT 1 FROM memory_vectors WHERE tenant_id = %s "
                "AND subject_id = %s AND memory_id = %s AND version = %s AND model = %s) ON CONFLICT DO NOTHING",
                (t, subject, memory_id, kind, version, request.target_model, Vector(vectors[(memory_id, version)]),
                 t, subject, memory_id, version, request.source_model))
            written += cur.rowcount
    last = rows[-1] if rows else None
    return ReembedBatchResult(selected=len(rows), embedded=len(todo), reused=reused, written=written,
                              next_memory_id=str(last[0]) if last else request.after_memory_id,
                              next_version=int(last[2]) if last else request.after_version,
                              done=len(rows) < request.batch_size)


async def switch_model(pool: AsyncConnectionPool, request: SwitchModelInput) -> SwitchModelResult:
    """Make the target active and drop the source's vectors, once every source vector (of a
    memory still there) has its target twin; else nothing changes and `missing` says how many."""
    t = request.tenant_id
    async with tenant_transaction(pool, t) as conn:
        # A source vector whose memory row is gone (nothing to embed) is not missing: it goes below.
        cur = await conn.execute(f"SELECT count(*) FROM ({_ITEMS}) missing WHERE missing.text IS NOT NULL",
                                 {"t": t, "source": request.source_model, "target": request.target_model})
        (missing,) = await fetch_one(cur)
        if missing:
            return SwitchModelResult(switched=False, missing=missing, old_vectors_deleted=0)
        await conn.execute("UPDATE embedding_models SET state = 'retired' WHERE tenant_id = %s AND state = 'active'",
                           (t,))
        await conn.execute("UPDATE embedding_models SET state = 'active', switched_at = now() "
                           "WHERE tenant_id = %s AND model = %s", (t, request.target_model))
        cur = await conn.execute("DELETE FROM memory_vectors WHERE tenant_id = %s AND model <> %s",
                                 (t, request.target_model))
        deleted = cur.rowcount
    return SwitchModelResult(switched=True, missing=0, old_vectors_deleted=deleted)


async def reembedding_needed(pool: AsyncConnectionPool, tenant_id: str, target_model: str) -> bool:
    """Whether the tenant reads (or holds vectors of) another model than `target_model`."""
    async with tenant_transaction(pool, tenant_id) as conn:
        active = await active_model(conn, tenant_id)
        if active is not None:
            return active != target_model
        cur = await conn.execute("SELECT 1 FROM memory_vectors WHERE tenant_id = %s AND model <> %s LIMIT 1",
                                 (tenant_id, target_model))
        return await cur.fetchone() is not None


async def start_reembedding(pool: AsyncConnectionPool, keyring: KeyRing, temporal: Client, task_queue: str,
                            tenant_id: str, embedder: Embedder, *, registered_by: str,
                            ttl_seconds: float = DEFAULT_TTL_SECONDS) -> WorkflowHandle:
    """Start (or attach to) the tenant's re-embedding to the embedder's model, registered first
    by `registered_by` (its switch deletes the old model's vectors: the run's single-use
    authorization, agent_memory/security/operator_requests.py)."""
    model = embedder_model(embedder)
    if model is None:
        raise InvalidInput("this embedder does not name its model before a call: it cannot be a re-embedding target")
    workflow_id = contract.reembed_workflow_id(tenant_id, model)
    if await starts_a_new_run(temporal, workflow_id, failed_only=False):  # else: attached to the running one
        await register_operator_request(pool, keyring, "reembedding", workflow_id, registered_by=registered_by,
                                        ttl_seconds=ttl_seconds, tenant_id=tenant_id)
    return await temporal.start_workflow(
        contract.REEMBED_WORKFLOW,
        ReembedInput(tenant_id=tenant_id, target_model=model, target_dimensions=embedder.dimensions),
        id=workflow_id, task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        # A model can come back (A → B → A): each change is a new run under the model's id.
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        search_attributes=TypedSearchAttributes([SearchAttributePair(contract.TENANT_ID, tenant_id)]),
        result_type=ReembedProgress)


async def start_needed_reembeddings(pool: AsyncConnectionPool, keyring: KeyRing, temporal: Client, task_queue: str,
                                    embedder: Embedder, *, registered_by: str,
                                    ttl_seconds: float = DEFAULT_TTL_SECONDS) -> list[str]:
    """At worker start: every tenant whose recall reads another model than the worker's embedder
    gets its re-embedding registered (by `registered_by`, the worker) and started (a running one
    is attached to). Returns those tenants."""
    model = embedder_model(embedder)
    if model is None:
        return []
    started = []
    for tenant_id in await registered_tenants(pool):
        if await reembedding_needed(pool, tenant_id, model):
            await start_reembedding(pool, keyring, temporal, task_queue, tenant_id, embedder,
                                    registered_by=registered_by, ttl_seconds=ttl_seconds)
            started.append(tenant_id)
    return started
