"""The one-activity routes' activities on the real dev server: a run recorded on those routes that
is still in flight when its worker is upgraded completes, its steps run by the workflow's one
pipeline (workflows/consolidation.py) as a run on the step route."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import timedelta

import pytest
from temporalio import workflow
from temporalio.activity import ActivityCancellationDetails
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities.consolidation import ConsolidationActivities
from activities.projection import ProjectionActivities
from agent_memory.core import contract
from agent_memory.core.models import ConsolidationInput, ConsolidationResult, ConsolidationStepsOutcome, StepInput
from agent_memory.providers.errors import ProviderPermanentError
from agent_memory.providers.offline import OfflineProviders, RuleFactExtractor, offline_providers
from agent_memory.store.db import tenant_transaction
from tests.sessions import session
from workflows.consolidation import ConsolidationWorkflow

PROBE_QUEUE_SUFFIX = "-probe"


@workflow.defn(name="OneActivityRoutesProbe", sandboxed=False)
class OneActivityRoutesProbe(ConsolidationWorkflow):
    """A run recorded on the in-worker route as it goes on when in flight (the workflow's code after
    its patch `in-worker-consolidation-as-one-local-activity`): the local activity, then, without a
    commit from it, the one ordinary activity on the product worker's queue (this probe has a
    worker of its own), and the workflow's own report of what that returned."""

    @workflow.run
    async def run(self, request: ConsolidationInput) -> ConsolidationResult:
        step = StepInput(tenant_id=request.tenant_id, subject_id=request.subject_id, session_id=request.session_id)
        done = await workflow.execute_local_activity_method(
            ConsolidationActivities.consolidate_in_worker, step, **contract.IN_WORKER_CONSOLIDATION.local_options())
        if done.commit is None:
            done = await workflow.execute_activity_method(
                ConsolidationActivities.consolidate_with_remote_providers, step,
                task_queue=workflow.info().task_queue.removesuffix(PROBE_QUEUE_SUFFIX),
                **contract.REMOTE_CONSOLIDATION.options())
        return await self._consolidated_in_one_activity(request, done)


class CountingExtractor(RuleFactExtractor):
    """The real offline extractor, counting its calls (the provider's view); `delay`: each call
    takes that much longer, as a remote model's."""

    def __init__(self, delay: float = 0.0, runs_in_worker: bool = True):
        super().__init__()
        self.calls = 0
        self.called = asyncio.Event()
        self.delay = delay
        self.runs_in_worker = runs_in_worker

    async def extract(self, messages, *, subject_role="user", current_facts=None):
        self.calls += 1
        self.called.set()
        await asyncio.sleep(self.delay)
        return await super().extract(messages, subject_role=subject_role, current_facts=current_facts)


class RefusingExtractor(CountingExtractor):
    async def extract(self, messages, *, subject_role="user", current_facts=None):
        self.calls += 1
        raise ProviderPermanentError("the model refused the request")


def _providers(extractor: RuleFactExtractor) -> OfflineProviders:
    p = offline_providers()
    return OfflineProviders(extractor, p.scorer, p.summarizer, p.embedder)


def _activities(services, extractor=None, temporal: Client | None = None) -> ConsolidationActivities:
    p = _providers(extractor or RuleFactExtractor())
    return ConsolidationActivities(services.pool, services.keyring, p.extractor, p.scorer, p.summarizer, p.embedder,
                                   temporal=temporal)


async def _count(services, tenant: str, query: str) -> int:
    async with tenant_transaction(services.pool, tenant) as conn:
        return (await (await conn.execute(query, (tenant,))).fetchone())[0]


async def _stored(services, tenant: str) -> tuple[int, int, int, int]:
    """Events, current facts, vectors and recorded commits of the tenant."""
    return (await _count(services, tenant, "SELECT count(*) FROM memory_events WHERE tenant_id = %s"),
            await _count(services, tenant, "SELECT count(*) FROM facts WHERE tenant_id = %s AND status = 'active'"),
            await _count(services, tenant, "SELECT count(*) FROM memory_vectors WHERE tenant_id = %s"),
            await _count(services, tenant, "SELECT count(*) FROM operations WHERE tenant_id = %s "
                                           "AND operation_id LIKE 'commit/%%'"))


async def _two_facts_session(client, tenant: str) -> StepInput:
    # Four messages: a shorter session gets no episode (the substance gate), and the runs write one.
    await client.append_messages(tenant, "lin", session("s1", "2024-03-01T09:00:00Z", "I live in Hangzhou.",
                                                        ("assistant", "Are there any foods you cannot eat?"),
                                                        "I am allergic to peanuts.",
                                                        ("assistant", "Do you want recipes without peanuts, then?")))
    return StepInput(tenant_id=tenant, subject_id="lin", session_id="s1")


def _env(task_queue: str, heartbeat_timeout: timedelta | None = None) -> ActivityEnvironment:
    """An activity of a run of its own (ids of a run recorded on the route) on `task_queue`."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id=f"consolidate/legacy-{uuid.uuid4().hex[:8]}",
                                   workflow_run_id=str(uuid.uuid4()), activity_id="1", task_queue=task_queue,
                                   heartbeat_timeout=heartbeat_timeout)
    return env


@pytest.mark.parametrize("remote_model", [False, True])
async def test_the_in_worker_activity_commits_nothing_and_says_where_the_providers_compute(
        client, services, tenant, remote_model):
    """Nothing is called or written: the run goes on to the one ordinary activity, whatever the
    placement, and the placement it records is this worker's."""
    step = await _two_facts_session(client, tenant)
    extractor = CountingExtractor(runs_in_worker=not remote_model)
    done = await ActivityEnvironment().run(_activities(services, extractor).consolidate_in_worker, step)
    assert done.commit is None and done.projection is None and done.refused_reason is None
    assert done.placement.model_steps_in_worker is not remote_model and done.placement.embedder_in_worker
    assert extractor.calls == 0 and await _stored(services, tenant) == (0, 0, 0, 0)
    assert await _count(services, tenant, "SELECT count(*) FROM operations WHERE tenant_id = %s") == 0


async def test_a_run_in_flight_on_the_one_activity_routes_completes_with_the_workflows_steps_once(
        client, services, tenant, task_queue, running_worker):
    """The route end to end on workers: the local activity hands the run to the ordinary one,
    which runs the workflow's steps as a run on the step route: one provider call, one commit, the
    run's rows embedded, and the route's report (result and progress) counts what the steps did.
    A second run recorded on the route (another id) gets the recorded results: no call, no row."""
    step = await _two_facts_session(client, tenant)
    extractor = CountingExtractor()
    probe = _activities(services)
    p = offline_providers()
    projection = ProjectionActivities(services.pool, services.keyring, p.embedder, services.temporal)
    async with running_worker(providers=_providers(extractor)), Worker(
            services.temporal, task_queue=task_queue + PROBE_QUEUE_SUFFIX, workflows=[OneActivityRoutesProbe],
            activities=[probe.consolidate_in_worker, projection.wake_projector],
            workflow_runner=UnsandboxedWorkflowRunner()):

        async def recorded_run() -> tuple[ConsolidationResult, object, str]:
            handle = await services.temporal.start_workflow(
                OneActivityRoutesProbe.run, ConsolidationInput(**step.model_dump(exclude={"through"})),
                id=f"consolidate/legacy-{uuid.uuid4().hex[:8]}", task_queue=task_queue + PROBE_QUEUE_SUFFIX)
            result = await asyncio.wait_for(handle.result(), timeout=60)
            progress = await handle.query(OneActivityRoutesProbe.progress)
            [activity_id] = [e.activity_task_scheduled_event_attributes.activity_id
                             async for e in handle.fetch_history_events()
                             if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
            return result, progress, contract.steps_route_workflow_id(handle.id, handle.result_run_id or "",
                                                                      activity_id)

        result, progress, steps_id = await recorded_run()
        events, facts, vectors, commits = await _stored(services, tenant)
        assert extractor.calls == 1 and commits == 1 and facts == 2
        assert (result.facts_extracted, result.facts_written, result.episode_written) == (2, 2, True)
        assert result.events_appended == events and result.vectors_upserted == vectors > 2
        assert result.refused_reason is None and not result.projector_woken
        assert (progress.step, progress.decisions, progress.conflict_retries) == ("done", 2, 0)
        # The steps ran as a consolidation on the step route, with the session's search attributes.
        steps_run = await services.temporal.get_workflow_handle(steps_id).describe()
        assert steps_run.workflow_type == contract.CONSOLIDATION_WORKFLOW
        assert steps_run.status == WorkflowExecutionStatus.COMPLETED
        assert steps_run.typed_search_attributes.get(contract.SESSION_ID) == "s1"

        again, _, _ = await recorded_run()
        assert extractor.calls == 1 and await _stored(services, tenant) == (events, facts, vectors, commits)
        assert (again.facts_written, again.events_appended, again.vectors_upserted) == (2, events, 0)


async def test_a_retried_activity_waits_for_the_same_run_and_heartbeats_its_step(
        client, services, tenant, task_queue, running_worker):
    """Heartbeats name the step the run is in; a retry of the activity (same run, same activity)
    attaches to the run it started, even closed: one run, one provider call, the same outcome."""
    step = await _two_facts_session(client, tenant)
    extractor = CountingExtractor(delay=2.5, runs_in_worker=False)  # a remote model: the model queue
    acts = _activities(services, temporal=services.temporal)
    env = _env(task_queue, heartbeat_timeout=timedelta(seconds=3))  # a beat every second
    beats: list[dict] = []
    env.on_heartbeat = lambda *details: beats.append(details[0])
    async with running_worker(providers=_providers(extractor)):
        done = await env.run(acts.consolidate_with_remote_providers, step)
        info = env.info
        steps_id = contract.steps_route_workflow_id(info.workflow_id, info.workflow_run_id, info.activity_id)
        first_run = (await services.temporal.get_workflow_handle(steps_id).describe()).run_id
        retried = await env.run(acts.consolidate_with_remote_providers, step)
        assert (await services.temporal.get_workflow_handle(steps_id).describe()).run_id == first_run
    assert isinstance(done, ConsolidationStepsOutcome) and retried == done
    assert extractor.calls == 1 and done.refused_reason is None and done.conflict_retries == 0
    assert not done.placement.model_steps_in_worker and done.placement.embedder_in_worker
    assert done.facts_extracted == done.decisions == 2
    assert done.commit is not None and done.commit.facts_written == 2 and done.commit.episode_written
    assert done.projection is not None and done.projection.pending == 0
    assert done.projection.vectors_upserted == done.commit.outbox_rows == await _count(
        services, tenant, "SELECT count(*) FROM memory_vectors WHERE tenant_id = %s")
    assert any(b.get("step") == "extract_facts" for b in beats), beats


async def test_an_erased_subject_is_refused_before_any_call(client, services, tenant, task_queue, running_worker):
    extractor = CountingExtractor()
    acts = _activities(services, temporal=services.temporal)
    async with running_worker(providers=_providers(extractor)):
        await client.append_messages(tenant, "zoe", session("s1", "2024-03-01T09:00:00Z", "I live in Oslo."))
        await client.admin.erasure_receipt(await client.admin.erase(tenant, "zoe", reason="test"))
        with pytest.raises(ApplicationError) as refused:
            await _env(task_queue).run(acts.consolidate_with_remote_providers,
                                       StepInput(tenant_id=tenant, subject_id="zoe", session_id="s1"))
    assert refused.value.type == "SubjectErased" and refused.value.non_retryable and extractor.calls == 0


async def test_a_failed_run_fails_the_activity_permanently_with_its_type(
        client, services, tenant, task_queue, running_worker):
    step = await _two_facts_session(client, tenant)
    extractor = RefusingExtractor()
    acts = _activities(services, temporal=services.temporal)
    async with running_worker(providers=_providers(extractor)):
        with pytest.raises(ApplicationError) as failed:
            await _env(task_queue).run(acts.consolidate_with_remote_providers, step)
    assert failed.value.type == "ProviderPermanent" and failed.value.non_retryable
    assert failed.value.message == "the model refused the request" and extractor.calls == 1
    assert await _stored(services, tenant) == (0, 0, 0, 0)


@pytest.mark.parametrize("cancelled", [ActivityCancellationDetails(cancel_requested=True),
                                       ActivityCancellationDetails(timed_out=True)], ids=["run-cancelled", "timed-out"])
async def test_a_cancelled_calling_run_cancels_the_steps_and_a_timed_out_attempt_leaves_them_to_its_retry(
        client, services, tenant, task_queue, running_worker, cancelled):
    step = await _two_facts_session(client, tenant)
    extractor = CountingExtractor(delay=3, runs_in_worker=False)
    acts = _activities(services, temporal=services.temporal)
    env = _env(task_queue)
    info = env.info
    steps_run = services.temporal.get_workflow_handle(
        contract.steps_route_workflow_id(info.workflow_id, info.workflow_run_id, info.activity_id))
    async with running_worker(providers=_providers(extractor)):
        attempt = asyncio.ensure_future(env.run(acts.consolidate_with_remote_providers, step))
        await asyncio.wait_for(extractor.called.wait(), timeout=30)  # the steps' run is in its model call
        env.cancel(cancelled)
        with pytest.raises(asyncio.CancelledError):
            await attempt
        if cancelled.cancel_requested:
            with pytest.raises(WorkflowFailureError):
                await asyncio.wait_for(steps_run.result(), timeout=30)
            assert (await steps_run.describe()).status == WorkflowExecutionStatus.CANCELED
            assert await _stored(services, tenant) == (0, 0, 0, 0)
            return
        retry = ActivityEnvironment()
        retry.info = info
        done = await retry.run(acts.consolidate_with_remote_providers, step)
    assert done.commit is not None and done.commit.facts_written == 2 and extractor.calls == 1
    assert (await steps_run.describe()).status == WorkflowExecutionStatus.COMPLETED
