"""The per-user cache of built and prepared artifacts: `${XDG_CACHE_HOME:-~/.cache}/agent-memory`,
private to the user (0700). What lives there can be rebuilt; removing it only costs time."""

from __future__ import annotations

import os
from pathlib import Path


def private_dir(path: Path) -> Path:
    """`path`, created if missing, mode 0700."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def cache_root() -> Path:
    """`${XDG_CACHE_HOME:-~/.cache}/agent-memory`, created 0700."""
    return private_dir(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "agent-memory")
