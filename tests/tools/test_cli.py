"""`agent-memory-tools` (tools/cli.py) and the speed of `agent-memory --help`: the help loads click and
the CLI package, none of the library, the SDKs or the rule extractor."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_memory.settings import ENV_VARS

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("openai", "temporalio", "psycopg", "agent_memory.providers.offline_rules")


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
    from agent_memory.recall_policy import DEFAULT_PRESET, PRESETS, policy_fields
    from agent_memory.retention import RetentionPolicy
    from agent_memory.write_policy import WritePolicy

    assert tuple(PRESETS) == core.PRESET_NAMES and core.DEFAULT_PRESET == DEFAULT_PRESET
    assert tuple(policy_fields()) == policies.RECALL_POLICY_FIELDS
    assert tuple(RetentionPolicy.model_fields) == policies.RETENTION_FIELDS
    assert tuple(WritePolicy.model_fields) == policies.WRITE_POLICY_FIELDS


def run_tools(*args: str, home: Path) -> subprocess.CompletedProcess:
    """`agent-memory-tools ARGS` in process with no services configured (parsing needs none)."""
    from tests.cli.runner import invoke
    from tools.cli import build_parser

    env: dict[str, str | None] = dict.fromkeys(ENV_VARS)
    env["AGENT_MEMORY_HOME"] = str(home)
    return invoke(build_parser(), args, env)


def test_a_mistyped_option_of_a_tool_names_that_tools_help(tmp_path):
    out = run_tools("bench", "recall", "--querys", "5", home=tmp_path)
    help_of = "agent-memory-tools bench recall"
    assert out.returncode == 2 and out.stdout == "", out
    assert out.stderr == f"{help_of}: error: unrecognized arguments: --querys 5 (see {help_of} -h)\n", out.stderr


def test_the_tools_are_their_own_console_script_and_the_product_has_none_of_them():
    import tomllib

    from workers.cli import build_parser

    with open(ROOT / "pyproject.toml", "rb") as f:
        assert tomllib.load(f)["project"]["scripts"]["agent-memory-tools"] == "tools.cli:run"
    assert not {"bench", "eval", "chaos"} & set(build_parser().commands)


def test_many_valued_options_take_every_value():
    from agent_memory.cli.core import parse_args
    from tools.cli import build_parser

    args = parse_args(build_parser(), ["eval", "locomo", "--data", "d", "--compare", "designed", "long-horizon"])
    assert (args.benchmark, args.compare) == ("locomo", ["designed", "long-horizon"])
    assert parse_args(build_parser(), ["bench", "recall"]).sizes == [1_000, 10_000, 50_000]
    assert parse_args(build_parser(), ["bench", "recall", "--sizes", "5", "--json"]).sizes == [5]
