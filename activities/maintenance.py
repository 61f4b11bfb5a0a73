"""Maintenance activities run by Schedules: key rotation and physical compaction."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool
from redis.asyncio import Redis
from temporalio import activity

from activities.authorization import claim_for_this_run
from activities.errors import temporal_failures
from agent_memory.core import contract
from agent_memory.lifecycle.compaction import CompactionInput, CompactionResult, compact_pending
from agent_memory.security.keyring import KeyRing, KeyRotationInput, RotationResult


class MaintenanceActivities:
    def __init__(self, pool: AsyncConnectionPool, redis: Redis, keyring: KeyRing, database_url: str):
        self.pool = pool
        self.redis = redis
        self.keyring = keyring
        self.database_url = database_url

    @activity.defn(name=contract.ROTATE_KEY_ENCRYPTION_KEY)
    @temporal_failures
    async def rotate_key_encryption_key(self, request: KeyRotationInput) -> RotationResult:
        if request.beyond_schedule():  # a forced rotation: an operator must have asked for this very run
            await claim_for_this_run(self.pool, self.keyring, "key-rotation")
        return await self.keyring.rotate(self.pool, force=request.force)

    @activity.defn(name=contract.COMPACT_ERASED_DATA)
    @temporal_failures
    async def compact_erased_data(self, request: CompactionInput) -> CompactionResult:
        if request.beyond_schedule():  # every erasure table, ticket or not: an operator asked for this very run
            await claim_for_this_run(self.pool, self.keyring, "compaction")
        return await compact_pending(self.pool, self.redis, self.database_url, force=request.force)
