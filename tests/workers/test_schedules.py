"""The Schedules' inputs carry no authority: each is its workflow's bounded default, which runs
without an operator request, and a definition asking for more is refused (workers/schedules.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent_memory.core import contract
from agent_memory.lifecycle.compaction import CompactionInput
from agent_memory.lifecycle.sweeper import MemorySweepInput
from agent_memory.security.keyring import KeyRotationInput
from workers.schedules import MEMORY_SWEEP_SCHEDULE, SCHEDULES, ScheduleDefinition


def test_every_schedule_runs_its_workflows_bounded_default():
    assert SCHEDULES
    for definition in SCHEDULES:
        assert not definition.argument.beyond_schedule(), definition.schedule_id
        assert definition.argument == type(definition.argument)(), definition.schedule_id


@pytest.mark.parametrize("argument", [KeyRotationInput(force=True), CompactionInput(force=True),
                                      MemorySweepInput(grace_seconds=0), MemorySweepInput(grace_seconds=86400)])
def test_an_input_beyond_the_schedule_needs_a_registration_and_no_schedule_may_carry_it(argument):
    assert argument.beyond_schedule()
    with pytest.raises(ValueError, match="asks for more than a Schedule may"):
        ScheduleDefinition(MEMORY_SWEEP_SCHEDULE, contract.MEMORY_SWEEP_WORKFLOW, argument, timedelta(hours=1), "")
