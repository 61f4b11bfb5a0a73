"""Crash and resume on the real stack: the worker process SIGKILLs itself at a fault point, is
restarted without the fault, and the memory must come out as if nothing had happened — no
duplicates, no lost session, one provider call per request, the same content as a crash-free
run of the same input in another tenant. Then Postgres and the Temporal server are restarted
under a running workflow (on a private stack, so the session's shared stack is not disturbed).

After a kill, the worker's orphaned activity attempt is failed by id (WorkerSupervisor): that
is what the workflows' 20-second heartbeat timeout does in production, only sooner.
"""

from __future__ import annotations

import asyncio
import sys
import uuid

import pytest

from agent_memory.api.client import MemoryClient
from agent_memory.api.services import Services, migrate
from agent_memory.core.settings import Settings
from agent_memory.memory.operations import CLAIM_LEASE
from agent_memory.providers.offline import OfflineProviders, offline_providers
from agent_memory.store.db import tenant_transaction
from tools.chaos import (
    SUBJECT,
    ScenarioOutcome,
    WorkerSupervisor,
    demo_sessions,
    duplicate_counts,
    lost_in_flight,
    lost_sessions,
    mismatches,
    projection_digest,
    run_scenario,
    worker_env,
)
from tools.faults import hits, parse_faults
from workers.embedded import EmbeddedStack, Ports
from workers.worker import build_worker

pytestmark = [pytest.mark.stack, pytest.mark.minutes(2)]

WORKER = [sys.executable, "-m", "tests.chaos.worker_main"]
# Three sessions (EN and ZH, a move that supersedes the home city, a trip that must not), erased
# at the end. `@N`: the Nth time the point is reached, i.e. in the Nth session.
KILLS = ["after_record:extract", "after_record:summary@2", "after_plan@2", "after_commit@2", "mid_projection@2",
         "mid_erasure:facts", "mid_erasure:messages"]

# Fault points inside the consolidation's local activities (workflows/consolidation.py): the plan,
# the commit and, with the providers in the worker's process (offline), their steps and the
# embedding of the run's own rows. A model's calls are ordinary activities on the model queue (a
# remote embedder's batch too), whose killed attempt is an orphan to fail like any activity's.
LOCAL_POINTS = {"after_plan", "after_commit", "after_record:plan"}
IN_WORKER_LOCAL_POINTS = LOCAL_POINTS | {"mid_projection", "after_record:embed", "after_record:extract",
                                         "after_record:importance", "after_record:summary"}
# The model-call, commit and projection kills again on the route of a remote model.
REMOTE_KILLS = ["after_record:extract", "after_record:summary@2", "after_commit@2", "mid_projection@2"]


@pytest.fixture(scope="module")
def chaos_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("chaos")


# A kill can land while a concurrent model call (importance beside the summary) holds its claim:
# the retry then waits out the dead attempt's lease (operations.CLAIM_LEASE, by design: the
# attempt might still be alive) after the heartbeat timeout noticed the death. The worker logs
# each wait (`... is claimed by another attempt; waiting ...`).
SCENARIO_TIMEOUT = CLAIM_LEASE.total_seconds() + 90


async def scenario(services, chaos_dir, tenant: str, fault: str | None = None, *, remote_providers: bool = False,
                   processes: int = 1):
    state_dir = chaos_dir / f"faults-{tenant}"
    provider_log = chaos_dir / f"provider-calls-{tenant}.log"  # a log each: scenarios run side by side
    env = worker_env(services.settings, task_queue=f"chaos-{tenant}", provider_log=provider_log, state_dir=state_dir,
                     remote_providers=remote_providers)
    supervisor = await WorkerSupervisor(services.temporal, env, chaos_dir / f"worker-{tenant}.log",
                                        argv=WORKER, processes=processes).start(fault)  # restarted without it
    try:
        outcome = await run_scenario(services, supervisor, tenant, provider_log=provider_log,
                                     timeout=SCENARIO_TIMEOUT)
    finally:
        await supervisor.stop()
    return outcome, supervisor, state_dir


def assert_clean(outcome: ScenarioOutcome) -> None:
    assert outcome.workflows_failed == 0, outcome.errors
    assert outcome.workflows_completed == 4  # three consolidations and the erasure
    assert set(outcome.duplicates.values()) == {0}, outcome.duplicates
    assert set(outcome.erased_duplicates.values()) == {0}, outcome.erased_duplicates
    assert outcome.lost == []
    assert outcome.repeated == 0, ({k: n for k, n in outcome.calls.items() if n > 1}, outcome.lost_in_flight)
    assert outcome.receipt["residue_total"] == 0 and outcome.receipt["key_shredded"]


# Two worker processes on the scenario's queue, both configured with the fault: the one that
# reaches the hit dies, the other goes on serving, and the dead one's attempts alone are failed.
TWO_WORKER_KILLS = ["after_record:summary@2", "after_commit@2", "mid_erasure:facts"]
CASES = [(f, False) for f in KILLS] + [(f, True) for f in REMOTE_KILLS]
# Side by side: a scenario mostly waits (a workflow task's timeout after a kill, a lease), on a
# task queue, a tenant and a worker process of its own.
CONCURRENT_SCENARIOS = 4


@pytest.fixture(scope="module")
async def scenarios(services, chaos_dir):
    """The crash-free reference and every kill scenario, started at once; a test awaits its own."""
    slots = asyncio.Semaphore(CONCURRENT_SCENARIOS)

    async def run(tenant: str, fault: str | None = None, remote: bool = False, processes: int = 1):
        async with slots:
            return await scenario(services, chaos_dir, tenant, fault, remote_providers=remote, processes=processes)

    tasks = {None: asyncio.ensure_future(run(f"ref-{uuid.uuid4().hex[:8]}"))}
    tasks.update({case: asyncio.ensure_future(run(f"crash-{uuid.uuid4().hex[:8]}", *case)) for case in CASES})
    tasks.update({(fault, "two workers"): asyncio.ensure_future(run(f"crash2-{uuid.uuid4().hex[:8]}", fault, False, 2))
                  for fault in TWO_WORKER_KILLS})
    try:
        yield tasks
    finally:
        for task in tasks.values():
            task.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)


@pytest.fixture(scope="module")
async def reference(scenarios) -> ScenarioOutcome:
    """The same input, crash-free, in its own tenant."""
    outcome, supervisor, _ = await scenarios[None]
    assert supervisor.kills == []
    assert_clean(outcome)
    assert len(outcome.contents["episodes"]) == 3
    # Hangzhou, then Shanghai: the move closed the first interval; the trip did not touch it.
    cities = [row[2] for row in outcome.contents["facts"] if row[:2] == ["location", "home_city"]]
    assert sorted(cities) == ["Hangzhou", "Shanghai"]
    assert {k.split(":")[0] for k in outcome.calls} == {"extract", "importance", "summary", "embed"}
    return outcome


@pytest.mark.parametrize("fault, remote", CASES)
async def test_a_worker_killed_at_a_fault_point_resumes_without_a_trace(fault, remote, scenarios, reference):
    outcome, supervisor, state_dir = await scenarios[fault, remote]

    (point, nth), = parse_faults(fault).items()
    assert supervisor.kills == [fault], supervisor.log_tail()  # died there once, by SIGKILL, and came back
    # Inside an activity: its attempt was left running (the subject's projector may have had one
    # running at the same time, alongside the consolidation). In a local activity the server never
    # saw the attempt, the workflow task's timeout hands the step to the restarted worker, and
    # there is no orphan to fail (a projector's may be).
    if point not in (LOCAL_POINTS if remote else IN_WORKER_LOCAL_POINTS):
        assert supervisor.orphans_failed >= 1
    assert hits(state_dir, point) >= nth
    assert_clean(outcome)
    assert outcome.calls == reference.calls  # each request reached the provider exactly once
    assert mismatches(outcome, reference) == []


@pytest.mark.parametrize("fault", TWO_WORKER_KILLS)
async def test_one_of_two_workers_killed_at_a_fault_point_leaves_no_trace(fault, scenarios, reference):
    outcome, supervisor, state_dir = await scenarios[fault, "two workers"]

    (point, nth), = parse_faults(fault).items()
    assert supervisor.kills == [fault], supervisor.log_tail()  # one process died there, once
    assert len(supervisor.faults) == 3  # two started, one restarted in the dead one's place
    assert hits(state_dir, point) >= nth
    assert_clean(outcome)
    assert outcome.calls == reference.calls
    assert mismatches(outcome, reference) == []


def test_only_a_call_a_killed_process_had_in_flight_may_be_made_again():
    """The repeated-call check: a request made again counts as lost in flight only when the
    earlier call came from a killed process and is not of the kind whose recorded result that
    process's kill point follows (that result must be reused)."""
    calls = {("importance", "a"): [10, 12], ("summary", "b"): [10, 12], ("extract", "c"): [12, 12],
             ("embed", "d"): [10, 11, 12], ("extract", "e"): [10]}
    killed = {10: "after_record:summary@2", 11: "after_record:embed@3"}
    # 10's summary was recorded before it died: made again, it is a defect (not in the result).
    # 11's embedding of d was recorded too; 10's, in flight, was lost.
    assert lost_in_flight(calls, killed) == {("importance", "a"): 1, ("embed", "d"): 1}
    assert lost_in_flight(calls, {10: "mid_projection@2"}) == {("importance", "a"): 1, ("summary", "b"): 1}
    assert lost_in_flight(calls, {}) == {}  # no kill: every repeat is a defect


# --- infrastructure restarts under a running workflow, on a private stack ----------------------

class GatedSummarizer:
    """The offline summarizer, holding the call for one session until the test opens the gate:
    the workflow is then provably mid-way (extraction, importance and plan recorded)."""

    def __init__(self, inner, session_id: str):
        self.inner, self.session_id = inner, session_id
        self.name, self.version = inner.name, inner.version
        self.entered, self.gate = asyncio.Event(), asyncio.Event()

    async def summarize(self, messages, **kwargs):
        if messages and messages[0].message_id.startswith(f"{self.session_id}:"):
            self.entered.set()
            await self.gate.wait()
        return await self.inner.summarize(messages, **kwargs)


@pytest.fixture(scope="module")
async def own_stack(tmp_path_factory):
    home = tmp_path_factory.mktemp("own-stack")
    stack = EmbeddedStack(home, Ports.free())
    settings = await asyncio.to_thread(stack.start, Settings.from_env({"AGENT_MEMORY_HOME": str(home)}))
    try:
        await migrate(settings, app_password=stack.app_password)
        services = await Services.open(settings)
        try:
            yield stack, services
        finally:
            await services.close()
    finally:
        await asyncio.to_thread(stack.stop)


async def stop(stack: EmbeddedStack, name: str) -> None:
    await asyncio.to_thread(getattr(stack, f"_stop_{name}"))
    stack.started.remove(name)


async def start(stack: EmbeddedStack, name: str) -> None:
    """Start it again: the same port, the same data (Postgres data dir, Temporal's file DB)."""
    await asyncio.to_thread(getattr(stack, f"_start_{name}"))


@pytest.mark.parametrize("service", ["postgres", "temporal"])
async def test_a_workflow_survives_a_restart_of(service, own_stack, reference):
    stack, services = own_stack
    p = offline_providers()
    gated = GatedSummarizer(p.summarizer, "s2")
    task_queue = f"restart-{uuid.uuid4()}"
    tenant = f"restart-{service}-{uuid.uuid4().hex[:6]}"
    client = MemoryClient(services, p.embedder, task_queue=task_queue)
    sessions = demo_sessions()
    for s in sessions:
        await client.append_messages(tenant, SUBJECT, s)
    worker = build_worker(services, task_queue=task_queue,
                          providers=OfflineProviders(p.extractor, p.scorer, gated, p.embedder))
    async with worker:
        await asyncio.wait_for(client.consolidation_result(await client.end_session(tenant, SUBJECT, "s1")), 60)
        handle = await client.end_session(tenant, SUBJECT, "s2")
        await asyncio.wait_for(gated.entered.wait(), 60)
        before = stack._state(service)
        await stop(stack, service)  # Postgres: pg_ctl -m fast; Temporal: SIGTERM
        if service == "postgres":
            # The summary returns while the database is down: recording it fails, and the
            # activity retries until Postgres is back.
            gated.gate.set()
            await asyncio.sleep(2)
            await start(stack, service)
        else:
            # The activity completes to the restarted server (the attempt is in its file DB).
            await start(stack, service)
            gated.gate.set()
        after = stack._state(service)
        assert after["pid"] != before["pid"] and after["port"] == before["port"]
        second = await asyncio.wait_for(client.consolidation_result(handle), 90)
        third = await asyncio.wait_for(client.consolidation_result(await client.end_session(tenant, SUBJECT, "s3")),
                                       60)
        await client.admin.wait_for_projection(tenant, SUBJECT, timeout=60)  # vectors follow the commits
    assert second.session_id == "s2" and third.episode_written
    await services.pool.check()  # drop connections that died with the old Postgres
    assert set((await duplicate_counts(services.pool, tenant, SUBJECT)).values()) == {0}
    assert await lost_sessions(services.pool, tenant, SUBJECT) == []
    assert await projection_digest(services.pool, tenant, SUBJECT) == reference.digest
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT attempts FROM operations WHERE tenant_id = %s AND operation_id LIKE %s",
                                 (tenant, f"summary/{SUBJECT}/s2/%"))
        (attempts,), = await cur.fetchall()
    # Postgres: the held summary is recorded once the database is back (the pool lends only a
    # checked connection and waits for the restart), or, when that wait ran out, it ran again once.
    assert 1 <= attempts <= 2 if service == "postgres" else attempts == 1
