"""The steps of a run as its history names them: each activity in the order the workflow
recorded it, ordinary ones (scheduled events, with their task queue) and local ones (markers)."""

from __future__ import annotations

import json
from typing import Any

from temporalio.client import WorkflowHistory

LOCAL = "local"


def history_steps(history: WorkflowHistory | list[Any]) -> list[tuple[str, str]]:
    """(activity name, task queue) per step; a local activity's queue reads "local"."""
    events = history.events if isinstance(history, WorkflowHistory) else history
    steps = []
    for event in events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduled = event.activity_task_scheduled_event_attributes
            steps.append((scheduled.activity_type.name, scheduled.task_queue.name))
        elif (event.HasField("marker_recorded_event_attributes")
              and event.marker_recorded_event_attributes.marker_name == "core_local_activity"):
            [data] = event.marker_recorded_event_attributes.details["data"].payloads
            steps.append((json.loads(data.data)["activity_type"], LOCAL))
    return steps
