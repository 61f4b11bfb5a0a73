"""Command fingerprints of every workflow: a change to the commands a workflow can issue must come
behind a new `workflow.patched("...")` id (modelled on PostHog's workflow_fingerprints.py).

Temporal replays a running workflow's history against the current code; if the code now issues a
different command sequence (an activity, child workflow, timer or continue-as-new added, removed,
reordered or made conditional), replay fails with a non-determinism error and the run is stuck.
tests/workflows/test_replay.py catches that for the checked-in histories only; this test catches
it for every code path, by comparing, per `@workflow.defn` class of every module in workflows/,
the *command skeleton* (the source-ordered command-issuing calls with the control flow around
them: if/for/while/try headers, return/raise/break/continue, calls of the class's own
command-issuing methods) with the record in workflow_fingerprints.json next to this file.

A changed skeleton is accepted only when the workflow's set of patch ids grew (the change is
gated by a new `workflow.patched("...")`), and then the record must be regenerated:

    UPDATE_WORKFLOW_FINGERPRINTS=1 pytest -q -p no:cacheprovider tests/workflows/test_workflow_fingerprints.py

which rewrites the file only if every change is accepted (a new workflow class or module counts
as accepted: no run of it exists yet). A change that is replay-safe without a patch (e.g. renaming
an activity method whose name agent_memory/core/contract.py pins) can be recorded with
UPDATE_WORKFLOW_FINGERPRINTS=force — say why in the commit, and keep test_replay.py passing.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW_DIR = ROOT / "workflows"
RECORD = Path(__file__).with_name("workflow_fingerprints.json")
UPDATE_ENV = "UPDATE_WORKFLOW_FINGERPRINTS"

# Calls that make a workflow issue a command (or mark a patch), by attribute or bare name.
COMMAND_CALLS = frozenset({
    "execute_activity", "start_activity", "execute_activity_method", "start_activity_method",
    "execute_activity_class", "start_activity_class",
    "execute_local_activity", "start_local_activity", "execute_local_activity_method",
    "start_local_activity_method", "execute_local_activity_class", "start_local_activity_class",
    "execute_child_workflow", "start_child_workflow", "sleep", "wait_condition", "continue_as_new",
    "upsert_search_attributes", "upsert_memo", "patched", "deprecate_patch",
})
PATCH_CALLS = frozenset({"patched", "deprecate_patch"})
CHILD_CALLS = frozenset({"execute_child_workflow", "start_child_workflow"})


def _call_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute) and func.attr in COMMAND_CALLS:
        return func.attr
    if isinstance(func, ast.Name) and func.id in COMMAND_CALLS:
        return func.id
    return None


def _command_entry(call: ast.Call) -> str | None:
    name = _call_name(call.func)
    if name is None:
        return None
    if name in ("wait_condition", "sleep", "continue_as_new"):
        return ast.unparse(call).split(".", 1)[-1] if isinstance(call.func, ast.Attribute) else ast.unparse(call)
    target = ast.unparse(call.args[0]) if call.args else ""
    entry = f"{name}({target})"
    if name in CHILD_CALLS:
        entry += "".join(f" {k.arg}={ast.unparse(k.value)}" for k in call.keywords if k.arg == "id")
    return entry


def _self_call(call: ast.Call, methods: set[str]) -> str | None:
    func = call.func
    if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"
            and func.attr in methods):
        return f"call self.{func.attr}{_activity_argument(call)}"
    if isinstance(func, ast.Name) and func.id in methods:
        return f"call {func.id}{_activity_argument(call)}"
    return None


def _activity_argument(call: ast.Call) -> str:
    """An activity a helper is called to run (`self._step(FooActivities.bar, ...)`): part of the
    command, as if the helper were inlined."""
    first = call.args[0] if call.args else None
    if (isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name)
            and first.value.id.endswith("Activities")):
        return f"({ast.unparse(first)})"
    return ""


def _calls_in(node: ast.AST) -> list[ast.Call]:
    """Calls within a node in source order (nested function bodies included: lambdas, closures)."""
    calls = [n for n in ast.walk(node) if isinstance(n, ast.Call)]
    return sorted(calls, key=lambda c: (c.lineno, c.col_offset))


class _Skeleton:
    def __init__(self, command_callables: set[str]):
        self.callables = command_callables

    def entries(self, node: ast.AST) -> list[str]:
        out = []
        for call in _calls_in(node):
            entry = _command_entry(call) or _self_call(call, self.callables)
            if entry:
                out.append(entry)
        return out

    def block(self, statements: list[ast.stmt], depth: int) -> list[str]:
        lines: list[str] = []
        for statement in statements:
            lines += self.statement(statement, depth)
        return lines

    def _compound(self, header: str, header_nodes: list[ast.AST], parts: list[tuple[str, list[ast.stmt]]],
                  depth: int) -> list[str]:
        """The statement's header and its blocks, if anything in them issues a command or exits."""
        inner: list[str] = []
        for label, body in parts:
            lines = self.block(body, depth + 1)
            if lines:
                inner += ([f"{'  ' * depth}{label}:"] if label else []) + lines
        if inner or any(self.entries(node) for node in header_nodes):
            return [f"{'  ' * depth}{header}", *inner]
        return []

    def statement(self, st: ast.stmt, depth: int) -> list[str]:
        pad = "  " * depth
        if isinstance(st, ast.If):
            return self._compound(f"if {ast.unparse(st.test)}", [st.test], [("", st.body), ("else", st.orelse)],
                                  depth)
        if isinstance(st, (ast.For, ast.AsyncFor)):
            return self._compound(f"for {ast.unparse(st.target)} in {ast.unparse(st.iter)}", [st.iter],
                                  [("", st.body), ("for-else", st.orelse)], depth)
        if isinstance(st, ast.While):
            return self._compound(f"while {ast.unparse(st.test)}", [st.test],
                                  [("", st.body), ("while-else", st.orelse)], depth)
        if isinstance(st, (ast.With, ast.AsyncWith)):
            return self._compound("with " + ", ".join(ast.unparse(i) for i in st.items), list(st.items),
                                  [("", st.body)], depth)
        if isinstance(st, (ast.Try, ast.TryStar)):
            parts = [("", st.body)]
            parts += [(f"except {ast.unparse(h.type) if h.type else ''}".rstrip(), h.body) for h in st.handlers]
            parts += [("try-else", st.orelse), ("finally", st.finalbody)]
            return self._compound("try", [], parts, depth)
        if isinstance(st, ast.Match):
            return self._compound(f"match {ast.unparse(st.subject)}", [st.subject],
                                  [(f"case {ast.unparse(c.pattern)}", c.body) for c in st.cases], depth)
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return [f"{pad}{e}" for e in self.entries(st)]
        exits = {ast.Return: "return", ast.Raise: "raise", ast.Break: "break", ast.Continue: "continue"}
        lines = [f"{pad}{e}" for e in self.entries(st)]
        for kind, word in exits.items():
            if isinstance(st, kind):
                lines.append(f"{pad}{word}")
        return lines


def _has_command(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and _call_name(n.func) for n in ast.walk(node))


def _command_callables(functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]) -> set[str]:
    """Functions that issue commands themselves or call one that does (a fixpoint)."""
    found = {name for name, fn in functions.items() if _has_command(fn)}
    while True:
        more = {name for name, fn in functions.items() if name not in found
                and any(_self_call(c, found) for c in _calls_in(fn))}
        if not more:
            return found
        found |= more


Function = ast.FunctionDef | ast.AsyncFunctionDef


def _record(methods: dict[str, Function], module_functions: dict[str, Function]) -> dict:
    """The skeleton of a workflow class: its command-issuing methods, and the module functions
    they call that issue commands, each as `def name` followed by its skeleton."""
    functions = {**module_functions, **methods}
    callables = _command_callables(functions)
    included = [name for name in methods if name in callables]
    while True:  # module functions reached from the included ones
        more = [name for name in module_functions if name in callables and name not in included
                and any(_self_call(c, {name}) for f in included for c in _calls_in(functions[f]))]
        if not more:
            break
        included += more
    skeleton = _Skeleton(callables)
    commands: list[str] = []
    patches: set[str] = set()
    for name in included:
        commands.append(f"def {name}")
        commands += skeleton.block(functions[name].body, 1)
        for call in _calls_in(functions[name]):
            if _call_name(call.func) in PATCH_CALLS and call.args and isinstance(call.args[0], ast.Constant):
                patches.add(str(call.args[0].value))
    digest = hashlib.sha256(json.dumps(commands).encode()).hexdigest()[:16]
    return {"fingerprint": digest, "patches": sorted(patches), "commands": commands}


def _is_workflow_class(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if (isinstance(target, ast.Attribute) and target.attr == "defn") or (
                isinstance(target, ast.Name) and target.id == "defn"):
            return True
    return False


def _imported_workflow_functions(tree: ast.Module) -> dict[str, Function]:
    """The functions of the other modules of workflows/ this module imports from (`from workflows.x
    import f`): a workflow's commands issued by a shared step are part of its skeleton, as if inlined."""
    found: dict[str, Function] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("workflows."):
            path = WORKFLOW_DIR / f"{node.module.removeprefix('workflows.')}.py"
            if not path.exists():
                continue
            defined = {n.name: n for n in ast.parse(path.read_text(encoding="utf-8")).body
                       if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            for name, function in defined.items():  # the module's own helpers too, for the calls within it
                found.setdefault(name, function)
            for alias in node.names:
                if alias.name in defined and alias.asname:
                    found[alias.asname] = defined[alias.name]
    return found


def fingerprint_source(source: str) -> dict[str, dict]:
    """{workflow class: {fingerprint, patches, commands}} of one module's source."""
    tree = ast.parse(source)
    module_functions = {**_imported_workflow_functions(tree),
                        **{n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}}
    records: dict[str, dict] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and _is_workflow_class(node):
            methods = {n.name: n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            records[node.name] = _record(methods, module_functions)
    return records


def fingerprint_tree(root: Path = WORKFLOW_DIR) -> dict[str, dict[str, dict]]:
    """{module path relative to the repo: fingerprint_source(module)} for every module in workflows/."""
    found = {}
    for path in sorted(root.glob("*.py")):
        records = fingerprint_source(path.read_text(encoding="utf-8"))
        if records:
            found[path.relative_to(root.parent).as_posix()] = records
    return found


def compare(stored: dict[str, dict[str, dict]], current: dict[str, dict[str, dict]]) -> tuple[list[str], list[str]]:
    """(problems, accepted changes): a changed skeleton is accepted only if its patch-id set grew."""
    problems: list[str] = []
    accepted: list[str] = []
    for module in sorted(set(stored) | set(current)):
        old_module, new_module = stored.get(module, {}), current.get(module, {})
        for name in sorted(set(old_module) | set(new_module)):
            old, new = old_module.get(name), new_module.get(name)
            where = f"{module}::{name}"
            if new is None:
                problems.append(f"{where} was removed: running executions of it can no longer make progress")
            elif old is None:
                accepted.append(f"{where} is new")
            elif old["fingerprint"] == new["fingerprint"] and old["commands"] == new["commands"]:
                continue
            elif set(new["patches"]) > set(old["patches"]):
                grown = sorted(set(new["patches"]) - set(old["patches"]))
                accepted.append(f"{where} changed its commands behind new patch id(s) {grown}")
            else:
                diff = _diff(old["commands"], new["commands"])
                problems.append(f"{where} changed the commands it issues without a new workflow.patched(...) id "
                                f"(patches still {new['patches']}); running executions would fail to replay:\n"
                                f"{diff}")
    return problems, accepted


def _diff(old: list[str], new: list[str]) -> str:
    import difflib

    return "\n".join(difflib.unified_diff(old, new, "recorded", "current", lineterm="", n=2))


def _write(current: dict) -> None:
    RECORD.write_text(json.dumps(current, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def test_workflow_commands_match_the_record():
    current = fingerprint_tree()
    assert current, "no workflow found in workflows/"
    stored = json.loads(RECORD.read_text(encoding="utf-8")) if RECORD.exists() else {}
    problems, accepted = compare(stored, current)
    mode = os.environ.get(UPDATE_ENV, "")
    if mode == "force" or (mode and not problems):
        if current != stored:
            _write(current)
        return
    message = "\n\n".join(problems)
    if accepted:
        message += ("\n\n" if message else "") + "accepted, record not regenerated yet:\n  " + "\n  ".join(accepted) + (
            f"\nregenerate: {UPDATE_ENV}=1 pytest -q -p no:cacheprovider tests/workflows/test_workflow_fingerprints.py")
    if not problems and not accepted and current != stored:
        message = f"record out of date (formatting only): {UPDATE_ENV}=1 to regenerate"
    assert not message, message


# --- the checker itself ---------------------------------------------------------------------


def _source(name: str) -> str:
    return (WORKFLOW_DIR / name).read_text(encoding="utf-8")


def _check(name: str, mutated: str) -> tuple[list[str], list[str]]:
    module = f"workflows/{name}"
    return compare({module: fingerprint_source(_source(name))}, {module: fingerprint_source(mutated)})


def test_removing_an_activity_call_is_reported():
    source = _source("erasure.py")
    start = source.index("        receipt = await workflow.execute_activity_method(")
    end = source.index("        self._progress.step = \"done\"\n        return receipt")
    mutated = source[:start] + "        receipt = started.completed_receipt\n" + source[end:]
    problems, accepted = _check("erasure.py", mutated)
    assert len(problems) == 1 and "ErasureWorkflow" in problems[0] and not accepted
    removed = [line for line in problems[0].splitlines() if line.startswith("-") and not line.startswith("---")]
    assert [line.strip("- ") for line in removed] == ["execute_activity_method(ErasureActivities.complete_erasure)"]


def test_reordering_or_making_a_call_conditional_is_reported():
    source = _source("consolidation.py")
    assert "            if round_ == 0 and not at_once:\n" in source
    problems, _ = _check("consolidation.py", source.replace("            if round_ == 0 and not at_once:\n",
                                                            "            if round_ == 1 and not at_once:\n"))
    assert problems and "ConsolidationWorkflow" in problems[0]
    problems, _ = _check("maintenance.py", _source("maintenance.py").replace(
        "return await workflow.execute_activity_method(",
        "await workflow.sleep(1)\n        return await workflow.execute_activity_method(", 1))
    assert problems and "KeyRotationWorkflow" in problems[0]


def test_a_change_behind_a_new_patch_is_accepted_and_other_edits_are_ignored():
    source = _source("maintenance.py")
    marker = "        return await workflow.execute_activity_method(\n            MaintenanceActivities.rotate_key"
    assert source.count(marker) == 1
    gated = source.replace(marker, "        if workflow.patched(\"sleep-first\"):\n"
                                   "            await workflow.sleep(1)\n" + marker)
    problems, accepted = _check("maintenance.py", gated)
    assert not problems and accepted == ["workflows/maintenance.py::KeyRotationWorkflow changed its commands "
                                         "behind new patch id(s) ['sleep-first']"]
    # Progress strings, comments and result assembly do not issue commands.
    edited = _source("erasure.py").replace('self._progress.step = "receipt"', 'self._progress.step = "receipt!"')
    edited = edited.replace("# Frozen step lists", "# frozen step lists")
    assert _check("erasure.py", edited) == ([], [])


def test_every_workflow_module_is_covered():
    current = fingerprint_tree()
    for path in WORKFLOW_DIR.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef) and _is_workflow_class(n)]
        for name in classes:
            record = current[f"workflows/{path.name}"][name]
            assert record["commands"], f"{path.name}::{name} issues no command the checker sees"


@pytest.mark.parametrize("name, first", [("consolidation.py", "ConsolidationActivities.locate_providers"),
                                         ("rebuild.py", "RebuildActivities.list_subjects_to_rebuild")])
def test_skeletons_name_the_activities_in_order(name, first):
    records = fingerprint_source(_source(name))
    (record,) = records.values()
    calls = [line.strip() for line in record["commands"] if "Activities." in line]
    assert calls[0].endswith(f"({first})")
