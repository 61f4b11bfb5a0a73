"""The tenants registry (migration 037): a tenant is noted at its first write, whatever that
write is, and every Schedule lists tenants from it; row security shows a tenant's transaction its
own id only."""

from __future__ import annotations

from agent_memory.lifecycle.retention import RetentionPolicy, apply_retention
from agent_memory.security.api_keys import create_key
from agent_memory.store.db import registered_tenants, tenant_transaction
from tests.databases import database_before
from tests.sessions import session


async def test_a_tenant_is_registered_by_its_first_write_of_any_kind(services, client, tenant):
    messages_only, policy_only, key_only = f"{tenant}-m", f"{tenant}-p", f"{tenant}-k"
    await client.append_messages(messages_only, "zoe", session("s-z", "2024-01-01T10:00:00Z", "I live in Oslo."))
    await client.admin.set_retention_policy(policy_only, RetentionPolicy(note_days=30))
    await create_key(services.pool, key_only, "read")

    listed = set(await registered_tenants(services.pool))
    assert {messages_only, policy_only, key_only} <= listed
    assert tenant not in listed  # never wrote anything
    # A tenant's own transaction sees its own id only.
    async with tenant_transaction(services.pool, messages_only) as conn:
        cur = await conn.execute("SELECT tenant_id FROM tenants")  # no WHERE on purpose
        assert await cur.fetchall() == [(messages_only,)]
    # A second write notes nothing new.
    await client.append_messages(messages_only, "zoe", session("s-y", "2024-01-02T10:00:00Z", "Hi."))
    async with services.pool.connection() as conn, conn.transaction():
        cur = await conn.execute("SELECT count(*) FROM tenants WHERE tenant_id = %s", (messages_only,))
        assert (await cur.fetchone())[0] == 1


async def test_the_schedules_visit_a_tenant_whose_data_never_reached_the_outbox(services, client, tenant):
    await client.append_messages(tenant, "zoe", session("s-z", "2024-01-01T10:00:00Z", "I live in Oslo."))
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM projection_outbox")
        assert (await cur.fetchone())[0] == 0
    retention = await apply_retention(services.pool, services.keyring)
    assert retention.tenants >= 1 and tenant in await registered_tenants(services.pool)


async def test_migration_037_folds_the_narrower_lists_into_the_registry(services):
    """An existing database migrates forward: tenants known from the outbox or from messages,
    and those whose only rows are a policy or a key, are all in the registry; the old lists are gone."""
    async with database_before(services.settings.database_admin_url, "037") as (conn, migrate_the_rest):
        await conn.execute("INSERT INTO projection_tenants (tenant_id, first_seen_at) "
                           "VALUES ('from-outbox', '2024-01-01T00:00:00Z')")
        await conn.execute("INSERT INTO message_tenants (tenant_id, first_seen_at) "
                           "VALUES ('from-messages', '2024-02-01T00:00:00Z'), ('from-outbox', '2023-06-01T00:00:00Z')")
        await conn.execute("INSERT INTO retention_policies (tenant_id, policy) VALUES ('from-policy', '{}'::jsonb)")
        await conn.execute("INSERT INTO api_keys (tenant_id, key_id, secret_sha256, scope) "
                           "VALUES ('from-key', 'k1', 'x', 'read')")
        await migrate_the_rest()
        cur = await conn.execute("SELECT tenant_id, first_write_at::date::text FROM tenants ORDER BY tenant_id")
        registry = dict(await cur.fetchall())
        cur = await conn.execute("SELECT to_regclass('public.projection_tenants'), "
                                 "to_regclass('public.message_tenants')")
        gone = await cur.fetchone()
        cur = await conn.execute("SELECT relforcerowsecurity FROM pg_class WHERE relname IN "
                                 "('messages', 'api_keys', 'retention_policies', 'tenants')")
        forced = [f for (f,) in await cur.fetchall()]
    assert set(registry) == {"from-outbox", "from-messages", "from-policy", "from-key"}
    assert registry["from-outbox"] == "2023-06-01"  # the earliest sighting
    assert gone == (None, None)
    assert forced == [True] * 4  # the backfill lifted row security for its transaction only
