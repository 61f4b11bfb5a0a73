"""Tenant isolation is enforced by Postgres row-level security under the app role."""

from __future__ import annotations

import psycopg

from agent_memory.core.tables import tenant_tables
from agent_memory.store.db import tenant_transaction
from tests.sessions import session

# Declared once, in the table registry; test_tables checks the registry against the database.
TENANT_TABLES = set(tenant_tables())


async def test_app_role_is_not_superuser_and_rls_is_forced(services):
    async with services.pool.connection() as conn:
        cur = await conn.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
        assert await cur.fetchone() == (False, False)
        cur = await conn.execute(
            "SELECT relname FROM pg_class WHERE relkind IN ('r', 'p') AND relnamespace = 'public'::regnamespace "
            "AND relrowsecurity AND relforcerowsecurity")
        forced = {r[0] for r in await cur.fetchall()}
        # The partitions of a partitioned table (memory_vectors, migrations 027, 029 and 030) force it too, in
        # case a privilege on one is ever granted.
        cur = await conn.execute(
            "SELECT c.relname, c.relrowsecurity AND c.relforcerowsecurity FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'public.memory_vectors'::regclass")
        partitions = dict(await cur.fetchall())
    assert forced >= TENANT_TABLES
    assert len(partitions) == 256 and all(partitions.values()), partitions
    async with await psycopg.AsyncConnection.connect(services.settings.database_admin_url) as admin:
        cur = await admin.execute(
            "SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' "
            "AND column_name = 'tenant_id'")
        with_tenant = {r[0] for r in await cur.fetchall()}
    assert with_tenant == TENANT_TABLES  # every table holding tenant data is covered


async def test_a_query_that_forgets_the_tenant_filter_sees_only_its_tenant(client, services, tenant):
    other = tenant + "-b"
    await client.append_messages(tenant, "same-id", session("s1", "2024-01-01T00:00:00Z", "I live in Oslo."))
    await client.append_messages(other, "same-id", session("s1", "2024-01-01T00:00:00Z", "I live in Rome."))
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT DISTINCT tenant_id, content FROM messages")  # no WHERE on purpose
        assert await cur.fetchall() == [(tenant, "I live in Oslo.")]
        # Writing into another tenant is refused by the policy's WITH CHECK.
        try:
            async with conn.transaction():
                await conn.execute("INSERT INTO tombstones (tenant_id, subject_id, request_id) "
                                   "VALUES (%s, 'x', 'r')", (other,))
            raise AssertionError("insert into another tenant was accepted")
        except psycopg.errors.InsufficientPrivilege:
            pass
    async with services.pool.connection() as conn:  # no tenant set at all: nothing is visible
        cur = await conn.execute("SELECT count(*) FROM messages")
        assert (await cur.fetchone())[0] == 0
        await conn.rollback()


async def test_evidence_is_append_only_for_the_app_role(client, services, tenant):
    await client.append_messages(tenant, "lin", session("s1", "2024-01-01T00:00:00Z", "I live in Oslo."))
    async with tenant_transaction(services.pool, tenant) as conn:
        for statement in ("UPDATE messages SET content = 'x'", "UPDATE memory_events SET actor = 'x'",
                          "UPDATE facts SET value = 'x'"):
            try:
                async with conn.transaction():
                    await conn.execute(statement)
                raise AssertionError(f"{statement!r} was allowed")
            except psycopg.errors.InsufficientPrivilege:
                pass
    # Events may be deleted only for a memory the sweeper marked swept (migration 014's
    # restrictive policy): any other DELETE finds no row.
    await client.write_fact(tenant, "lin", "location", "home_city", "Oslo", expected_version=0,
                            evidence_message_ids=["s1:1"])
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("DELETE FROM memory_events")
        assert cur.rowcount == 0
        cur = await conn.execute("SELECT count(*) FROM memory_events WHERE tenant_id = %s", (tenant,))
        assert await cur.fetchone() == (1,)
