"""A subject's Redis keys are registered where they are written, so erasure finds them without a
SCAN of the keyspace; keys written before the registry are registered by one SCAN."""

from __future__ import annotations

from agent_memory.memory.evidence import working_memory_key
from agent_memory.store.redis_keys import BACKFILL_MARKER, redis_prefix, registry_key, subject_keys
from tests.sessions import session


async def _scan(services, tenant: str, subject: str) -> set[str]:
    return {k.decode() if isinstance(k, bytes) else k
            async for k in services.redis.scan_iter(match=f"{redis_prefix(tenant, subject)}*")}


async def test_every_key_under_a_subjects_prefix_is_registered(client, services, tenant):
    long_session = session("r1", "2024-03-01T09:00:00Z", *[f"turn {n}: something about the garden" * 8
                                                           for n in range(30)])
    await client.append_messages(tenant, "lin", long_session)
    await client.build_prompt(tenant, "lin", "r1", "and the garden?")  # writes the running summary too
    registered = set(await subject_keys(services.redis, tenant, "lin"))
    assert working_memory_key(tenant, "lin", "r1") in registered and len(registered) == 2, registered
    # What a SCAN of the prefix finds is exactly the registered keys and the registry.
    assert await _scan(services, tenant, "lin") == registered | {registry_key(tenant, "lin")}


async def test_keys_written_before_the_registry_are_registered_once(services, tenant):
    legacy = f"{redis_prefix(tenant, 'kim')}wm:old"
    await services.redis.rpush(legacy, "{}")  # an older writer: no registry entry
    await services.redis.expire(legacy, 600)
    await services.redis.delete(BACKFILL_MARKER)
    assert await subject_keys(services.redis, tenant, "kim") == [legacy]
    assert await services.redis.exists(BACKFILL_MARKER)
    assert 0 < await services.redis.ttl(registry_key(tenant, "kim")) <= 600


async def test_erasure_deletes_the_registered_keys_and_the_registry_in_one_step(services, tenant):
    from agent_memory.store.redis_keys import delete_subject_keys, register

    key = working_memory_key(tenant, "ana", "d1")
    async with services.redis.pipeline(transaction=True) as pipe:
        pipe.rpush(key, "{}")
        register(pipe, tenant, "ana", key, 600)
        await pipe.execute()
    assert await delete_subject_keys(services.redis, tenant, "ana") == 1
    assert await _scan(services, tenant, "ana") == set()
