"""The vector projection's outbox is pruned: rows projected over an hour ago go, pending
and recently projected rows stay; the projection sweep does it, bounded per tenant."""

from __future__ import annotations

import uuid

from agent_memory.projection.projector import prune_projected_rows
from agent_memory.store.db import tenant_transaction


async def _outbox_row(services, tenant: str, processed: str | None) -> uuid.UUID:
    memory_id = uuid.uuid4()
    async with tenant_transaction(services.pool, tenant) as conn:
        await conn.execute(
            "INSERT INTO projection_outbox (tenant_id, subject_id, memory_id, memory_kind, version, operation_id, "
            "processed_at) VALUES (%s, 'lin', %s, 'episode', 1, 'op', now() - %s::interval)",
            (tenant, memory_id, processed) if processed else (tenant, memory_id, None))
        if processed is None:
            await conn.execute("UPDATE projection_outbox SET processed_at = NULL, next_attempt_at = now() + "
                               "interval '1 day' WHERE tenant_id = %s AND memory_id = %s", (tenant, memory_id))
    return memory_id


async def _left(services, tenant: str) -> set[uuid.UUID]:
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT memory_id FROM projection_outbox WHERE tenant_id = %s", (tenant,))
        return {row[0] for row in await cur.fetchall()}


async def test_projected_rows_older_than_an_hour_are_pruned_in_bounded_runs(services, tenant):
    old = [await _outbox_row(services, tenant, "2 hours") for _ in range(5)]
    recent = await _outbox_row(services, tenant, "5 minutes")
    pending = await _outbox_row(services, tenant, None)
    other_tenant = f"{tenant}-b"
    theirs = await _outbox_row(services, other_tenant, "2 hours")
    assert await prune_projected_rows(services.pool, tenant, limit=3) == 3
    assert await prune_projected_rows(services.pool, tenant, limit=3) == 2
    assert await prune_projected_rows(services.pool, tenant) == 0
    assert await _left(services, tenant) == {recent, pending} and not set(old) & await _left(services, tenant)
    assert await _left(services, other_tenant) == {theirs}  # row security: one tenant at a time

