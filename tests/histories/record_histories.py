"""Record workflow histories for the replay tests:
python -m tests.histories.record_histories [NAME.json ...]   (default: CURRENT names not recorded yet)

Each workflow version has its own file, recorded once and never re-recorded: old files prove that
runs started under an older version still replay (consolidation.json: inline vector projection;
erasure-v1/-v2/-v3.json: before observations, before event metadata was redacted, before frozen
step lists; the *-v2.json and erasure-v4.json files: the versions before the event log).
After a change to a workflow's steps, add a new name to CURRENT rather than overwriting a file.

Histories are written with their payloads decoded (json/plain): the deployment's payload codec
encrypts them under a key that dies with the recording's temporary home.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.client import WorkflowHandle
from temporalio.converter import PayloadCodec

from agent_memory.api.client import MemoryClient
from agent_memory.core.settings import Settings
from agent_memory.providers.offline import offline_providers
from agent_memory.security.payload_codec import ENCODING
from tests.providers.openai_server import FakeOpenAIServer
from tests.sessions import session
from tests.workflows.test_consolidation_openai import S as OPENAI_SESSION
from tests.workflows.test_consolidation_openai import bundle_for as openai_bundle
from tests.workflows.test_consolidation_openai import route as openai_route
from workers.embedded import Ports
from workers.runtime import open_stack
from workers.worker import build_worker

HERE = Path(__file__).parent

# The file each workflow's current version is recorded to.
# consolidation: offline providers (in the worker's process), every step a local activity;
# consolidation-remote: the OpenAI-compatible providers against a local server that speaks the
# API, the model calls ordinary activities on the model queue. consolidation-v11.json: the step
# route with the offline providers' steps on the model queue too; consolidation-v8/-v10.json:
# every step in one local or ordinary activity; consolidation-v9.json: an ordinary activity per
# step on the workflow's queue; consolidation-v12.json: a remote model's run before the token
# budget's checks (consolidation-v14.json: one parked on the budget, then released).
CURRENT = {"consolidation": "consolidation-v13.json", "consolidation-remote": "consolidation-v14.json",
           "projector": "projector.json", "rebuild": "rebuild-v3.json", "erasure": "erasure-v4.json",
           "session-idle": "session-idle-v4.json"}


async def _decode(node: Any, codec: PayloadCodec) -> None:
    """Replace every encrypted payload in a history's JSON with its decoded form, in place."""
    if isinstance(node, dict):
        metadata = node.get("metadata")
        # Only what the codec encrypted (search attributes, for one, are never encoded).
        if isinstance(metadata, dict) and "data" in node and base64.b64decode(metadata.get("encoding", "")) == ENCODING:
            payload = Payload(metadata={k: base64.b64decode(v) for k, v in metadata.items()},
                              data=base64.b64decode(node["data"]))
            [plain] = await codec.decode([payload])
            node["metadata"] = {k: base64.b64encode(v).decode() for k, v in plain.metadata.items()}
            node["data"] = base64.b64encode(plain.data).decode()
            return
        for value in node.values():
            await _decode(value, codec)
    elif isinstance(node, list):
        for value in node:
            await _decode(value, codec)


async def _write(handle: WorkflowHandle, name: str, codec: PayloadCodec | None) -> None:
    history = await handle.fetch_history()
    data = json.loads(history.to_json())
    if codec is not None:
        await _decode(data, codec)
    (HERE / name).write_text(json.dumps(data, indent=2) + "\n")


async def main(only: set[str] | None = None) -> None:
    def keep(name: str) -> bool:
        # By default only the current versions not recorded yet: a recorded file is never rewritten
        # unless named on the command line.
        return name in only if only else not (HERE / name).exists()

    with tempfile.TemporaryDirectory() as home:
        settings = Settings.from_env({"AGENT_MEMORY_HOME": home})
        async with open_stack(settings, start=True, ports=Ports.free()) as services:
            codec = services.temporal.data_converter.payload_codec
            client = MemoryClient(services, offline_providers().embedder, task_queue="record-histories")
            async with build_worker(services, task_queue="record-histories"):
                await client.append_messages("acme", "lin", session(
                    "s1", "2024-03-01T09:00:00Z", "My name is Lin.", "I live in Hangzhou.", "我不吃辣。"))
                handle = await client.end_session("acme", "lin", "s1")
                await handle.result()
                await client.admin.wait_for_projection("acme", "lin", timeout=120)
                if keep(CURRENT["consolidation"]):
                    await _write(handle, CURRENT["consolidation"], codec)
                if keep(CURRENT["projector"]):
                    await _write(services.temporal.get_workflow_handle("projector/acme/lin"), CURRENT["projector"],
                                 codec)
                rebuild = await client.admin.rebuild("acme", request_id="recorded")  # every subject: rebuild/acme/*/recorded
                await rebuild.result()
                if keep(CURRENT["rebuild"]):
                    await _write(rebuild, CURRENT["rebuild"], codec)
                erase = await client.admin.erase("acme", "lin", reason="recorded history")
                await erase.result()
                if keep(CURRENT["erasure"]):
                    await _write(erase, CURRENT["erasure"], codec)
            # Remote providers: every model step and the run's own embedding batch are ordinary
            # activities on the model queue.
            if keep(CURRENT["consolidation-remote"]):
                with FakeOpenAIServer() as server:
                    server.responder = openai_route
                    bundle = openai_bundle(server)
                    async with build_worker(services, task_queue="record-histories-remote", providers=bundle):
                        remote = MemoryClient(services, bundle.embedder, task_queue="record-histories-remote")
                        # A budget the extraction spends: the run parks before importance and
                        # the summary, and resumes when the budget is raised (a signal).
                        await remote.set_token_budget("acme", 100)
                        await remote.append_messages("acme", "kai", OPENAI_SESSION)
                        handle = await remote.end_session("acme", "kai", OPENAI_SESSION.session_id)
                        for _ in range(300):  # parked within a second or two (visibility)
                            if await remote.parked_consolidations("acme", "kai"):
                                break
                            await asyncio.sleep(0.2)
                        await remote.set_token_budget("acme", "unlimited")
                        await handle.result()
                    await bundle.aclose()
                await _write(handle, CURRENT["consolidation-remote"], codec)
            # The idle timer: no end hook, the timer runs out and starts the consolidation.
            idle_client = MemoryClient(services, offline_providers().embedder, task_queue="record-histories",
                                       idle_timeout=timedelta(seconds=1))
            async with build_worker(services, task_queue="record-histories"):
                await idle_client.append_messages("acme", "ana", session("s2", "2024-03-02T09:00:00Z",
                                                                          "I live in Rome."))
                idle = services.temporal.get_workflow_handle("idle/acme/ana/s2")
                await idle.result()
                await services.temporal.get_workflow_handle("consolidate/acme/ana/s2").result()
                if keep(CURRENT["session-idle"]):
                    await _write(idle, CURRENT["session-idle"], codec)


if __name__ == "__main__":
    asyncio.run(main(set(sys.argv[1:])))
