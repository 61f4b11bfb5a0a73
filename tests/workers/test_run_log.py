"""`agent-memory up` logs one line per workflow it completes, read from
the real dev server's visibility."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from temporalio.api.workflow.v1 import WorkflowExecutionInfo
from temporalio.client import WorkflowExecution, WorkflowExecutionStatus
from temporalio.common import TypedSearchAttributes
from temporalio.converter import DataConverter

from tests.sessions import session
from workers.run_log import OVERLAP, ClosedRunLog, log_closed_runs


async def test_each_closed_run_of_the_queue_is_logged_once(client, services, tenant, task_queue, running_worker):
    lines: list[str] = []
    stop = asyncio.Event()
    logger = asyncio.create_task(log_closed_runs(services.temporal, task_queue, stop, say=lines.append, every=0.2))
    async with running_worker():
        await client.append_messages(tenant, "kim", session("r1", "2024-03-01T09:00:00Z", "I live in Oslo."))
        handle = await client.end_session(tenant, "kim", "r1")
        await client.consolidation_result(handle)
        for _ in range(100):  # visibility indexes a closed run shortly after it closes
            if any(handle.id in line for line in lines):
                break
            await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)  # a few more polls: nothing is logged twice
    stop.set()
    await logger
    mine = [line for line in lines if line.endswith(" s") and f" {handle.id} in " in line]
    assert len(mine) == 1, lines
    assert " completed " in mine[0] and "ConsolidationWorkflow" in mine[0]
    assert len(lines) == len(set(lines))


def closed_run(workflow_id: str, closed: datetime) -> WorkflowExecution:
    """A closed run as visibility lists it (the fields the run log reads)."""
    return WorkflowExecution(
        close_time=closed, execution_time=closed - timedelta(seconds=2), history_length=11, id=workflow_id,
        namespace="default", parent_id=None, parent_run_id=None, root_id=None, root_run_id=None,
        raw_info=WorkflowExecutionInfo(), run_id=f"{workflow_id}-run", search_attributes={},
        start_time=closed - timedelta(seconds=2), status=WorkflowExecutionStatus.COMPLETED, task_queue="q",
        typed_search_attributes=TypedSearchAttributes.empty, workflow_type="ConsolidationWorkflow",
        _context_free_data_converter=DataConverter.default)


def test_a_finished_run_listed_again_after_the_window_moves_on_is_not_printed_again():
    """`up` polls every 2 s and visibility keeps listing a finished run: once the log has
    forgotten it (its window moved past it), it must not print it again."""
    started = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    log = ClosedRunLog(started)
    before = closed_run("before-up", started - timedelta(seconds=5))  # closed before `up` started
    first, second = closed_run("wf-1", started + timedelta(seconds=1)), closed_run("wf-2", started + timedelta(seconds=3))
    assert log.to_print([second, before, first], started + timedelta(seconds=4)) == [first, second]
    assert log.to_print([first, second], started + timedelta(seconds=6)) == []
    later = started + 3 * OVERLAP  # the window has moved past both runs: they are no longer remembered
    assert log.to_print([first, second], later) == []
    assert log.printed == {} and log.query_since() > started - OVERLAP  # the query's window moved on too
    third = closed_run("wf-3", later + timedelta(seconds=1))
    for poll in range(60):  # two more minutes of polls listing all three
        assert log.to_print([first, second, third], later + timedelta(seconds=2 * (poll + 1))) == (
            [third] if poll == 0 else [])
