"""The README's Python code runs as written (complete scripts: no `await` outside a
function, nothing undefined), against the session's real stack and a worker."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

from agent_memory.core.settings import ENV_VARS

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_the_readme_has_python_to_run():
    blocks = python_blocks()
    assert blocks and all("asyncio.run(" in b for b in blocks)  # complete scripts, not fragments


async def test_every_python_block_of_the_readme_runs_as_written(services, task_queue, running_worker, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env.update(AGENT_MEMORY_HOME=str(services.settings.home), AGENT_MEMORY_TASK_QUEUE=task_queue)
    async with running_worker():
        for n, block in enumerate(python_blocks()):
            script = tmp_path / f"readme_{n}.py"
            script.write_text(block, encoding="utf-8")
            ran = await asyncio.to_thread(subprocess.run, [sys.executable, str(script)], env=env, cwd=tmp_path,
                                          capture_output=True, text=True, timeout=300)
            assert ran.returncode == 0, f"README python block {n} failed:\n{ran.stderr[-3000:]}"
            if "facts written" in block:
                assert "facts written by consolidate/acme/lin/quickstart-1" in ran.stdout
                assert "Oslo" in ran.stdout


async def test_connect_finds_the_running_stack_through_a_private_file(services, tmp_path):
    import json

    import pytest

    from agent_memory.api.client import MemoryClient
    from agent_memory.core.settings import Settings

    path = services.settings.home / "run" / "connection.json"
    assert path.stat().st_mode & 0o777 == 0o600
    stored = json.loads(path.read_text())
    assert stored["database_url"] == services.settings.database_url  # the application role's URL
    assert services.settings.database_admin_url not in path.read_text()  # never the owner's
    async with MemoryClient.connect(Settings.from_env({"AGENT_MEMORY_HOME": str(services.settings.home)})) as client:
        assert await client.facts("t-connect", "nobody") == []
    assert client.services.pool.closed
    with pytest.raises(RuntimeError, match=f"no agent-memory stack is running under {tmp_path}"):
        await MemoryClient.open(Settings.from_env({"AGENT_MEMORY_HOME": str(tmp_path)}))


def _section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n### {title}\n")
    end = text.find("\n## ", start + 1)
    following = text.find("\n### ", start + 1)
    return text[start:min(x for x in (end, following) if x != -1)]


def _cli_env(services, task_queue: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    # The `agent-memory` console script of this environment first on PATH, as after `pip install`.
    env.update(AGENT_MEMORY_HOME=str(services.settings.home), AGENT_MEMORY_TASK_QUEUE=task_queue,
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", **extra)
    return env


async def test_the_readme_curl_example_runs_against_a_live_server(client, services, task_queue, running_worker):
    import json

    from agent_memory.api.http.server import serving

    block = next(b for b in re.findall(r"```bash\n(.*?)```", _section("HTTP API"), flags=re.S) if "curl" in b)
    async with running_worker(), serving(client) as port:
        env = _cli_env(services, task_queue, AGENT_MEMORY_API=f"http://127.0.0.1:{port}")
        ran = await asyncio.to_thread(subprocess.run, ["bash", "-e", "-o", "pipefail", "-c", block], env=env,
                                      capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr
        documents, at, decoder = [], 0, json.JSONDecoder()
        while at < len(ran.stdout.strip()):  # curl prints the bodies back to back
            document, at = decoder.raw_decode(ran.stdout, at)
            documents.append(document)
            at += len(ran.stdout[at:]) - len(ran.stdout[at:].lstrip())
        appended, ended, facts = documents
        assert appended["inserted"] + appended["duplicates"] == 1
        assert ended["workflow_id"] and ended["ui_url"].startswith("http")
        assert isinstance(facts, list)
        await client.consolidation_result(services.temporal.get_workflow_handle(ended["workflow_id"]))
    assert "Oslo" in {f.value for f in await client.facts("acme", "lin")}


async def test_the_readme_mcp_client_configs_connect(client, services, tenant, task_queue):
    """The two config snippets of the README, as a desktop MCP client would read them, with a real
    key and this stack filled in: the stdio one launches `agent-memory mcp`, the HTTP one connects
    to /mcp with the header."""
    import json

    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    from agent_memory.api.http.server import serving
    from agent_memory.security.api_keys import create_key

    snippets = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", _section("MCP server"), flags=re.S)]
    stdio, http = (s["mcpServers"]["agent-memory"] for s in snippets)
    token = (await create_key(services.pool, tenant, "read")).token
    assert set(stdio["env"]) == {"AGENT_MEMORY_API_KEY", "AGENT_MEMORY_HOME"}
    env = _cli_env(services, task_queue, AGENT_MEMORY_API_KEY=token)  # and this stack's home
    launched = StdioServerParameters(command=stdio["command"], args=stdio["args"], env=env)
    async with Client(launched) as mcp:
        assert "context" in {t.name for t in (await mcp.list_tools()).tools}
    async with serving(client) as port:
        url = http["url"].replace(":8765/", f":{port}/")
        headers = {k: v.replace("amk:acme:…", token) for k, v in http["headers"].items()}
        async with Client(streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))) as mcp:
            assert "remember" in {t.name for t in (await mcp.list_tools()).tools}
