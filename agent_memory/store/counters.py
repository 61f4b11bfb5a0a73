"""Operator counters of a tenant in Postgres (`agent-memory stats`): durable across restarts of
every server, under the tenant's row-level security, without content.

Counters are named `{group}:{name}` (`reads:context`, `reads:context:items`, `leak_drops:email`).
An increment lands on one of `SHARDS` rows of the counter, chosen at random, so concurrent reads
of one tenant rarely wait on the same row lock; a reader sums the shards (migration 020)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping

import psycopg
from psycopg_pool import AsyncConnectionPool

from agent_memory.store.db import joined_tenant_transaction, tenant_transaction

SHARDS = 8
_UPSERT = ("INSERT INTO operator_counters AS c (tenant_id, counter, shard, count) "
           "SELECT %s, name, %s, n FROM unnest(%s::text[], %s::bigint[]) AS i(name, n) "
           "ON CONFLICT (tenant_id, counter, shard) DO UPDATE SET count = c.count + EXCLUDED.count")


async def add_counts(pool: AsyncConnectionPool, tenant_id: str, increments: Mapping[str, int], *,
                     conn: psycopg.AsyncConnection | None = None) -> None:
    """Add each increment to its counter, in one statement: in its own transaction, or as the last
    statement of the caller's (`conn`: the row locks are held until that transaction ends)."""
    names = sorted(name for name, n in increments.items() if n)
    if not names:
        return
    shard = random.randrange(SHARDS)  # spreads row locks; not a secret
    async with joined_tenant_transaction(pool, tenant_id, conn) as tx:
        # Every context read counts itself: it should not wait for a WAL flush. A crash of the
        # database may lose the last fraction of a second of increments (never corrupts them).
        await tx.execute("SET LOCAL synchronous_commit = off")
        await tx.execute(_UPSERT, (tenant_id, shard, names, [increments[name] for name in names]))


async def add_counts_in(conn: psycopg.AsyncConnection, tenant_id: str, increments: Mapping[str, int]) -> None:
    """Add each increment to its counter in the caller's transaction, with that transaction's
    durability (add_counts turns synchronous commit off: right for a read's counters, not for a
    count written with the record it counts)."""
    names = sorted(name for name, n in increments.items() if n)
    if names:
        await conn.execute(_UPSERT, (tenant_id, random.randrange(SHARDS), names, [increments[n] for n in names]))


async def add_counts_if_known(pool: AsyncConnectionPool, tenant_id: str, increments: Mapping[str, int]) -> bool:
    """Like add_counts, for a tenant named by untrusted input (a forged workflow id): counted only
    when the tenant has data, so a forger cannot create counter rows for invented tenants."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            "SELECT EXISTS (SELECT 1 FROM sessions WHERE tenant_id = %s) "
            "OR EXISTS (SELECT 1 FROM tenants WHERE tenant_id = %s)", (tenant_id, tenant_id))
        row = await cur.fetchone()
        if row is None or not row[0]:
            return False
        await add_counts(pool, tenant_id, increments, conn=conn)
    return True


async def read_counts(pool: AsyncConnectionPool, tenant_id: str, counters: Iterable[str]) -> dict[str, int]:
    """The named counters' totals (0 for a counter never incremented)."""
    wanted = list(counters)
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            "SELECT counter, sum(count)::bigint FROM operator_counters "
            "WHERE tenant_id = %s AND counter = ANY(%s) GROUP BY counter", (tenant_id, wanted))
        found = {name: int(total) for name, total in await cur.fetchall()}
    return {name: found.get(name, 0) for name in wanted}
