"""Every `--json` command prints one JSON document on stdout and nothing else: no log line, no
terminal colour code (the Temporal SDK core's warnings go to stderr). The commands are found in
the parser, so one that gains `--json` without a case here fails the first test."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import click
import pytest

from agent_memory.core.settings import ENV_VARS, Settings
from tests.tools.evaluation.test_locomo_eval import ADVERSARIAL, QUESTIONS, SESSIONS, _write
from tools.cli import build_parser as build_tools
from workers.cli import build_parser, main
from workers.embedded import Ports
from workers.runtime import open_stack
from workers.worker import build_worker

pytestmark = pytest.mark.minutes(3)

ROOT = Path(__file__).resolve().parents[1]
SUBJECT = "lin"
SESSION = {"session_id": "j1", "messages": [
    {"message_id": "j1:1", "turn_index": 0, "role": "user", "content": "I live in Kyoto and I play the cello.",
     "created_at": "2024-01-01T10:00:00Z"}]}

# The library commands, in order, on a private stack (some change keys or policies); {tenant},
# {memory} and {request} are filled in from earlier outputs.
LIBRARY = [
    "runs --tenant {tenant}",
    "facts --tenant {tenant} --subject lin",
    "entities --tenant {tenant} --subject lin",
    "relations --tenant {tenant} --subject lin --history",
    # An endpoint nothing answers at: the forget's delivery is dead after its one attempt
    # (AGENT_MEMORY_WEBHOOK_MAX_ATTEMPTS=1 below), ready for `webhooks redeliver`. It is on this
    # machine, so the stack allows private targets (AGENT_MEMORY_WEBHOOK_ALLOW_PRIVATE=1 below).
    "webhooks add --tenant {tenant} --url https://127.0.0.1:1/hooks --event memory.forgotten",
    "webhooks list --tenant {tenant}",
    "forget --tenant {tenant} --subject lin --memory-id {memory}",
    "forgotten --tenant {tenant} --subject lin",
    "restore --tenant {tenant} --subject lin --memory-id {memory}",
    # Kyoto was said in 2024: past location's shelf life, so the review marks it.
    "review run --tenant {tenant}",
    "review list --tenant {tenant}",
    "review resolve --tenant {tenant} --subject lin --mark-id {mark} --resolution keep",
    "recall --tenant {tenant} --subject lin Kyoto",
    "context --tenant {tenant} --subject lin Kyoto",
    "prompt --tenant {tenant} --subject lin --session live Kyoto?",
    "policy show --tenant {tenant}",
    "policy set --tenant {tenant} --preset designed",
    "retention show --tenant {tenant}",
    "retention set --tenant {tenant} note_days=365",
    "write-policy show --tenant {tenant}",
    "write-policy set --tenant {tenant} consent_namespaces=health",
    "provider-policy show --tenant {tenant}",
    "provider-policy set --tenant {tenant} --redact email",
    "token-budget show --tenant {tenant}",
    "token-budget set --tenant {tenant} --daily-tokens 2000000",
    "categories set --tenant {tenant} music --word cello --namespace hobby",
    "categories list --tenant {tenant}",
    "categories remove --tenant {tenant} music",
    "consent list --tenant {tenant} --subject lin",
    "subjects --tenant {tenant}",
    "sessions --tenant {tenant} --subject lin",
    "stats --tenant {tenant}",
    "projection retry-dead-letters --tenant {tenant}",
    "rebuild --tenant {tenant} --wait",
    "rederive --tenant {tenant} --dry-run",
    "reembed --tenant {tenant}",
    "webhooks deliveries --tenant {tenant} --status dead",
    "webhooks redeliver --tenant {tenant} {delivery}",
    "webhooks rotate-secret --tenant {tenant} {endpoint}",
    "webhooks remove --tenant {tenant} {endpoint}",
    "keys create --tenant {tenant}",
    "keys list --tenant {tenant}",
    "keys create-operator --name on-call",
    "keys list-operator",
    "keys status",
    "keys rotate",
    "erase --tenant {tenant} --subject lin --reason test --wait",
    "erasure status --tenant {tenant} --request-id {request}",
    "erasure reapply",
    "sweep",
    "redrive-erasures",
    "compact",
    "authorizations",  # after `keys rotate`: its forced rotation's, claimed
    "schedules ensure",
    "schedules list",
    "deployment set-current --build-id json-1",
    "deployment set-ramping --delete",
    "deployment describe",
    "keys rotate-payload",  # last: the running processes switch to the new key at its first payload
]

# The demo (agent-memory) and the tools (`python -m tools.cli`), each on a private stack of its own (a
# subprocess), with small inputs.
TOOLING = [
    "demo",
    "eval probes --data {probes}",
    "eval recall-probes --data {recall_probes}",
    "eval locomo --data {locomo}",
    "bench erasure --memories 20 --per-subject 10 --erase 1",
    "bench erase --memories 20",
    "bench recall --memories 100 --queries 2 --embedder hashing --throughput-texts 32",
    "bench lexical --memories 50 --queries 3",
    "bench consolidate --sessions 2 --concurrency 2 --embedder hashing",
    "bench scale --workers 1 --sessions 2 --model-latency-ms 10",
    "bench storage --sessions 2 --copies 1",
    "bench ingest --messages 20 --clients 2 --batch 10",
    "bench end-session --rows 50 --sessions 2 --calls 4",
    "bench http --concurrency 2 --seconds 0.5",
    "bench reembed --memories 100 --throughput-texts 0",
    "chaos --kills 1 --workers 2",
]


def json_commands(command: click.Command, path: tuple[str, ...] = ()) -> list[str]:
    """Every (sub)command of the program that has a --json option."""
    found = [" ".join(path)] if any("--json" in getattr(p, "opts", ()) for p in command.params) else []
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            found += json_commands(sub, (*path, name))
    return found


def test_every_json_command_has_a_case_here():
    covered = {_command_of(case) for case in LIBRARY + TOOLING}
    assert set(json_commands(build_parser()) + json_commands(build_tools())) == covered


def _command_of(case: str) -> str:
    words = []
    for word in case.split():
        if word.startswith("-"):
            break
        words.append(word)
    return " ".join(words)


def _parse_stdout(out: str, case: str) -> object:
    assert "\x1b[" not in out, (case, out)
    try:
        return json.loads(out)
    except ValueError as exc:
        raise AssertionError(f"`{case} --json` printed more than JSON: {out[:2000]!r}") from exc


@pytest.mark.stack
async def test_every_library_json_command_prints_json_only(tmp_path, monkeypatch, capfd):
    home, queue, tenant = tmp_path / "home", f"json-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:10]}"
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AGENT_MEMORY_HOME", str(home))
    monkeypatch.setenv("AGENT_MEMORY_TASK_QUEUE", queue)
    monkeypatch.setenv("AGENT_MEMORY_WEBHOOK_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("AGENT_MEMORY_WEBHOOK_ALLOW_PRIVATE", "1")
    # A versioned worker (made current below): `deployment` has a deployment to show.
    monkeypatch.setenv("AGENT_MEMORY_BUILD_ID", "json-1")
    sessions = tmp_path / "s.jsonl"
    sessions.write_text(json.dumps(SESSION) + "\n")
    async with open_stack(Settings.from_env(), start=True, ports=Ports.free(), scratch=True) as services:
        async with build_worker(services, task_queue=queue):

            async def cli(*argv: str) -> str:
                code = await asyncio.to_thread(main, list(argv))
                out, err = capfd.readouterr()
                assert code == 0, (argv, out, err)
                assert "\x1b[" not in err, err
                return out

            await cli("deployment", "set-current", "--build-id", "json-1", "--wait", "30")
            await cli("ingest", "--tenant", tenant, "--subject", SUBJECT, str(sessions))
            await cli("end-session", "--tenant", tenant, "--subject", SUBJECT, "--session", "j1", "--wait")
            filled: dict[str, str] = {"tenant": tenant}
            for case in LIBRARY:
                argv = case.format(**filled).split()
                document = _parse_stdout(await cli(*argv, "--json"), case)
                if argv[0] == "facts":
                    assert isinstance(document, list) and document, document
                    filled["memory"] = document[0]["memory_id"]
                if argv[:2] == ["review", "list"]:
                    assert isinstance(document, list) and document, document
                    filled["mark"] = document[0]["mark_id"]
                if argv[:2] == ["webhooks", "add"]:
                    assert isinstance(document, dict) and document["secret"]
                    filled["endpoint"] = document["endpoint_id"]
                if argv[:2] == ["webhooks", "deliveries"]:
                    assert isinstance(document, list) and document, "the forget's delivery is not dead yet"
                    filled["delivery"] = document[0]["delivery_id"]
                if argv[:2] == ["deployment", "describe"]:
                    assert isinstance(document, dict) and document["current_build_id"] == "json-1", document
                if argv[0] == "erase":
                    assert isinstance(document, dict)
                    filled["request"] = document["request_id"]


@pytest.fixture(scope="module")
def tooling_data(tmp_path_factory) -> dict[str, str]:
    data = tmp_path_factory.mktemp("json-data")
    samples = ROOT / "tools" / "evaluation" / "data"
    for _key, source in (("probes", "probes.jsonl"), ("recall_probes", "recall-probes-dev.jsonl")):
        lines = (samples / source).read_text().splitlines()[:2]
        (data / source).write_text("\n".join(lines) + "\n")
    locomo = data / "locomo"
    locomo.mkdir()
    _write(locomo / "sessions.jsonl", SESSIONS)
    _write(locomo / "questions.jsonl", QUESTIONS)
    _write(locomo / "questions_adversarial.jsonl", ADVERSARIAL)
    return {"probes": str(data / "probes.jsonl"), "recall_probes": str(data / "recall-probes-dev.jsonl"),
            "locomo": str(locomo), "home": str(data / "home")}


@pytest.mark.stack
@pytest.mark.parametrize("case", TOOLING, ids=_command_of)
def test_every_tooling_json_command_prints_json_only(case, tooling_data, request):
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    if case == "demo":  # on the running stack of the tests (on its own the demo takes the default ports)
        env["AGENT_MEMORY_HOME"] = str(request.getfixturevalue("services").settings.home)
        env["AGENT_MEMORY_TASK_QUEUE"] = f"demo-{uuid.uuid4().hex[:8]}"
    else:  # each runs on a private stack of its own
        env["AGENT_MEMORY_HOME"] = tooling_data["home"]
    argv = [*case.format(**tooling_data).split(), "--json"]
    program = "workers.cli" if case == "demo" else "tools.cli"
    done = subprocess.run([sys.executable, "-m", program, *argv], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, (case, done.stdout[-2000:], done.stderr[-3000:])
    _parse_stdout(done.stdout, case)
    assert "\x1b[" not in done.stderr, done.stderr[-3000:]  # not a terminal: plain text
