"""Replay of checked-in histories: a change that breaks workflow determinism fails here."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from workers.worker import WORKFLOWS

HISTORIES = Path(__file__).parent.parent / "histories"


@pytest.mark.parametrize("name, workflow_id", [("consolidation.json", "consolidate/acme/s1"),
                                               ("erasure-v1.json", "erase/acme/lin"),
                                               ("erasure-v2.json", "erase/acme/lin"),
                                               ("erasure-v3.json", "erase/acme/lin"),
                                               ("session-idle.json", "idle/acme/s2"),
                                               ("rebuild.json", "rebuild/acme/*/recorded")])
async def test_recorded_history_replays(name, workflow_id):
    history = WorkflowHistory.from_json(workflow_id, (HISTORIES / name).read_text())
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None
    assert len(history.events) > 10  # a real run, not an empty file


def test_every_retry_preset_retries_transient_failures_without_an_attempt_cap():
    """A one-minute Postgres or provider outage must not fail a run: transient failures retry
    until they pass at a capped interval; permanent ones end retries as non-retryable types."""
    from temporalio.common import RetryPolicy

    import workflows.consolidation
    import workflows.erasure
    import workflows.maintenance
    import workflows.rebuild
    import workflows.session_idle

    presets = {f"{module.__name__}.{name}": value
               for module in (workflows.consolidation, workflows.erasure, workflows.maintenance, workflows.rebuild,
                              workflows.session_idle)
               for name, value in vars(module).items() if isinstance(value, RetryPolicy)}
    assert len(presets) >= 7
    for name, policy in presets.items():
        assert policy.maximum_attempts == 0, f"{name} gives up after {policy.maximum_attempts} attempts"
        assert policy.maximum_interval is not None and policy.maximum_interval.total_seconds() <= 120, name
