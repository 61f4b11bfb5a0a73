"""The recall probe set: recency, importance, recall window, profile and in-session turns, in
English and Chinese. Each case's past sessions run through the real consolidation workflow; its
live session is appended and left open; then the prompt for the case's query is built under the
chosen recall policy and its blocks are checked. Two splits ship: dev (tune on it) and test."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from agent_memory.api.client import MemoryClient
from agent_memory.core.models import Role
from agent_memory.recall.prompt import BuiltPrompt
from agent_memory.recall.recall_policy import PRESETS, PresetName, RecallPolicy
from tools.evaluation.probes import _day, build_sessions, parse_cases, read_case_file

SPLITS = ("dev", "test")
Lines = list[str | tuple[Role, str]]


class RecallProbe(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    lang: str = ""
    category: str = ""
    sessions: list[tuple[str, Lines]]
    live: tuple[str, Lines] | None = None
    query: str
    as_of: str
    recalled: list[int] = []  # sessions (1-based) the episodic block must draw on
    not_recalled: list[int] = []
    ranked_before: list[tuple[int, int]] = []  # (a, b): a's first item comes before any item of b
    profile: list[str] = []  # substrings of the profile block
    recent: list[str] = []  # substrings of the recent block, verbatim

    def checks(self) -> int:
        return (len(self.recalled) + len(self.not_recalled) + len(self.ranked_before) + len(self.profile)
                + len(self.recent))


class RecallFailure(BaseModel):
    case: str
    check: str
    detail: str


class CategoryTally(BaseModel):
    cases: int = 0
    cases_passed: int = 0
    checks: int = 0
    passed: int = 0


class RecallProbeReport(BaseModel):
    split: str
    preset: str
    cases: int
    checks: int
    passed: int
    cases_passed: int
    by_category: dict[str, CategoryTally]
    by_lang: dict[str, CategoryTally]
    failures: list[RecallFailure]
    seconds: float

    @property
    def accuracy(self) -> float:
        return self.passed / max(self.checks, 1)

    def render(self) -> str:
        lines = [f"recall probes ({self.split}, policy {self.preset}): {self.passed}/{self.checks} checks "
                 f"({self.accuracy:.1%}), {self.cases_passed}/{self.cases} cases, {self.seconds:.1f}s"]
        for title, table in (("category", self.by_category), ("language", self.by_lang)):
            lines += [f"  {title} {name:<12} {t.passed:>3}/{t.checks:<3} {t.passed / max(t.checks, 1):6.1%}   "
                      f"cases {t.cases_passed}/{t.cases}" for name, t in sorted(table.items())]
        lines += [f"  FAIL {f.case}: {f.check}: {f.detail}" for f in self.failures]
        return "\n".join(lines)


def load_recall_probes(path: Path | None = None, split: str = "dev") -> list[RecallProbe]:
    """A split of the bundled set, or any file of cases (JSON Lines). A bad file raises
    InvalidInput in one line naming the file, the line and the problem."""
    name, text = read_case_file(path, f"recall-probes-{split}.jsonl")
    return parse_cases(name, text, RecallProbe, days=_days, problem=_problem, empty="no cases")


def _days(case: RecallProbe) -> list[str]:
    return [d for d, _ in case.sessions] + [case.as_of] + ([case.live[0]] if case.live else [])


def _problem(case: RecallProbe) -> str:
    indices = [*case.recalled, *case.not_recalled, *(i for pair in case.ranked_before for i in pair)]
    return ("no checks" if not case.checks()
            else "a session index out of range" if any(not 1 <= i <= len(case.sessions) for i in indices)
            else "recent checks need a live session" if case.recent and not case.live
            else "")


def _sessions_cited(built: BuiltPrompt, case_id: str, block: str) -> list[int]:
    """The session of every item of a block, in block order (an item citing several: the first)."""
    prefix = f"{case_id}-"
    found: list[int] = []
    for b in built.blocks:
        for cited in b.citations.values() if b.name == block else ():
            sessions = sorted({int(s) for s in (m.removeprefix(prefix).split(":", 1)[0] for m in cited
                                                if m.startswith(prefix)) if s.isdigit()})
            found += sessions[:1]
    return found


def check_case(case: RecallProbe, built: BuiltPrompt) -> list[tuple[str, bool, str]]:
    """(check, passed, detail) for every expectation of the case."""
    blocks = {b.name: b for b in built.blocks}
    order = _sessions_cited(built, case.id, "episodic")
    profile = "\n".join(m.content for m in blocks["profile"].messages)
    recent = "\n".join(m.content for m in blocks["recent"].messages)
    results = [(f"session {i} recalled", i in order, f"episodic block draws on sessions {order}")
               for i in case.recalled]
    results += [(f"session {i} not recalled", i not in order, f"episodic block draws on sessions {order}")
                for i in case.not_recalled]
    for a, b in case.ranked_before:
        ok = a in order and (b not in order or order.index(a) < order.index(b))
        results.append((f"session {a} before session {b}", ok, f"episodic order {order}"))
    results += [(f"profile has {text!r}", text in profile, f"profile block: {profile[:300]!r}")
                for text in case.profile]
    results += [(f"recent has {text!r}", text in recent, f"recent block: {recent[:300]!r}") for text in case.recent]
    return results


async def _run_case(client: MemoryClient, tenant: str, case: RecallProbe, policy: RecallPolicy) -> BuiltPrompt:
    subject = case.id
    for session in build_sessions(case.id, case.sessions):
        await client.append_messages(tenant, subject, session)
        await client.consolidation_result(await client.end_session(tenant, subject, session.session_id))
    live_id = f"{case.id}-live"
    if case.live:
        (live,) = build_sessions(f"{case.id}-live", [case.live])
        await client.append_messages(tenant, subject, live.model_copy(update={"session_id": live_id}))
    await client.admin.wait_for_projection(tenant, subject)
    as_of = _day(case.as_of) + timedelta(hours=12)  # the query comes after the day's sessions
    return await client.build_prompt(tenant, subject, live_id, case.query, as_of=as_of, policy=policy)


async def run_recall_probes(services, cases: list[RecallProbe], *, split: str, preset: PresetName,
                            task_queue: str | None = None, concurrency: int = 6) -> RecallProbeReport:
    from agent_memory.providers.factory import providers_for
    from workers.worker import build_worker

    queue = task_queue or f"recall-probes-{uuid.uuid4().hex[:8]}"
    tenant = f"recall-{uuid.uuid4().hex[:8]}"
    providers = providers_for(services.settings)
    client = MemoryClient(services, providers.embedder, task_queue=queue, idle_timeout=None,
                          summarizer=providers.summarizer)
    gate = asyncio.Semaphore(concurrency)
    policy = PRESETS[preset]

    async def one(case: RecallProbe):
        async with gate:
            return case, check_case(case, await _run_case(client, tenant, case, policy))

    loop = asyncio.get_running_loop()
    started = loop.time()
    async with build_worker(services, task_queue=queue):
        outcomes = await asyncio.gather(*(one(c) for c in cases))
    by_category: dict[str, CategoryTally] = {}
    by_lang: dict[str, CategoryTally] = {}
    failures: list[RecallFailure] = []
    totals: Counter[str] = Counter()
    for case, results in outcomes:
        ok = [passed for _, passed, _ in results]
        for tally in (by_category.setdefault(case.category or "-", CategoryTally()),
                      by_lang.setdefault(case.lang or "-", CategoryTally())):
            tally.cases += 1
            tally.cases_passed += all(ok)
            tally.checks += len(ok)
            tally.passed += sum(ok)
        totals.update(checks=len(ok), passed=sum(ok), cases_passed=all(ok))
        failures += [RecallFailure(case=case.id, check=check, detail=detail)
                     for check, passed, detail in results if not passed]
    return RecallProbeReport(split=split, preset=preset, cases=len(cases), checks=totals["checks"],
                             passed=totals["passed"], cases_passed=totals["cases_passed"], by_category=by_category,
                             by_lang=by_lang, failures=failures, seconds=round(loop.time() - started, 2))


async def recall_probes_command(args, settings) -> int:
    from workers.runtime import scratch_stack

    # A bad file fails here, before any stack starts.
    splits = [(str(args.data), load_recall_probes(args.data))] if args.data else [
        (split, load_recall_probes(split=split)) for split in (SPLITS if args.split == "all" else (args.split,))]
    reports = []
    async with scratch_stack(settings, "recall-probes") as services:
        for split, cases in splits:
            reports.append(await run_recall_probes(services, cases, split=split, preset=args.preset))
    if args.json:
        print(json.dumps([{**r.model_dump(mode="json"), "accuracy": r.accuracy} for r in reports], indent=2,
                         ensure_ascii=False))
    else:
        print("\n".join(r.render() for r in reports))
    return 0 if all(not r.failures for r in reports) else 1
