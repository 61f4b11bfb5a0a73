"""`python -m tools.cli bench http`: the HTTP API under a bounded local load, as figures, not a test.

On a private embedded stack, a uvicorn server runs the API, and N concurrent clients (httpx, one
connection each) call it for D seconds per route:
- append: each client appends one message per request to its own session;
- context: each client asks for a subject's context, against a subject with a few sessions
  consolidated first.

It prints requests/s, p50 and p99 latency, and errors per route. Clients and server share the
machine's cores, so the figures are a floor for a real deployment, and a comparison between runs
of this command only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel

from agent_memory.api.client import MemoryClient
from agent_memory.api.http.server import serving
from agent_memory.api.services import Services
from agent_memory.core.errors import InvalidInput
from agent_memory.core.settings import Settings
from agent_memory.providers.factory import providers_for
from agent_memory.security.api_keys import create_key
from workers.worker import build_worker

TENANT = "bench-http"
LINES = ("I live in Lisbon and work as an architect.", "My sister Maja is getting married in June.",
         "I adopted a grey cat called Miso.", "I'm allergic to peanuts, keep that in mind.",
         "We hiked the coast trail near Sintra last weekend.")


class RouteFigures(BaseModel):
    route: str
    requests: int
    errors: int
    requests_per_second: float
    p50_ms: float
    p99_ms: float


class HttpBenchReport(BaseModel):
    concurrency: int
    seconds: float
    routes: list[RouteFigures]

    def render(self) -> str:
        lines = [f"HTTP API bench: {self.concurrency} concurrent clients, {self.seconds:g} s per route, one machine",
                 f"{'route':<10} {'requests':>9} {'errors':>7} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}"]
        lines += [f"{r.route:<10} {r.requests:>9} {r.errors:>7} {r.requests_per_second:>8.1f} {r.p50_ms:>8.1f} "
                  f"{r.p99_ms:>8.1f}" for r in self.routes]
        return "\n".join(lines)


def _figures(route: str, times: list[float], errors: int, seconds: float) -> RouteFigures:
    cuts = statistics.quantiles(times, n=100, method="inclusive") if len(times) > 1 else times * 99
    return RouteFigures(route=route, requests=len(times) + errors, errors=errors,
                        requests_per_second=round(len(times) / seconds, 1),
                        p50_ms=round(statistics.median(times), 1) if times else 0.0,
                        p99_ms=round(cuts[98], 1) if times else 0.0)


async def run_http_bench(services: Services, *, concurrency: int = 50, seconds: float = 30.0) -> HttpBenchReport:
    client = MemoryClient(services, providers_for(services.settings).embedder, task_queue="bench-http")
    token = (await create_key(services.pool, TENANT, "write")).token
    headers = {"Authorization": f"Bearer {token}"}
    async with serving(client) as port:
        return await _load(services, client, headers, f"http://127.0.0.1:{port}", concurrency, seconds)


async def _load(services: Services, client: MemoryClient, headers: dict[str, str], base: str, concurrency: int,
                seconds: float) -> HttpBenchReport:
    import httpx

    origin = datetime(2024, 5, 1, tzinfo=UTC)
    async with build_worker(services, task_queue="bench-http"), httpx.AsyncClient(base_url=base) as http:
        for n, line in enumerate(LINES):  # the context route's subject: a few consolidated sessions
            session = f"seed-{n}"
            await http.post(f"/v1/subjects/lin/sessions/{session}/messages", headers=headers, json={"messages": [
                {"message_id": f"{session}:1", "turn_index": 0, "role": "user", "content": line,
                 "created_at": (origin + timedelta(days=n)).isoformat()}]})
            ended = await http.post(f"/v1/subjects/lin/sessions/{session}/end", headers=headers)
            await client.consolidation_result(services.temporal.get_workflow_handle(ended.json()["workflow_id"]))
        await client.admin.wait_for_projection(TENANT, "lin", timeout=600)

        async def load(route: str) -> RouteFigures:
            times: list[float] = []
            errors = 0
            deadline = time.monotonic() + seconds

            async def one_client(c: int) -> None:
                nonlocal errors
                async with httpx.AsyncClient(base_url=base, timeout=60) as own:
                    turn = 0
                    while time.monotonic() < deadline:
                        started = time.perf_counter()
                        if route == "append":
                            response = await own.post(
                                f"/v1/subjects/u{c}/sessions/load-{c}/messages", headers=headers,
                                json={"messages": [{"message_id": f"load-{c}:{turn}", "turn_index": turn,
                                                    "role": "user", "content": LINES[turn % len(LINES)],
                                                    "created_at": datetime.now(UTC).isoformat()}]})
                            turn += 1
                        else:
                            response = await own.post("/v1/subjects/lin/context", headers=headers,
                                                      json={"query": "what should I cook for her?"})
                        if response.status_code == 200:
                            times.append((time.perf_counter() - started) * 1000)
                        else:
                            errors += 1

            began = time.monotonic()
            await asyncio.gather(*(one_client(c) for c in range(concurrency)))
            return _figures(route, times, errors, time.monotonic() - began)

        routes = [await load("append"), await load("context")]
    return HttpBenchReport(concurrency=concurrency, seconds=seconds, routes=routes)


async def http_bench_command(args: argparse.Namespace, settings: Settings) -> int:
    from workers.runtime import scratch_stack

    if args.concurrency < 1 or args.seconds <= 0:
        raise InvalidInput("--concurrency must be at least 1 and --seconds above 0")
    async with scratch_stack(settings, "bench-http") as services:
        report = await run_http_bench(services, concurrency=args.concurrency, seconds=args.seconds)
    print(json.dumps(report.model_dump(mode="json"), indent=2) if args.json else report.render())
    return 0
