"""A scratch database on the embedded Postgres, migrated up to just before a given migration: how
a test shows an existing store migrating forward (rows written as an older schema held them, then
the remaining migrations applied)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from agent_memory.store.db import migration_files


def with_database(url: str, database: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{database}"))


@asynccontextmanager
async def database_before(admin_url: str, migration: str, *, until: str | None = None
                          ) -> AsyncIterator[tuple[psycopg.AsyncConnection, Callable[[], Awaitable[None]]]]:
    """(an owner connection to a new database holding every migration before `migration` (a
    name prefix such as "027"), a function applying the rest on it, or those before `until`).
    The database is dropped afterwards."""
    database = f"forward_{migration}_{uuid.uuid4().hex[:10]}"
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
        await admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    try:
        files = migration_files()
        before = [(name, text) for name, text in files if name < migration]
        async with await psycopg.AsyncConnection.connect(with_database(admin_url, database)) as conn:
            await conn.execute("CREATE TABLE schema_migrations (name text PRIMARY KEY, sha256 text NOT NULL, "
                               "applied_at timestamptz NOT NULL DEFAULT now())")
            for _, text in before:
                await conn.execute(text)

            async def migrate_the_rest() -> None:
                for name, text in files[len(before):]:
                    if until is None or name < until:
                        await conn.execute(text)

            yield conn, migrate_the_rest
    finally:
        async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
            await admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
