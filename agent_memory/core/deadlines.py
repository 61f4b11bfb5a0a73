"""Which dependency the current HTTP request is waiting on, and since when: a request whose call
to a dependency has not come back within its deadline is answered 503 naming that dependency
while the call winds down on its own (agent_memory/api/http/app.py). A call made outside a request
(the worker, the CLI) is not tracked."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class DependencyWaits:
    """The calls of one request still waiting on a dependency (the request's tasks share it)."""

    def __init__(self) -> None:
        self._pending: dict[int, tuple[str, float]] = {}
        self._ids = itertools.count()

    def enter(self, dependency: str) -> int:
        token = next(self._ids)
        self._pending[token] = (dependency, time.monotonic())
        return token

    def leave(self, token: int) -> None:
        self._pending.pop(token, None)

    def overdue(self, deadline: float) -> str | None:
        """The dependency of the oldest call pending longer than `deadline` seconds, or None."""
        now = time.monotonic()
        oldest = min(self._pending.values(), key=lambda pending: pending[1], default=None)
        return oldest[0] if oldest is not None and now - oldest[1] >= deadline else None


_waits: ContextVar[DependencyWaits | None] = ContextVar("agent_memory_dependency_waits", default=None)


@contextmanager
def tracking_waits() -> Iterator[DependencyWaits]:
    """Track the dependency calls made in this block (and the tasks it starts)."""
    waits = DependencyWaits()
    token = _waits.set(waits)
    try:
        yield waits
    finally:
        _waits.reset(token)


@contextmanager
def waiting_on(dependency: str) -> Iterator[None]:
    """A call to `dependency` (`postgres`, `redis`, `temporal`) for the length of the block."""
    waits = _waits.get()
    if waits is None:
        yield
        return
    token = waits.enter(dependency)
    try:
        yield
    finally:
        waits.leave(token)
