"""The speed of `agent-memory --help`: the help (of the program, of a command, of `python -m tools.cli`)
loads click and the CLI package, none of the library, the SDKs or the rule extractor."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("openai", "temporalio", "psycopg", "agent_memory.providers.offline")


def _modules_after(module: str, *argv: str) -> list[str]:
    """The modules a fresh interpreter holds after `module ARGS` printed its help."""
    code = (f"import json, sys\nfrom {module} import main\ncode = main({list(argv)!r})\n"
            "print(json.dumps([code, sorted(sys.modules)]), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    code, modules = json.loads(done.stderr.strip().splitlines()[-1])
    assert code == 0 and done.stdout.startswith("usage: "), done
    return modules


@pytest.mark.parametrize("module, argv", [
    ("workers.cli", ["--help"]), ("workers.cli", ["facts", "--help"]), ("workers.cli", ["keys", "rotate", "-h"]),
    ("workers.cli", ["up", "-h"]), ("tools.cli", ["--help"]), ("tools.cli", ["bench", "recall", "-h"]),
])
def test_the_help_imports_none_of_the_library(module, argv):
    loaded = _modules_after(module, *argv)
    assert [m for m in loaded if m.split(".")[0] in HEAVY or m in HEAVY] == []
    assert "click" in loaded


def test_the_help_constants_match_the_models():
    from agent_memory.cli import core, policies
    from agent_memory.lifecycle.retention import RetentionPolicy
    from agent_memory.memory.write_policy import WritePolicy
    from agent_memory.recall.recall_policy import DEFAULT_PRESET, PRESETS, policy_fields

    assert tuple(PRESETS) == core.PRESET_NAMES and core.DEFAULT_PRESET == DEFAULT_PRESET
    assert tuple(policy_fields()) == policies.RECALL_POLICY_FIELDS
    assert tuple(RetentionPolicy.model_fields) == policies.RETENTION_FIELDS
    assert tuple(WritePolicy.model_fields) == policies.WRITE_POLICY_FIELDS


@pytest.mark.parametrize("command", [[str(Path(sys.executable).parent / "agent-memory")], ["-m", "tools.cli"]])
def test_the_commands_help_imports_none_of_the_library(command):
    """The installed console script and the checkout's tools, as a user runs them (`-X importtime` lists
    every module it imported)."""
    done = subprocess.run([sys.executable, "-X", "importtime", *command, "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("usage: "), done
    imported = [line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert "click" in imported
    assert [m for m in imported if m.split(".")[0] in HEAVY or m in HEAVY] == []
