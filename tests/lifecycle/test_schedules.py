"""The Schedules kept as designed, on the session's real Temporal: a Schedule paused or edited from a
plain Temporal client (no product code, no payload key) shows in stats, in readiness and in an
erasure's status, and `schedules ensure` restores it and says what it changed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from temporalio.client import (
    Client,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
)

from agent_memory.core import contract
from agent_memory.lifecycle.compaction import CompactionInput
from agent_memory.lifecycle.schedules import (
    COMPACTION_SCHEDULE,
    KEY_ROTATION_SCHEDULE,
    MEMORY_SWEEP_SCHEDULE,
    SCHEDULES,
    ScheduleDefinition,
    check_schedules,
    ensure_schedules,
)
from agent_memory.lifecycle.sweeper import MemorySweepInput
from agent_memory.security.keyring import KeyRotationInput
from agent_memory.security.operator_keys import create_operator_key
from tests.api.test_http_api import api
from tests.cli.runner import run_cli


@pytest.fixture
async def plain(services) -> Client:
    """A Temporal client as anyone on the network has one: no converter or codec of the product."""
    return await Client.connect(services.settings.temporal_address or "",
                                namespace=services.settings.temporal_namespace)


@pytest.fixture
async def designed(services, task_queue) -> AsyncIterator[None]:
    """Every Schedule as designed, on this test's task queue (its runs reach no worker)."""
    await ensure_schedules(services.temporal, task_queue)
    yield
    await ensure_schedules(services.temporal, task_queue)


async def test_fresh_schedules_are_as_designed(services, task_queue, designed):
    checks = await check_schedules(services.temporal, task_queue)
    assert [(c.schedule_id, c.exists, c.drift) for c in checks] == [(d.schedule_id, True, []) for d in SCHEDULES]
    assert {r.outcome for r in await ensure_schedules(services.temporal, task_queue)} == {"unchanged"}


async def test_a_schedule_paused_from_a_plain_client_is_reported_then_restored(services, client, tenant, task_queue,
                                                                               plain, designed):
    await plain.get_schedule_handle(COMPACTION_SCHEDULE).pause(note="disk busy, back later")
    await plain.get_schedule_handle(KEY_ROTATION_SCHEDULE).pause()

    # stats: a count and the names.
    stats = await asyncio.to_thread(run_cli, services, "stats", "--tenant", tenant, "--json", task_queue=task_queue)
    assert stats.returncode == 0, stats.stderr
    reported = json.loads(stats.stdout)["schedules"]
    assert reported["not_as_designed"] == 2 and reported["paused"] == [KEY_ROTATION_SCHEDULE, COMPACTION_SCHEDULE]
    text = await asyncio.to_thread(run_cli, services, "stats", "--tenant", tenant, task_queue=task_queue)
    assert f"Schedules not as designed: 2\n  paused: {KEY_ROTATION_SCHEDULE}, {COMPACTION_SCHEDULE}" in text.stdout

    # readiness: degraded, naming them, to an operator; anyone else learns only that it is up.
    operator = {"Authorization": f"Bearer {(await create_operator_key(services.pool)).token}"}
    async with api(client) as http:
        ready = (await http.get("/v1/ready", headers=operator)).json()
        anonymous = await http.get("/v1/ready")
    assert ready["status"] == "degraded" and ready["schedules"]["paused"] == [KEY_ROTATION_SCHEDULE,
                                                                              COMPACTION_SCHEDULE]
    assert anonymous.status_code == 200 and anonymous.json() == {"status": "ready"}

    # An erasure waits on both: its status says what each paused Schedule holds back.
    handle = await client.admin.erase(tenant, "nobody", "ticket 99", block_future_writes=True)
    request_id = handle.id.rsplit("/", 1)[-1]
    status = await client.admin.erasure_status(tenant, request_id)
    assert set(status.held_back_by) == {KEY_ROTATION_SCHEDULE, COMPACTION_SCHEDULE}
    assert "shred stays reversible" in status.held_back_by[KEY_ROTATION_SCHEDULE]
    assert status.held_back_by[COMPACTION_SCHEDULE].startswith("paused: the erased residue stays on disk")
    await handle.terminate()

    ensured = await asyncio.to_thread(run_cli, services, "schedules", "ensure", "--json", task_queue=task_queue)
    assert ensured.returncode == 0, ensured.stderr
    report = {r["schedule_id"]: r for r in json.loads(ensured.stdout)}
    assert report[COMPACTION_SCHEDULE]["outcome"] == "unpaused"
    assert report[COMPACTION_SCHEDULE]["found_note"] == "disk busy, back later"
    assert report[KEY_ROTATION_SCHEDULE]["outcome"] == "unpaused"
    assert {r["outcome"] for s, r in report.items() if s not in (COMPACTION_SCHEDULE, KEY_ROTATION_SCHEDULE)} == {
        "unchanged"}
    assert not (await plain.get_schedule_handle(COMPACTION_SCHEDULE).describe()).schedule.state.paused
    async with api(client) as http:
        restored = (await http.get("/v1/ready", headers=operator)).json()
    assert restored["status"] == "ready" and restored["schedules"] == {"paused": [], "altered": [], "missing": []}
    assert (await client.admin.erasure_status(tenant, request_id)).held_back_by == {}


async def test_a_drifted_schedule_is_restored_with_what_changed(services, client, task_queue, plain, designed):
    def drift(current: ScheduleUpdateInput) -> ScheduleUpdate:
        schedule = current.description.schedule
        schedule.spec = ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(days=30))])
        schedule.policy.overlap = ScheduleOverlapPolicy.ALLOW_ALL
        return ScheduleUpdate(schedule=schedule)

    await plain.get_schedule_handle(MEMORY_SWEEP_SCHEDULE).update(drift)
    [sweep] = [c for c in await check_schedules(services.temporal, task_queue) if c.schedule_id == MEMORY_SWEEP_SCHEDULE]
    assert sweep.drift == ["spec", "policies"]
    assert (await client.admin.schedules_health()).drifted == [MEMORY_SWEEP_SCHEDULE]

    report = {r.schedule_id: r for r in await ensure_schedules(services.temporal, task_queue)}
    assert report[MEMORY_SWEEP_SCHEDULE].outcome == "updated"
    assert report[MEMORY_SWEEP_SCHEDULE].updated == ["spec", "policies"]
    described = await plain.get_schedule_handle(MEMORY_SWEEP_SCHEDULE).describe()
    assert described.schedule.spec.intervals[0].every == timedelta(hours=1)
    assert described.schedule.policy.overlap == ScheduleOverlapPolicy.SKIP
    assert (await client.admin.schedules_health()).count == 0


async def test_a_schedule_sent_to_another_queue_or_deleted_is_restored(services, task_queue, plain, designed):
    def elsewhere(current: ScheduleUpdateInput) -> ScheduleUpdate:
        schedule = current.description.schedule
        schedule.action.task_queue = "nobody-listens"  # type: ignore[attr-defined]
        return ScheduleUpdate(schedule=schedule)

    await plain.get_schedule_handle(COMPACTION_SCHEDULE).update(elsewhere)
    await plain.get_schedule_handle(MEMORY_SWEEP_SCHEDULE).delete()
    report = {r.schedule_id: r for r in await ensure_schedules(services.temporal, task_queue)}
    assert (report[COMPACTION_SCHEDULE].outcome, report[COMPACTION_SCHEDULE].updated) == ("updated", ["task queue"])
    assert report[MEMORY_SWEEP_SCHEDULE].outcome == "created"
    assert all(c.as_designed for c in await check_schedules(services.temporal, task_queue))


async def test_the_key_rotation_schedule_is_a_declared_absence_with_keys_from_the_environment(services, task_queue,
                                                                                                designed):
    await services.temporal.get_schedule_handle(KEY_ROTATION_SCHEDULE).delete()
    checks = await check_schedules(services.temporal, task_queue, keys_rotatable=False)
    [rotation] = [c for c in checks if c.schedule_id == KEY_ROTATION_SCHEDULE]
    assert not rotation.exists and rotation.as_designed and "environment" in (rotation.expected_absent or "")
    report = await ensure_schedules(services.temporal, task_queue, keys_rotatable=False)
    assert [(r.schedule_id, r.outcome) for r in report if r.outcome != "unchanged"] == [
        (KEY_ROTATION_SCHEDULE, "absent as declared")]


# The Schedules' inputs carry no authority: each is its workflow's bounded default, which runs
# without an operator request, and a definition asking for more is refused.


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
