"""`python -m tools.cli bench consolidate --telemetry`: what tracing costs the consolidation.

On a private embedded stack, in one run, the same synthetic sessions (those of `bench
consolidate`) are consolidated through Temporal twice, with `--concurrency` in flight:

- **untraced**: a worker and a client as a deployment without the OTEL_* variables runs them
  (no interceptor, no instrumented connection);
- **traced**: a worker and a client with tracing on (agent_memory/telemetry/tracing.py): Temporal's
  tracing interceptor, a span per SQL statement, every span scrubbed and exported by OTLP/HTTP in
  batches to a receiver in another process that answers each export and keeps nothing.

Both run in this process at once, on their own task queues and pools; after one untimed session
each (a worker's first run loads what the others reuse), the blocks alternate untraced, traced,
traced, untraced, so a drift of the machine's speed hits both. Printed:
sessions/s of each, their ratio, CPU per session, and the spans exported.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial

from pydantic import BaseModel

from agent_memory.api.client import MemoryClient
from agent_memory.api.services import Services, connect_pool, connect_temporal
from agent_memory.core.errors import InvalidInput
from agent_memory.core.settings import Settings
from agent_memory.telemetry import tracing
from tools.evaluation.consolidate_bench import (
    MESSAGES_PER_SESSION,
    ModeFigures,
    _store,
    _stored,
    _temporal,
    _timed_block,
    delayed_providers,
)
from workers.worker import build_worker

MODES = ("untraced", "traced")

# The OTLP receiver: answers every export (an empty ExportTraceServiceResponse) and counts spans'
# bytes only; its port on the first line of stdout, its count of exports on stdin's end.
RECEIVER = """
import sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
exports = [0, 0]
class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        exports[0] += 1
        exports[1] += len(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
print(exports[0], exports[1], flush=True)
"""


class TracingBenchReport(BaseModel):
    embedder: str
    sessions: int
    concurrency: int
    model_latency_ms: float
    messages_per_session: int
    figures: list[ModeFigures]
    exports: int  # OTLP requests the receiver answered
    exported_kib: float
    traced_over_untraced: float  # sessions/s ratio
    cpu_traced_over_untraced: float  # machine CPU per session ratio

    def render(self) -> str:
        lines = [f"tracing bench: {self.sessions} sessions of {self.messages_per_session} messages per mode through "
                 f"Temporal, {self.concurrency} in flight, model latency {self.model_latency_ms:g} ms per provider "
                 f"call, embedder {self.embedder}",
                 f"  {'mode':<9} {'sessions/s':>10} {'seconds':>8} {'cpu ms/session (process)':>25} "
                 f"{'(machine)':>10}"]
        for f in self.figures:
            lines.append(f"  {f.mode:<9} {f.sessions_per_second:>10.2f} {f.seconds:>8.1f} "
                         f"{f.process_cpu_ms_per_session:>25.1f} {f.machine_cpu_ms_per_session:>10.1f}")
        lines.append(f"  stored: facts {' / '.join(str(f.facts) for f in self.figures)} (untraced / traced); "
                     f"exported {self.exports} OTLP requests, {self.exported_kib:.0f} KiB")
        lines.append(f"  traced/untraced: throughput {self.traced_over_untraced:.3f}×, machine CPU per session "
                     f"{self.cpu_traced_over_untraced:.3f}×")
        return "\n".join(lines)


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, list[int]]]:
    """A receiver in its own process (its CPU is not this process's); yields its URL and, once
    closed, [exports, bytes]."""
    proc = subprocess.Popen([sys.executable, "-c", RECEIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    counts: list[int] = []
    try:
        yield f"http://127.0.0.1:{proc.stdout.readline().strip()}", counts
    finally:
        proc.stdin.close()
        counts += [int(x) for x in proc.stdout.readline().split()]
        proc.wait(timeout=10)


async def run_tracing_bench(services: Services, *, sessions: int, concurrency: int, model_latency_ms: float,
                            embedder: str | None = None, seed: int = 11) -> TracingBenchReport:
    """The figures; tracing must be on (configure_tracing) and `services` opened before it was."""
    if not tracing.tracing_on():
        raise InvalidInput("the tracing bench needs tracing on (OTEL_EXPORTER_OTLP_ENDPOINT)")
    providers = delayed_providers(model_latency_ms, embedder)
    tenants = {mode: f"bench-{mode}-{uuid.uuid4().hex[:6]}" for mode in MODES}
    subjects = [f"u{n}" for n in range(sessions + 1)]  # the last one warms each side up, untimed
    for mode in MODES:  # the same sessions for both
        await _store(services, tenants[mode], subjects, random.Random(seed))
    # The traced side: its own pool (instrumented connections) and Temporal client (the interceptor).
    traced_pool = await connect_pool(services.settings)
    traced = replace(services, pool=traced_pool,
                     temporal=await connect_temporal(services.settings, services.temporal.data_converter))
    queues = {mode: f"bench-{mode}-{uuid.uuid4().hex[:8]}" for mode in MODES}
    clients = {"untraced": MemoryClient(services, providers.embedder, task_queue=queues["untraced"], idle_timeout=None),
               "traced": MemoryClient(traced, providers.embedder, task_queue=queues["traced"], idle_timeout=None)}
    half = max(1, sessions // 2)
    blocks = [("untraced", 0, half), ("traced", 0, half), ("traced", half, sessions), ("untraced", half, sessions)]
    totals = {mode: [0.0, 0.0, 0.0, 0.0] for mode in MODES}
    async with build_worker(services, task_queue=queues["untraced"], providers=providers), \
            build_worker(traced, task_queue=queues["traced"], providers=providers):
        for mode in MODES:  # the first run of each worker loads what later ones reuse
            await _temporal(clients[mode], tenants[mode], subjects[sessions], f"s{sessions}")
        for mode, start, stop in blocks:
            jobs: list[Callable[[], Awaitable[None]]] = [
                partial(_temporal, clients[mode], tenants[mode], subjects[n], f"s{n}") for n in range(start, stop)]
            for i, value in enumerate((*await _timed_block(jobs, concurrency), len(jobs))):
                totals[mode][i] += value
    figures = []
    for mode in MODES:
        wall, process, machine, count = totals[mode]
        facts, vectors = await _stored(services, tenants[mode])
        figures.append(ModeFigures(mode=mode, sessions=int(count), facts=facts, vectors=vectors,
                                   seconds=round(wall, 2), sessions_per_second=round(count / max(wall, 1e-9), 2),
                                   process_cpu_ms_per_session=round(process * 1000 / max(count, 1), 1),
                                   machine_cpu_ms_per_session=round(machine * 1000 / max(count, 1), 1)))
    await traced_pool.close()
    untraced, traced_figures = figures
    return TracingBenchReport(
        embedder=providers.embedder.name, sessions=sessions, concurrency=concurrency,
        model_latency_ms=model_latency_ms, messages_per_session=MESSAGES_PER_SESSION, figures=figures,
        exports=0, exported_kib=0.0,
        traced_over_untraced=round(traced_figures.sessions_per_second / max(untraced.sessions_per_second, 1e-9), 3),
        cpu_traced_over_untraced=round(traced_figures.machine_cpu_ms_per_session
                                       / max(untraced.machine_cpu_ms_per_session, 1e-9), 3))


async def tracing_bench_command(args: argparse.Namespace, settings: Settings) -> int:
    from workers.runtime import scratch_stack

    if args.sessions < 2 or args.concurrency < 1 or args.model_latency_ms < 0:
        raise InvalidInput("--sessions must be at least 2, --concurrency at least 1 and --model-latency-ms "
                           "0 or more")
    # The untraced side is opened with tracing off whatever the environment says; then it is on.
    for name in [name for name in os.environ if name.startswith("OTEL_")]:
        del os.environ[name]
    with otlp_receiver() as (url, counts):
        async with scratch_stack(settings, "bench-tracing", embedded_only=True) as services:
            os.environ.update(OTEL_EXPORTER_OTLP_ENDPOINT=url, OTEL_SERVICE_NAME="agent-memory-bench")
            tracing.configure_tracing()
            report = await run_tracing_bench(services, sessions=args.sessions, concurrency=args.concurrency,
                                             model_latency_ms=args.model_latency_ms, embedder=args.embedder)
            await asyncio.to_thread(tracing.flush_traces)
    report.exports, report.exported_kib = counts[0], round(counts[1] / 1024, 1)
    print(json.dumps(report.model_dump(mode="json"), indent=2) if args.json else report.render())
    return 0
