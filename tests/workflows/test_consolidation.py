"""Flow 1 (session end → consolidation) and flow 2 (operators) on the real dev server."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from agent_memory.core import contract
from agent_memory.core.models import ConsolidationInput, ConsolidationResult
from agent_memory.store.db import tenant_transaction
from agent_memory.telemetry.metrics import REGISTRY, tenant_label
from tests.sessions import session
from tests.workflows.history_steps import LOCAL, history_steps
from tests.workflows.remote_providers import remote_model_providers
from workers.worker import build_model_worker
from workflows.consolidation import ConsolidationWorkflow

HANGZHOU = session("s-hz", "2024-03-01T09:00:00Z", "Hi, my name is Lin Wei.", "I live in Hangzhou.",
                   ("assistant", "Nice to meet you."), "I'm allergic to peanuts.")
# Four messages each: a shorter session gets no episode (the substance gate), and each of these has one.
TRIP = session("s-trip", "2024-04-10T20:00:00Z", "我下周去北京出差三天。", ("assistant", "需要我帮你找酒店吗？"), "我不吃辣。",
               ("assistant", "好的，我会推荐不辣的餐厅。"))
MOVE = session("s-move", "2024-06-02T18:30:00Z", "I moved to Shanghai last month.",
               ("assistant", "How are you settling in?"), "I live in Shanghai now.",
               ("assistant", "Shanghai has a lot to explore."))


async def _count(services, tenant, sql, *params):
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute(sql, params)
        return (await cur.fetchone())[0]


async def test_session_end_consolidates_move_without_trip_overwrite(client, services, tenant, running_worker):
    subject = "lin"
    async with running_worker():
        for s in (HANGZHOU, TRIP, MOVE):
            await client.append_messages(tenant, subject, s)
            first = await client.end_session(tenant, subject, s.session_id)
            # A duplicate hook attaches to the same run instead of starting a second one.
            again = await client.end_session(tenant, subject, s.session_id)
            assert first.id == again.id == f"consolidate/{tenant}/{subject}/{s.session_id}"
            result = await client.consolidation_result(first)
            assert result.refused_reason is None
            assert (await again.describe()).run_id == (await first.describe()).run_id
            progress = await first.query(ConsolidationWorkflow.progress)
            assert progress.step == "done"
        # The runs embedded their own rows (the embedder is in the worker): nothing is left pending.
        lag = await client.admin.wait_for_projection(tenant, subject)
        assert lag.pending == 0 and lag.dead_letters == 0

    history = await client.facts(tenant, subject, history=True)
    cities = [(f.value, f.valid_to is None, f.interval_version) for f in history if f.key == "home_city"]
    assert cities == [("Hangzhou", False, 1), ("Shanghai", True, 2)]
    hz = next(f for f in history if f.value == "Hangzhou")
    sh = next(f for f in history if f.value == "Shanghai")
    assert hz.valid_to == sh.valid_from  # the old interval closes where the new one starts
    assert hz.evidence_message_ids == ["s-hz:2"]
    trip = next(f for f in history if f.namespace == "travel")
    assert trip.value == "北京" and trip.permanence == "temporary"

    current = {(f.namespace, f.key): f.value for f in await client.facts(tenant, subject)}
    assert current[("location", "home_city")] == "Shanghai"
    assert current[("diet", "spicy")] == "no spicy food"
    assert ("travel", "trip_city") not in current  # the trip ended; it never touched home_city

    # Episodes and vectors were projected, one vector per (memory, version).
    assert await _count(services, tenant, "SELECT count(*) FROM episodes WHERE tenant_id = %s", tenant) == 3
    vectors = await _count(services, tenant, "SELECT count(*) FROM memory_vectors WHERE tenant_id = %s", tenant)
    outbox = await _count(services, tenant, "SELECT count(*) FROM projection_outbox WHERE tenant_id = %s", tenant)
    assert vectors == outbox > 3
    assert await _count(services, tenant, "SELECT count(*) FROM projection_outbox "
                        "WHERE tenant_id = %s AND processed_at IS NULL", tenant) == 0

    recalled = await client.recall(tenant, subject, "where does Lin live now, Shanghai?")
    assert recalled.episodes and recalled.episodes[0].session_id == "s-move"
    assert {f.value for f in recalled.facts} >= {"Shanghai", "peanuts"}


async def test_each_step_is_an_activity_of_its_own_named_in_the_history(client, services, tenant, task_queue,
                                                                       running_worker):
    """Providers in the worker's process (the offline default): every step is named in the run's
    history, in order, each a local activity (one marker each): the providers' steps, the plan, the
    commit and the batch that embeds the run's own rows. No projector run: nothing was left for it.
    A model's calls are ordinary activities on the model queue (tests/workflows/test_time_skipping.py,
    test_consolidation_openai.py)."""
    async with running_worker():
        await client.append_messages(tenant, "lin", HANGZHOU)
        handle = await client.end_session(tenant, "lin", HANGZHOU.session_id)
        result = await client.consolidation_result(handle)
    history = await handle.fetch_history()
    assert history_steps(history) == [
        ("locate_providers", LOCAL), ("extract_facts", LOCAL), ("score_importance", LOCAL),
        ("summarize_session", LOCAL), ("check_conflicts", LOCAL), ("commit_consolidation", LOCAL),
        ("project_outbox_batch", LOCAL)]
    # No round trip through the server for any step: one workflow task runs the whole consolidation.
    assert not any(e.HasField("activity_task_scheduled_event_attributes") for e in history.events)
    # Ids and counts only: no message text in the history.
    assert "Hangzhou" not in history.to_json() and "peanuts" not in history.to_json()
    assert result.facts_extracted > 0 and result.events_appended > 0 and result.episode_written
    vectors = await _count(services, tenant, "SELECT count(*) FROM memory_vectors WHERE tenant_id = %s", tenant)
    assert result.vectors_upserted == vectors > 3 and not result.projector_woken
    assert await _count(services, tenant, "SELECT count(*) FROM projection_outbox "
                        "WHERE tenant_id = %s AND processed_at IS NULL", tenant) == 0
    with pytest.raises(RPCError) as missing:
        await services.temporal.get_workflow_handle(contract.projector_workflow_id(tenant, "lin")).describe()
    assert missing.value.status == RPCStatusCode.NOT_FOUND


async def test_model_calls_wait_for_a_worker_of_the_model_queue(client, tenant, task_queue, running_worker):
    """A model's calls are scheduled on the model queue, not run by the workflow's worker: without
    a model worker the run waits at its extraction, and a model worker started later (another
    process, with the queue's rate limit) takes it from there."""
    await client.append_messages(tenant, "lin", HANGZHOU)
    providers = remote_model_providers()
    async with running_worker(model_worker=False, providers=providers):
        handle = await client.end_session(tenant, "lin", HANGZHOU.session_id)
        for _ in range(100):
            pending = (await handle.describe()).raw_description.pending_activities
            if pending:
                break
            await asyncio.sleep(0.1)
        [waiting] = pending
        assert waiting.activity_type.name == "extract_facts" and waiting.attempt == 1
        assert (await handle.query(ConsolidationWorkflow.progress)).step == "extract_facts"
        async with build_model_worker(client.services, task_queue=task_queue, providers=providers):
            result = await client.consolidation_result(handle)
    assert result.facts_written > 0 and result.episode_written


async def test_runs_lists_workflows_with_the_ui_visibility_query(client, tenant, running_worker):
    async with running_worker():
        await client.append_messages(tenant, "ana", session("s-ana", "2024-01-01T10:00:00Z", "I live in Lisbon."))
        handle = await client.end_session(tenant, "ana", "s-ana")
        await client.consolidation_result(handle)
        await client.admin.wait_for_projection(tenant, "ana")
    for _ in range(50):  # visibility is eventually consistent
        runs = await client.admin.runs(tenant, "ana")
        statuses = {r.workflow_type: r.status for r in runs}
        if statuses.get("ConsolidationWorkflow") == "COMPLETED" and "SessionIdleWorkflow" in statuses:
            break
        await asyncio.sleep(0.2)
    # The consolidation (done) and the session's idle timer (stopped by the end hook); no projector:
    # with the embedder in the worker the consolidation embedded its own rows.
    assert sorted((r.workflow_id, r.workflow_type) for r in runs) == [
        (f"consolidate/{tenant}/ana/s-ana", "ConsolidationWorkflow"), (f"idle/{tenant}/ana/s-ana", "SessionIdleWorkflow")]
    assert {r.workflow_type: r.status for r in runs}["ConsolidationWorkflow"] == "COMPLETED"
    assert await client.admin.runs(tenant, "someone-else") == []
    described = await handle.describe()
    attrs = {k.name: v for k, v in described.typed_search_attributes}
    assert {k: attrs.get(k) for k in ("TenantId", "SubjectId", "SessionId")} == {
        "TenantId": tenant, "SubjectId": "ana", "SessionId": "s-ana"}


async def test_a_failed_run_and_a_resumed_session_are_consolidated_again(client, tenant, running_worker):
    def runs(outcome: str) -> float:
        return REGISTRY.get_sample_value("agent_memory_consolidations_total",
                                         {"tenant": tenant_label(tenant), "outcome": outcome}) or 0.0

    before = {outcome: runs(outcome) for outcome in ("committed", "no_substance", "failed")}
    async with running_worker():
        # The hook fired before the messages were stored: refused at once, nothing started…
        with pytest.raises(LookupError, match="no session 's-late'"):
            await client.end_session(tenant, "eve", "s-late")
        # …and a run that starts anyway (an idle timer racing the append) fails for good…
        early = await client.services.temporal.start_workflow(
            contract.CONSOLIDATION_WORKFLOW, ConsolidationInput(tenant_id=tenant, subject_id="eve", session_id="s-late"),
            id=contract.consolidation_workflow_id(tenant, "eve", "s-late"), task_queue=client.task_queue,
            result_type=ConsolidationResult)
        try:
            await client.consolidation_result(early)
            raise AssertionError("a run over a missing session should fail")
        except WorkflowFailureError:
            pass
        failed_run = (await early.describe()).run_id
        # …and does not block the session: once the messages are there, the hook runs again.
        await client.append_messages(tenant, "eve", session("s-late", "2024-01-01T10:00:00Z", "I live in Lima."))
        retried = await client.end_session(tenant, "eve", "s-late")
        assert (await client.consolidation_result(retried)).facts_written == 1
        done_run = (await retried.describe()).run_id
        assert done_run != failed_run
        # The same hook again, nothing new: it attaches to the finished run.
        again = await client.end_session(tenant, "eve", "s-late")
        assert (await again.describe()).run_id == done_run
        # The session goes on after its consolidation: the new messages get a run of their own.
        await client.append_messages(tenant, "eve", session("s-late", "2024-01-01T10:00:00Z", "I live in Lima.",
                                                            "I moved to Quito."))
        resumed = await client.end_session(tenant, "eve", "s-late")
        await client.consolidation_result(resumed)
        assert (await resumed.describe()).run_id not in (done_run, failed_run)
    history = [(f.value, f.interval_version) for f in await client.facts(tenant, "eve", history=True)]
    assert history == [("Lima", 1), ("Quito", 2)]
    # The operator's counters: the failed run, then the two that committed (each with its fact).
    assert {outcome: runs(outcome) - n for outcome, n in before.items()} == {
        "committed": 2, "no_substance": 0, "failed": 1}


def test_the_model_queue_is_configured_by_settings():
    from agent_memory.core.settings import Settings

    default = Settings.from_env({"AGENT_MEMORY_HOME": "/tmp/x"})
    assert (default.model_worker, default.model_concurrency, default.model_activities_per_second) == (True, 100, None)
    tuned = Settings.from_env({"AGENT_MEMORY_HOME": "/tmp/x", "AGENT_MEMORY_MODEL_WORKER": "0",
                               "AGENT_MEMORY_MODEL_CONCURRENCY": "8", "AGENT_MEMORY_MODEL_ACTIVITIES_PER_SECOND": "2.5"})
    assert (tuned.model_worker, tuned.model_concurrency, tuned.model_activities_per_second) == (False, 8, 2.5)
    for bad in ("0", "-1", "fast"):
        with pytest.raises(ValueError, match="AGENT_MEMORY_MODEL_ACTIVITIES_PER_SECOND"):
            Settings.from_env({"AGENT_MEMORY_HOME": "/tmp/x", "AGENT_MEMORY_MODEL_ACTIVITIES_PER_SECOND": bad})


async def test_the_model_worker_takes_the_queues_rate_limit(services):
    from dataclasses import replace

    limited = replace(services, settings=services.settings.with_services(model_activities_per_second=3.0,
                                                                         model_concurrency=4))
    worker = build_model_worker(limited, task_queue="q")
    config = worker.config()
    assert config["task_queue"] == contract.model_task_queue("q") == "q-model"
    assert config["max_task_queue_activities_per_second"] == 3.0 and config["max_concurrent_activities"] == 4
    assert sorted(activity.__name__ for activity in config["activities"]) == [
        "extract_facts", "project_outbox_batch", "score_importance", "summarize_session"]
