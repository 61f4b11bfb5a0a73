"""Roles that can do only their job: the application role reaches the maintenance and
key-rotation privileges only through the narrow functions of migration 031. Each test attempts,
as the runtime application role, what a switch to agent_memory_maintainer or
agent_memory_key_rotator used to allow, and shows the legitimate path still working."""

from __future__ import annotations

import asyncio
import hashlib
import os

import psycopg
import pytest

from agent_memory.lifecycle.compaction import ERASURE_TABLES
from agent_memory.security.crypto import kek_check_value
from agent_memory.store.db import tenant_transaction

MAINTENANCE_ROLES = ("agent_memory_maintainer", "agent_memory_key_rotator")


async def _app(services) -> psycopg.AsyncConnection:
    return await psycopg.AsyncConnection.connect(services.settings.database_url, autocommit=True)


async def _admin(services) -> psycopg.AsyncConnection:
    return await psycopg.AsyncConnection.connect(services.settings.database_admin_url, autocommit=True)


async def _refused_to_switch(app: psycopg.AsyncConnection) -> None:
    for role in MAINTENANCE_ROLES:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await app.execute(f"SET ROLE {role}")


async def _statistics_locks_of(admin: psycopg.AsyncConnection, pid: int) -> list[str]:
    cur = await admin.execute("SELECT mode FROM pg_locks WHERE pid = %s AND relation = 'pg_catalog.pg_statistic'::regclass",
                              (pid,))
    return [mode for (mode,) in await cur.fetchall()]


async def test_the_app_cannot_inject_planner_statistics(services):
    async with await _app(services) as app, await _admin(services) as admin:
        cur = await admin.execute("SELECT relpages FROM pg_class WHERE oid = 'public.messages'::regclass")
        (relpages_before,) = await cur.fetchone()
        await _refused_to_switch(app)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await app.execute("SELECT pg_catalog.pg_restore_relation_stats('schemaname', 'public', 'relname', "
                              "'messages', 'relpages', 999999::integer)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await app.execute("SELECT pg_catalog.pg_restore_attribute_stats('schemaname', 'public', 'relname', "
                              "'messages', 'attname', 'tenant_id', 'inherited', false, 'null_frac', 0.99::real)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await app.execute("SELECT pg_catalog.pg_clear_attribute_stats('public', 'messages', 'tenant_id', false)")
        # The compaction entry point rewrites only the fixed list of erasure tables.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await app.execute("CALL public.compact_table('api_keys')")
        cur = await admin.execute("SELECT relpages FROM pg_class WHERE oid = 'public.messages'::regclass")
        assert (await cur.fetchone())[0] == relpages_before != 999999


async def test_the_app_cannot_hold_a_lock_on_pg_statistic(services):
    async with await _app(services) as app, await _admin(services) as admin:
        await _refused_to_switch(app)
        async with app.transaction():
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await app.execute("LOCK pg_catalog.pg_statistic IN ACCESS EXCLUSIVE MODE")
        # The definer function that rewrites pg_statistic runs only under CALL compact_statistics.
        for statement in ("SELECT public.compaction_rewrite_statistics()",
                          "DO $$ BEGIN PERFORM public.compaction_rewrite_statistics(); END $$",
                          "SELECT public.compaction_rewrite_relation('messages', 'public.messages'::regclass)"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await app.execute(statement)
        # Inside a transaction block the procedure's COMMIT fails, and the abort drops the lock at once.
        await app.execute("BEGIN")
        with pytest.raises(psycopg.errors.InvalidTransactionTermination):
            await app.execute("CALL public.compact_statistics()")
        assert await _statistics_locks_of(admin, app.info.backend_pid) == []
        await app.execute("ROLLBACK")
        # Waiting for the lock is bounded by the functions' own lock_timeout, whatever the session says.
        await app.execute("SET lock_timeout = 0")
        await app.execute("SET statement_timeout = 0")
        async with admin.transaction():
            await admin.execute("LOCK pg_catalog.pg_statistic IN ACCESS SHARE MODE")
            with pytest.raises(psycopg.errors.LockNotAvailable):
                await asyncio.wait_for(app.execute("CALL public.compact_statistics()"), timeout=120)
        # The legitimate call: one statement, the lock released by its own COMMIT.
        await app.execute("CALL public.compact_statistics()")
        assert await _statistics_locks_of(admin, app.info.backend_pid) == []


async def _subject_key(services, tenant: str, subject: str) -> tuple[str, bytes, bytes, bytes]:
    """(KEK id, wrapped key, nonce, the unwrapped key) of the subject, created if new."""
    async with tenant_transaction(services.pool, tenant) as conn:
        key = await services.keyring.subject_key(conn, tenant, subject, create=True)
        cur = await conn.execute("SELECT kek_id, wrapped_key, wrap_nonce FROM subject_keys "
                                 "WHERE tenant_id = %s AND subject_id = %s", (tenant, subject))
        kek_id, wrapped, nonce = await cur.fetchone()
    return kek_id, bytes(wrapped), bytes(nonce), key.key


async def _rewrap(app: psycopg.AsyncConnection, tenant: str, subject: str, source: str, target: str, old: bytes,
                 proof: bytes) -> None:
    await app.execute("SELECT public.kek_rewrap_subject_key(%s, %s, %s, %s, %s, %s, %s, %s)",
                      (tenant, subject, source, target, old, os.urandom(len(old)), os.urandom(12), proof))


async def test_the_app_cannot_overwrite_a_wrapped_key(services, tenant):
    subject = "wrapped-victim"
    kek_id, wrapped, nonce, key = await _subject_key(services, tenant, subject)
    async with await _app(services) as app:
        await _refused_to_switch(app)
        await app.execute("SELECT set_config('app.tenant_id', %s, false)", (tenant,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await app.execute("UPDATE public.subject_keys SET wrapped_key = %s", (os.urandom(len(wrapped)),))
        # Outside a rotation the active KEK is the only one: the re-wrap function moves nothing.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await _rewrap(app, tenant, subject, kek_id, kek_id, wrapped, os.urandom(32))
        # Within a rotation (one the attacker starts, even), a re-wrap needs proof of holding the key.
        new_id = services.keyring.provider.create_kek()
        await app.execute("SELECT public.kek_begin_rotation(%s, %s, %s)",
                          (new_id, *kek_check_value(services.keyring.kek(new_id))))
        cur = await app.execute("SELECT subject_id FROM public.kek_rewrap_candidates(%s, '', 5000) "
                                "WHERE tenant_id = %s", (tenant, tenant))
        assert [row[0] for row in await cur.fetchall()] == [subject]  # (tenant, '') sorts before its rows
        for proof in (os.urandom(32), hashlib.sha256(b"guess").digest(), b""):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await _rewrap(app, tenant, subject, kek_id, new_id, wrapped, proof)
    assert (await _subject_key(services, tenant, subject))[1:] == (wrapped, nonce, key)

    # The rotation (resumed) re-wraps it: the same key under the new KEK, the old KEK destroyed.
    rotation = await services.keyring.rotate(services.pool, force=False)
    assert rotation.new_kek_id == new_id and kek_id in rotation.destroyed_kek_ids
    new_kek, rewrapped, _, unwrapped = await _subject_key(services, tenant, subject)
    assert new_kek == new_id and rewrapped != wrapped and unwrapped == key
    async with await _app(services) as app:
        for source in (kek_id, new_kek):  # destroyed, active: neither is a source
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await _rewrap(app, tenant, subject, source, new_kek, rewrapped, os.urandom(32))
    assert (await _subject_key(services, tenant, subject))[3] == key


async def test_the_app_cannot_mark_a_needed_kek_destroyed(services, tenant):
    subject = "kek-victim"
    kek_id, _, _, key = await _subject_key(services, tenant, subject)
    provider = services.keyring.provider
    async with await _app(services) as app:
        await _refused_to_switch(app)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await app.execute("UPDATE public.key_encryption_keys SET state = 'destroyed'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # the active KEK
            await app.execute("SELECT public.kek_mark_destroyed(%s)", (kek_id,))
        # A rotation under way: the old KEK is retiring but still wraps this subject's key.
        new_id = provider.create_kek()
        await app.execute("SELECT public.kek_begin_rotation(%s, %s, %s)",
                          (new_id, *kek_check_value(services.keyring.kek(new_id))))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await app.execute("SELECT public.kek_mark_destroyed(%s)", (kek_id,))
        cur = await app.execute("SELECT state FROM public.key_encryption_keys WHERE kek_id = %s", (kek_id,))
        assert (await cur.fetchone())[0] == "retiring"
    assert provider.kek(kek_id) is not None
    # The rotation resumes, re-wraps, destroys the key file, then records the KEK destroyed.
    rotation = await services.keyring.rotate(services.pool, force=False)
    assert rotation.new_kek_id == new_id and kek_id in rotation.destroyed_kek_ids
    assert provider.kek(kek_id) is None
    assert (await _subject_key(services, tenant, subject))[3] == key
    async with await _app(services) as app:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # once destroyed, never again
            await app.execute("SELECT public.kek_mark_destroyed(%s)", (kek_id,))


async def test_compaction_rewrites_exactly_the_erasure_tables(services):
    async with await _app(services) as app:
        cur = await app.execute("SELECT table_name FROM public.compaction_tables")
        assert {name for (name,) in await cur.fetchall()} == set(ERASURE_TABLES)
