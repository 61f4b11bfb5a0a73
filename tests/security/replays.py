"""Replays of a finished run, as the holder of the Temporal port makes them: the started event's
input copied from the history into a new run under the same workflow id (reuse policy
ALLOW_DUPLICATE), by a plain temporalio client holding no key."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.common import RawValue, WorkflowIDReusePolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError

from agent_memory.core import contract


async def refusal(handle: WorkflowHandle) -> ApplicationError:
    """The failed run's activity error; fails the test when the run does not fail within the bound."""
    try:
        await asyncio.wait_for(handle.result(), timeout=60)
    except WorkflowFailureError as exc:
        cause = exc.cause
        while cause is not None and not isinstance(cause, ApplicationError):
            cause = cause.__cause__
        assert isinstance(cause, ApplicationError), exc
        return cause
    pytest.fail(f"{handle.id} completed: a replayed run must fail")


async def replay(services, workflow_id: str, task_queue: str) -> tuple[str, WorkflowHandle]:
    """The finished run's id, and a new run under its workflow id with its input copied from the
    history, started by a client holding no key; the handle reads the new run's failure."""
    outsider = await Client.connect(services.settings.temporal_address, data_converter=pydantic_data_converter)
    finished = outsider.get_workflow_handle(workflow_id)
    first_run = (await finished.describe()).run_id
    started = None
    async for event in finished.fetch_history_events():
        if event.HasField("workflow_execution_started_event_attributes"):
            started = event.workflow_execution_started_event_attributes
            break
    assert started is not None and first_run is not None
    replayed = await outsider.start_workflow(
        started.workflow_type.name, RawValue(started.input.payloads[0]), id=workflow_id, task_queue=task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE)
    assert replayed.result_run_id != first_run
    return first_run, services.temporal.get_workflow_handle(workflow_id, run_id=replayed.result_run_id)


async def refused_as_consumed(handle: WorkflowHandle, first_run: str) -> None:
    refused = await refusal(handle)
    assert refused.type == contract.ErrorType.UNAUTHORIZED_REQUEST and refused.non_retryable
    assert f"consumed by run {first_run}" in refused.message, refused.message
    assert handle.run_id in refused.message
    attempts = [e async for e in handle.fetch_history_events() if e.HasField("activity_task_started_event_attributes")]
    assert [e.activity_task_started_event_attributes.attempt for e in attempts][-1:] == [1]  # failed at once
