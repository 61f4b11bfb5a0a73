"""The embedded stack launcher: reuse, stale pid files, and stopping only what it started."""

from __future__ import annotations

import json

import psycopg

from agent_memory.settings import Settings
from workers.embedded import EmbeddedStack, Ports, pid_alive, port_open


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
