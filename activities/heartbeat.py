"""Heartbeats while an activity runs, at an interval derived from its heartbeat timeout, with
progress details an activity can update (counts and step names only: details are visible in the
Temporal UI's pending activities and are recorded on timeout).

    from activities.heartbeat import progress
    progress().update(step="erase facts", done=n, total=total)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from datetime import timedelta

from temporalio import activity

# Without a heartbeat timeout (none set by the workflow) heartbeats cost little and tell the UI
# the activity is alive: every DEFAULT_INTERVAL. With one, at a third of it, within the bounds.
DEFAULT_INTERVAL = timedelta(seconds=5)
MIN_INTERVAL = timedelta(seconds=1)
MAX_INTERVAL = timedelta(seconds=30)


@dataclass
class Progress:
    """What the activity has done so far; sent with every heartbeat."""

    step: str = ""
    done: int = 0
    total: int | None = None

    def update(self, *, step: str | None = None, done: int | None = None, total: int | None = None) -> None:
        if step is not None:
            self.step = step
        if done is not None:
            self.done = done
        if total is not None:
            self.total = total

    def advance(self, count: int = 1) -> None:
        self.done += count

    def details(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if v not in ("", None)}


_progress: ContextVar[Progress | None] = ContextVar("agent_memory_activity_progress", default=None)


def progress() -> Progress:
    """The running activity's progress (a detached one outside a heartbeating activity)."""
    current = _progress.get()
    return current if current is not None else Progress()


def heartbeat_interval(heartbeat_timeout: timedelta | None) -> timedelta:
    if not heartbeat_timeout:
        return DEFAULT_INTERVAL
    return max(MIN_INTERVAL, min(MAX_INTERVAL, heartbeat_timeout / 3))


async def _beat(state: Progress, interval: float) -> None:
    # The first beat after one interval: the attempt's start already tells the server it is alive,
    # and an activity shorter than the interval (most model calls and store steps) sends none,
    # each beat being a call to the server and a write of the run's state there.
    while True:
        await asyncio.sleep(interval)
        activity.heartbeat(state.details())


@contextlib.asynccontextmanager
async def heartbeating() -> AsyncIterator[Progress]:
    """Heartbeats until the block ends (nothing outside an activity); yields the progress. Nested
    (an activity that runs other activities' steps in line) it yields the running one's progress:
    one heartbeat per activity, whose details say which step it is in."""
    running = _progress.get()
    if running is not None:
        yield running
        return
    state = Progress()
    token = _progress.set(state)
    beat = None
    # A local activity has no heartbeat (the server never sees it): its workflow task's timeout
    # notices a dead worker.
    if activity.in_activity() and not activity.info().is_local:
        interval = heartbeat_interval(activity.info().heartbeat_timeout).total_seconds()
        beat = asyncio.create_task(_beat(state, interval))
    try:
        yield state
    finally:
        if beat is not None:
            beat.cancel()
        _progress.reset(token)
