"""`python -m tools.cli` (tools/cli.py): run from a checkout, never installed; usage errors and many-valued options."""

from __future__ import annotations

import subprocess
from pathlib import Path

from agent_memory.core.settings import ENV_VARS

ROOT = Path(__file__).resolve().parents[2]
def run_tools(*args: str, home: Path) -> subprocess.CompletedProcess:
    """`python -m tools.cli ARGS` in process with no services configured (parsing needs none)."""
    from tests.cli.runner import invoke
    from tools.cli import build_parser

    env: dict[str, str | None] = dict.fromkeys(ENV_VARS)
    env["AGENT_MEMORY_HOME"] = str(home)
    return invoke(build_parser(), args, env)


def test_a_mistyped_option_of_a_tool_names_that_tools_help(tmp_path):
    out = run_tools("bench", "recall", "--querys", "5", home=tmp_path)
    help_of = "python -m tools.cli bench recall"
    assert out.returncode == 2 and out.stdout == "", out
    assert out.stderr == f"{help_of}: error: unrecognized arguments: --querys 5 (see {help_of} -h)\n", out.stderr


def test_the_tools_are_no_installed_script_and_the_product_has_none_of_them():
    import tomllib

    from workers.cli import build_parser

    with open(ROOT / "pyproject.toml", "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert scripts == {"agent-memory": "workers.cli:run"}
    assert not {"bench", "eval", "chaos"} & set(build_parser().commands)


def test_many_valued_options_take_every_value():
    from agent_memory.cli.core import parse_args
    from tools.cli import build_parser

    args = parse_args(build_parser(), ["eval", "locomo", "--data", "d", "--compare", "designed", "long-horizon"])
    assert (args.benchmark, args.compare) == ("locomo", ["designed", "long-horizon"])
    assert parse_args(build_parser(), ["bench", "recall"]).sizes == [1_000, 10_000, 50_000]
    assert parse_args(build_parser(), ["bench", "recall", "--sizes", "5", "--json"]).sizes == [5]
