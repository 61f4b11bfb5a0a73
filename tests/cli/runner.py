"""Running the command line in tests: in process through click's CliRunner, on the test stack."""

from __future__ import annotations

import json
import subprocess
import threading

from agent_memory.core.settings import ENV_VARS

GOOD = {"session_id": "c1", "messages": [
    {"message_id": "c1:1", "turn_index": 0, "role": "user", "content": "I live in Kyoto.",
     "created_at": "2024-01-01T10:00:00Z"}]}


def invoke(group, args, env: dict[str, str | None]) -> subprocess.CompletedProcess:
    """`group` run in process by click's CliRunner, as a finished process: returncode, stdout, stderr.
    In a thread of its own, so the command's event loop never meets a test's running one."""
    from click.testing import CliRunner

    done: list = []
    thread = threading.Thread(target=lambda: done.append(CliRunner().invoke(group, list(args), env=env)))
    thread.start()
    thread.join(120)
    assert done, f"{args} did not finish in 120 s"
    result = done[0]
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


def run_cli(services, *args: str, task_queue: str | None = None) -> subprocess.CompletedProcess:
    """`agent-memory ARGS` on the test stack (its home; no other service configuration)."""
    from workers.cli import build_parser

    env: dict[str, str | None] = dict.fromkeys(ENV_VARS)
    env["AGENT_MEMORY_HOME"] = str(services.settings.home)
    if task_queue:
        env["AGENT_MEMORY_TASK_QUEUE"] = task_queue
    return invoke(build_parser(), [str(a) for a in args], env)


def write_lines(path, *lines) -> str:
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return str(path)
