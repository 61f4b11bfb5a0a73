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


async def log_closed_runs(temporal: Client, task_queue: str, stop: asyncio.Event, *,
                          say: Callable[[str], None] = lambda line: print(line, flush=True),
                          every: float = 2.0) -> None:
    """Until `stop` is set, `say` one line for each run of `task_queue` that closes."""
    since = datetime.now(UTC)
    seen: dict[tuple[str, str], datetime] = {}
    queue = task_queue.replace("\\", "\\\\").replace("'", "\\'")
    while not stop.is_set():
        query = (f"TaskQueue = '{queue}' AND ExecutionStatus != 'Running' "
                 f"AND CloseTime >= '{(since - OVERLAP).isoformat()}'")
        try:
            closed = [run async for run in temporal.list_workflows(query)]
        except RPCError:  # Temporal restarting or briefly unreachable: the next poll catches up
            closed = []
        for run in sorted(closed, key=lambda r: r.close_time or since):
            key = (run.id, run.run_id)
            if key in seen or run.close_time is None or run.close_time < since:
                continue
            seen[key] = run.close_time
            say(format_closed_run(run))
        # Forget what can no longer come back within the overlap window.
        horizon = datetime.now(UTC) - 2 * OVERLAP
        seen = {k: t for k, t in seen.items() if t >= horizon}
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=every)
