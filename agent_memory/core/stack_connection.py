"""How a program finds the embedded stack `agent-memory up` runs: a connection file in its home.

The launcher (workers/embedded.py) writes `run/connection.json` when it has the servers of a
home running: the Temporal address, the UI URL, and the *application role's* database URL and
the Redis URL (both with passwords, so the file is 0600 in a 0700 home; never the owner's URL).
`Settings.with_running_stack()` fills the service URLs a deployment did not configure from it,
which is how `MemoryClient.connect()` works from any program, on the same home. A file whose
servers are gone (their pids) is ignored.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

CONNECTION_FILE = Path("run") / "connection.json"
FIELDS = ("temporal_address", "ui_url", "database_url", "redis_url")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def write_connection(home: Path, urls: dict[str, str | None], pids: list[int]) -> None:
    path = home / CONNECTION_FILE
    temp = path.with_suffix(".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({**{k: urls.get(k) for k in FIELDS}, "pids": pids}, out)
    temp.replace(path)


def remove_connection(home: Path) -> None:
    (home / CONNECTION_FILE).unlink(missing_ok=True)


def read_connection(home: Path) -> dict[str, str] | None:
    """The running stack's URLs under `home`, or None (no file, unreadable, or servers gone)."""
    try:
        data = json.loads((home / CONNECTION_FILE).read_text())
    except (OSError, ValueError):
        return None
    pids = data.get("pids") if isinstance(data, dict) else None
    if not isinstance(pids, list) or not pids or not all(isinstance(p, int) and p > 0 and _alive(p) for p in pids):
        return None
    return {k: v for k in FIELDS if isinstance(v := data.get(k), str)}
