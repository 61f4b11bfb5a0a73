"""Connections to the configured services, opened and closed explicitly."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from redis.asyncio import Redis
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_exponential

from agent_memory.crypto import KeyWrapper, load_master_key
from agent_memory.db import apply_migrations, open_pool, set_app_role_password
from agent_memory.settings import Settings


def _retrying() -> AsyncRetrying:
    # Services may still be starting (compose, restarts): retry connecting, then fail clearly.
    return AsyncRetrying(stop=stop_after_delay(45), wait=wait_exponential(multiplier=0.2, max=5),
                         retry=retry_if_exception_type((OSError, RuntimeError, psycopg.OperationalError, PoolTimeout)),
                         reraise=True)


async def connect_temporal(settings: Settings) -> Client:
    if not settings.temporal_address:
        raise RuntimeError("TEMPORAL_ADDRESS is not set and no embedded server was started")
    async for attempt in _retrying():
        with attempt:
            return await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace,
                                        data_converter=pydantic_data_converter)
    raise AssertionError("unreachable")


async def connect_pool(settings: Settings, *, max_size: int = 8) -> AsyncConnectionPool:
    if not settings.database_url:
        raise RuntimeError("DATABASE_URL is not set and no embedded PostgreSQL was started")
    async for attempt in _retrying():
        with attempt:
            return await open_pool(settings.database_url, max_size=max_size)
    raise AssertionError("unreachable")


async def migrate(settings: Settings, *, app_password: str | None = None) -> list[str]:
    """Apply migrations with the owner role (DATABASE_ADMIN_URL); the app role cannot.
    The embedded stack also passes the app role's password so it can log in."""
    if not settings.database_admin_url:
        return []
    async for attempt in _retrying():
        with attempt:
            applied = await apply_migrations(settings.database_admin_url)
    if app_password:
        await set_app_role_password(settings.database_admin_url, app_password)
    return applied


def connect_redis(settings: Settings) -> Redis:
    if not settings.redis_url:
        raise RuntimeError("REDIS_URL is not set and no embedded Redis was started")
    return Redis.from_url(settings.redis_url, decode_responses=True)


@dataclass
class Services:
    settings: Settings
    pool: AsyncConnectionPool
    redis: Redis
    temporal: Client
    wrapper: KeyWrapper

    @classmethod
    async def open(cls, settings: Settings) -> "Services":
        pool = await connect_pool(settings)
        redis = connect_redis(settings)
        await redis.ping()
        temporal = await connect_temporal(settings)
        wrapper = KeyWrapper(load_master_key(settings.master_key, settings.home))
        return cls(settings=settings, pool=pool, redis=redis, temporal=temporal, wrapper=wrapper)

    async def close(self) -> None:
        await self.redis.aclose()
        await self.pool.close()
