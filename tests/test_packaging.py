"""The runtime wheel, built as `pip install .` builds it (the Dockerfile): the product's packages
(agent_memory, activities, workflows, workers) and the data they read, and nothing of the checkout's
tools (benchmarks, evaluations, the crash campaign) or their evaluation sets; every third-party
module the product imports is a declared dependency."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from email.parser import Parser
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from tests.test_layering import all_imports, top

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("agent_memory", "activities", "workflows", "workers")
# What the product reads at run time besides its modules: the migrations, the demo's sessions and the
# console's templates and stylesheet.
PRODUCT_DATA = {f"agent_memory/store/migrations/{p.name}" for p in (ROOT / "agent_memory/store/migrations").glob("*.sql")
                } | {"agent_memory/samples/demo_sessions.jsonl"} | {
    p.relative_to(ROOT).as_posix() for pattern in ("templates/*.html", "static/*.css")
    for p in (ROOT / "agent_memory/api/console").glob(pattern)}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Iterator[zipfile.ZipFile]:
    """The wheel built from a copy of the checkout (the build writes build/ and *.egg-info beside its
    source, so never into the checkout), without what .gitignore keeps out of the repository."""
    source = tmp_path_factory.mktemp("source") / "agent-memory"
    ignored = [line.strip().strip("/") for line in (ROOT / ".gitignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", *ignored))
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out),
                           str(source)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    [built] = out.glob("agent_memory-*.whl")
    with zipfile.ZipFile(built) as archive:
        yield archive


def canonical(name: str) -> str:
    """A distribution's name as PyPI compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _metadata(wheel: zipfile.ZipFile, name: str) -> str:
    [path] = [n for n in wheel.namelist() if n.endswith(f".dist-info/{name}")]
    return wheel.read(path).decode()


def test_the_wheel_holds_the_product_packages_and_no_tools(wheel):
    names = wheel.namelist()
    assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == set(PRODUCT)
    assert _metadata(wheel, "top_level.txt").split() == sorted(PRODUCT)
    # every module of the product, none of tools/
    modules = {p.relative_to(ROOT).as_posix() for package in PRODUCT for p in (ROOT / package).rglob("*.py")
               if "__pycache__" not in p.parts}
    assert {n for n in names if n.endswith(".py")} == modules


def test_the_wheel_holds_the_data_the_product_reads_and_no_evaluation_set(wheel):
    data = {n for n in wheel.namelist() if not n.endswith(".py") and ".dist-info/" not in n}
    assert len(PRODUCT_DATA) > 50 and data == PRODUCT_DATA
    evaluation_sets = {p.name for p in (ROOT / "tools/evaluation/data").iterdir()}
    assert "probes.jsonl" in evaluation_sets
    assert not evaluation_sets & {Path(n).name for n in wheel.namelist()}


def test_the_only_installed_command_is_the_products(wheel):
    entry_points = _metadata(wheel, "entry_points.txt")
    assert [line for line in entry_points.splitlines() if "=" in line] == ["agent-memory = workers.cli:run"]


def test_every_third_party_module_the_product_imports_is_a_declared_dependency(wheel):
    metadata = Parser().parsestr(_metadata(wheel, "METADATA"))
    requirements = metadata.get_all("Requires-Dist", [])
    declared = {canonical(re.match(r"[A-Za-z0-9._-]+", r)[0]) for r in requirements if "extra ==" not in r}
    # An optional feature's extra (OpenTelemetry's): imported only inside the functions that turn it on.
    optional = {canonical(re.match(r"[A-Za-z0-9._-]+", r)[0]) for r in requirements if 'extra == "otel"' in r}
    providers = packages_distributions()
    imports = [i for i in all_imports(ROOT, PRODUCT) if top(i.target) not in set(PRODUCT) | sys.stdlib_module_names]
    imported = {top(i.target) for i in imports}
    assert "httpx" in imported and "h11" in imported
    undeclared = {module: providers.get(module) for module in imported
                  if not {canonical(d) for d in providers.get(module, [])} & declared}
    extra_only = {module for module in undeclared if {canonical(d) for d in providers[module]} & optional}
    assert "opentelemetry" in extra_only
    assert not [f"{i.module}:{i.line}" for i in imports if top(i.target) in extra_only and i.top_level and not i.type_only]
    assert {module: where for module, where in undeclared.items() if module not in extra_only} == {}
