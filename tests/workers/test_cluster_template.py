"""Scratch stacks start from a cached, migrated PostgreSQL cluster: built once per migrations,
copied per stack, and each copy logs in with its own home's passwords only."""

from __future__ import annotations

import fcntl
import json
import os
import stat

import psycopg
import pytest

from agent_memory.core.settings import Settings
from agent_memory.store.db import pending_migrations
from workers import cluster_template
from workers.embedded import EmbeddedStack, Ports, build_template, postgres_system_user
from workers.runtime import open_stack

pytestmark = pytest.mark.stack


async def test_scratch_stacks_copy_one_template_and_keep_their_own_passwords(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # a cache with no template yet
    homes = [tmp_path / "one", tmp_path / "two"]
    urls = []
    for home in homes:
        settings = Settings.from_env({"AGENT_MEMORY_HOME": str(home)})
        async with open_stack(settings, start=True, ports=Ports.free(), scratch=True) as services:
            urls.append(services.settings.database_url)
            assert await pending_migrations(services.settings.database_url) == []  # the schema is current
            template_data, template_password = cluster_template.migrated_template(build_template)
            port = services.settings.database_url.rsplit(":", 1)[1].split("/")[0]
            own = json.loads((home / "secrets.json").read_text())["postgres"]
            assert own != template_password
            with psycopg.connect(f"postgresql://postgres:{own}@127.0.0.1:{port}/postgres") as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
            with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
                psycopg.connect(f"postgresql://postgres:{template_password}@127.0.0.1:{port}/postgres")
            data = home / "postgres"
            assert stat.S_IMODE(data.stat().st_mode) == 0o700
            owner = postgres_system_user()
            if owner is not None:  # as root, PostgreSQL's own user owns every copied file
                assert {(p.stat().st_uid, p.stat().st_gid) for p in data.rglob("*") if not p.is_symlink()} == {owner}
        if home == homes[0]:
            built = template_data.stat().st_ino
    assert urls[0] != urls[1]
    assert template_data.stat().st_ino == built  # built once, copied twice
    folder = template_data.parent
    assert stat.S_IMODE((folder / cluster_template.TEMPLATE_SECRETS).stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.parent.stat().st_mode) == 0o700
    assert [p.name for p in folder.parent.iterdir() if p.is_dir()] == [folder.name]


def test_a_template_of_other_migrations_is_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    stale = cluster_template.template_dir("0" * 16)
    stale.mkdir(parents=True)
    (stale / cluster_template.TEMPLATE_SECRETS).write_text("{}")
    data, _ = cluster_template.migrated_template(build_template)
    assert not stale.exists() and data.is_dir() and (data / "PG_VERSION").is_file()


def test_a_template_another_checkout_is_copying_is_left_until_the_copy_ends(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    current = cluster_template.template_dir("1" * 16)
    in_use = cluster_template.template_dir("0" * 16)
    for folder in (current, in_use):
        folder.mkdir(parents=True)
    with open(cluster_template._lock_file(in_use)) as copying:
        fcntl.flock(copying, fcntl.LOCK_SH)  # what copy_template holds while it copies
        cluster_template._remove_other_templates(current)
        assert in_use.is_dir()
    cluster_template._remove_other_templates(current)
    assert not in_use.exists() and current.is_dir()


def test_a_stack_that_is_not_scratch_runs_initdb(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    settings = Settings.from_env({"AGENT_MEMORY_HOME": str(tmp_path / "home")})
    stack = EmbeddedStack(settings.home, Ports.free())
    try:
        stack.start(settings, only=("postgres",))
    finally:
        stack.stop()
    assert (settings.home / "postgres" / "PG_VERSION").is_file()
    assert not (tmp_path / "cache" / "agent-memory" / "postgres-template").exists()
    assert os.listdir(settings.home / "postgres")
