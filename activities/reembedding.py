"""Re-embedding activities: begin, one batch, switch (agent_memory/projection/reembedding.py).

The switch deletes the old model's vectors: a re-embedding acts only on its registration
(`reembedding`, agent_memory/security/operator_requests.py), claimed by its chain's first run at
`begin` and checked again at the switch, so a copied input started under the same workflow id
switches nothing."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool
from temporalio import activity
from temporalio.client import Client

from activities.authorization import claim_for_this_run
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
from agent_memory.security.keyring import KeyRing


class ReembeddingActivities:
    def __init__(self, pool: AsyncConnectionPool, keyring: KeyRing, embedder: Embedder, temporal: Client | None = None):
        """`temporal`: asked for the first run of a continued re-embedding, which holds its claim."""
        self.pool = pool
        self.keyring = keyring
        self.embedder = embedder  # the worker's: the re-embedding's target model
        self.temporal = temporal

    @activity.defn(name=contract.BEGIN_REEMBEDDING)
    @temporal_failures
    async def begin_reembedding(self, request: BeginReembedInput) -> BeginReembedResult:
        await claim_for_this_run(self.pool, self.keyring, "reembedding", chain=self.temporal, chained=True)
        return await begin_reembedding(self.pool, request)

    @activity.defn(name=contract.REEMBED_BATCH)
    @temporal_failures
    async def reembed_batch(self, request: ReembedBatchInput) -> ReembedBatchResult:
        return await reembed_batch(self.pool, self.embedder, request)

    @activity.defn(name=contract.SWITCH_EMBEDDING_MODEL)
    @temporal_failures
    async def switch_embedding_model(self, request: SwitchModelInput) -> SwitchModelResult:
        await claim_for_this_run(self.pool, self.keyring, "reembedding", chain=self.temporal, chained=True)
        return await switch_model(self.pool, request)
