"""Progress bars of long commands: drawn on a terminal, silent on a pipe or with --json.
The terminal is a real pseudo-terminal."""

from __future__ import annotations

import asyncio
import io
import json
import os
import pty
import select
import subprocess
import sys
import time

from agent_memory.cli.progress import Progress
from tests.cli.runner import ENV_VARS, write_lines
from tests.sessions import session


def test_a_bar_is_drawn_only_on_a_terminal():
    pipe = io.StringIO()
    with Progress("ingest", 3, stream=pipe) as bar:
        bar.advance(3)
    assert pipe.getvalue() == ""

    leader, follower = pty.openpty()
    try:
        with os.fdopen(os.dup(follower), "w") as terminal:
            with Progress("ingest", 4, stream=terminal) as bar:
                time.sleep(0.15)  # redraws are at most ten a second
                bar.advance(2, note="half")
                bar.update(4)
        drawn = ""
        while not drawn.endswith("\n") and select.select([leader], [], [], 5)[0]:
            drawn += os.read(leader, 4096).decode()
    finally:
        os.close(leader)
        os.close(follower)
    assert "\r" in drawn and "[###############...............] 2/4" in drawn and "half" in drawn
    assert "] 4/4" in drawn and drawn.endswith("\n")


def _cli_on_a_terminal(services, *args: str, task_queue: str | None = None) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal (stdout on a pipe); return rc, stdout, stderr."""
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env["AGENT_MEMORY_HOME"] = str(services.settings.home)
    if task_queue:
        env["AGENT_MEMORY_TASK_QUEUE"] = task_queue
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "workers.cli", *args], env=env, stdout=subprocess.PIPE,
                                stderr=follower, text=True)
        os.close(follower)
        follower = -1
        stderr = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            stderr += chunk
        stdout = proc.stdout.read() if proc.stdout else ""
        return proc.wait(timeout=120), stdout, stderr.decode()
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)


def test_ingest_draws_a_bar_on_a_terminal_and_nothing_on_a_pipe(services, tenant, tmp_path):
    lines = [{"session_id": f"p{n}", "messages": [{"message_id": f"p{n}:1", "turn_index": 0, "role": "user",
                                                   "content": f"Note {n}.", "created_at": "2024-05-01T09:00:00Z"}]}
             for n in range(5)]
    file = write_lines(tmp_path / "s.jsonl", *[json.dumps(line) for line in lines])
    rc, stdout, stderr = _cli_on_a_terminal(services, "ingest", file, "--tenant", tenant, "--subject", "kim")
    assert rc == 0 and "p4: 1 new" in stdout
    assert "] 5/5" in stderr and "sessions" in stderr
    from tests.cli.runner import run_cli

    piped = run_cli(services, "ingest", file, "--tenant", tenant, "--subject", "kim")
    assert piped.returncode == 0 and piped.stderr == "" and "p4: 0 new, 1 already stored" in piped.stdout


async def test_rebuild_and_erase_wait_draw_their_workflow_progress(client, services, tenant, task_queue,
                                                                   running_worker):
    async with running_worker():
        await client.append_messages(tenant, "kim", session("w1", "2024-03-01T09:00:00Z", "I live in Oslo."))
        await client.consolidation_result(await client.end_session(tenant, "kim", "w1"))
        rc, stdout, stderr = await asyncio.to_thread(
            _cli_on_a_terminal, services, "rebuild", "--tenant", tenant, "--wait", task_queue=task_queue)
        assert rc == 0 and "1 subjects: 1 equal" in stdout
        assert "rebuild subjects" in stderr and stderr.endswith("\n")
        rc, stdout, stderr = await asyncio.to_thread(
            _cli_on_a_terminal, services, "erase", "--tenant", tenant, "--subject", "kim", "--reason", "test",
            "--wait", task_queue=task_queue)
        assert rc == 0 and json.loads(stdout[stdout.index("{"):])["residue_total"] == 0
        assert "erase stores" in stderr
        rc, stdout, stderr = await asyncio.to_thread(
            _cli_on_a_terminal, services, "rebuild", "--tenant", tenant, "--json", task_queue=task_queue)
        assert rc == 0 and stderr == "" and json.loads(stdout)["subjects_total"] >= 0
