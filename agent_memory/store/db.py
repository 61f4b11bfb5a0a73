"""Postgres access: the application pool, tenant-scoped transactions and migrations."""

from __future__ import annotations

import hashlib
import math
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeVar

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool

from agent_memory.core.deadlines import waiting_on
from agent_memory.core.errors import ServiceUnavailable
from agent_memory.core.models import check_identifier
from agent_memory.telemetry import tracing

APP_ROLE = "agent_memory_app"
# Arbitrary constant: serialises concurrent migrators across processes.
MIGRATION_LOCK_ID = 7_331_004_211


async def _configure(conn: psycopg.AsyncConnection) -> None:
    await register_vector_async(conn)
    # psycopg prepares a statement after a few runs, and Postgres would then reuse one generic
    # plan for every subject (one plan for a subject of ten memories and one of fifty thousand):
    # every execution is planned with its own parameters instead.
    await conn.execute("SET plan_cache_mode = force_custom_plan")
    await conn.commit()
    tracing.instrument_connection(conn)  # with tracing on, a span per statement (no parameters)


POOL_RECONNECT_SECONDS = 8.0


@dataclass(frozen=True)
class DatabaseDeadlines:
    """How long the pool's work may take: each statement and lock wait (PostgreSQL's own
    `statement_timeout` and `lock_timeout`, 0: none), opening a connection, and a caller's wait
    for a pooled connection."""

    statement_seconds: float = 30.0
    lock_seconds: float = 10.0
    connect_seconds: float = 5.0
    pool_wait_seconds: float = 15.0

    def connection_kwargs(self, database_url: str) -> dict[str, object]:
        """psycopg connection arguments: the timeouts as server options (options the URL gives
        come after, so they win), a connect timeout, and TCP keepalives, so a connection to a
        host that vanished is found dead within a minute rather than the kernel's two hours."""
        ours = (f"-c statement_timeout={round(self.statement_seconds * 1000)} "
                f"-c lock_timeout={round(self.lock_seconds * 1000)}")
        given = conninfo_to_dict(database_url).get("options")
        return {"options": f"{ours} {given}" if given else ours,
                "connect_timeout": max(2, math.ceil(self.connect_seconds)),  # libpq's least
                "keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}


class TrackedConnection(psycopg.AsyncConnection):
    """A connection whose every round trip (a statement, a fetch, a commit) counts as a wait on
    PostgreSQL for the request that makes it (agent_memory.core.deadlines)."""

    async def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        with waiting_on("postgres"):
            return await super().wait(gen, interval, timeout)


async def open_pool(database_url: str, *, min_size: int = 1, max_size: int = 8,
                    deadlines: DatabaseDeadlines | None = None) -> AsyncConnectionPool:
    # check: a connection is tested as it is lent, so one that died with a restarted server is
    # replaced then, and no caller sees its error. timeout: how long a caller waits for a
    # connection (Postgres down: then PoolTimeout, an HTTP 503). reconnect_timeout: the pool's
    # reconnection backoff doubles without a cap, so after a long outage its next attempt could
    # come longer after the server's return than a caller waits; a chain of attempts gives up
    # after a few seconds instead, and the next caller starts a new one at once.
    deadlines = deadlines or DatabaseDeadlines()
    pool: AsyncConnectionPool = AsyncConnectionPool(
        database_url, min_size=min_size, max_size=max_size, configure=_configure, open=False,
        connection_class=TrackedConnection,
        kwargs={"autocommit": False, **deadlines.connection_kwargs(database_url)},
        check=AsyncConnectionPool.check_connection, timeout=deadlines.pool_wait_seconds,
        reconnect_timeout=POOL_RECONNECT_SECONDS,
    )
    await pool.open(wait=True, timeout=30)
    return pool


# The statement_timeout of the long operator jobs' transactions (an erasure, a rebuild, a
# re-embedding batch of a large subject), in place of the pool's.
LONG_STATEMENT_SECONDS = 30 * 60.0
_statement_seconds: ContextVar[float | None] = ContextVar("agent_memory_statement_seconds", default=None)


@contextmanager
def long_statements(seconds: float = LONG_STATEMENT_SECONDS) -> Iterator[None]:
    """Every tenant transaction of the block runs with `statement_timeout` `seconds` (0: none)
    instead of the pool's."""
    token = _statement_seconds.set(seconds)
    try:
        yield
    finally:
        _statement_seconds.reset(token)


@dataclass(frozen=True)
class KeyLimits:
    """What the current request's key is limited to: an agent (Postgres hides the other agents'
    private messages, episodes and notes from it, migration 046) and an app (its reads keep the
    memories citing the app's messages, agent_memory.memory.filters). None: not limited."""

    agent_id: str | None = None
    app_id: str | None = None


# The limits of the current request (a key limited to an agent or an app); the worker and a
# tenant-wide key have none. Every tenant transaction of the request names the agent to row-level
# security.
NO_LIMITS = KeyLimits()
_key_limits: ContextVar[KeyLimits] = ContextVar("agent_memory_key_limits", default=NO_LIMITS)


def key_limits() -> KeyLimits:
    return _key_limits.get()


def reading_agent() -> str | None:
    return _key_limits.get().agent_id


def _checked(agent_id: str | None, app_id: str | None) -> KeyLimits:
    for field, value in (("agent_id", agent_id), ("app_id", app_id)):
        if value is not None:
            check_identifier(field, value)
    return KeyLimits(agent_id=agent_id, app_id=app_id)


@contextmanager
def acting_as(*, agent_id: str | None = None, app_id: str | None = None) -> Iterator[None]:
    """Read and write as a key limited to `agent_id` and `app_id` does, in this block."""
    token = _key_limits.set(_checked(agent_id, app_id))
    try:
        yield
    finally:
        _key_limits.reset(token)


def enter_key_limits(agent_id: str | None, app_id: str | None) -> None:
    """Read and write as a key limited to `agent_id` and `app_id` for the rest of the current task
    (a request's handler: the task ends with the request, and with it the setting)."""
    _key_limits.set(_checked(agent_id, app_id))


@asynccontextmanager
async def tenant_transaction(pool: AsyncConnectionPool, tenant_id: str) -> AsyncIterator[psycopg.AsyncConnection]:
    """One transaction in which row-level security sees only `tenant_id`'s rows (and, for a
    request of a key limited to an agent, no other agent's private ones).

    set_config(..., is_local => true) lasts until the transaction ends, so a pooled connection
    never carries one tenant's scope into the next borrower's transaction.
    """
    check_identifier("tenant", tenant_id)
    async with pool.connection() as conn:
        async with conn.transaction():
            await conn.execute("SELECT set_config('app.tenant_id', %s, true), set_config('app.agent_id', %s, true)",
                               (tenant_id, _key_limits.get().agent_id or ""))
            if (seconds := _statement_seconds.get()) is not None:
                await conn.execute("SELECT set_config('statement_timeout', %s, true)", (f"{round(seconds * 1000)}",))
            yield conn


async def registered_tenants(pool: AsyncConnectionPool) -> list[str]:
    """Every tenant that ever wrote anything (the tenants registry, migration 037: noted by triggers
    at a tenant's first write). Read with no tenant set, the one listing row security allows."""
    async with pool.connection() as conn, conn.transaction():
        cur = await conn.execute("SELECT tenant_id FROM tenants ORDER BY tenant_id")
        return [row[0] for row in await cur.fetchall()]


@asynccontextmanager
async def joined_tenant_transaction(pool: AsyncConnectionPool, tenant_id: str,
                                    conn: psycopg.AsyncConnection | None) -> AsyncIterator[psycopg.AsyncConnection]:
    """`conn` when the caller holds a transaction of `tenant_id` on it already (the statements join
    it: no round trips to begin, scope and commit another), else a new `tenant_transaction`."""
    if conn is not None:
        yield conn
        return
    async with tenant_transaction(pool, tenant_id) as new:
        yield new


def subject_lock_key(tenant_id: str, subject_id: str) -> int:
    """A stable 63-bit advisory lock key per (tenant, subject)."""
    digest = hashlib.blake2b(f"{tenant_id}\x1f{subject_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


async def lock_subject(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, *, exclusive: bool) -> None:
    """Writers share the subject lock; erasure takes it exclusively, so a write either commits
    before the tombstone (and is then erased) or sees the tombstone and is refused."""
    fn = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
    await conn.execute(sql.SQL("SELECT {}(%s)").format(sql.Identifier(fn)), (subject_lock_key(tenant_id, subject_id),))


Row = TypeVar("Row")


async def fetch_one(cur: psycopg.AsyncCursor[Row]) -> Row:
    """The row of a query that returns one by construction (an aggregate, or a row this transaction
    wrote or locked); no row means a broken invariant, not an empty result."""
    row = await cur.fetchone()
    if row is None:
        raise RuntimeError("the query returned no row where one must exist")
    return row


# Migrations whose comments were reworded after they shipped, their statements unchanged
# (tests/store/test_migrations.py checks the statements): the digest a store recorded for an
# earlier wording is still that migration.
EARLIER_DIGESTS: dict[str, frozenset[str]] = {
    "006_keys_redaction_compaction.sql": frozenset({"758029f1f729f96578d0965ce5a284e274f7993319625a355bb051f67606041c"}),
    "030_vector_partitions_256.sql": frozenset({"3a457384453f49e9fcae07f17cb49adba9f1deeea78a13db552964d8456d9e20"}),
}


def migration_files() -> list[tuple[str, str]]:
    folder = resources.files("agent_memory.store") / "migrations"
    names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".sql"))
    return [(name, (folder / name).read_text(encoding="utf-8")) for name in names]


async def apply_migrations(admin_url: str) -> list[str]:
    """Apply pending migrations as the owner role, under an advisory lock, each recorded."""
    applied: list[str] = []
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_ID,))
        try:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " name text PRIMARY KEY, sha256 text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            cur = await conn.execute("SELECT name, sha256 FROM schema_migrations")
            done = {name: digest for name, digest in await cur.fetchall()}
            for name, text in migration_files():
                digest = hashlib.sha256(text.encode()).hexdigest()
                if name in done:
                    if done[name] != digest and done[name] not in EARLIER_DIGESTS.get(name, ()):
                        raise ServiceUnavailable(f"migration {name} changed after it was applied; add a new migration instead")
                    continue
                async with conn.transaction():
                    await conn.execute(text)
                    await conn.execute("INSERT INTO schema_migrations (name, sha256) VALUES (%s, %s)", (name, digest))
                applied.append(name)
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_ID,))
    return applied


async def pending_migrations(database_url: str) -> list[str]:
    """Packaged migrations the database has not applied, read with the application role.

    A database from before migration 007 (which lets the app role read schema_migrations), or
    one never migrated, counts as having applied nothing."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        try:
            cur = await conn.execute("SELECT name FROM schema_migrations")
            applied = {name for (name,) in await cur.fetchall()}
        except (psycopg.errors.UndefinedTable, psycopg.errors.InsufficientPrivilege):
            applied = set()
    return [name for name, _ in migration_files() if name not in applied]


def scram_verifier(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any], role: str, password: str) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL stores for `role`'s `password`, computed by libpq on
    this side of `conn` (PQencryptPasswordConn: a fresh salt, the server's iteration count). The
    server stores a password given in this form as it is, so the plaintext never reaches it (nor
    its logs)."""
    return conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256").decode()


async def set_app_role_password(admin_url: str, password: str) -> str:
    """Let the application role log in (embedded stack; production provisions it itself).

    Sends only a SCRAM verifier, never the plaintext; returns the verifier."""
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        verifier = scram_verifier(conn, APP_ROLE, password)
        await conn.execute(
            sql.SQL("ALTER ROLE {} WITH LOGIN PASSWORD {}").format(sql.Identifier(APP_ROLE), sql.Literal(verifier))
        )
    return verifier
