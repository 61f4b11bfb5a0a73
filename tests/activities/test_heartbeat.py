"""Activity heartbeats: at a third of the heartbeat timeout, carrying the activity's progress."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

import pytest
from temporalio import activity
from temporalio.testing import ActivityEnvironment

from activities.errors import temporal_failures
from activities.heartbeat import DEFAULT_INTERVAL, MAX_INTERVAL, MIN_INTERVAL, heartbeat_interval, progress


@pytest.mark.parametrize("timeout, expected", [
    (None, DEFAULT_INTERVAL),
    (timedelta(0), DEFAULT_INTERVAL),
    (timedelta(seconds=1), MIN_INTERVAL),
    (timedelta(seconds=21), timedelta(seconds=7)),
    (timedelta(hours=1), MAX_INTERVAL),
])
def test_interval_is_a_third_of_the_heartbeat_timeout_within_bounds(timeout, expected):
    assert heartbeat_interval(timeout) == expected


@activity.defn
@temporal_failures
async def three_steps() -> int:
    state = progress()
    state.update(step="copy", total=3)
    for _ in range(3):
        await asyncio.sleep(0.5)
        state.advance()
    return state.done


async def test_heartbeats_carry_the_progress_at_the_derived_interval():
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(seconds=3))  # → every 1 s
    beats: list[tuple] = []
    env.on_heartbeat = lambda *details: beats.append(details)
    assert await env.run(three_steps) == 3
    # One beat at the start, one after 1 s (1.5 s run): not every 5 s, nor every tick.
    assert len(beats) == 2, beats
    assert beats[0] == ({"step": "copy", "done": 0, "total": 3},)
    assert beats[1][0]["done"] >= 1


async def test_progress_outside_an_activity_is_detached():
    state = progress()
    state.advance(5)
    assert progress().done == 0
