"""The probe set: cross-session write-gate cases (moves, trips, budgets, diet changes,
negations, jokes, restatements, candidates) in English and Chinese, run through the real
consolidation workflows, scored on current values and as-of values."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from importlib import resources

from pydantic import BaseModel

from agent_memory.client import MemoryClient
from agent_memory.memory_store import list_facts
from agent_memory.models import Message, Role, Session


class ProbeCase(BaseModel):
    id: str
    sessions: list[tuple[str, list[str | tuple[Role, str]]]]
    current: dict[str, str | None] = {}
    as_of: list[tuple[str, str, str | None]] = []
    history: dict[str, int] = {}  # key → number of rows (restatements must not add rows)
    evidence: dict[str, int] = {}  # key → evidence ids on the current fact
    candidates: dict[str, str] = {}  # key → value held in the candidate area


ProbeValue = str | int | None


class ProbeFailure(BaseModel):
    case: str
    check: str
    expected: ProbeValue
    actual: ProbeValue


class ProbeReport(BaseModel):
    cases: int
    checks: dict[str, int]
    passed: dict[str, int]
    accuracy: dict[str, float]
    failures: list[ProbeFailure]
    seconds: float

    def render(self) -> str:
        lines = [f"probe set: {self.cases} cases, {self.seconds:.1f}s"]
        lines += [f"  {kind:<10} {self.passed[kind]:>3}/{self.checks[kind]:<3} {self.accuracy[kind]:.1%}"
                  for kind in self.checks]
        lines += [f"  FAIL {f.case}: {f.check} expected {f.expected!r}, got {f.actual!r}" for f in self.failures]
        return "\n".join(lines)


def load_probes() -> list[ProbeCase]:
    text = (resources.files("agent_memory") / "samples" / "probes.jsonl").read_text(encoding="utf-8")
    return [ProbeCase.model_validate_json(line) for line in text.splitlines() if line.strip()]


def _day(value: str) -> datetime:
    return datetime.fromisoformat(value).replace(hour=9, tzinfo=UTC)


def case_sessions(case: ProbeCase) -> list[Session]:
    sessions = []
    for n, (day, lines) in enumerate(case.sessions, start=1):
        start, sid = _day(day), f"{case.id}-{n}"
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
        got = next((f.value for f in facts if f"{f.namespace}/{f.key}" == key), None)
        results.append(("as_of", f"{key} as of {day}", want, got))
    results += [("dedup", f"rows of {key}", want, history.get(key, 0)) for key, want in case.history.items()]
    results += [("dedup", f"evidence of {key}", want, evidence.get(key, 0)) for key, want in case.evidence.items()]
    results += [("candidate", f"candidate {key}", want, candidates.get(key)) for key, want in case.candidates.items()]
    return results


async def run_probes(services, *, task_queue: str | None = None, concurrency: int = 8) -> ProbeReport:
    from agent_memory.providers.openai_compat import providers_for
    from workers.worker import build_worker

    queue = task_queue or f"probes-{uuid.uuid4().hex[:8]}"
    tenant = f"probes-{uuid.uuid4().hex[:8]}"
    client = MemoryClient(services, providers_for(services.settings).embedder, task_queue=queue)
    cases = load_probes()
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
    for case_id, results in outcomes:
        for kind, check, want, got in results:
            checks[kind] += 1
            if want == got:
                passed[kind] += 1
            else:
                failures.append(ProbeFailure(case=case_id, check=check, expected=want, actual=got))
    return ProbeReport(cases=len(cases), checks=dict(checks), passed={k: passed[k] for k in checks},
                       accuracy={k: passed[k] / checks[k] for k in checks}, failures=failures,
                       seconds=round(loop.time() - started, 2))


async def probes_command(args, settings) -> int:
    from workers.runtime import scratch_stack

    async with scratch_stack(settings, "probes") as services:
        report = await run_probes(services)
    print(json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False) if args.json else report.render())
    return 0 if not report.failures else 1
