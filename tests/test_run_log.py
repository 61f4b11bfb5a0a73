"""`agent-memory up` logs one line per workflow it completes (issue 12, rough edge 12), read from
the real dev server's visibility."""

from __future__ import annotations

import asyncio

from tests.sessions import session
from workers.run_log import log_closed_runs


async def test_each_closed_run_of_the_queue_is_logged_once(client, services, tenant, task_queue, running_worker):
    lines: list[str] = []
    stop = asyncio.Event()
    logger = asyncio.create_task(log_closed_runs(services.temporal, task_queue, stop, say=lines.append, every=0.2))
    async with running_worker():
        await client.append_messages(tenant, "kim", session("r1", "2024-03-01T09:00:00Z", "I live in Oslo."))
        handle = await client.end_session(tenant, "kim", "r1")
        await client.consolidation_result(handle)
        for _ in range(100):  # visibility indexes a closed run shortly after it closes
            if any(handle.id in line for line in lines):
                break
            await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)  # a few more polls: nothing is logged twice
    stop.set()
    await logger
    mine = [line for line in lines if line.endswith(" s") and f" {handle.id} in " in line]
    assert len(mine) == 1, lines
    assert " completed " in mine[0] and "ConsolidationWorkflow" in mine[0]
    assert len(lines) == len(set(lines))
