"""Progress of a long command (ingest, rebuild --wait, erase --wait, eval, chaos) on a terminal.

One line on stderr, redrawn at most ten times a second. It is drawn only when stderr is a
terminal and the command was not asked for `--json`: a pipe, a log file or a JSON consumer sees
nothing of it, so the command's output stays what it was."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TextIO, TypeVar

from temporalio.client import WorkflowHandle, WorkflowQueryFailedError
from temporalio.service import RPCError

T = TypeVar("T")
WIDTH = 30


class Progress:
    """A bar of `done` out of `total` (or a count when the total is unknown), with a note."""

    def __init__(self, label: str, total: int | None, *, enabled: bool = True, stream: TextIO | None = None):
        self.label, self.total, self.done, self.note = label, total, 0, ""
        self.stream = stream or sys.stderr
        self.live = enabled and self.stream.isatty()
        self.started = time.monotonic()
        self._drawn = 0.0
        self._width = 0
        self._draw(force=True)

    def advance(self, n: int = 1, note: str | None = None) -> None:
        self.update(self.done + n, note=note)

    def update(self, done: int, total: int | None = None, note: str | None = None) -> None:
        self.done = done
        self.total = total if total is not None else self.total
        self.note = note if note is not None else self.note
        self._draw(force=self.total is not None and self.done >= self.total)

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not self.live or (not force and now - self._drawn < 0.1):
            return
        self._drawn = now
        if self.total:
            filled = WIDTH * min(self.done, self.total) // self.total
            bar = f"[{'#' * filled}{'.' * (WIDTH - filled)}] {self.done}/{self.total}"
        else:
            bar = f"{self.done} done"
        line = f"{self.label:<22} {bar} {now - self.started:6.1f}s" + (f"  {self.note}" if self.note else "")
        # Pad over a longer previous line (a note that got shorter).
        self.stream.write("\r" + line.ljust(self._width))
        self._width = len(line)
        self.stream.flush()

    def close(self) -> None:
        if self.live:
            self._draw(force=True)
            self.stream.write("\n")
            self.stream.flush()
            self.live = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def wait_with_progress(handle: WorkflowHandle, result: Callable[[], Awaitable[T]], bar: Progress,
                             show: Callable[[dict], tuple[int, int | None, str]], *, every: float = 0.5) -> T:
    """Await `result()` (a workflow's result) while redrawing `bar` from the workflow's `progress`
    query; `show` maps the query's answer to (done, total, note). Without a terminal it just waits."""
    task = asyncio.ensure_future(result())
    with bar:
        while bar.live and not task.done():
            try:
                state = await handle.query("progress", result_type=dict)
            except (RPCError, WorkflowQueryFailedError):  # not started yet, or closed between polls: the result says which
                state = None
            if state:
                done, total, note = show(state)
                bar.update(done, total, note)
            await asyncio.wait([task], timeout=every)
        return await task
