"""A worker keeps the Schedules as designed: when it starts, and on its periodic check while it
runs, a Schedule paused from a plain Temporal client is unpaused and the restoration logged."""

from __future__ import annotations

import asyncio
import copy
import logging
import signal
from datetime import timedelta

from temporalio.client import Client

from agent_memory.providers.offline import offline_providers
from workers.cli import run_worker_until_signal
from workers.schedules import COMPACTION_SCHEDULE, ERASURE_REDRIVE_SCHEDULE, ensure_schedules, keep_schedules
from workers.supervisor import ShutdownGuard

LOGGER = "agent_memory.lifecycle.schedules"


async def _plain(services) -> Client:
    return await Client.connect(services.settings.temporal_address or "",
                                namespace=services.settings.temporal_namespace)


async def _paused(client: Client, schedule_id: str) -> bool:
    return (await client.get_schedule_handle(schedule_id).describe()).schedule.state.paused


async def _until_unpaused(client: Client, schedule_id: str, timeout: float = 60) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while await _paused(client, schedule_id):
        assert loop.time() < deadline, f"{schedule_id} is still paused"
        await asyncio.sleep(0.2)


async def test_a_starting_worker_restores_a_paused_schedule_and_logs_it(services, task_queue, caplog):
    own = copy.copy(services)  # the worker on this test's task queue
    own.settings = services.settings.model_copy(update={"task_queue": task_queue})
    await ensure_schedules(services.temporal, task_queue)
    plain = await _plain(services)
    await plain.get_schedule_handle(ERASURE_REDRIVE_SCHEDULE).pause(note="paused by hand")
    caplog.set_level(logging.WARNING, logger=LOGGER)
    guard = ShutdownGuard(None)
    running = asyncio.create_task(run_worker_until_signal(own, "worker up", offline_providers(), guard=guard))
    try:
        await _until_unpaused(plain, ERASURE_REDRIVE_SCHEDULE)
    finally:
        guard.stop.set()
        await asyncio.wait_for(running, timeout=60)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    restored = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert f"Schedule {ERASURE_REDRIVE_SCHEDULE} restored as designed: unpaused" in restored


async def test_a_running_worker_restores_a_schedule_paused_since_its_last_check(services, task_queue, caplog):
    await ensure_schedules(services.temporal, task_queue)
    plain = await _plain(services)
    caplog.set_level(logging.WARNING, logger=LOGGER)
    stop = asyncio.Event()
    keeping = asyncio.create_task(keep_schedules(services.temporal, task_queue, stop, every=timedelta(seconds=0.5),
                                                 at_once=False))
    try:
        await plain.get_schedule_handle(COMPACTION_SCHEDULE).pause(note="paused by hand")
        await _until_unpaused(plain, COMPACTION_SCHEDULE)
    finally:
        stop.set()
        await asyncio.wait_for(keeping, timeout=30)
    assert f"Schedule {COMPACTION_SCHEDULE} restored as designed: unpaused" in [
        r.getMessage() for r in caplog.records if r.name == LOGGER]
