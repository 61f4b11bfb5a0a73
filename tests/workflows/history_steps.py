"""The steps of a run as its history names them: each activity in the order the workflow
started it, ordinary ones (scheduled events, with their task queue) and local ones (markers)."""

from __future__ import annotations

import json
from typing import Any

from temporalio.client import WorkflowHistory

LOCAL = "local"
# Steps the consolidation starts at once, in this order. As local activities their markers are
# recorded as each finishes, in either order.
AT_ONCE = ("score_importance", "summarize_session")


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
    for i in range(len(steps) - 1):
        if (steps[i][0], steps[i + 1][0]) == AT_ONCE[::-1]:
            steps[i], steps[i + 1] = steps[i + 1], steps[i]
    return steps
