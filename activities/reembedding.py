"""Re-embedding activities: begin, one batch, switch (agent_memory/projection/reembedding.py)."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool
from temporalio import activity

from activities.errors import temporal_failures
from agent_memory.core import contract
from agent_memory.projection.reembedding import (
    BeginReembedInput,
    BeginReembedResult,
    ReembedBatchInput,
    ReembedBatchResult,
    SwitchModelInput,
    SwitchModelResult,
    begin_reembedding,
    reembed_batch,
    switch_model,
)
from agent_memory.providers.base import Embedder


class ReembeddingActivities:
    def __init__(self, pool: AsyncConnectionPool, embedder: Embedder):
        self.pool = pool
        self.embedder = embedder  # the worker's: the re-embedding's target model

    @activity.defn(name=contract.BEGIN_REEMBEDDING)
    @temporal_failures
    async def begin_reembedding(self, request: BeginReembedInput) -> BeginReembedResult:
        return await begin_reembedding(self.pool, request)

    @activity.defn(name=contract.REEMBED_BATCH)
    @temporal_failures
    async def reembed_batch(self, request: ReembedBatchInput) -> ReembedBatchResult:
        return await reembed_batch(self.pool, self.embedder, request)

    @activity.defn(name=contract.SWITCH_EMBEDDING_MODEL)
    @temporal_failures
    async def switch_embedding_model(self, request: SwitchModelInput) -> SwitchModelResult:
        return await switch_model(self.pool, request)
