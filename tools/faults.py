"""Fault injection for the crash suite: the hook that kills the process at a named point
(agent_memory/core/hooks.py lists the points; `install` puts the hook in place in a worker process).

Off unless configured. `AGENT_MEMORY_FAULTS` lists the points, comma-separated, e.g.
`after_record:extract,after_commit@2`: the process SIGKILLs itself the first (or the Nth, with
`@N`) time it reaches a listed point. Hits are counted per point in a file under
`AGENT_MEMORY_FAULTS_STATE` when that is set (else in memory), so a restarted process with the
same configuration goes past the spot where its predecessor died instead of dying again; ask
for another death with a higher N (hits count across every process sharing the state dir).
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import threading
from pathlib import Path

from agent_memory.core.errors import InvalidInput
from agent_memory.core.hooks import install_fault_hook

FAULTS_ENV = "AGENT_MEMORY_FAULTS"
STATE_ENV = "AGENT_MEMORY_FAULTS_STATE"

_lock = threading.Lock()
_memory_hits: dict[str, int] = {}


def parse_faults(spec: str | None) -> dict[str, int]:
    """`a,b@3` → {"a": 1, "b": 3}: the hit on which each point kills the process."""
    faults: dict[str, int] = {}
    for item in (spec or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, _, nth = item.partition("@")
        faults[name.strip()] = int(nth) if nth.strip() else 1
        if faults[name.strip()] < 1:
            raise InvalidInput(f"{FAULTS_ENV}: {item!r}: the hit number counts from 1")
    return faults


def state_file(state_dir: str | Path, name: str) -> Path:
    return Path(state_dir) / (re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".hits")


def hits(state_dir: str | Path, name: str) -> int:
    """How often a point was reached so far (across processes sharing the state dir)."""
    path = state_file(state_dir, name)
    return int(path.read_text() or 0) if path.exists() else 0


def _count_hit(name: str) -> int:
    state_dir = os.environ.get(STATE_ENV)
    with _lock:
        if not state_dir:
            _memory_hits[name] = _memory_hits.get(name, 0) + 1
            return _memory_hits[name]
        os.makedirs(state_dir, exist_ok=True)
        fd = os.open(state_file(state_dir, name), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # other worker processes on the same state dir
            count = int(os.read(fd, 64) or b"0") + 1
            os.lseek(fd, 0, os.SEEK_SET)
            os.ftruncate(fd, 0)
            os.write(fd, str(count).encode())
            os.fsync(fd)
            return count
        finally:
            os.close(fd)


def fault_point(name: str, *, when: bool = True) -> None:
    """Kill this process (SIGKILL: no cleanup, no reply to anyone) if `name` is configured and
    this is the configured hit. A no-op unless AGENT_MEMORY_FAULTS or AGENT_MEMORY_FAULTS_STATE
    is set; with a state dir every point's hits are counted, configured or not (a campaign
    reads them to aim its next kill)."""
    spec = os.environ.get(FAULTS_ENV)
    if not when or not (spec or os.environ.get(STATE_ENV)):
        return
    count = _count_hit(name)
    if spec and parse_faults(spec).get(name) == count:
        os.kill(os.getpid(), signal.SIGKILL)


def install() -> None:
    """Kill this process at the configured fault points (AGENT_MEMORY_FAULTS) from now on."""
    install_fault_hook(fault_point)
