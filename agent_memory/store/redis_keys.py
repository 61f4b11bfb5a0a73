"""A subject's Redis keys: one prefix, and a registry, so that erasure finds them without a SCAN
of the whole keyspace.

Every key written under `am:{tenant}:{subject}:` (working memory, the running summary) is added,
in the same MULTI, to the subject's registry set `am:{tenant}:{subject}:keys`, whose TTL is
renewed with each write, so it outlives its members. Erasure deletes the registered keys and the
registry; its residue check asks EXISTS of the same keys (tests also SCAN the prefix, so a key
written without registering fails them).

Keys written before the registry existed (an upgrade with live sessions) are registered by one
SCAN of `am:*`, run by the first erasure that finds no completion marker; after it, no erasure
scans the keyspace again.
"""

from __future__ import annotations

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

REGISTRY = "keys"
BACKFILL_MARKER = "am:registry:subject-keys-registered"


def redis_prefix(tenant_id: str, subject_id: str) -> str:
    """Every Redis key of a subject starts with this."""
    return f"am:{tenant_id}:{subject_id}:"


def registry_key(tenant_id: str, subject_id: str) -> str:
    return f"{redis_prefix(tenant_id, subject_id)}{REGISTRY}"


def register(pipe: Pipeline, tenant_id: str, subject_id: str, key: str, ttl_seconds: int) -> None:
    """Queue, in the writer's MULTI, the registration of `key` of the subject."""
    registry = registry_key(tenant_id, subject_id)
    pipe.sadd(registry, key)
    pipe.expire(registry, ttl_seconds)


async def register_existing_keys(redis: Redis) -> int:
    """Register every subject key written before the registries existed (one SCAN), then set the
    marker; returns how many keys were registered."""
    registered = 0
    persistent: set[str] = set()  # registries given a member without expiry
    async for raw in redis.scan_iter(match="am:*", count=1000):
        key = raw.decode() if isinstance(raw, bytes) else raw
        parts = key.split(":", 3)
        if len(parts) < 4 or parts[3] == REGISTRY:  # am:registry:* and am:metrics:* have three parts
            continue
        ttl = await redis.ttl(key)
        if ttl == -2:  # gone since the SCAN saw it (an erasure, an expiry): nothing to register
            continue
        registry = registry_key(parts[1], parts[2])
        await redis.sadd(registry, key)
        # The registry lives as long as its longest-lived member (EXPIRE GT needs Redis 7).
        registry_ttl = await redis.ttl(registry)
        if ttl == -1:  # a member that never expires: nor does the registry
            await redis.persist(registry)
            persistent.add(registry)
        elif ttl > 0 and registry not in persistent and (registry_ttl == -1 or ttl > registry_ttl):
            await redis.expire(registry, ttl)
        registered += 1
    await redis.set(BACKFILL_MARKER, "1")
    return registered


# Deletes the registered keys and the registry in one step: a writer's MULTI (key + SADD) lands
# wholly before it (deleted here) or after it (a new registry, which the residue check sees).
_DELETE_REGISTERED = """
local members = redis.call('SMEMBERS', KEYS[1])
local deleted = 0
for _, key in ipairs(members) do
    deleted = deleted + redis.call('DEL', key)
end
redis.call('DEL', KEYS[1])
return deleted
"""


async def delete_subject_keys(redis: Redis, tenant_id: str, subject_id: str) -> int:
    """Delete the subject's registered keys and its registry atomically; returns how many keys
    existed. (The keys are named by the registry, not declared to the script: fine for one
    Redis server, which is what the deployment runs.)"""
    if not await redis.exists(BACKFILL_MARKER):
        await register_existing_keys(redis)
    return int(await redis.eval(_DELETE_REGISTERED, 1, registry_key(tenant_id, subject_id)))


async def subject_keys(redis: Redis, tenant_id: str, subject_id: str) -> list[str]:
    """The subject's registered keys that exist now (the registry itself is `registry_key`)."""
    if not await redis.exists(BACKFILL_MARKER):
        await register_existing_keys(redis)
    registry = registry_key(tenant_id, subject_id)
    candidates = sorted(m.decode() if isinstance(m, bytes) else m for m in await redis.smembers(registry))
    if not candidates:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for key in candidates:
            pipe.exists(key)
        flags = await pipe.execute()
    return [key for key, present in zip(candidates, flags, strict=True) if present]
