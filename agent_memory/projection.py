"""The vector projection: embeds outbox rows and upserts them into memory_vectors.

Each embedding is a recorded operation keyed by (memory id, version, model), so a crash after
the provider call and before the upsert resumes without calling the embedder again.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from pgvector import Vector
from psycopg_pool import AsyncConnectionPool

from agent_memory.db import tenant_transaction
from agent_memory.fact_text import fact_text
from agent_memory.faults import fault_point
from agent_memory.models import EmbeddingResult, ProjectionOutcome
from agent_memory.operations import OperationRecorder, ensure_not_erased, request_hash
from agent_memory.providers.base import Embedder

BATCH_SIZE = 64


def memory_text(kind: str, namespace: str, key: str | None, value: str) -> str:
    return fact_text(namespace, key, value) if kind == "fact" and key else value


def embed_operation_id(memory_id: object, version: int, embedder: Embedder, text: str) -> str:
    """One embedding per (memory, version, model, text): a change in how a memory reads makes a
    new operation, never a mismatch with one recorded for the old text."""
    return f"embed/{memory_id}/{version}/{embedder.name}-{embedder.version}/{request_hash({'text': text})[:12]}"


async def pending_rows(pool: AsyncConnectionPool, tenant_id: str, subject_id: str) -> list[tuple[Any, ...]]:
    """Outbox rows still to project, joined to the text of the row they point at (None if gone)."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            """
            SELECT o.memory_id, o.memory_kind, o.version,
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
             ORDER BY o.created_at, o.memory_id
             LIMIT %s
            """, (tenant_id, subject_id, BATCH_SIZE))
        return await cur.fetchall()


async def project_vectors(pool: AsyncConnectionPool, recorder: OperationRecorder, embedder: Embedder,
                          tenant_id: str, subject_id: str) -> ProjectionOutcome:
    upserted = done = skipped = 0
    while rows := await pending_rows(pool, tenant_id, subject_id):
        for memory_id, kind, version, value, namespace, key in rows:
            if value is not None:
                text = memory_text(kind, namespace, key, value)
                embedding, _ = await recorder.run(
                    tenant_id=tenant_id, subject_id=subject_id,
                    operation_id=embed_operation_id(memory_id, version, embedder, text),
                    kind="embed", request={"text": text, "model": embedder.name, "version": embedder.version},
                    result_type=EmbeddingResult, call=partial(embedder.embed, [text]))
            async with tenant_transaction(pool, tenant_id) as conn:
                await ensure_not_erased(conn, tenant_id, subject_id,
                                        recorder.keyring.subject_digest(tenant_id, subject_id))
                if value is not None:
                    cur = await conn.execute(
                        """
                        INSERT INTO memory_vectors (tenant_id, subject_id, memory_id, memory_kind, version, model,
                                                    embedding)
                        VALUES (%s, %s, %s, %s, %s, %s, %s)
                        ON CONFLICT (tenant_id, memory_id, version, model) DO NOTHING
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


