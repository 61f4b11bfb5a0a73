"""The idle timer: a session with no new message for the idle timeout is consolidated without
its end hook; the hook and the timer never start two consolidations."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio.client import Client

from agent_memory.api.client import MemoryClient, idle_workflow_id
from agent_memory.core import contract
from agent_memory.providers.offline import offline_providers
from tests.sessions import session


async def test_an_idle_session_is_consolidated_without_its_end_hook(services, tenant, task_queue, running_worker):
    client = MemoryClient(services, offline_providers().embedder, task_queue=task_queue,
                          idle_timeout=timedelta(seconds=2))
    async with running_worker():
        await client.append_messages(tenant, "lin", session("s1", "2024-01-01T09:00:00Z", "I live in Oslo."))
        await asyncio.sleep(1)
        # A new message restarts the idle clock: nothing may be consolidated before it runs out.
        await client.append_messages(tenant, "lin", session("s1", "2024-01-01T09:00:00Z", "I live in Oslo.",
                                                            "I love jazz."))
        await asyncio.sleep(1.2)
        assert await client.facts(tenant, "lin") == []
        idle = services.temporal.get_workflow_handle(idle_workflow_id(tenant, "lin", "s1"))
        outcome = await asyncio.wait_for(idle.result(), timeout=30)
        assert outcome["outcome"] == "idle: consolidation started"
        consolidation = services.temporal.get_workflow_handle(outcome["consolidation_workflow_id"])
        result = await asyncio.wait_for(consolidation.result(), timeout=60)
        assert result["facts_written"] == 2
        # The end hook arriving late attaches to the same consolidation.
        late = await client.end_session(tenant, "lin", "s1")
        assert (await late.describe()).run_id == (await consolidation.describe()).run_id
    assert sorted(f.key for f in await client.facts(tenant, "lin")) == ["home_city", "jazz"]


async def test_the_end_hook_stops_the_idle_timer_and_one_consolidation_runs(services, tenant, task_queue,
                                                                             running_worker):
    client = MemoryClient(services, offline_providers().embedder, task_queue=task_queue,
                          idle_timeout=timedelta(minutes=10))
    async with running_worker():
        await client.append_messages(tenant, "ana", session("s2", "2024-01-01T09:00:00Z", "I live in Rome."))
        hook = await client.end_session(tenant, "ana", "s2")
        await client.consolidation_result(hook)
        idle = services.temporal.get_workflow_handle(idle_workflow_id(tenant, "ana", "s2"))
        outcome = await asyncio.wait_for(idle.result(), timeout=30)
        # The hook consolidates and says so in its end signal: the timer leaves it to the hook, one run.
        assert outcome["outcome"] == "ended by the session-end hook"
        runs = [r async for r in services.temporal.list_workflows(f"WorkflowId = '{hook.id}'")]
    assert len(runs) == 1


async def test_an_end_signal_from_a_plain_client_starts_the_consolidation(services, tenant, task_queue,
                                                                          running_worker):
    """An `end` signal sent by anyone (here a Temporal client without the product's converter)
    closes the timer with the session consolidated, as an idle timeout does."""
    client = MemoryClient(services, offline_providers().embedder, task_queue=task_queue,
                          idle_timeout=timedelta(minutes=10))
    plain = await Client.connect(services.settings.temporal_address or "",
                                 namespace=services.settings.temporal_namespace)
    async with running_worker():
        await client.append_messages(tenant, "eva", session("s4", "2024-01-01T09:00:00Z", "I live in Lyon."))
        await plain.get_workflow_handle(idle_workflow_id(tenant, "eva", "s4")).signal(contract.SIGNAL_END)
        idle = services.temporal.get_workflow_handle(idle_workflow_id(tenant, "eva", "s4"))
        outcome = await asyncio.wait_for(idle.result(), timeout=30)
        assert outcome["outcome"] == "ended: consolidation started"
        consolidation = services.temporal.get_workflow_handle(outcome["consolidation_workflow_id"])
        assert (await asyncio.wait_for(consolidation.result(), timeout=60))["facts_written"] == 1
    assert [f.key for f in await client.facts(tenant, "eva")] == ["home_city"]


async def test_appends_signal_the_timer_once_per_window_and_idle_counts_from_the_newest_message(
        services, tenant, task_queue, running_worker):
    """Appends signal the idle timer at most once per debounce window (5 s here: half the idle
    timeout would be more); a message inside the window that sent no signal still moves the
    consolidation to idle-timeout after itself, because the timer reads the newest message."""
    client = MemoryClient(services, offline_providers().embedder, task_queue=task_queue,
                          idle_timeout=timedelta(seconds=10))
    texts = ["I live in Oslo.", "Hello there.", "How are you?", "Fine, thanks.", "Good."]
    loop = asyncio.get_running_loop()
    async with running_worker():
        started = loop.time()
        for n in range(1, len(texts) + 1):  # five appends, one message each
            await client.append_messages(tenant, "kim", session("s3", "2024-01-01T09:00:00Z", *texts[:n]))
        await asyncio.sleep(max(0.0, started + 2 - loop.time()))
        await client.append_messages(tenant, "kim", session("s3", "2024-01-01T09:00:00Z", *texts, "I love jazz."))
        idle = services.temporal.get_workflow_handle(idle_workflow_id(tenant, "kim", "s3"))
        # The timer ran out 10 s after the first signal; the newest message is 2 s younger.
        await asyncio.sleep(max(0.0, started + 11 - loop.time()))
        assert await client.facts(tenant, "kim") == []
        outcome = await asyncio.wait_for(idle.result(), timeout=30)
        assert outcome["outcome"] == "idle: consolidation started"
        consolidation = services.temporal.get_workflow_handle(outcome["consolidation_workflow_id"])
        await asyncio.wait_for(consolidation.result(), timeout=60)
        history = await idle.fetch_history()
    signals = [e for e in history.events if e.HasField("workflow_execution_signaled_event_attributes")]
    assert len(signals) == 1  # six appends, one signal
    assert sorted(f.key for f in await client.facts(tenant, "kim")) == ["home_city", "jazz"]
