"""The embedded stack launcher: reuse, stale pid files, and stopping only what it started; its
files private, its servers on loopback only, Redis behind a password."""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import socket
import stat
import struct
import subprocess
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from agent_memory.core.settings import Settings
from workers.embedded import (
    ACL_MASK,
    ACL_XATTR,
    POSTGRES_MAX_LOCKS_PER_TRANSACTION,
    POSTGRES_SYSTEM_USER,
    EmbeddedStack,
    Ports,
    ServerExitedError,
    acl_with_user_search,
    can_traverse,
    grant_search,
    pid_alive,
    port_open,
    postgres_shared_buffers_mb,
    postgres_socket_dir,
    postgres_system_user,
    read_acl,
)
from workers.runtime import open_stack

pytestmark = pytest.mark.stack


def test_up_reuses_running_servers_and_survives_a_stale_pid_file(tmp_path):
    settings = Settings.from_env({"AGENT_MEMORY_HOME": str(tmp_path)})
    # Temporal is provided "externally" here (a bogus address is never dialled by the launcher),
    # so this test exercises Postgres and Redis, which have pid files of our own.
    settings = settings.with_services(temporal_address="127.0.0.1:1")
    first = EmbeddedStack(tmp_path, Ports.free())
    resolved = first.start(settings)
    try:
        assert sorted(first.started) == ["postgres", "redis"]
        second = EmbeddedStack(tmp_path, Ports.free())  # other ports: it must reuse, not start
        again = second.start(settings)
        assert second.started == [] and again.database_url == resolved.database_url
        assert again.redis_url == resolved.redis_url
        with psycopg.connect(resolved.database_admin_url) as conn:
            assert conn.execute("SELECT default_version FROM pg_available_extensions "
                                "WHERE name = 'vector'").fetchone()[0].startswith("0.8")
            assert conn.execute("SHOW server_version").fetchone()[0].startswith("18")

        # A stale pid file (process gone) must not stop a fresh start.
        state = tmp_path / "run" / "redis.json"
        redis_port = json.loads(state.read_text())["port"]
        first._stop_redis()
        first.started.remove("redis")
        state.write_text(json.dumps({"pid": 999_999, "port": redis_port}))
        third = EmbeddedStack(tmp_path, Ports.free())
        restarted = third.start(settings)
        assert third.started == ["redis"] and restarted.redis_url != resolved.redis_url
        third.stop()
        assert not port_open(int(restarted.redis_url.rsplit(":", 1)[1].split("/")[0]))
    finally:
        first.stop()
    pg_state = tmp_path / "run" / "postgres.json"
    assert not pg_state.exists()
    assert not port_open(int(resolved.database_url.rsplit(":", 1)[1].split("/")[0]))


def test_pid_alive_detects_dead_processes():
    assert not pid_alive(999_999)


def test_postgres_socket_sits_in_its_data_directory_unless_the_path_is_too_long_for_a_socket(tmp_path):
    assert postgres_socket_dir(tmp_path / "postgres", 5432) == tmp_path / "postgres"
    deep = tmp_path / ("nested-" * 16) / "postgres"
    short = postgres_socket_dir(deep, 5432)
    try:
        assert short != deep and len(f"{short}/.s.PGSQL.5432") <= 107
        server_uid = (postgres_system_user() or (os.getuid(), os.getgid()))[0]
        assert stat.S_IMODE(short.stat().st_mode) == 0o700 and short.stat().st_uid == server_uid
        assert postgres_socket_dir(deep, 5432) == short  # the same home, the same directory
    finally:
        short.rmdir()


# --- a fresh stack under a private parent: file modes, listening sockets, Redis auth ---------------

@pytest.fixture(scope="module")
async def private_stack(tmp_path_factory):
    """A whole embedded stack (Temporal, Postgres, Redis, migrated) whose home does not exist yet,
    under a 0o700 parent: as root, Postgres runs as another user that must reach its data."""
    parent = tmp_path_factory.mktemp("private-parent")
    parent.chmod(0o700)
    home = parent / "stack" / "home"
    before = {p: p.stat().st_mode for p in home.parents if p.exists()}
    settings = Settings.from_env({"AGENT_MEMORY_HOME": str(home)})
    async with open_stack(settings, start=True, ports=Ports.free()) as services:
        yield home, before, services


def test_no_file_of_the_stack_is_readable_or_writable_by_others(private_stack):
    home, before, _ = private_stack
    assert (home / "postgres" / "PG_VERSION").exists() and (home / "temporal.db").exists()
    wide = []
    for root, dirs, files in os.walk(home):  # the postgres data directory included
        for name in [*dirs, *files]:
            path = Path(root) / name
            mode = path.lstat().st_mode
            if not stat.S_ISLNK(mode) and mode & 0o007:
                wide.append(f"{stat.filemode(mode)} {path}")
    assert stat.S_IMODE(home.stat().st_mode) & 0o007 == 0
    assert not wide, "world-accessible under the stack home:\n" + "\n".join(wide)
    for name in ("secrets.json", "temporal.db"):
        assert stat.S_IMODE((home / name).stat().st_mode) == 0o600, name
    for name in ("run", "logs", "redis"):
        assert stat.S_IMODE((home / name).stat().st_mode) & 0o077 in (0, 0o010), name  # 0o010: an ACL mask
    for parent, mode in before.items():
        gained = parent.stat().st_mode & ~mode
        assert not gained & 0o006, f"{parent} gained {stat.filemode(parent.stat().st_mode)} (was {stat.filemode(mode)})"
    # The initdb password file is gone.
    assert not list(home.glob(".initdb-*"))


def test_the_buffer_cache_is_a_quarter_of_the_ram_between_128_mb_and_1_gb():
    assert postgres_shared_buffers_mb(24 * 2**30) == 1024
    assert postgres_shared_buffers_mb(2 * 2**30) == 512
    assert postgres_shared_buffers_mb(256 * 2**20) == 128


async def test_the_embedded_postgres_runs_with_that_buffer_cache(private_stack):
    _, _, services = private_stack
    async with services.pool.connection() as conn:
        cur = await conn.execute("SELECT setting::bigint * 8 / 1024 FROM pg_catalog.pg_settings "
                                 "WHERE name = 'shared_buffers'")  # in 8 kB blocks
        assert await cur.fetchone() == (postgres_shared_buffers_mb(),)


async def test_the_embedded_postgres_has_room_for_a_tenant_wide_vector_query(private_stack):
    """A query on memory_vectors by tenant alone locks every partition and its indexes."""
    _, _, services = private_stack
    async with services.pool.connection() as conn:
        cur = await conn.execute("SELECT setting::int FROM pg_catalog.pg_settings "
                                 "WHERE name = 'max_locks_per_transaction'")
        assert await cur.fetchone() == (POSTGRES_MAX_LOCKS_PER_TRANSACTION,)
        async with conn.transaction():
            await conn.execute("SELECT set_config('app.tenant_id', 'nobody', true)")
            await conn.execute("SELECT count(*) FROM memory_vectors WHERE tenant_id = 'nobody'")
            cur = await conn.execute("SELECT count(*) FROM pg_catalog.pg_locks WHERE pid = pg_backend_pid() "
                                     "AND locktype = 'relation'")
            (held,) = await cur.fetchone()
    assert 5 * 256 <= held <= POSTGRES_MAX_LOCKS_PER_TRANSACTION * 8, held


def _listening_inodes() -> dict[int, tuple[str, int]]:
    """inode -> (address, port) of every listening TCP socket, from /proc/net/tcp and tcp6."""
    found = {}
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        if not os.path.exists(table):
            continue
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                local, state, inode = fields[1], fields[3], int(fields[9])
                if state != "0A":  # TCP_LISTEN
                    continue
                address_hex, port_hex = local.split(":")
                raw = bytes.fromhex(address_hex)
                # The kernel prints the address as 32-bit words in host (little-endian) order.
                words = [raw[i:i + 4][::-1] for i in range(0, len(raw), 4)]
                found[inode] = (socket.inet_ntop(family, b"".join(words)), int(port_hex, 16))
    return found


def _listening_of(pid: int, listening: dict[int, tuple[str, int]]) -> list[tuple[str, int]]:
    sockets = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inode = int(target[len("socket:["):-1])
            if inode in listening:
                sockets.append(listening[inode])
    return sockets


def test_every_server_listens_on_loopback_only(private_stack):
    home, _, _ = private_stack
    listening = _listening_inodes()
    states = {name: json.loads((home / "run" / f"{name}.json").read_text()) for name in ("postgres", "redis", "temporal")}
    for name, state in states.items():
        sockets = _listening_of(state["pid"], listening)
        assert state["port"] in {port for _, port in sockets}, f"{name} does not listen on its port"
        public = [(address, port) for address, port in sockets if not ipaddress.ip_address(address).is_loopback]
        assert not public, f"{name} listens beyond loopback: {public}"
    # The Temporal Web UI is served by the same process, on loopback too.
    temporal_ports = {port for _, port in _listening_of(states["temporal"]["pid"], listening)}
    assert states["temporal"]["ui_port"] in temporal_ports


async def test_redis_refuses_unauthenticated_clients(private_stack):
    home, _, services = private_stack
    port = json.loads((home / "run" / "redis.json").read_text())["port"]
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(b"PING\r\n")
        reply = conn.recv(200)
    assert reply.startswith(b"-NOAUTH"), reply
    # The stack's own URL carries the password from secrets.json.
    password = json.loads((home / "secrets.json").read_text())["redis"]
    assert f":{password}@" in services.settings.redis_url
    assert await services.redis.ping()


# --- the postgres user's search permission: a POSIX ACL entry for that user only -------------------

def test_acl_entry_bytes_keep_the_mode_and_add_search_for_one_user(tmp_path):
    directory = tmp_path / "d"
    directory.mkdir(mode=0o750)
    directory.chmod(0o750)
    value = acl_with_user_search(directory, 4242)
    version, = struct.unpack_from("<I", value)
    entries = [struct.unpack_from("<HHI", value, offset) for offset in range(4, len(value), 8)]
    undefined = 0xFFFFFFFF
    assert version == 2
    assert entries == [(0x01, 0o7, undefined), (0x02, 0o1, 4242), (0x04, 0o5, undefined),
                       (0x10, 0o5, undefined), (0x20, 0o0, undefined)]


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs Postgres as another user")
@pytest.mark.parametrize("how", ["grant_search", "xattr"])
def test_the_postgres_user_may_search_but_not_list_and_nobody_else_gains(tmp_path, how):
    uid, gid = postgres_system_user()  # creates the system user if need be
    for above in [*reversed(tmp_path.parents), tmp_path]:  # as the stack does for its home
        if not can_traverse(above, uid, gid):
            grant_search(above, POSTGRES_SYSTEM_USER, uid)
    directory = tmp_path / "private"
    directory.mkdir(mode=0o700)
    directory.chmod(0o700)
    (directory / "inner").mkdir(mode=0o755)
    assert not can_traverse(directory, uid, gid)
    if how == "xattr":
        try:
            os.setxattr(directory, ACL_XATTR, acl_with_user_search(directory, uid))
        except OSError as exc:
            pytest.skip(f"no POSIX ACLs on {tmp_path}: {exc}")
    elif grant_search(directory, POSTGRES_SYSTEM_USER, uid) == "o+x":
        assert directory.stat().st_mode & 0o006 == 0  # the fallback: search for others, never read
        pytest.skip(f"no POSIX ACLs on {tmp_path}")
    mode = directory.stat().st_mode
    assert mode & 0o007 == 0, stat.filemode(mode)  # nothing for others
    assert can_traverse(directory, uid, gid)
    assert not can_traverse(directory, 65534, 65534)  # nobody
    acl = read_acl(directory)
    if acl is not None:
        assert any(tag == ACL_MASK for tag, _, _ in acl)

    def as_user(uid: int, gid: int, *argv: str) -> int:
        return subprocess.run(list(argv), user=uid, group=gid, extra_groups=[], cwd="/",
                              capture_output=True).returncode

    shell = shutil.which("sh") or "/bin/sh"
    assert as_user(uid, gid, shell, "-c", f"cd '{directory}/inner'") == 0
    assert as_user(uid, gid, shell, "-c", f"ls '{directory}'") != 0  # search, not read


def _wait_until_dead(pid: int) -> None:
    import time

    while pid_alive(pid):
        time.sleep(0.05)


async def test_working_memory_survives_a_redis_crash_and_a_restart(tmp_path):
    """Redis keeps an append-only file fsynced every second: a crash (SIGKILL) loses at most the
    last second, and a restart of the stack finds the session's recent turns."""
    import asyncio
    import signal
    from datetime import UTC, datetime

    from redis.asyncio import Redis

    from agent_memory.core.models import Message
    from agent_memory.memory.evidence import push_working_memory, recent_messages

    settings = Settings.from_env({"AGENT_MEMORY_HOME": str(tmp_path)}).with_services(temporal_address="127.0.0.1:1")
    turn = Message(message_id="s1:1", turn_index=0, role="user", content="I live in Oslo.",
                   created_at=datetime(2024, 5, 1, 9, tzinfo=UTC))
    first = EmbeddedStack(tmp_path, Ports.free())
    resolved = first.start(settings, only=("redis",))
    redis = Redis.from_url(resolved.redis_url)
    try:
        await push_working_memory(redis, "acme", "lin", "s1", [turn])
        assert list((await redis.config_get("appendonly")).values()) == ["yes"]
        await asyncio.sleep(2.5)  # appendfsync everysec: the write is on disk within about a second
    finally:
        await redis.aclose()
    pid = json.loads((tmp_path / "run" / "redis.json").read_text())["pid"]
    os.kill(pid, signal.SIGKILL)  # a crash: no shutdown save
    await asyncio.to_thread(_wait_until_dead, pid)
    second = EmbeddedStack(tmp_path, Ports.free())
    restarted = second.start(settings, only=("redis",))
    redis = Redis.from_url(restarted.redis_url)
    try:
        assert await recent_messages(redis, "acme", "lin", "s1") == [turn]
    finally:
        await redis.aclose()
        second.stop()


def test_temporal_is_moved_to_other_picked_ports_when_another_process_took_one(tmp_path):
    """A port picked free stays free only until the server binds it (an outgoing connection's
    local port can take it meanwhile): Temporal, told a UI port that is taken, is started again on
    newly picked ports; with ports configured, not picked, the same conflict is an error at once."""
    settings = Settings.from_env({"AGENT_MEMORY_HOME": str(tmp_path)})
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        picked = replace(Ports.free(), ui=busy)
        stack = EmbeddedStack(tmp_path, picked)
        try:
            resolved = stack.start(settings, only=("temporal",))
            assert stack.started == ["temporal"] and stack.ports.ui != busy
            assert resolved.ui_url == f"http://127.0.0.1:{stack.ports.ui}"
            assert resolved.temporal_address == f"127.0.0.1:{stack.ports.temporal}" and port_open(stack.ports.temporal)
        finally:
            stack.stop()

        configured = EmbeddedStack(tmp_path / "configured", replace(Ports.free(), ui=busy, picked=False))
        with pytest.raises(ServerExitedError) as refused:
            configured.start(settings, only=("temporal",))
        assert refused.value.port_in_use and "already in use" in str(refused.value)
        assert configured.started == [] and not port_open(configured.ports.temporal)


def test_redis_is_moved_to_another_picked_port_when_another_process_took_it(tmp_path):
    settings = Settings.from_env({"AGENT_MEMORY_HOME": str(tmp_path)}).with_services(
        database_url="postgresql://unused", temporal_address="127.0.0.1:1")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))  # bound, not listening: the launcher's port check sees nothing
        busy = taken.getsockname()[1]
        stack = EmbeddedStack(tmp_path, replace(Ports.free(), redis=busy))
        try:
            resolved = stack.start(settings, only=("redis",))
            assert stack.started == ["redis"] and stack.ports.redis != busy
            assert resolved.redis_url.endswith(f"@127.0.0.1:{stack.ports.redis}/0") and port_open(stack.ports.redis)
        finally:
            stack.stop()
