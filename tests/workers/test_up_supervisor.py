"""`agent-memory up` as a supervisor, run as a user runs it (a subprocess on its own home and free
ports): a killed server comes back, said once; one `up` per home; Ctrl-C ends within a bound even
with PostgreSQL down, and at any moment of the start-up stops every server started so far; a
killed `up`'s servers are adopted by the next one; each run printed once."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from agent_memory.api.http.server import free_port
from agent_memory.core.settings import ENV_VARS
from agent_memory.core.stack_connection import read_connection
from workers.embedded import pid_alive
from workers.supervisor import SHUTDOWN_SECONDS, Backoff

pytestmark = pytest.mark.minutes(1)

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ("postgres", "redis", "temporal")
# Ctrl-C must end `up` within this (its own hard bound, plus the interpreter's exit).
STOP_BOUND_SECONDS = SHUTDOWN_SECONDS + 5


class Up:
    """A running `agent-memory up`; its stdout lines collected as they come."""

    def __init__(self, home: Path, *, ready: bool = True, settings: dict[str, str] | None = None) -> None:
        self.home = home
        env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
        env.update(AGENT_MEMORY_HOME=str(home), AGENT_MEMORY_TASK_QUEUE=f"up-{uuid.uuid4().hex[:8]}", **(settings or {}))
        self.task_queue = env["AGENT_MEMORY_TASK_QUEUE"]
        self.stderr = home.parent / f"up-{uuid.uuid4().hex[:6]}.stderr"
        with open(self.stderr, "w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "workers.cli", "up", "--free-ports", "--api-port", "0"],
                                         env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True)
        self.lines: list[str] = []
        self._new: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        if ready:
            self.wait_for("Ctrl-C stops everything.", timeout=180)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            self._new.put(line)

    def wait_for(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        for line in list(self.lines):
            if text in line:
                return line
        while time.monotonic() < deadline:
            try:
                line = self._new.get(timeout=0.2)
            except queue.Empty:
                assert self.proc.poll() is None, f"up exited ({self.proc.returncode}): {self.output()}"
                continue
            if text in line:
                return line
        raise AssertionError(f"no line with {text!r} within {timeout} s: {self.output()}")

    def count(self, text: str) -> int:
        return sum(text in line for line in self.lines)

    def output(self) -> str:
        return "\n".join(self.lines) + "\n--- stderr:\n" + self.stderr.read_text()[-3000:]

    def pid(self, server: str) -> int:
        return json.loads((self.home / "run" / f"{server}.json").read_text())["pid"]

    def port(self, server: str) -> int:
        return json.loads((self.home / "run" / f"{server}.json").read_text())["port"]

    def interrupt(self) -> float:
        """SIGINT, as Ctrl-C; the seconds until `up` exited."""
        began = time.monotonic()
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=STOP_BOUND_SECONDS + 30)
        return time.monotonic() - began


def _kill_leftovers(home: Path) -> None:
    for path in (home / "run").glob("*.json"):
        pid = json.loads(path.read_text()).get("pid")
        if pid and pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


def _home_processes(home: Path) -> list[str]:
    """The command lines of the processes (servers, initdb) that run on files under `home`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(home) in argv and "pytest" not in argv:
            found.append(f"{cmdline.parent.name}: {argv}")
    return found


def _until_started(home: Path, server: str, timeout: float = 120) -> None:
    """Until `up` has recorded `server` as started (its state file)."""
    deadline = time.monotonic() + timeout
    while not (home / "run" / f"{server}.json").exists():
        assert time.monotonic() < deadline, f"{server} not started within {timeout} s"
        time.sleep(0.05)


def _hold_port(port: int) -> socket.socket:
    """Listen on `port` as soon as the server that had it is gone."""
    deadline = time.monotonic() + 5
    while True:
        holder = socket.socket()
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            holder.bind(("127.0.0.1", port))
            holder.listen()
            return holder
        except OSError:
            holder.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _until_gone(pids, timeout: float = 10) -> None:
    """A process stopped by a signal may take a moment to exit."""
    deadline = time.monotonic() + timeout
    while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)


async def _closed_run(temporal_address: str, task_queue: str) -> str:
    """A run on the queue that closes at once (terminated): the run log must print it."""
    from temporalio.client import Client

    client = await Client.connect(temporal_address)
    workflow_id = f"closed-{uuid.uuid4().hex[:8]}"
    handle = await client.start_workflow("RunLogProbe", id=workflow_id, task_queue=task_queue)
    await handle.terminate()
    return workflow_id


@pytest.mark.stack
def test_a_killed_server_comes_back_one_up_per_home_and_ctrl_c_is_bounded(tmp_path):
    home = tmp_path / "home"
    up = Up(home)
    try:
        # A second `up` on the home exits at once, with one line naming the first.
        began = time.monotonic()
        second = subprocess.run([sys.executable, "-m", "workers.cli", "up", "--free-ports"], cwd=ROOT,
                                env={**{k: v for k, v in os.environ.items() if k not in ENV_VARS},
                                     "AGENT_MEMORY_HOME": str(home)}, capture_output=True, text=True, timeout=60)
        assert second.returncode != 0 and second.stdout == ""
        assert second.stderr.strip().count("\n") == 0, second.stderr
        assert f"already running under {home} (pid {up.proc.pid}" in second.stderr
        assert time.monotonic() - began < 15

        # Each closed run is printed once, however long `up` runs on.
        temporal = f"127.0.0.1:{up.port('temporal')}"
        workflow_id = asyncio.run(_closed_run(temporal, up.task_queue))
        up.wait_for(workflow_id, timeout=30)

        # A killed server is started again on its port, and each change is said once.
        redis_port, redis_pid = up.port("redis"), up.pid("redis")
        os.kill(redis_pid, signal.SIGKILL)
        up.wait_for("redis is running again", timeout=60)
        assert up.count("redis stopped unexpectedly") == 1 and up.count("redis is running again") == 1
        assert up.port("redis") == redis_port and up.pid("redis") != redis_pid
        # Programs on the home still find the stack (the connection file names the restarted server's pid).
        assert read_connection(home) is not None
        time.sleep(5)  # a few more run-log polls and supervisor checks
        assert up.count(workflow_id) == 1, up.output()
        assert up.count("redis") == 2 and up.proc.poll() is None

        # A server that cannot start (a full disk, its port taken) is retried with backoff, said
        # once, and comes back by itself once the cause is gone.
        pg_port = up.port("postgres")
        os.kill(up.pid("postgres"), signal.SIGKILL)
        blocker = _hold_port(pg_port)
        try:
            up.wait_for("postgres did not start again", timeout=30)
            time.sleep(2)  # more attempts, not more lines
        finally:
            blocker.close()
        up.wait_for("postgres is running again", timeout=60)
        assert up.count("postgres stopped unexpectedly") == 1 and up.count("postgres did not start again") == 1
        assert up.port("postgres") == pg_port

        # Ctrl-C with PostgreSQL down (the worker's pool waiting on it) still ends in bounded time.
        pids = {name: up.pid(name) for name in SERVERS}
        os.kill(pids["postgres"], signal.SIGKILL)
        took = up.interrupt()
        assert took < STOP_BOUND_SECONDS, (took, up.output())
        assert up.proc.returncode == 0, up.output()
        _until_gone(pids.values())
        assert not [name for name, pid in pids.items() if pid_alive(pid)], up.output()
        assert not list((home / "run").glob("*.json"))
    finally:
        if up.proc.poll() is None:
            up.proc.kill()
        _kill_leftovers(home)


# Ctrl-C during start-up: what started is stopped in order (PostgreSQL's fast shutdown, Temporal's
# drain), generously bounded for a loaded machine; a second Ctrl-C kills at once.
STARTUP_STOP_BOUND_SECONDS = 20.0
FORCED_STOP_BOUND_SECONDS = 8.0


@pytest.mark.stack
@pytest.mark.parametrize(("started", "interrupts"), [
    ("postgres", 1),  # Redis and Temporal, the migrations and the worker still to come
    ("temporal", 1),  # the migrations, the connections, the worker and the API still to come
    ("temporal", 2),  # Temporal's drain keeps the first stop busy while the second Ctrl-C comes
])
def test_ctrl_c_during_start_up_stops_every_server_started_so_far(tmp_path, started, interrupts):
    home = tmp_path / "home"
    up = Up(home, ready=False)
    try:
        _until_started(home, started)
        began = time.monotonic()
        up.proc.send_signal(signal.SIGINT)
        if interrupts == 2:
            up.wait_for("stopping before start-up finished", timeout=10)
            assert up.proc.poll() is None, up.output()  # the first stop is still under way
            up.proc.send_signal(signal.SIGINT)
        up.proc.wait(timeout=STOP_BOUND_SECONDS + 30)
        took = time.monotonic() - began
        bound = STARTUP_STOP_BOUND_SECONDS if interrupts == 1 else FORCED_STOP_BOUND_SECONDS
        assert took < bound, (took, up.output())
        assert up.proc.returncode == (130 if interrupts == 1 else 1), up.output()
        assert up.count("Ctrl-C stops everything.") == 0, up.output()  # it never finished starting
        deadline = time.monotonic() + 10  # a killed server's last moments
        while _home_processes(home) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _home_processes(home) == [], up.output()
        assert not list((home / "run").glob("*.json")), up.output()
    finally:
        if up.proc.poll() is None:
            up.proc.kill()
        _kill_leftovers(home)


@pytest.mark.stack
def test_the_servers_of_a_killed_up_are_adopted_and_stopped_by_the_next(tmp_path):
    home = tmp_path / "home"
    first = Up(home)
    try:
        pids = {name: first.pid(name) for name in SERVERS}
        first.proc.kill()  # SIGKILL: no chance to stop anything
        first.proc.wait(timeout=10)
        assert all(pid_alive(pid) for pid in pids.values())

        second = Up(home)
        for name in SERVERS:
            assert second.count(f"adopted the {name} server") == 1, second.output()
        assert {name: second.pid(name) for name in SERVERS} == pids
        took = second.interrupt()
        assert took < STOP_BOUND_SECONDS and second.proc.returncode == 0, second.output()
        _until_gone(pids.values())
        assert not [name for name, pid in pids.items() if pid_alive(pid)], second.output()

        # A second Ctrl-C does not wait for an orderly stop: the servers are killed at once. A
        # frozen Temporal keeps the orderly stop from finishing first.
        third = Up(home)
        pids = {name: third.pid(name) for name in SERVERS}
        os.kill(pids["temporal"], signal.SIGSTOP)
        began = time.monotonic()
        third.proc.send_signal(signal.SIGINT)
        third.wait_for("stopping", timeout=10)
        third.proc.send_signal(signal.SIGINT)
        third.proc.wait(timeout=30)
        assert time.monotonic() - began < 10 and third.proc.returncode == 1, third.output()
        assert third.count("a second interrupt: killing the servers") == 1
        _until_gone(pids.values())
        assert not [name for name, pid in pids.items() if pid_alive(pid)], third.output()
    finally:
        for up in (first, locals().get("second"), locals().get("third")):
            if up is not None and up.proc.poll() is None:
                up.proc.kill()
        _kill_leftovers(home)


def test_the_api_keeps_its_port_while_old_connections_linger():
    """A port whose closed connections are in TIME_WAIT (the API of a crashed `up`) is free for
    the API: the probe binds with SO_REUSEADDR, as uvicorn does, not with a plain bind."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    peer = socket.create_connection(("127.0.0.1", port))
    accepted, _ = listener.accept()
    accepted.close()  # the server's side closes first: its port lingers in TIME_WAIT
    listener.close()
    peer.close()
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind(("127.0.0.1", port))
    assert free_port("127.0.0.1", port) == port
    with socket.socket() as taken:  # a port another server listens on is still refused
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", port))
        taken.listen()
        assert free_port("127.0.0.1", port) != port


def test_backoff_grows_to_its_ceiling():
    backoff = Backoff()
    delays = [backoff.next_delay() for _ in range(12)]
    assert delays == sorted(delays) and delays[0] < 1 and delays[-1] == 30


async def test_a_failing_task_is_restarted_with_backoff_and_each_change_said_once(monkeypatch):
    """The worker and the HTTP API run under supervise_task: failures restart them, and a stop
    ends them within its bound even when one ignores it."""
    from workers import supervisor

    monkeypatch.setattr(supervisor, "BACKOFF_SECONDS", (0.01, 0.02))
    monkeypatch.setattr(supervisor, "HELD_SECONDS", 0.3)
    monkeypatch.setattr(supervisor, "PART_STOP_SECONDS", 0.5)
    said: list[str] = []
    runs = 0
    stop = asyncio.Event()

    async def flaky() -> None:
        nonlocal runs
        runs += 1
        if runs <= 3:
            raise ConnectionError(f"refused {runs}")
        await asyncio.sleep(3600)  # ignores `stop`: the bound must end it

    task = asyncio.create_task(supervisor.supervise_task("worker", flaky, stop, say=said.append))
    await asyncio.sleep(1.0)
    assert said == ["worker failed (refused 1); restarting it", said[1]] and said[1].startswith(
        "worker is running again (down "), said
    began = time.monotonic()
    stop.set()
    await asyncio.wait_for(task, timeout=5)
    assert time.monotonic() - began < 2 and runs == 4
