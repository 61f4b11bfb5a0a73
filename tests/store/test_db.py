"""The pool's deadlines on the session's PostgreSQL: every connection carries statement_timeout
and lock_timeout (the URL's own options win), a statement past its deadline is PostgreSQL being
unavailable, and the long operator jobs' transactions get a statement_timeout of their own."""

from __future__ import annotations

import psycopg
import pytest

from agent_memory.api.outages import dependency_down
from agent_memory.store.db import DatabaseDeadlines, long_statements, open_pool, tenant_transaction


async def show(conn: psycopg.AsyncConnection, name: str) -> str:
    cur = await conn.execute(f"SHOW {name}")
    row = await cur.fetchone()
    assert row is not None
    return str(row[0])


async def test_pooled_connections_carry_the_deadlines_and_a_statement_past_its_own_is_postgres_unavailable(services):
    url = services.settings.database_url
    pool = await open_pool(url, max_size=2, deadlines=DatabaseDeadlines(statement_seconds=1.5, lock_seconds=0.5))
    try:
        async with pool.connection() as conn:
            assert (await show(conn, "statement_timeout"), await show(conn, "lock_timeout")) == ("1500ms", "500ms")
        with pytest.raises(psycopg.errors.QueryCanceled) as slow:
            async with pool.connection() as conn:
                await conn.execute("SELECT pg_sleep(5)")
        assert dependency_down(slow.value) == "postgres"
        async with tenant_transaction(pool, "t-deadlines") as conn:
            assert await show(conn, "statement_timeout") == "1500ms"
        with long_statements():
            async with tenant_transaction(pool, "t-deadlines") as conn:
                assert await show(conn, "statement_timeout") == "30min"
        async with tenant_transaction(pool, "t-deadlines") as conn:  # only within the block, only that transaction
            assert await show(conn, "statement_timeout") == "1500ms"
    finally:
        await pool.close()


async def test_the_urls_own_options_win(services):
    url = services.settings.database_url + "?options=-c%20lock_timeout%3D7s"
    pool = await open_pool(url, max_size=1)
    try:
        async with pool.connection() as conn:
            assert (await show(conn, "lock_timeout"), await show(conn, "statement_timeout")) == ("7s", "30s")
    finally:
        await pool.close()
