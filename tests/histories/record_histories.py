"""Record workflow histories for the replay tests:
python -m tests.histories.record_histories [NAME.json ...]   (default: all current names)

Histories of older workflow versions (erasure-v1.json: before observations and the lexical
index; erasure-v2.json: before event metadata was redacted; both behind workflow.patched) are
kept and never re-recorded: they prove old runs still replay. After a change to a workflow's
steps, add a new name rather than overwriting."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

from agent_memory.client import MemoryClient
from agent_memory.providers.offline import offline_providers
from agent_memory.settings import Settings
from tests.sessions import session
from workers.embedded import Ports
from workers.runtime import open_stack
from workers.worker import build_worker

HERE = Path(__file__).parent


async def main(only: set[str] | None = None) -> None:
    def keep(name: str) -> bool:
        return not only or name in only

    with tempfile.TemporaryDirectory() as home:
        settings = Settings.from_env({"AGENT_MEMORY_HOME": home})
        async with open_stack(settings, start=True, ports=Ports.free()) as services:
            client = MemoryClient(services, offline_providers().embedder, task_queue="record-histories")
            async with build_worker(services, task_queue="record-histories"):
                await client.append_messages("acme", "lin", session(
                    "s1", "2024-03-01T09:00:00Z", "My name is Lin.", "I live in Hangzhou.", "我不吃辣。"))
                handle = await client.end_session("acme", "lin", "s1")
                await handle.result()
                if keep("consolidation.json"):
                    (HERE / "consolidation.json").write_text((await handle.fetch_history()).to_json())
                rebuild = await client.rebuild("acme", request_id="recorded")  # every subject: rebuild/acme/*/recorded
                await rebuild.result()
                if keep("rebuild.json"):
                    (HERE / "rebuild.json").write_text((await rebuild.fetch_history()).to_json())
                erase = await client.erase("acme", "lin", reason="recorded history")
                await erase.result()
                if keep("erasure-v3.json"):
                    (HERE / "erasure-v3.json").write_text((await erase.fetch_history()).to_json())
            # The idle timer: no end hook, the timer runs out and starts the consolidation.
            idle_client = MemoryClient(services, offline_providers().embedder, task_queue="record-histories",
                                       idle_timeout=timedelta(seconds=1))
            async with build_worker(services, task_queue="record-histories"):
                await idle_client.append_messages("acme", "ana", session("s2", "2024-03-02T09:00:00Z",
                                                                          "I live in Rome."))
                idle = services.temporal.get_workflow_handle("idle/acme/s2")
                await idle.result()
                await services.temporal.get_workflow_handle("consolidate/acme/s2").result()
                if keep("session-idle.json"):
                    (HERE / "session-idle.json").write_text((await idle.fetch_history()).to_json())


if __name__ == "__main__":
    asyncio.run(main(set(sys.argv[1:])))
