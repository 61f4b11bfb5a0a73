"""Counters of memory reads an operator can count (`agent-memory stats --tenant T`), without
content: context reads (context, prompt) and recall reads per tenant, and the items they served.

Durable counters in Postgres (agent_memory.store.counters), with the leak filter's drops::

    reads:{kind}         reads of that kind
    reads:{kind}:items   items served by them

Each read also logs one line (tenant, kind, item count, leak-filter drops): never a query or a
memory's text.
"""

from __future__ import annotations

import logging
from typing import Literal

import psycopg
from psycopg_pool import AsyncConnectionPool

from agent_memory.store import counters

ReadKind = Literal["context", "recall"]
READ_KINDS: tuple[ReadKind, ...] = ("context", "recall")

log = logging.getLogger("agent_memory.reads")


async def count_read(pool: AsyncConnectionPool, tenant_id: str, *, items: int, kind: ReadKind = "context",
                     leak_filter_dropped: int = 0, conn: psycopg.AsyncConnection | None = None) -> None:
    """Count one read; on `conn`, as the last statement of the read's own transaction."""
    await counters.add_counts(pool, tenant_id, {f"reads:{kind}": 1, f"reads:{kind}:items": items}, conn=conn)
    log.info("memory read tenant=%s kind=%s items=%d leak_filter_dropped=%d", tenant_id, kind, items,
             leak_filter_dropped)


async def read_counts(pool: AsyncConnectionPool, tenant_id: str) -> dict[str, int]:
    """{"context_reads": n, "context_items": n, "recall_reads": n, "recall_items": n}."""
    names = {f"{kind}_{name}": f"reads:{kind}" + (":items" if name == "items" else "")
             for kind in READ_KINDS for name in ("reads", "items")}
    totals = await counters.read_counts(pool, tenant_id, names.values())
    return {shown: totals[counter] for shown, counter in names.items()}
