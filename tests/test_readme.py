"""The README's Python code runs as written (issue 12: it once failed with `await` outside a
function and an undefined `services`), against the session's real stack and a worker."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

from agent_memory.settings import ENV_VARS

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
                assert "facts written by consolidate/acme/quickstart-1" in ran.stdout
                assert "Oslo" in ran.stdout


async def test_connect_finds_the_running_stack_through_a_private_file(services, tmp_path):
    import json

    import pytest

    from agent_memory.client import MemoryClient
    from agent_memory.settings import Settings

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
