"""`python -m tools.cli bench scale`: consolidation throughput with 1, 2, 4… worker processes against
one Temporal and one PostgreSQL, a provider's rate limit, and fairness between tenants.

On a private embedded stack, each phase on a task queue of its own with that many worker
processes (each its own OS process: `python -m tools.evaluation.scale_bench`, the product's
`build_worker`, its model queue's worker limited to `--worker-concurrency` calls at once by the
setting AGENT_MEMORY_MODEL_CONCURRENCY). The workers' providers are the offline ones behind a
simulated remote model (the `bench consolidate` latency wrapper, `_Delayed`): the extraction,
importance and summary calls each take `--model-latency-ms` and run on the model queue; the
embedder (hashing) computes in the worker. The simulated provider admits calls through a gate in
Redis, shared by every process: with a rate R it answers 429 with the time until a slot frees
(`retry-after-ms`) when R calls were admitted in the last second, and every call is logged there.

Phases, in one run:

- **scaling**: for each `--workers` count, `--sessions` sessions (one subject each, their messages
  stored beforehand) ended at once through the session-end hook; sessions/s from the first end to
  the last consolidated, its ratio to the first count's, p50/p99 from a session's end to its run
  (and its projector, if woken) done.
- **provider limit** (`--provider-rate R`): the most workers, the provider at R calls/s, twice:
  with the model queue's server-side limit at R (AGENT_MEMORY_MODEL_ACTIVITIES_PER_SECOND, the
  documented configuration) and without it (the provider's 429s alone hold the rate, each retried
  after its Retry-After through the activity's `next_retry_delay`). The most calls the provider
  admitted in any one-second window, the most attempted, the 429s absorbed and the failed runs.
- **fairness**: the most workers; a trickle tenant ends one session every 0.5 s, alone, then while
  a flood tenant's `--sessions` sessions were ended at once; the trickle's p99 each way and their
  ratio (fairness keys by tenant: contract.tenant_fairness).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import random
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel
from redis.asyncio import Redis

from agent_memory.api.client import MemoryClient
from agent_memory.api.services import Services
from agent_memory.core.errors import InvalidInput
from agent_memory.core.settings import Settings
from agent_memory.providers.embedders import local_embedder
from agent_memory.providers.errors import ProviderRetryableError
from agent_memory.providers.offline import OfflineProviders, offline_providers
from tools.chaos import worker_env
from tools.evaluation.answers import percentile
from tools.evaluation.consolidate_bench import _Delayed, _store, consolidated, machine_cpu_seconds

PROVIDER_ENV = "AGENT_MEMORY_BENCH_PROVIDER"  # the simulated provider of a bench worker (JSON)
MODEL_CALLS_PER_SESSION = 3  # extraction, importance, summary
TRICKLE_INTERVAL = 0.5
_REPO_ROOT = Path(__file__).resolve().parents[2]
log = logging.getLogger(__name__)

# The provider's admission, atomic in Redis and on the Redis server's clock (admissions and their
# times in one order, whichever process calls): KEYS window (sorted set of the last second's
# admitted calls), admitted log, attempted log; ARGV rate (0: no limit), a unique member. Returns
# nil when admitted, else the seconds until the oldest admitted call leaves the window.
_ADMIT = """
redis.replicate_commands()
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local rate = tonumber(ARGV[1])
redis.call('RPUSH', KEYS[3], string.format('%.6f', now))
if rate > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 1.0)
  if redis.call('ZCARD', KEYS[1]) >= rate then
    local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    return tostring(tonumber(oldest[2]) + 1.0 - now)
  end
  redis.call('ZADD', KEYS[1], now, ARGV[2])
end
redis.call('RPUSH', KEYS[2], string.format('%.6f', now))
return false
"""


def _keys(prefix: str) -> list[str]:
    return [f"{prefix}:window", f"{prefix}:admitted", f"{prefix}:attempted"]


class ProviderGate:
    """The simulated provider's rate limit, shared by every worker process through Redis."""

    def __init__(self, redis: Redis, prefix: str, rate: float | None):
        self._script = redis.register_script(_ADMIT)
        self._keys = _keys(prefix)
        self._rate = rate or 0

    async def admit(self) -> None:
        wait = await self._script(keys=self._keys, args=[self._rate, uuid.uuid4().hex])
        if wait is not None:
            raise ProviderRetryableError("provider returned HTTP 429: rate limit reached",
                                         max(float(wait), 0.001), status_code=429)


class _Gated:
    """A provider whose calls pass the gate first: a remote model (its steps ordinary activities
    on the model queue) that refuses calls over its rate."""

    runs_in_worker = False

    def __init__(self, inner: Any, gate: ProviderGate, methods: tuple[str, ...]):
        self._inner = inner
        self._gate = gate
        self._methods = methods

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if name not in self._methods:
            return attribute

        async def gated(*args: Any, **kwargs: Any) -> Any:
            await self._gate.admit()
            return await attribute(*args, **kwargs)
        return gated


def simulated_providers(redis: Redis, *, latency_ms: float, prefix: str, rate: float | None) -> OfflineProviders:
    """The offline extractor, scorer and summarizer as a remote model with `latency_ms` per call
    behind the gate; the hashing embedder in the worker's process."""
    p, gate, seconds = offline_providers(), ProviderGate(redis, prefix, rate), latency_ms / 1000
    embedder = local_embedder("hashing")
    assert embedder is not None

    def model(inner: Any, method: str) -> Any:
        return _Gated(_Delayed(inner, seconds, (method,)), gate, (method,))
    return OfflineProviders(cast(Any, model(p.extractor, "extract")), cast(Any, model(p.scorer, "score")),
                            cast(Any, model(p.summarizer, "summarize")), embedder)


# --- the worker process ---------------------------------------------------------------------------

async def _serve_worker() -> int:
    from workers.worker import build_worker

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = Settings.from_env()
    config = json.loads(os.environ[PROVIDER_ENV])
    services = await Services.open(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        providers = simulated_providers(services.redis, latency_ms=config["latency_ms"], prefix=config["prefix"],
                                        rate=config["rate"])
        async with build_worker(services, task_queue=settings.task_queue, providers=providers):
            (Path(config["ready"]) / str(os.getpid())).touch()
            await stop.wait()
    finally:
        await services.close()
    return 0


class WorkerProcesses:
    """`count` bench worker processes on one task queue; started together, stopped by their ids."""

    def __init__(self, services: Services, run_dir: Path, *, count: int, concurrency: int,
                 latency_ms: float, provider_rate: float | None, queue_rate: float | None):
        self.count = count
        self.queue = f"bench-scale-{uuid.uuid4().hex[:8]}"
        self.prefix = f"bench-provider:{self.queue}"
        self.redis = services.redis
        self.dir = run_dir / self.queue
        self.ready = self.dir / "ready"
        self.ready.mkdir(parents=True)
        env = worker_env(services.settings, task_queue=self.queue, provider_log=self.dir / "unused.log")
        env.update(AGENT_MEMORY_MODEL_CONCURRENCY=str(concurrency))
        if queue_rate:
            env["AGENT_MEMORY_MODEL_ACTIVITIES_PER_SECOND"] = str(queue_rate)
        env[PROVIDER_ENV] = json.dumps({"latency_ms": latency_ms, "prefix": self.prefix, "rate": provider_rate,
                                        "ready": str(self.ready)})
        self.env = env
        self.procs: list[asyncio.subprocess.Process] = []
        self.since = 0.0  # provider calls before this time (the Redis server's clock) are not counted

    async def __aenter__(self) -> WorkerProcesses:
        try:
            for n in range(self.count):
                # The child needs a real file descriptor; opening a local log file needs no thread.
                with open(self.dir / f"worker-{n}.log", "ab") as out:  # noqa: ASYNC230
                    self.procs.append(await asyncio.create_subprocess_exec(
                        sys.executable, "-m", "tools.evaluation.scale_bench", env=self.env, cwd=str(_REPO_ROOT),
                        stdout=out, stderr=asyncio.subprocess.STDOUT, stdin=asyncio.subprocess.DEVNULL))
            deadline = time.monotonic() + 180
            while len(list(self.ready.iterdir())) < self.count:
                exited = [p for p in self.procs if p.returncode is not None]
                if exited or time.monotonic() > deadline:
                    raise RuntimeError(f"a bench worker {'exited' if exited else 'did not start'}: "
                                       f"{self.log_tail()}")
                await asyncio.sleep(0.2)
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()

    def log_tail(self, chars: int = 3000) -> str:
        return "\n".join(path.read_text(errors="replace")[-chars:] for path in sorted(self.dir.glob("worker-*.log")))

    async def count_from_now(self) -> None:
        """Count the provider's calls from now on only (after a warm-up)."""
        seconds, microseconds = await self.redis.time()
        self.since = seconds + microseconds / 1e6

    async def provider_log(self) -> tuple[list[float], list[float]]:
        """The times of the calls the provider admitted, and of every call attempted."""
        _, admitted, attempted = _keys(self.prefix)
        return ([t for raw in await self.redis.lrange(admitted, 0, -1) if (t := float(raw)) >= self.since],
                [t for raw in await self.redis.lrange(attempted, 0, -1) if (t := float(raw)) >= self.since])


def peak_rate(times: list[float]) -> int:
    """The most calls in any one-second window (the provider's own window: (t - 1 s, t])."""
    ordered, best, first = sorted(times), 0, 0
    for last, t in enumerate(ordered):
        while ordered[first] <= t - 1.0:
            first += 1
        best = max(best, last - first + 1)
    return best


# --- phases -------------------------------------------------------------------------------------

class PhaseFigures(BaseModel):
    workers: int
    sessions: int
    failed: int  # consolidations that raised (a failed run, a timeout)
    seconds: float  # first session end to last consolidated
    sessions_per_second: float
    p50_seconds: float  # a session's end to its consolidation (and projection) done
    p99_seconds: float
    model_calls: int  # admitted by the provider
    rejected_429: int
    peak_calls_per_second: int  # the most admitted calls in any one-second window
    attempted_peak_per_second: int  # the same of every call made, admitted or refused
    machine_cpu_busy: float  # the machine's CPU time over its cores × the wall time (every process)


class ScalingRow(PhaseFigures):
    ratio_to_first: float  # sessions/s over the first row's (one worker in the default run)


class ProviderLimitRow(PhaseFigures):
    provider_rate: float
    queue_rate: float | None  # the model queue's server-side limit; None: none


class FairnessFigures(BaseModel):
    workers: int
    flood_sessions: int
    trickle_sessions: int
    trickle_interval_seconds: float
    failed: int
    trickle_alone_p99_seconds: float
    trickle_during_flood_p99_seconds: float
    during_flood_over_alone: float
    flood_seconds: float


class ScaleBenchReport(BaseModel):
    model_latency_ms: float
    worker_concurrency: int
    model_calls_per_session: int
    scaling: list[ScalingRow]
    provider_limit: list[ProviderLimitRow]
    fairness: FairnessFigures

    def render(self) -> str:
        lines = [f"scale bench: model latency {self.model_latency_ms:g} ms per call, {self.model_calls_per_session} "
                 f"model calls per session, {self.worker_concurrency} model calls at once per worker process",
                 f"  {'workers':>7} {'sessions':>8} {'failed':>6} {'sessions/s':>10} {'× first':>7} {'p50 s':>6} "
                 f"{'p99 s':>6} {'calls/s peak':>12} {'CPU busy':>8}"]
        for r in self.scaling:
            lines.append(f"  {r.workers:>7} {r.sessions:>8} {r.failed:>6} {r.sessions_per_second:>10.2f} "
                         f"{r.ratio_to_first:>7.2f} {r.p50_seconds:>6.1f} {r.p99_seconds:>6.1f} "
                         f"{r.peak_calls_per_second:>12} {r.machine_cpu_busy:>8.0%}")
        for p in self.provider_limit:
            queue = f"queue limit {p.queue_rate:g}/s" if p.queue_rate else "no queue limit"
            lines.append(f"  provider limit {p.provider_rate:g} calls/s, {queue}, {p.workers} workers: admitted peak "
                         f"{p.peak_calls_per_second}/s (attempted {p.attempted_peak_per_second}/s), "
                         f"{p.rejected_429} 429s absorbed, {p.failed} failed of {p.sessions}, "
                         f"{p.sessions_per_second:.2f} sessions/s")
        f = self.fairness
        lines.append(f"  fairness ({f.workers} workers): trickle of {f.trickle_sessions} sessions every "
                     f"{f.trickle_interval_seconds:g} s, p99 alone {f.trickle_alone_p99_seconds:.2f} s, during a flood "
                     f"of {f.flood_sessions} sessions {f.trickle_during_flood_p99_seconds:.2f} s "
                     f"({f.during_flood_over_alone:.2f}×), {f.failed} failed")
        return "\n".join(lines)


Timing = tuple[float, float] | None  # (ended, consolidated) on the perf counter; None: failed


async def _consolidate(client: MemoryClient, tenant: str, n: int, delay: float = 0.0,
                       ended: Callable[[], None] = lambda: None) -> Timing:
    """Session n of the tenant ended through the hook (`ended` called once it returned) and waited
    for; its times, or None if it failed."""
    await asyncio.sleep(delay)
    started = time.perf_counter()
    try:
        run = await client.end_session(tenant, f"u{n}", f"s{n}")
        ended()
        await asyncio.wait_for(consolidated(client, run), timeout=600)
    except Exception as exc:  # counted as failed, and said why
        log.warning("consolidation of %s/u%d failed: %s", tenant, n, exc)
        return None
    return started, time.perf_counter()


async def _stored_tenant(services: Services, sessions: int, seed: int) -> str:
    tenant = f"bench-scale-{uuid.uuid4().hex[:8]}"
    await _store(services, tenant, [f"u{n}" for n in range(sessions)], random.Random(seed))
    return tenant


def _latencies(timings: list[Timing]) -> list[float]:
    return [done - ended for t in timings if t is not None for ended, done in (t,)]


async def _figures(pool: WorkerProcesses, timings: list[Timing], cpu_seconds: float) -> dict[str, Any]:
    done = [t for t in timings if t is not None]
    wall = (max(t[1] for t in done) - min(t[0] for t in done)) if done else 0.0
    latencies = _latencies(timings)
    admitted, attempted = await pool.provider_log()
    return {"workers": pool.count, "sessions": len(timings), "failed": len(timings) - len(done),
            "seconds": round(wall, 2), "sessions_per_second": round(len(done) / max(wall, 1e-9), 3),
            "p50_seconds": round(percentile(latencies, 50) or 0.0, 2),
            "p99_seconds": round(percentile(latencies, 99) or 0.0, 2),
            "model_calls": len(admitted), "rejected_429": len(attempted) - len(admitted),
            "peak_calls_per_second": peak_rate(admitted), "attempted_peak_per_second": peak_rate(attempted),
            "machine_cpu_busy": round(cpu_seconds / max(wall * (os.cpu_count() or 1), 1e-9), 3)}


async def run_scale_bench(services: Services, *, workers: list[int], sessions: int, model_latency_ms: float,
                          worker_concurrency: int = 4, provider_rate: float | None = None,
                          run_dir: Path | None = None, seed: int = 11,
                          progress: Callable[[str], None] = lambda _: None) -> ScaleBenchReport:
    embedder = local_embedder("hashing")
    assert embedder is not None
    with contextlib.ExitStack() as cleanup:
        if run_dir is None:
            run_dir = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="bench-scale-")))

        @contextlib.asynccontextmanager
        async def processes(count: int, *, rate: float | None = None,
                            queue_rate: float | None = None) -> AsyncIterator[WorkerProcesses]:
            """The worker processes, warmed up: two sessions per process consolidated first (not
            counted), so no phase pays for first connections and first runs."""
            async with WorkerProcesses(services, run_dir, count=count, concurrency=worker_concurrency,
                                       latency_ms=model_latency_ms, provider_rate=rate, queue_rate=queue_rate) as pool:
                await sessions_at_once(pool, 2 * count)
                await pool.count_from_now()
                yield pool

        async def sessions_at_once(pool: WorkerProcesses, count: int) -> list[Timing]:
            tenant = await _stored_tenant(services, count, seed)
            client = MemoryClient(services, embedder, task_queue=pool.queue, idle_timeout=None)
            return list(await asyncio.gather(*(_consolidate(client, tenant, n) for n in range(count))))

        async def measured(pool: WorkerProcesses) -> dict[str, Any]:
            tenant = await _stored_tenant(services, sessions, seed)  # stored before the CPU is counted
            client = MemoryClient(services, embedder, task_queue=pool.queue, idle_timeout=None)
            cpu = machine_cpu_seconds()
            timings = list(await asyncio.gather(*(_consolidate(client, tenant, n) for n in range(sessions))))
            return await _figures(pool, timings, machine_cpu_seconds() - cpu)

        scaling: list[ScalingRow] = []
        for count in workers:
            progress(f"scaling: {count} worker process(es), {sessions} sessions")
            async with processes(count) as pool:
                figures = await measured(pool)
            first = scaling[0].sessions_per_second if scaling else figures["sessions_per_second"]
            scaling.append(ScalingRow(**figures, ratio_to_first=round(
                figures["sessions_per_second"] / max(first, 1e-9), 3)))

        most = max(workers)
        limited: list[ProviderLimitRow] = []
        for queue_rate in ((provider_rate, None) if provider_rate else ()):
            assert provider_rate is not None
            progress(f"provider limit {provider_rate:g}/s, queue limit {queue_rate or 'none'}: {most} workers")
            async with processes(most, rate=provider_rate, queue_rate=queue_rate) as pool:
                figures = await measured(pool)
            limited.append(ProviderLimitRow(**figures, provider_rate=provider_rate, queue_rate=queue_rate))

        trickle = max(2, min(16, sessions // 8))
        progress(f"fairness: a trickle of {trickle} sessions alone, then during a flood of {sessions}")
        async with processes(most) as pool:
            client = MemoryClient(services, embedder, task_queue=pool.queue, idle_timeout=None)

            async def trickle_run() -> list[Timing]:
                tenant = await _stored_tenant(services, trickle, seed + 1)
                return list(await asyncio.gather(*(_consolidate(client, tenant, n, n * TRICKLE_INTERVAL)
                                                   for n in range(trickle))))

            alone = await trickle_run()
            flood_tenant = await _stored_tenant(services, sessions, seed)
            all_ended, ends = asyncio.Event(), [0]

            def ended() -> None:
                ends[0] += 1
                if ends[0] == sessions:
                    all_ended.set()
            flood = asyncio.ensure_future(asyncio.gather(
                *(_consolidate(client, flood_tenant, n, ended=ended) for n in range(sessions))))
            # The trickle starts once the flood's sessions are all ended: their runs wait on the queue.
            waiting: asyncio.Future[Any] = asyncio.ensure_future(all_ended.wait())
            await asyncio.wait([cast(asyncio.Future[Any], flood), waiting], return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            during = await trickle_run()
            flooded = list(await flood)
        done = [t for t in flooded if t is not None]
        alone_p99 = percentile(_latencies(alone), 99) or 0.0
        during_p99 = percentile(_latencies(during), 99) or 0.0
        fairness = FairnessFigures(
            workers=most, flood_sessions=sessions, trickle_sessions=trickle, trickle_interval_seconds=TRICKLE_INTERVAL,
            failed=sum(t is None for t in alone + during + flooded), trickle_alone_p99_seconds=round(alone_p99, 2),
            trickle_during_flood_p99_seconds=round(during_p99, 2),
            during_flood_over_alone=round(during_p99 / max(alone_p99, 1e-9), 3),
            flood_seconds=round(max(t[1] for t in done) - min(t[0] for t in done), 2) if done else 0.0)
    return ScaleBenchReport(model_latency_ms=model_latency_ms, worker_concurrency=worker_concurrency,
                            model_calls_per_session=MODEL_CALLS_PER_SESSION, scaling=scaling,
                            provider_limit=limited, fairness=fairness)


async def scale_bench_command(args: argparse.Namespace, settings: Settings) -> int:
    from workers.runtime import scratch_stack

    if (not args.workers or min(args.workers) < 1 or args.sessions < 2 or args.model_latency_ms < 0
            or args.worker_concurrency < 1 or (args.provider_rate is not None and not args.provider_rate > 0)
            or (args.provider_rate is not None and math.isinf(args.provider_rate))):
        raise InvalidInput("--workers takes counts of 1 or more, --sessions at least 2, --model-latency-ms 0 or "
                           "more, --worker-concurrency at least 1 and --provider-rate a positive number")

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    async with scratch_stack(settings, "bench-scale", embedded_only=True) as services:
        report = await run_scale_bench(services, workers=args.workers, sessions=args.sessions,
                                       model_latency_ms=args.model_latency_ms,
                                       worker_concurrency=args.worker_concurrency, provider_rate=args.provider_rate,
                                       progress=progress)
    print(json.dumps(report.model_dump(mode="json"), indent=2) if args.json else report.render())
    return 0


def worker_main() -> int:
    return asyncio.run(_serve_worker())


if __name__ == "__main__":
    code = worker_main()
    logging.shutdown()
    os._exit(code)  # no interpreter teardown under the Temporal runtime (workers/cli.py run)
