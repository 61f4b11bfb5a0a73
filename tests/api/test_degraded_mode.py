"""The HTTP API while a dependency is down or stalls, on a stack of this module's own (stopping
the session's would disturb other tests): each outage, and each server that stops answering
without refusing (SIGSTOP), is answered 503 problem+json naming the dependency within a bound,
readiness names it to an operator, the first calls after its restart all succeed, and an append
made while Temporal is down is kept and its session consolidated once Temporal is back, without
anyone ending it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from agent_memory.api.client import MemoryClient
from agent_memory.api.http.server import serving
from agent_memory.api.services import Services, migrate
from agent_memory.core import contract
from agent_memory.core.settings import Settings
from agent_memory.lifecycle.idle_timers import IdleTimerSweepInput, IdleTimerSweepResult
from agent_memory.lifecycle.schedules import KEY_ROTATION_SCHEDULE, ensure_schedules
from agent_memory.providers.offline import offline_providers
from agent_memory.security.api_keys import create_key
from agent_memory.security.operator_keys import create_operator_key
from workers.embedded import EmbeddedStack, Ports
from workers.worker import build_worker

pytestmark = [pytest.mark.stack, pytest.mark.minutes(1)]

IDLE_SECONDS = 2.0


def messages(session_id: str, *texts: str) -> list[dict]:
    return [{"message_id": f"{session_id}:{i}", "turn_index": i, "role": "user", "content": text,
             "created_at": f"2024-05-01T09:0{i}:00Z"} for i, text in enumerate(texts)]


@pytest.fixture(scope="module")
async def own_stack(tmp_path_factory):
    home = tmp_path_factory.mktemp("degraded-stack")
    stack = EmbeddedStack(home, Ports.free())
    settings = await asyncio.to_thread(stack.start, Settings.from_env({"AGENT_MEMORY_HOME": str(home)}))
    try:
        await migrate(settings, app_password=stack.app_password)
        services = await Services.open(settings.with_services(idle_timeout_seconds=IDLE_SECONDS))
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
    """Start it again on the same port, with the same data."""
    await asyncio.to_thread(getattr(stack, f"_start_{name}"))


def assert_unavailable(answer: httpx.Response, dependency: str) -> None:
    assert answer.status_code == 503, (answer.status_code, answer.text)
    assert answer.headers["content-type"] == "application/problem+json"
    body = answer.json()
    assert body["status"] == 503 and body["dependency"] == dependency and dependency in body["detail"]
    assert int(answer.headers["Retry-After"]) > 0


@pytest.fixture
async def api(own_stack):
    stack, services = own_stack
    client = MemoryClient(services, offline_providers().embedder, task_queue=f"degraded-{uuid.uuid4()}",
                          idle_timeout=timedelta(seconds=IDLE_SECONDS), idle_signal_debounce=timedelta(0))
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    token = (await create_key(services.pool, tenant, "write")).token
    async with serving(client) as port, httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=90,
                                                          headers={"Authorization": f"Bearer {token}"}) as http:
        yield stack, services, client, tenant, http


async def test_postgres_down_is_a_503_naming_it_and_the_first_calls_after_its_restart_succeed(api):
    stack, _, _, _, http = api
    assert (await http.get("/v1/subjects/lin/facts")).status_code == 200
    await stop(stack, "postgres")
    try:
        assert_unavailable(await http.get("/v1/subjects/lin/facts"), "postgres")
    finally:
        await start(stack, "postgres")
    assert [(await http.get("/v1/subjects/lin/facts")).status_code for _ in range(5)] == [200] * 5


async def test_redis_down_is_a_503_naming_it_and_the_first_calls_after_its_restart_succeed(api):
    stack, _, _, _, http = api
    url = "/v1/subjects/lin/sessions/r1/messages"
    assert (await http.post(url, json={"messages": messages("r1", "I live in Oslo.")})).status_code == 200
    await stop(stack, "redis")
    try:
        down = await http.post(url, json={"messages": messages("r1", "I live in Oslo.", "I like tea.")})
        assert_unavailable(down, "redis")
    finally:
        await start(stack, "redis")
    answers = [await http.post(url, json={"messages": messages("r1", "I live in Oslo.", "I like tea.",
                                                                 *[f"note {j}" for j in range(i + 1)])})
               for i in range(5)]
    assert [a.status_code for a in answers] == [200] * 5, [a.text for a in answers]
    assert [a.json()["inserted"] for a in answers] == [2, 1, 1, 1, 1]  # the refused append left nothing


async def consolidated(client: MemoryClient, tenant: str, subject: str, session: str, timeout: float) -> bool:
    """Whether the session's consolidation completes within `timeout` seconds (nobody ends it)."""
    handle = client.services.temporal.get_workflow_handle(contract.consolidation_workflow_id(tenant, subject, session))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED:
                return True
        except RPCError:
            pass  # not started yet
        await asyncio.sleep(0.5)
    return False


async def test_temporal_down_appends_are_kept_and_their_sessions_consolidated_once_it_is_back(api):
    stack, services, client, tenant, http = api
    await stop(stack, "temporal")
    try:
        started = time.monotonic()
        swept = await http.post("/v1/subjects/lin/sessions/t1/messages",
                                json={"messages": messages("t1", "I live in Lisbon.")})
        assert time.monotonic() - started < 8  # the signal's wait is bounded (client.IDLE_SIGNAL_TIMEOUT)
        retried = await http.post("/v1/subjects/lin/sessions/t2/messages",
                                  json={"messages": messages("t2", "I am allergic to peanuts.")})
        for kept in (swept, retried):  # committed, answered as such: the idle timer is pending
            assert kept.status_code == 200, kept.text
            assert kept.json()["inserted"] == 1 and kept.json()["idle_timer"] == "pending"
        assert_unavailable(await http.post("/v1/subjects/lin/sessions/t1/end"), "temporal")
    finally:
        await start(stack, "temporal")
    # The client retries the append it believes failed: a duplicate, which arms the timer.
    again = await http.post("/v1/subjects/lin/sessions/t2/messages",
                            json={"messages": messages("t2", "I am allergic to peanuts.")})
    assert again.status_code == 200 and again.json()["duplicates"] == 1 and again.json()["idle_timer"] == "armed"
    assert services.settings.idle_timeout_seconds == IDLE_SECONDS  # the worker's, for the timers it re-arms
    async with build_worker(services, task_queue=client.task_queue):
        assert await consolidated(client, tenant, "lin", "t2", 60)
        # Nobody touches t1 again: the idle-timer sweep (its Schedule's workflow) arms its timer.
        await asyncio.sleep(IDLE_SECONDS)
        result = await services.temporal.execute_workflow(
            contract.IDLE_TIMER_SWEEP_WORKFLOW, IdleTimerSweepInput(), id=f"sweep-{uuid.uuid4()}",
            task_queue=client.task_queue, result_type=IdleTimerSweepResult)
        assert result.timers_started >= 1
        assert await consolidated(client, tenant, "lin", "t1", 60)
        # A second sweep finds nothing left to arm in this tenant.
        again_swept = await services.temporal.execute_workflow(
            contract.IDLE_TIMER_SWEEP_WORKFLOW, IdleTimerSweepInput(), id=f"sweep-{uuid.uuid4()}",
            task_queue=client.task_queue, result_type=IdleTimerSweepResult)
        assert again_swept.timers_started == 0
    assert "Lisbon" in {f.value for f in await client.facts(tenant, "lin")}


@pytest.mark.parametrize("dependency", ["postgres", "redis"])
async def test_a_restart_between_two_calls_is_not_seen_by_the_calls_after_it(api, dependency):
    """Every pooled connection died with the old server: none of them reaches a caller, and none
    makes it wait for the pool (each is tested as it is lent and replaced at once)."""
    stack, services, _, _, http = api
    before = "/v1/subjects/lin/sessions/q1/messages"
    for i in range(8):  # several pooled connections of each kind
        sent = await http.post(before, json={"messages": messages("q1", *[f"note {j}" for j in range(i + 1)])})
        assert sent.status_code == 200
    await stop(stack, dependency)
    await start(stack, dependency)
    after = "/v1/subjects/lin/sessions/q2/messages"
    answers = [await timed(http.post(after, json={"messages": messages("q2", *[f"note {j}" for j in range(i + 1)])}))
               for i in range(5)]
    assert [a.status_code for a, _ in answers] == [200] * 5, [a.text for a, _ in answers]
    assert max(seconds for _, seconds in answers) < services.settings.pool_timeout_seconds, answers


# A stalled server's 503 comes within the dependency deadline plus the middleware's check; this
# bound leaves room for a loaded machine.
STALLED_ANSWER_SECONDS = 10.0


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (PostgreSQL's backends are the postmaster's children)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rpartition(")")[2].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += children.get(current, [])
    return tree


@contextlib.asynccontextmanager
async def stalled(stack: EmbeddedStack, name: str) -> AsyncIterator[None]:
    """Server `name` (every process of it) stopped with SIGSTOP for the block: it accepts
    connections but answers nothing. Continued whatever the block does."""
    pid = stack.server_pid(name)
    assert pid is not None
    stopped = process_tree(pid)
    try:
        for each in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(each, signal.SIGSTOP)
        yield
    finally:
        for each in reversed(stopped):
            with contextlib.suppress(ProcessLookupError):
                os.kill(each, signal.SIGCONT)


async def timed(request) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    answer = await request
    return answer, time.monotonic() - started


@pytest.fixture
async def operator(own_stack) -> dict[str, str]:
    _, services = own_stack
    token = (await create_operator_key(services.pool, "readiness")).token
    return {"Authorization": f"Bearer {token}"}


async def readiness(http: httpx.AsyncClient, operator: dict[str, str]) -> tuple[httpx.Response, httpx.Response]:
    """/v1/ready as an operator and as anyone (no key)."""
    return (await http.get("/v1/ready", headers=operator),
            await http.get("/v1/ready", headers={"Authorization": ""}))


async def test_readiness_says_ready_and_only_an_operator_learns_each_dependency(api, operator):
    _, services, client, _, http = api
    # No worker has created this queue's Schedules yet: the server serves, and an operator learns
    # that the guarantees they carry are not kept.
    as_operator, as_anyone = await readiness(http, operator)
    assert as_operator.status_code == 200 and as_operator.json()["status"] == "degraded", as_operator.text
    assert KEY_ROTATION_SCHEDULE in as_operator.json()["schedules"]["missing"]
    assert as_anyone.status_code == 200 and as_anyone.json() == {"status": "ready"}
    await ensure_schedules(services.temporal, client.task_queue,
                           keys_rotatable=services.keyring.provider.rotatable)
    as_operator, as_anyone = await readiness(http, operator)
    assert as_operator.status_code == 200, as_operator.text
    assert as_operator.json() == {"status": "ready",
                                  "dependencies": {"postgres": "ok", "redis": "ok", "temporal": "ok"},
                                  "schedules": {"paused": [], "altered": [], "missing": []}}
    assert as_anyone.status_code == 200 and as_anyone.json() == {"status": "ready"}
    assert (await http.get("/v1/ready", headers={"Authorization": "Bearer amo:x:y"})).json() == {"status": "ready"}
    assert (await http.get("/v1/health")).json() == {"status": "ok"}


@pytest.mark.parametrize(("dependency", "route"), [
    ("postgres", ("GET", "/v1/subjects/lin/facts")),
    ("redis", ("POST", "/v1/subjects/lin/sessions/s1/messages")),
    ("temporal", ("POST", "/v1/subjects/lin/sessions/s2/end")),
])
async def test_a_stalled_dependency_is_a_503_naming_it_within_a_bound_and_readiness_names_it(
        api, operator, dependency, route):
    stack, _, _, _, http = api
    method, path = route

    def call() -> asyncio.Future:
        body = {"messages": messages("s1", "I live in Oslo.")} if path.endswith("/messages") else None
        return asyncio.ensure_future(http.request(method, path, json=body))

    if dependency == "temporal":  # a session to end
        sent = await http.post("/v1/subjects/lin/sessions/s2/messages", json={"messages": messages("s2", "Hi.")})
        assert sent.status_code == 200, sent.text
    assert (await readiness(http, operator))[0].status_code == 200  # the operator key is known
    async with stalled(stack, dependency):
        answer, seconds = await timed(call())
        assert_unavailable(answer, dependency)
        assert seconds < STALLED_ANSWER_SECONDS, seconds
        as_operator, checked = await timed(http.get("/v1/ready", headers=operator))
        as_anyone = await http.get("/v1/ready", headers={"Authorization": ""})
        assert checked < STALLED_ANSWER_SECONDS, checked
        assert as_operator.status_code == 503 and as_operator.headers["content-type"] == "application/problem+json"
        states = as_operator.json()["dependencies"]
        assert states[dependency].startswith("degraded"), states
        assert {name: state for name, state in states.items() if name != dependency} == {
            name: "ok" for name in ("postgres", "redis", "temporal") if name != dependency}
        assert as_anyone.status_code == 503
        assert "dependencies" not in as_anyone.json() and dependency not in as_anyone.text
    # Continued: the next requests succeed promptly, whatever the abandoned calls still do.
    if dependency != "temporal":
        again, seconds = await timed(call())
        assert again.status_code == 200, again.text
        assert seconds < STALLED_ANSWER_SECONDS, seconds
    else:
        again, seconds = await timed(http.get("/v1/subjects/lin/facts"))
        assert again.status_code == 200 and seconds < STALLED_ANSWER_SECONDS, (again.text, seconds)
    assert (await http.get("/v1/ready", headers=operator)).status_code == 200


async def test_the_first_consolidation_after_a_postgres_restart_completes_promptly_without_a_traceback(api, caplog):
    stack, services, client, tenant, http = api
    async with build_worker(services, task_queue=client.task_queue):
        sent = await http.post("/v1/subjects/lin/sessions/w1/messages",
                               json={"messages": messages("w1", "I live in Bergen.")})
        assert sent.status_code == 200, sent.text
        await stop(stack, "postgres")  # every connection of the worker's pool dies with it
        await start(stack, "postgres")
        with caplog.at_level("WARNING"):
            began = time.monotonic()
            ended = await http.post("/v1/subjects/lin/sessions/w1/end")
            assert ended.status_code == 200, ended.text
            assert await consolidated(client, tenant, "lin", "w1", 60)
            took = time.monotonic() - began
    assert took < services.settings.pool_timeout_seconds + 10, took  # no pool wait, no failed attempt
    tracebacks = [r.getMessage() for r in caplog.records if r.exc_info and r.name.startswith(("temporalio", "activities"))]
    assert tracebacks == []
    assert "Bergen" in {f.value for f in await client.facts(tenant, "lin")}
