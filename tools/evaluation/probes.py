"""The probe set: cross-session write-gate cases (moves, trips, budgets, diet changes,
negations, jokes, restatements, candidates) in English and Chinese, run through the real
consolidation workflows, scored on current values and as-of values."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from agent_memory.api.client import MemoryClient
from agent_memory.core.entities import fold
from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import Message, Role, Session
from agent_memory.memory.memory_store import list_facts
from agent_memory.memory.relations import list_relations
from agent_memory.store.db import tenant_transaction

# The evaluation sets (see data/PHRASING.md): read from the checkout, never part of the product's package.
DATA = Path(__file__).resolve().parent / "data"


class ProbeCase(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt expectation must not be silently ignored

    id: str
    sessions: list[tuple[str, list[str | tuple[Role, str]]]]
    current: dict[str, str | None] = {}
    as_of: list[tuple[str, str, str | None]] = []
    history: dict[str, int] = {}  # key → number of rows (restatements must not add rows)
    evidence: dict[str, int] = {}  # key → evidence ids on the current fact
    candidates: dict[str, str] = {}  # key → value held in the candidate area
    # Checked by value, whatever the keys: namespace (or "*" for every namespace, or a key prefix
    # such as "diet/allergy_*") → the current values there, as a multiset. {"budget": ["2000 euros"]} fails on two current budgets;
    # {"*": []} means nothing may be stored; {"pet": []} means the fact ended, nothing is current.
    values: dict[str, list[str]] = {}
    as_of_not: list[tuple[str, str, str]] = []  # (day, key, value the key must NOT hold then)
    # Edges that must hold after the last session, as (source, relation, target) entity names
    # compared case-insensitively; the source "subject" is the speaker the case is about. Third
    # parties are checked here: ("Mia", "works_at", "bank") beside {"work": []} on the subject.
    relations: list[tuple[str, str, str]] = []
    # In as_of and as_of_not a key without "/" names a namespace: its current values, sorted and
    # joined by " | " (None when empty), so a check holds whatever key the value was stored under.
    category: str = ""  # labels for per-category reports (phrasing corpus); not checked
    lang: str = ""
    source: str = ""


ProbeValue = str | int | None


class ProbeFailure(BaseModel):
    case: str
    check: str
    expected: ProbeValue
    actual: ProbeValue


class CategoryScore(BaseModel):
    cases: int = 0
    cases_passed: int = 0  # every check of the case held
    checks: int = 0
    passed: int = 0


class ProbeReport(BaseModel):
    cases: int
    checks: dict[str, int]
    passed: dict[str, int]
    accuracy: dict[str, float]
    failures: list[ProbeFailure]
    seconds: float
    by_category: dict[str, CategoryScore] = {}  # only when the cases carry a category

    def render(self) -> str:
        lines = [f"probe set: {self.cases} cases, {self.seconds:.1f}s"]
        lines += [f"  {kind:<10} {self.passed[kind]:>3}/{self.checks[kind]:<3} {self.accuracy[kind]:.1%}"
                  for kind in self.checks]
        if self.by_category:
            lines.append("  by category (checks passed, cases fully passed):")
            lines += [f"    {name:<22} {c.passed:>3}/{c.checks:<3} {c.passed / max(c.checks, 1):6.1%}   "
                      f"{c.cases_passed:>3}/{c.cases:<3}" for name, c in sorted(self.by_category.items())]
        lines += [f"  FAIL {f.case}: {f.check} expected {f.expected!r}, got {f.actual!r}" for f in self.failures]
        return "\n".join(lines)


def read_case_file(path: Path | None, bundled: str) -> tuple[str, str]:
    """(name, text) of a case file: `path`, or the bundled set `bundled` (in DATA). A file that cannot be
    read raises InvalidInput in one line naming it."""
    if path is None:
        return bundled, (DATA / bundled).read_text(encoding="utf-8")
    name = str(path)
    try:
        return name, Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(f"{name}: no such file") from None
    except IsADirectoryError:
        raise InvalidInput(f"{name}: is a directory, not a probe file") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{name}: not UTF-8 text") from None
    except OSError as exc:
        raise InvalidInput(f"{name}: cannot read: {exc.strerror or exc}") from None


C = TypeVar("C", bound=BaseModel)


def parse_cases(name: str, text: str, model: type[C], *, days: Callable[[C], Iterable[str]],
                problem: Callable[[C], str], empty: str = "no probe cases") -> list[C]:
    """JSON Lines of `model`, one case a line: every day `days` names must be a date, ids unique
    and `problem` empty; anything else raises InvalidInput in one line naming the file, the line
    and the problem."""
    cases: list[C] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            case = model.model_validate_json(line)
            for day in days(case):
                _day(day)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(part) for part in err["loc"])
            raise InvalidInput(f"{name}: line {number}: {where + ': ' if where else ''}{err['msg']}") from None
        except ValueError as exc:
            raise InvalidInput(f"{name}: line {number}: bad date: {exc}") from None
        case_id = str(case.id)  # type: ignore[attr-defined]  # every case model has an id
        found = f"duplicate case id {case_id!r}" if case_id in seen else problem(case)
        if found:
            raise InvalidInput(f"{name}: line {number}: {found}")
        seen.add(case_id)
        cases.append(case)
    if not cases:
        raise InvalidInput(f"{name}: {empty}")
    return cases


def load_probes(path: Path | None = None) -> list[ProbeCase]:
    """The bundled probe set, or any probe file (JSON Lines, one case a line). A bad file raises
    InvalidInput in one line naming the file, the line and the problem."""
    name, text = read_case_file(path, "probes.jsonl")
    return parse_cases(
        name, text, ProbeCase,
        days=lambda c: [*(d for d, _ in c.sessions), *(d for d, *_ in [*c.as_of, *c.as_of_not])],
        problem=lambda c: ("no sessions" if not c.sessions
                           else "no expectations" if not (c.current or c.as_of or c.history or c.evidence
                                                          or c.candidates or c.values or c.as_of_not
                                                          or c.relations)
                           else ""))


def _day(value: str) -> datetime:
    return datetime.fromisoformat(value).replace(hour=9, tzinfo=UTC)


def case_sessions(case: ProbeCase) -> list[Session]:
    return build_sessions(case.id, case.sessions)


def build_sessions(case_id: str, days: list[tuple[str, list[str | tuple[Role, str]]]]) -> list[Session]:
    """Session n of a case is "{case}-{n}", its i-th message "{case}-{n}:{i}", at 09:00 + i minutes."""
    sessions = []
    for n, (day, lines) in enumerate(days, start=1):
        start, sid = _day(day), f"{case_id}-{n}"
        messages = []
        for i, line in enumerate(lines):
            role: Role
            if isinstance(line, tuple):
                role, text = line
            else:
                role, text = "user", line
            messages.append(Message(message_id=f"{sid}:{i + 1}", turn_index=i, role=role,
                                    speaker="User" if role == "user" else "Assistant", content=text,
                                    created_at=start + timedelta(minutes=i)))
        sessions.append(Session(session_id=sid, started_at=start, messages=messages))
    return sessions


def _value_at(facts, key: str) -> str | None:
    """The value of a full key ("location/home_city"), or of a namespace ("budget"): its values
    sorted and joined by " | ", None when there is none."""
    if "/" in key:
        return next((f.value for f in facts if f"{f.namespace}/{f.key}" == key), None)
    return " | ".join(sorted(str(f.value) for f in facts if f.namespace == key)) or None


async def _run_case(client: MemoryClient, tenant: str,
                    case: ProbeCase) -> list[tuple[str, str, ProbeValue, ProbeValue]]:
    """(kind, check, expected, actual) for every expectation of the case."""
    subject = case.id
    for session in case_sessions(case):
        await client.append_messages(tenant, subject, session)
        await client.consolidation_result(await client.end_session(tenant, subject, session.session_id))
    pool, keyring = client.services.pool, client.services.keyring
    # Current facts are read as of just after the last session: temporary facts (trips) end by then.
    last = _day(case.sessions[-1][0]) + timedelta(days=30)
    current = {f"{f.namespace}/{f.key}": f.value
               for f in await list_facts(pool, keyring, tenant, subject, as_of=last)}
    history = Counter(f"{f.namespace}/{f.key}"
                      for f in await list_facts(pool, keyring, tenant, subject, include_history=True))
    rows = await list_facts(pool, keyring, tenant, subject, include_history=True, include_candidates=True)
    candidates = {f"{f.namespace}/{f.key}": f.value for f in rows if f.status == "candidate"}
    evidence = {f"{f.namespace}/{f.key}": len(f.evidence_message_ids) for f in rows
                if f.status == "active"}
    results: list[tuple[str, str, ProbeValue, ProbeValue]] = [
        ("current", f"current {key}", want, current.get(key)) for key, want in case.current.items()]
    for day, key, want in case.as_of:
        facts = await list_facts(pool, keyring, tenant, subject, as_of=_day(day))
        results.append(("as_of", f"{key} as of {day}", want, _value_at(facts, key)))
    results += [("dedup", f"rows of {key}", want, history.get(key, 0)) for key, want in case.history.items()]
    results += [("dedup", f"evidence of {key}", want, evidence.get(key, 0)) for key, want in case.evidence.items()]
    results += [("candidate", f"candidate {key}", want, candidates.get(key)) for key, want in case.candidates.items()]
    for namespace, want_values in case.values.items():
        got_values = sorted(str(value) for key, value in current.items() if _in_namespace(key, namespace))
        results.append(("values", f"current values in {namespace}", " | ".join(sorted(want_values)) or None,
                        " | ".join(got_values) or None))
    for day, key, wrong in case.as_of_not:
        got = _value_at(await list_facts(pool, keyring, tenant, subject, as_of=_day(day)), key)
        results.append(("as_of", f"{key} as of {day} is not {wrong!r}", f"not {wrong}",
                        f"not {wrong}" if got != wrong else got))
    if case.relations:
        async with tenant_transaction(pool, tenant) as conn:
            names = await _entity_names(conn, tenant, subject)
            edges = [(names.get(r.source_entity_id, {_end(r.source_name)}), r.relation,
                      names.get(r.target_entity_id, {_end(r.target_name)}))
                     for r in await list_relations(conn, tenant, subject)]
        held = "; ".join(sorted(f"{min(sources)} {kind} {min(targets)}" for sources, kind, targets in edges)) or "none"
        results += [("relations", f"relation {source} {relation} {target}", "holds",
                     "holds" if any(_end(source) in sources and relation == kind and _end(target) in targets
                                    for sources, kind, targets in edges) else f"missing (edges: {held})")
                    for source, relation, target in case.relations]
    return results


async def _entity_names(conn, tenant: str, subject: str) -> dict[uuid.UUID, set[str]]:
    """Each entity's names as a relation check compares them: its name and every alias, folded."""
    cur = await conn.execute("SELECT memory_id, name, aliases FROM entities WHERE tenant_id = %s AND subject_id = %s",
                             (tenant, subject))
    return {memory_id: {_end(name), *map(_end, aliases or [])} for memory_id, name, aliases in await cur.fetchall()}


def _in_namespace(key: str, namespace: str) -> bool:
    """Whether a full key is under a `values` namespace: "*" is every key, "budget" a namespace,
    "diet/allergy_*" the keys of a namespace that start with a prefix."""
    if namespace == "*":
        return True
    if namespace.endswith("*") and "/" in namespace:
        return key.startswith(namespace[:-1])
    return key.split("/", 1)[0] == namespace


def _end(name: str) -> str:
    """An edge's end as the checks compare it: folded, the subject under one name however the
    store names them (the probe's speaker is "User")."""
    folded = fold(name)
    return "subject" if folded in {"subject", "user"} else folded


async def run_probes(services, *, task_queue: str | None = None, concurrency: int = 8,
                     cases: list[ProbeCase] | None = None) -> ProbeReport:
    from agent_memory.providers.factory import providers_for
    from workers.worker import build_worker

    queue = task_queue or f"probes-{uuid.uuid4().hex[:8]}"
    tenant = f"probes-{uuid.uuid4().hex[:8]}"
    client = MemoryClient(services, providers_for(services.settings).embedder, task_queue=queue)
    cases = load_probes() if cases is None else cases
    gate = asyncio.Semaphore(concurrency)

    async def one(case: ProbeCase):
        async with gate:
            return case.id, await _run_case(client, tenant, case)

    loop = asyncio.get_running_loop()
    started = loop.time()
    async with build_worker(services, task_queue=queue):
        outcomes = await asyncio.gather(*(one(c) for c in cases))
    checks: Counter[str] = Counter()
    passed: Counter[str] = Counter()
    failures: list[ProbeFailure] = []
    categories = {c.id: c.category for c in cases}
    by_category: dict[str, CategoryScore] = {}
    for case_id, results in outcomes:
        score = by_category.setdefault(categories[case_id], CategoryScore()) if categories[case_id] else None
        ok = [want == got for _, _, want, got in results]
        if score is not None:
            score.cases += 1
            score.cases_passed += all(ok)
            score.checks += len(ok)
            score.passed += sum(ok)
        for kind, check, want, got in results:
            checks[kind] += 1
            if want == got:
                passed[kind] += 1
            else:
                failures.append(ProbeFailure(case=case_id, check=check, expected=want, actual=got))
    return ProbeReport(cases=len(cases), checks=dict(checks), passed={k: passed[k] for k in checks},
                       accuracy={k: passed[k] / checks[k] for k in checks}, failures=failures,
                       seconds=round(loop.time() - started, 2), by_category=by_category)


async def probes_command(args, settings) -> int:
    from workers.runtime import scratch_stack

    cases = load_probes(getattr(args, "data", None))  # a bad file fails here, before any stack starts
    async with scratch_stack(settings, "probes") as services:
        report = await run_probes(services, cases=cases)
    print(json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False) if args.json else report.render())
    return 0 if not report.failures else 1
