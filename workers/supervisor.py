"""`agent-memory up` as a supervisor: one `up` per home, servers restarted when they die, the
worker and the HTTP API restarted when they fail, and a stop that ends within a bounded time.

- The home's lock (`run/up.lock`, flock) names the running `up`; a second one exits at once.
  The kernel releases it when its holder dies, however it dies, so a killed `up` never blocks
  the next one, which adopts (supervises and stops) the servers the killed one left running.
- A server whose process is gone is started again on its port (its clients' URLs stay valid),
  with a backoff between failed attempts (a full disk: PostgreSQL comes back once space is freed).
  Each outage is said once when it begins and once when it ends, never once per attempt.
- Stopping is bounded: the worker, the API and the connections get a few seconds each; past
  SHUTDOWN_SECONDS, or at a second Ctrl-C, every server of the home is killed and `up` exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_memory.core.errors import ServiceUnavailable
from workers.embedded import EmbeddedStack, _private_dir

log = logging.getLogger(__name__)

# Past this many seconds after Ctrl-C, the servers are killed and `up` exits.
SHUTDOWN_SECONDS = 25.0
# Each part of a stop (worker, API, run log, connections) gets at most this long.
PART_STOP_SECONDS = 5.0
# Waits between attempts to restart something that keeps failing.
BACKOFF_SECONDS = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
LOCK_NAME = "up.lock"
# A restarted worker or API that has run this long without failing is said to be back.
HELD_SECONDS = 5.0

Say = Callable[[str], None]


def _print(line: str) -> None:
    print(line, flush=True)


class UpAlreadyRunningError(ServiceUnavailable):
    """Another `agent-memory up` holds the home's lock."""


@contextlib.contextmanager
def home_lock(home: Path) -> Iterator[Path]:
    """Hold the home's `up` lock for the block; the lock file records the holder's pid and start.
    Raises UpAlreadyRunningError naming the holder when another process has it."""
    run_dir = _private_dir(home / "run")
    path = run_dir / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(path)
            raise UpAlreadyRunningError(
                f"agent-memory up is already running under {home} (pid {holder.get('pid', '?')}, since "
                f"{holder.get('since', '?')}): use that one, or stop it first") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "since": datetime.now(UTC).isoformat(timespec="seconds")})
                  .encode(), 0)
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock


def _read_holder(path: Path) -> dict[str, Any]:
    try:
        holder = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


@dataclass
class Backoff:
    """The wait before the next attempt; reset after a success."""

    attempts: int = 0

    def next_delay(self) -> float:
        delay = BACKOFF_SECONDS[min(self.attempts, len(BACKOFF_SECONDS) - 1)]
        self.attempts += 1
        return delay


async def wait_or_stop(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep `seconds` unless `stop` is set first; True when it was set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    return stop.is_set()


@dataclass
class _Outage:
    since: float
    backoff: Backoff = field(default_factory=Backoff)
    next_attempt: float = 0.0
    reported_failure: bool = False


class ServerSupervisor:
    """Restarts the servers the stack runs (its `started` list) when their process is gone."""

    def __init__(self, stack: EmbeddedStack, *, say: Say = _print, every: float = 1.0) -> None:
        self.stack = stack
        self.say = say
        self.every = every
        self.outages: dict[str, _Outage] = {}

    def _log_file(self, name: str) -> Path:
        return self.stack.postgres_log if name == "postgres" else self.stack.log_dir / f"{name}.log"

    async def watch(self, stop: asyncio.Event) -> None:
        """Until `stop` is set: check every server each `every` seconds, restart the dead ones."""
        while not await wait_or_stop(stop, self.every):
            for name in list(self.stack.started):
                if stop.is_set():
                    return
                await self._check(name)

    async def _check(self, name: str) -> None:
        now = time.monotonic()
        outage = self.outages.get(name)
        if outage is None:
            if await asyncio.to_thread(self.stack.server_pid, name) is not None:
                return
            outage = self.outages[name] = _Outage(since=now)
            self.say(f"{name} stopped unexpectedly (log: {self._log_file(name)}); restarting it")
        if now < outage.next_attempt:
            return
        try:
            if not await asyncio.to_thread(self.stack.restart, name):
                return  # the stack is stopping
        except Exception as exc:  # the reason is in the server's log; try again after the backoff
            delay = outage.backoff.next_delay()
            outage.next_attempt = time.monotonic() + delay
            if not outage.reported_failure:
                outage.reported_failure = True
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                self.say(f"{name} did not start again: {reason}; retrying, at most {BACKOFF_SECONDS[-1]:.0f} s apart")
            log.info("restarting %s failed: %s; next attempt in %.1f s", name, exc, delay)
            return
        del self.outages[name]
        self.say(f"{name} is running again (down {time.monotonic() - outage.since:.1f} s)")


async def supervise_task(name: str, run: Callable[[], Awaitable[None]], stop: asyncio.Event, *,
                         say: Say = _print) -> None:
    """Run `run()` until `stop` is set (it watches `stop` itself and winds down), starting it again
    with backoff when it fails or ends early. A failure is said once, and the recovery once: when
    the restarted one has held for HELD_SECONDS."""
    backoff = Backoff()
    failing_since: float | None = None
    stopper = asyncio.ensure_future(stop.wait())
    try:
        while not stop.is_set():
            task = asyncio.ensure_future(run())
            while True:
                done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED,
                                             timeout=HELD_SECONDS if failing_since is not None else None)
                if done:
                    break
                assert failing_since is not None  # the timeout is only set while failing
                say(f"{name} is running again (down {time.monotonic() - failing_since:.1f} s)")
                failing_since, backoff = None, Backoff()
            if not task.done():  # stopping
                try:
                    await asyncio.wait_for(task, timeout=PART_STOP_SECONDS)
                except TimeoutError:
                    log.warning("%s did not stop within %.0f s", name, PART_STOP_SECONDS)
                except Exception as exc:
                    log.warning("%s failed while stopping: %s", name, exc)
                return
            error = None if task.cancelled() else task.exception()
            if stop.is_set():
                return
            if failing_since is None:
                failing_since = time.monotonic()
                say(f"{name} failed ({error or 'it ended'}); restarting it")
            else:
                log.info("%s failed again: %s", name, error)
            if await wait_or_stop(stop, backoff.next_delay()):
                return
    finally:
        stopper.cancel()


class ShutdownGuard:
    """Bounds a stop: SHUTDOWN_SECONDS after the first signal, or at a second one, every server
    recorded under the home is killed and the process exits."""

    def __init__(self, stack: EmbeddedStack | None = None, *, say: Say = _print,
                 seconds: float = SHUTDOWN_SECONDS) -> None:
        self.stack, self.say, self.seconds = stack, say, seconds
        self.stop = asyncio.Event()  # set at the first signal
        self.timer: threading.Timer | None = None
        self.signals = 0

    def on_signal(self) -> None:
        self.signals += 1
        if self.signals == 1:
            self.stop.set()
            self.timer = threading.Timer(self.seconds, self.force, args=(f"stopping took over {self.seconds:.0f} s",))
            self.timer.daemon = True
            self.timer.start()
        else:
            self.force("a second interrupt")

    def force(self, why: str) -> None:
        self.say(f"{why}: killing the servers")
        if self.stack is not None:
            self.stack.kill_all()
        os._exit(1)

    def cancel(self) -> None:
        """The stop finished in time (the servers are stopped too)."""
        if self.timer is not None:
            self.timer.cancel()


def _api_server(config: Any) -> Any:
    """uvicorn without its own signal handlers: `up` handles SIGINT/SIGTERM itself (the first
    stops everything in order, a second forces), which uvicorn's would pre-empt."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return Server(config)


async def serve_api(client: Any, host: str, port: int, stop: asyncio.Event,
                    started: asyncio.Event | None = None) -> None:
    """The HTTP API on host:port until `stop` is set. Raises when it cannot bind the port or
    ends on its own (supervise_task starts it again, on the same port)."""
    from agent_memory.api.http.server import free_port, uvicorn_config

    if free_port(host, port) != port:
        raise OSError(f"port {port} of the HTTP API is taken")
    server = _api_server(uvicorn_config(client, host, port))

    async def serve() -> None:
        try:
            await server.serve()
        except SystemExit as exc:  # uvicorn exits the process when it cannot bind: an error here
            raise OSError(f"the HTTP API could not serve on {host}:{port}") from exc

    task = asyncio.ensure_future(serve())
    stopper = asyncio.ensure_future(stop.wait())
    try:
        # uvicorn says it has bound its socket only by a flag.
        while not (server.started or task.done() or stop.is_set()):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        if server.started and started is not None:
            started.set()
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            server.should_exit = True
            await task
            return
        task.result()
        raise ServiceUnavailable("the HTTP API stopped serving")
    finally:
        stopper.cancel()
        if not task.done():
            server.should_exit = server.force_exit = True
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(task, timeout=PART_STOP_SECONDS)
