"""`python -m tools.cli bench ingest`: messages/s through `client.append_messages`, on a private stack.

Three ways, each on its own subjects and sessions, in one run:

- **batched**: `--batch` messages per call (what `ingest` of a file does, one session per call);
- **one per call, idle timer debounced**: chat-style appends with the idle timer on, signalled at
  most once per session per debounce window (the default);
- **one per call, a signal per append**: the same with the debounce off (every append signals
  the timer), for the ratio.

`--clients` callers append at once, each to its own session (one session's appends are serialised
by design).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
import uuid
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel

from agent_memory.api.client import MemoryClient
from agent_memory.api.services import Services
from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import Message, Session
from agent_memory.core.settings import Settings
from agent_memory.providers.offline import offline_providers
from tools.evaluation.recall_bench import _sentence
from workers.worker import build_worker

IDLE_TIMEOUT = timedelta(minutes=10)  # the default: no timer runs out during the bench


class IngestFigures(BaseModel):
    mode: str
    messages: int
    seconds: float
    messages_per_second: float


class IngestBenchReport(BaseModel):
    clients: int
    batch: int
    figures: list[IngestFigures]
    debounced_over_every_append: float  # one-per-call messages/s ratio

    def render(self) -> str:
        lines = [f"ingest bench: {self.clients} clients, batches of {self.batch}"]
        lines += [f"  {f.mode:<34} {f.messages_per_second:>8.0f} messages/s ({f.messages} in {f.seconds:.1f} s)"
                  for f in self.figures]
        lines.append(f"  one per call, debounced / a signal per append: {self.debounced_over_every_append:.2f}×")
        return "\n".join(lines)


def _messages(session_id: str, count: int, rng: random.Random) -> list[Message]:
    began = datetime(2024, 1, 1, tzinfo=UTC)
    return [Message(message_id=f"{session_id}:{i}", turn_index=i, role="user" if i % 2 == 0 else "assistant",
                    content=_sentence(rng), created_at=began + timedelta(seconds=i)) for i in range(count)]


async def _run(client: MemoryClient, tenant: str, mode: str, clients: int, per_client: int, batch: int,
               rng: random.Random) -> IngestFigures:
    async def caller(n: int) -> None:
        session_id = f"{mode}-{n}"
        messages = _messages(session_id, per_client, rng)
        for start in range(0, per_client, batch):
            chunk = messages[start:start + batch]
            await client.append_messages(tenant, f"u{n}", Session(session_id=session_id,
                                                                  started_at=messages[0].created_at, messages=chunk))

    started = time.perf_counter()
    await asyncio.gather(*(caller(n) for n in range(clients)))
    seconds = time.perf_counter() - started
    total = clients * per_client
    return IngestFigures(mode=mode, messages=total, seconds=round(seconds, 2),
                         messages_per_second=round(total / max(seconds, 1e-9), 1))


async def run_ingest_bench(services: Services, *, messages: int, clients: int, batch: int,
                           seed: int = 5) -> IngestBenchReport:
    rng = random.Random(seed)
    queue = f"bench-ingest-{uuid.uuid4().hex[:8]}"
    tenant = f"bench-ingest-{uuid.uuid4().hex[:6]}"
    embedder = offline_providers().embedder
    per_client = max(1, messages // clients)
    debounced = MemoryClient(services, embedder, task_queue=queue, idle_timeout=IDLE_TIMEOUT)
    every_append = MemoryClient(services, embedder, task_queue=queue, idle_timeout=IDLE_TIMEOUT,
                                idle_signal_debounce=timedelta(0))
    async with build_worker(services, task_queue=queue):  # the idle timers run, as in production
        figures = [await _run(debounced, tenant, "batched", clients, per_client, batch, rng)]
        # One per call: alternating halves (debounced, every append, every append, debounced).
        halves: dict[str, list[IngestFigures]] = {"debounced": [], "every-append": []}
        for name in ("debounced", "every-append", "every-append", "debounced"):
            client = debounced if name == "debounced" else every_append
            part = len(halves[name])
            halves[name].append(await _run(client, tenant, f"{name}-{part}", clients, max(1, per_client // 2), 1,
                                           rng))
        for name, label in (("debounced", "one per call, idle timer debounced"),
                            ("every-append", "one per call, a signal per append")):
            count = sum(f.messages for f in halves[name])
            seconds = sum(f.seconds for f in halves[name])
            figures.append(IngestFigures(mode=label, messages=count, seconds=round(seconds, 2),
                                         messages_per_second=round(count / max(seconds, 1e-9), 1)))
        # Stop the idle timers the bench started (the private stack goes away anyway).
        async for run in services.temporal.list_workflows(f"TaskQueue = '{queue}' AND ExecutionStatus = 'Running'"):
            await services.temporal.get_workflow_handle(run.id, run_id=run.run_id).terminate("bench over")
    return IngestBenchReport(clients=clients, batch=batch, figures=figures,
                             debounced_over_every_append=round(
                                 figures[1].messages_per_second / max(figures[2].messages_per_second, 1e-9), 2))


async def ingest_bench_command(args: argparse.Namespace, settings: Settings) -> int:
    from workers.runtime import scratch_stack

    if args.messages < 2 or args.clients < 1 or args.batch < 1:
        raise InvalidInput("--messages must be at least 2, --clients and --batch at least 1")
    async with scratch_stack(settings, "bench-ingest", embedded_only=True) as services:
        report = await run_ingest_bench(services, messages=args.messages, clients=args.clients, batch=args.batch)
    print(json.dumps(report.model_dump(mode="json"), indent=2) if args.json else report.render())
    return 0

