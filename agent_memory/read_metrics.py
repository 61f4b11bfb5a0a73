"""Counters of memory reads an operator can count (`agent-memory stats --tenant T`), without
content: context reads (context, prompt) and recall reads per tenant, and the items they served.

One Redis hash, like the leak filter's drop counters (agent_memory.leak_filter explains why not a
key per tenant)::

    am:metrics:memory_reads   field "{tenant}:{kind}"        reads of that kind
                              field "{tenant}:{kind}:items"  items served by them

Each read also logs one line (tenant, kind, item count, leak-filter drops): never a query or a
memory's text.
"""

from __future__ import annotations

import logging
from typing import Literal

from redis.asyncio import Redis

METRICS_KEY = "am:metrics:memory_reads"
ReadKind = Literal["context", "recall"]
READ_KINDS: tuple[ReadKind, ...] = ("context", "recall")

log = logging.getLogger("agent_memory.reads")


async def count_read(redis: Redis, tenant_id: str, *, items: int, kind: ReadKind = "context",
                     leak_filter_dropped: int = 0) -> None:
    async with redis.pipeline(transaction=True) as pipe:
        pipe.hincrby(METRICS_KEY, f"{tenant_id}:{kind}", 1)
        pipe.hincrby(METRICS_KEY, f"{tenant_id}:{kind}:items", items)
        await pipe.execute()
    log.info("memory read tenant=%s kind=%s items=%d leak_filter_dropped=%d", tenant_id, kind, items,
             leak_filter_dropped)


async def read_counts(redis: Redis, tenant_id: str) -> dict[str, int]:
    """{"context_reads": n, "context_items": n, "recall_reads": n, "recall_items": n}."""
    fields = [f"{tenant_id}:{kind}{suffix}" for kind in READ_KINDS for suffix in ("", ":items")]
    values = await redis.hmget(METRICS_KEY, fields)
    names = [f"{kind}_{name}" for kind in READ_KINDS for name in ("reads", "items")]
    return {name: int(v or 0) for name, v in zip(names, values, strict=True)}
