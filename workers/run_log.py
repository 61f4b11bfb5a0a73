"""`agent-memory up` logs one line per workflow that closes on its task queue.

The lines come from Temporal's visibility (the query the UI's list runs), polled every couple
of seconds, not from inside the workflows: workflow code stays free of I/O, a replay never logs
twice, and a run finished by another worker of the same queue is logged too."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from temporalio.client import Client, WorkflowExecution
from temporalio.service import RPCError

# Visibility may index a closed run a moment after it closed: look back this far on every poll.
OVERLAP = timedelta(seconds=30)


def format_closed_run(run: WorkflowExecution) -> str:
    closed = run.close_time or datetime.now(UTC)
    took = f" in {(closed - run.start_time).total_seconds():.1f} s" if run.start_time else ""
    status = run.status.name.lower().replace("_", " ") if run.status else "closed"
    return f"{closed.astimezone(UTC):%H:%M:%S} {status:<10} {run.workflow_type:<28} {run.id}{took}"


class ClosedRunLog:
    """Which closed runs to print: each once, none that closed before the log started.

    The visibility query looks back OVERLAP past the window's floor, and the floor moves up with
    the clock, so the query stays small however long `up` runs. A run is remembered until it falls
    below the floor; below the floor nothing is printed, so a run forgotten there is never printed
    again (the query may still return it while the floor moves past it)."""

    def __init__(self, started: datetime) -> None:
        self.floor = started  # runs that closed before this are never printed
        self.printed: dict[tuple[str, str], datetime] = {}

    def query_since(self) -> datetime:
        """The CloseTime the next visibility query starts at."""
        return self.floor - OVERLAP

    def to_print(self, closed: list[WorkflowExecution], now: datetime) -> list[WorkflowExecution]:
        """The runs of `closed` not printed yet, in closing order; then the floor moves up to
        2 × OVERLAP before `now` (visibility indexes a run within OVERLAP of its closing)."""
        fresh = []
        for run in sorted(closed, key=lambda r: r.close_time or now):
            key = (run.id, run.run_id)
            if run.close_time is None or run.close_time < self.floor or key in self.printed:
                continue
            self.printed[key] = run.close_time
            fresh.append(run)
        self.floor = max(self.floor, now - 2 * OVERLAP)
        self.printed = {k: t for k, t in self.printed.items() if t >= self.floor}
        return fresh


async def log_closed_runs(temporal: Client, task_queue: str, stop: asyncio.Event, *,
                          say: Callable[[str], None] = lambda line: print(line, flush=True),
                          every: float = 2.0) -> None:
    """Until `stop` is set, `say` one line for each run of `task_queue` that closes."""
    log = ClosedRunLog(datetime.now(UTC))
    queue = task_queue.replace("\\", "\\\\").replace("'", "\\'")
    while not stop.is_set():
        query = (f"TaskQueue = '{queue}' AND ExecutionStatus != 'Running' "
                 f"AND CloseTime >= '{log.query_since().isoformat()}'")
        try:
            closed = [run async for run in temporal.list_workflows(query)]
        except RPCError:  # Temporal restarting or briefly unreachable: the next poll catches up
            closed = []
        for run in log.to_print(closed, datetime.now(UTC)):
            say(format_closed_run(run))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=every)
