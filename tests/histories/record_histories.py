"""Re-record the checked-in workflow histories (run when a workflow changes on purpose):
python -m tests.histories.record_histories"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from agent_memory.client import MemoryClient
from agent_memory.providers.offline import offline_providers
from agent_memory.settings import Settings
from tests.sessions import session
from workers.embedded import Ports
from workers.runtime import open_stack
from workers.worker import build_worker

HERE = Path(__file__).parent


async def main() -> None:
    with tempfile.TemporaryDirectory() as home:
        settings = Settings.from_env({"AGENT_MEMORY_HOME": home})
        async with open_stack(settings, start=True, ports=Ports.free()) as services:
            client = MemoryClient(services, offline_providers().embedder, task_queue="record-histories")
            async with build_worker(services, task_queue="record-histories"):
                await client.append_messages("acme", "lin", session(
                    "s1", "2024-03-01T09:00:00Z", "My name is Lin.", "I live in Hangzhou.", "我不吃辣。"))
                handle = await client.end_session("acme", "lin", "s1")
                await handle.result()
                (HERE / "consolidation.json").write_text((await handle.fetch_history()).to_json())
                erase = await client.erase("acme", "lin", reason="recorded history")
                await erase.result()
                (HERE / "erasure.json").write_text((await erase.fetch_history()).to_json())


if __name__ == "__main__":
    asyncio.run(main())
