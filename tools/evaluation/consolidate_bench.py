"""`python -m tools.cli bench consolidate`: what orchestration costs, Temporal against a direct pipeline.

On a private embedded stack, in one run, the same synthetic sessions (one subject each, their
messages stored beforehand and not timed) are consolidated two ways with `--concurrency` in
flight:

- **temporal**: the session-end hook (`client.end_session`) starts the consolidation workflow on
  an in-process worker (and its model queue's worker); a session is done when its run has committed and its outbox rows are
  embedded (by the run itself with an embedder in the worker, else by the subject's projector).
- **direct**: one asyncio task per session calls the same activity methods in the workflow's
  order (`_direct`: extract → importance and summary at once → conflicts → commit) and then the
  projector's batch step until the subject's outbox is empty. No Temporal: no history, no task
  round trips, no retries.

The blocks alternate direct, temporal, temporal, direct (half the sessions each), so a drift of
the machine's speed hits both. `--model-latency-ms` adds that sleep to every provider call
(extractor, scorer, summarizer, embedder) to show what a real model leaves of the overhead.
Printed: sessions/s of each, their ratio, and CPU per session (this process, which runs the
worker and the pipeline, and the whole machine: worker + Postgres + Temporal).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, cast

from pydantic import BaseModel
from temporalio.client import WorkflowHandle

from activities.consolidation import ConsolidationActivities
from agent_memory.api.client import MemoryClient
from agent_memory.api.services import Services
from agent_memory.core import contract
from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import CommitInput, ConflictPlanInput, Message, Session, StepInput
from agent_memory.core.projection_models import ProjectionPolicy
from agent_memory.core.settings import Settings
from agent_memory.memory.evidence import append_messages
from agent_memory.projection.projector import OutboxProjector
from agent_memory.providers.base import runs_in_worker
from agent_memory.providers.embedders import local_embedder
from agent_memory.providers.offline import OfflineProviders, offline_providers
from agent_memory.store.db import fetch_one, tenant_transaction
from tools.evaluation.recall_bench import _sentence
from workers.worker import build_worker

CITIES = ("Oslo", "Lisbon", "Kyoto", "Lima", "Cairo", "Quito", "Perth", "Riga")
JOBS = ("nurse", "teacher", "pilot", "baker", "plumber", "chemist", "lawyer", "farmer")
MESSAGES_PER_SESSION = 10
MODES = ("direct", "temporal")


class ModeFigures(BaseModel):
    mode: str
    sessions: int
    facts: int  # current facts and vectors stored by the mode: both did the same work
    vectors: int
    seconds: float
    sessions_per_second: float
    process_cpu_ms_per_session: float  # this process: the worker or the pipeline, and the bench
    machine_cpu_ms_per_session: float  # every process: + Postgres, Temporal, Redis


class ConsolidateBenchReport(BaseModel):
    embedder: str
    sessions: int
    concurrency: int
    model_latency_ms: float
    messages_per_session: int
    figures: list[ModeFigures]
    temporal_over_direct: float  # sessions/s ratio
    cpu_temporal_over_direct: float  # machine CPU per session ratio

    def render(self) -> str:
        lines = [f"consolidation bench: {self.sessions} sessions of {self.messages_per_session} messages per mode, "
                 f"{self.concurrency} in flight, model latency {self.model_latency_ms:g} ms per provider call, "
                 f"embedder {self.embedder}",
                 f"  {'mode':<9} {'sessions/s':>10} {'seconds':>8} {'cpu ms/session (process)':>25} "
                 f"{'(machine)':>10}"]
        for f in self.figures:
            lines.append(f"  {f.mode:<9} {f.sessions_per_second:>10.2f} {f.seconds:>8.1f} "
                         f"{f.process_cpu_ms_per_session:>25.1f} {f.machine_cpu_ms_per_session:>10.1f}")
        lines.append(f"  stored: facts {' / '.join(str(f.facts) for f in self.figures)}, vectors "
                     f"{' / '.join(str(f.vectors) for f in self.figures)} (direct / temporal)")
        lines.append(f"  temporal/direct: throughput {self.temporal_over_direct:.2f}×, machine CPU per session "
                     f"{self.cpu_temporal_over_direct:.2f}×")
        return "\n".join(lines)


class _Delayed:
    """A provider whose calls each take `seconds` longer: a model's latency, without the model.
    With a latency it stands for a remote model (its steps run as ordinary activities)."""

    def __init__(self, inner: Any, seconds: float, methods: tuple[str, ...]):
        self._inner = inner
        self._seconds = seconds
        self._methods = methods
        self.runs_in_worker = seconds <= 0 and runs_in_worker(inner)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if name not in self._methods or self._seconds <= 0:
            return attribute

        async def delayed(*args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(self._seconds)
            return await attribute(*args, **kwargs)
        return delayed


def delayed_providers(latency_ms: float, embedder: str | None = None) -> OfflineProviders:
    p = offline_providers()
    chosen = local_embedder(embedder) if embedder is not None else p.embedder
    assert chosen is not None  # a local embedder's name
    seconds = latency_ms / 1000
    return OfflineProviders(cast(Any, _Delayed(p.extractor, seconds, ("extract",))),
                            cast(Any, _Delayed(p.scorer, seconds, ("score",))),
                            cast(Any, _Delayed(p.summarizer, seconds, ("summarize",))),
                            cast(Any, _Delayed(chosen, seconds, ("embed",))))


def bench_session(n: int, rng: random.Random) -> Session:
    """A session with profile statements (facts to extract and decide) among ordinary turns."""
    began = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(hours=n)
    lines = [f"I live in {rng.choice(CITIES)}.", f"I work as a {rng.choice(JOBS)}."]
    lines += [_sentence(rng) for _ in range(MESSAGES_PER_SESSION - len(lines))]
    rng.shuffle(lines)
    return Session(session_id=f"s{n}", started_at=began, messages=[
        Message(message_id=f"s{n}:{i}", turn_index=i, role="user" if i % 2 == 0 else "assistant",
                content=text, created_at=began + timedelta(seconds=i)) for i, text in enumerate(lines)])


async def _store(services: Services, tenant: str, subjects: list[str], rng: random.Random) -> None:
    for n, subject in enumerate(subjects):
        await append_messages(services.pool, None, tenant, subject, bench_session(n, rng),
                              subject_digest=services.keyring.subject_digest(tenant, subject))


async def _stored(services: Services, tenant: str) -> tuple[int, int]:
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT (SELECT count(*) FROM facts WHERE tenant_id = %(t)s AND status = 'active'), "
                                 "(SELECT count(*) FROM memory_vectors WHERE tenant_id = %(t)s)", {"t": tenant})
        facts, vectors = await fetch_one(cur)
    return int(facts), int(vectors)


async def _direct(activities: ConsolidationActivities, projector: OutboxProjector, tenant: str, subject: str,
                  session_id: str) -> None:
    """The consolidation's activity methods called in line, in the workflow's order
    (workflows/consolidation.py), then the projector's batch step until nothing is left: the
    baseline the workflow's throughput is compared with. One plan and one commit: no other writer
    touches a bench subject's facts, so a commit is never refused as a version conflict (were it
    refused, the bench would fail)."""
    step = StepInput(tenant_id=tenant, subject_id=subject, session_id=session_id)
    extraction = await activities.extract_facts(step)
    step = step.model_copy(update={"through": extraction.through})
    importance, summary = await asyncio.gather(activities.score_importance(step),
                                               activities.summarize_session(step))
    plan = await activities.check_conflicts(ConflictPlanInput(
        **step.model_dump(), extraction_operation_id=extraction.operation_id, round=0))
    await activities.commit_consolidation(CommitInput(
        **step.model_dump(), extraction_operation_id=extraction.operation_id, plan_operation_id=plan.operation_id,
        importance_operation_id=importance.operation_id, summary_operation_id=summary.operation_id))
    while (await projector.project_batch(tenant, subject)).pending:
        pass


async def _temporal(client: MemoryClient, tenant: str, subject: str, session_id: str) -> None:
    await consolidated(client, await client.end_session(tenant, subject, session_id))


async def consolidated(client: MemoryClient, run: WorkflowHandle) -> None:
    """Wait for a consolidation run, and for the projector it woke to embed what it left."""
    result = await run.result()
    if result.projector_woken:  # the projector's latest run embeds what the consolidation left
        await client.services.temporal.get_workflow_handle(
            contract.projector_workflow_id(result.tenant_id, result.subject_id)).result()


async def _timed_block(jobs: list[Callable[[], Awaitable[None]]], concurrency: int) -> tuple[float, float, float]:
    """Wall seconds, this process's CPU seconds and the machine's CPU seconds for the jobs."""
    gate = asyncio.Semaphore(concurrency)

    async def bounded(job: Callable[[], Awaitable[None]]) -> None:
        async with gate:
            await job()

    machine_before, process_before = machine_cpu_seconds(), time.process_time()
    started = time.perf_counter()
    await asyncio.gather(*(bounded(job) for job in jobs))
    wall = time.perf_counter() - started
    return wall, time.process_time() - process_before, machine_cpu_seconds() - machine_before


def machine_cpu_seconds() -> float:
    """CPU time spent by every process since boot (Linux /proc/stat: user, nice, system, irq,
    softirq); 0 where there is no /proc (the machine column then reads 0)."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return 0.0
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


async def run_consolidate_bench(services: Services, *, sessions: int, concurrency: int, model_latency_ms: float,
                                embedder: str | None = None, seed: int = 11) -> ConsolidateBenchReport:
    providers = delayed_providers(model_latency_ms, embedder)
    queue = f"bench-consolidate-{uuid.uuid4().hex[:8]}"
    tenants = {mode: f"bench-{mode}-{uuid.uuid4().hex[:6]}" for mode in MODES}
    subjects = {mode: [f"u{n}" for n in range(sessions)] for mode in MODES}
    for mode in MODES:  # the same sessions for both
        await _store(services, tenants[mode], subjects[mode], random.Random(seed))
    activities = ConsolidationActivities(services.pool, services.keyring, providers.extractor, providers.scorer,
                                         providers.summarizer, providers.embedder)
    projector = OutboxProjector(services.pool, services.keyring, providers.embedder, ProjectionPolicy())
    client = MemoryClient(services, providers.embedder, task_queue=queue, idle_timeout=None)
    half = max(1, sessions // 2)
    blocks = [("direct", 0, half), ("temporal", 0, half), ("temporal", half, sessions), ("direct", half, sessions)]
    totals = {mode: [0.0, 0.0, 0.0, 0] for mode in MODES}
    async with build_worker(services, task_queue=queue, providers=providers):
        for mode, start, stop in blocks:
            tenant = tenants[mode]
            chosen = [(s, f"s{n}") for n, s in enumerate(subjects[mode]) if start <= n < stop]
            if not chosen:
                continue
            jobs: list[Callable[[], Awaitable[None]]] = [
                partial(_direct, activities, projector, tenant, s, sid) if mode == "direct"
                else partial(_temporal, client, tenant, s, sid) for s, sid in chosen]
            wall, process, machine = await _timed_block(jobs, concurrency)
            total = totals[mode]
            total[0] += wall
            total[1] += process
            total[2] += machine
            total[3] += len(chosen)
    figures = []
    for mode in MODES:
        wall, process, machine, count = totals[mode]
        count = int(count)
        facts, vectors = await _stored(services, tenants[mode])
        figures.append(ModeFigures(mode=mode, sessions=count, facts=facts, vectors=vectors, seconds=round(wall, 2),
                                   sessions_per_second=round(count / max(wall, 1e-9), 2),
                                   process_cpu_ms_per_session=round(process * 1000 / max(count, 1), 1),
                                   machine_cpu_ms_per_session=round(machine * 1000 / max(count, 1), 1)))
    direct, temporal = figures
    return ConsolidateBenchReport(
        embedder=providers.embedder.name, sessions=sessions, concurrency=concurrency, model_latency_ms=model_latency_ms,
        messages_per_session=MESSAGES_PER_SESSION, figures=figures,
        temporal_over_direct=round(temporal.sessions_per_second / max(direct.sessions_per_second, 1e-9), 3),
        cpu_temporal_over_direct=round(temporal.machine_cpu_ms_per_session
                                       / max(direct.machine_cpu_ms_per_session, 1e-9), 3))


async def consolidate_bench_command(args: argparse.Namespace, settings: Settings) -> int:
    from workers.runtime import scratch_stack

    if args.sessions < 2 or args.concurrency < 1 or args.model_latency_ms < 0:
        raise InvalidInput("--sessions must be at least 2, --concurrency at least 1 and --model-latency-ms "
                           "0 or more")
    async with scratch_stack(settings, "bench-consolidate", embedded_only=True) as services:
        report = await run_consolidate_bench(services, sessions=args.sessions, concurrency=args.concurrency,
                                             model_latency_ms=args.model_latency_ms, embedder=args.embedder)
    print(json.dumps(report.model_dump(mode="json"), indent=2) if args.json else report.render())
    return 0
