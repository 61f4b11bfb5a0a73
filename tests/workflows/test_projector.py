"""The projection as its own durable flow (workflows/projector.py), on the real dev server and
Postgres: consolidation ends at its commit, the subject's projector embeds the outbox in
batches, retries transient failures on its own timer, dead-letters permanent ones, and the
sweep wakes a projector without any new consolidation."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta

import psycopg
import pytest
from temporalio.worker import Replayer

from agent_memory.core import contract
from agent_memory.core.models import EmbeddingResult
from agent_memory.core.projection_models import (
    ProjectionPolicy,
    ProjectionSweepInput,
    ProjectionSweepResult,
    ProjectorResult,
)
from agent_memory.projection.projector import OutboxProjector
from agent_memory.providers.errors import ProviderPermanentError, ProviderRetryableError
from agent_memory.providers.offline import HashingEmbedder, OfflineProviders, offline_providers
from agent_memory.store.db import tenant_transaction
from tests.cli.runner import run_cli
from tests.sessions import session
from tests.workflows.history_steps import LOCAL, history_steps
from workers.worker import WORKFLOWS
from workflows.consolidation import ConsolidationWorkflow
from workflows.projector import ProjectorWorkflow

HANGZHOU = session("s-hz", "2024-03-01T09:00:00Z", "Hi, my name is Lin Wei.", "I live in Hangzhou.",
                   ("assistant", "Nice to meet you."), "I'm allergic to peanuts.", "I have a cat named Mochi.")
FAST = ProjectionPolicy(batch_size=4, backoff_initial_seconds=0.3, backoff_max_seconds=1.0, max_attempts=6)


class ScriptedEmbedder:
    """The offline embedder behind a switch: fails transiently `failures` times, fails
    permanently for any batch holding `poison`, and counts every provider call (batch sizes)."""

    def __init__(self, *, failures: int = 0, poison: str | None = None):
        self._inner = HashingEmbedder()
        self.name, self.version, self.dimensions = self._inner.name, self._inner.version, self._inner.dimensions
        self.failures = failures
        self.poison = poison
        self.calls: list[int] = []

    async def embed(self, texts: list[str]) -> EmbeddingResult:
        self.calls.append(len(texts))
        if self.failures > 0:
            self.failures -= 1
            raise ProviderRetryableError("provider returned HTTP 503: overloaded", status_code=503)
        if self.poison and any(self.poison in t for t in texts):
            raise ProviderPermanentError("provider returned HTTP 400: input rejected", status_code=400)
        return await self._inner.embed(texts)


def providers_with(embedder: ScriptedEmbedder) -> OfflineProviders:
    p = offline_providers()
    return OfflineProviders(p.extractor, p.scorer, p.summarizer, embedder)  # type: ignore[arg-type]


async def rows(services, tenant, sql, *params):
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute(sql, params)
        return await cur.fetchall()


async def scalar(services, tenant, sql, *params):
    return (await rows(services, tenant, sql, *params))[0][0]


async def consolidate(client, tenant, subject, s=HANGZHOU):
    await client.append_messages(tenant, subject, s)
    handle = await client.end_session(tenant, subject, s.session_id)
    return handle, await client.consolidation_result(handle)


async def test_consolidation_commits_while_the_embedder_fails_and_the_projector_catches_up(
        client, services, tenant, running_worker):
    embedder = ScriptedEmbedder(failures=3)
    async with running_worker(providers=providers_with(embedder), projection_policy=FAST):
        handle, result = await consolidate(client, tenant, "lin")
        # Committed, not held by the failing embedder: no vector yet is fine.
        assert result.refused_reason is None and result.facts_written >= 3 and result.vectors_upserted == 0
        assert (await handle.query(ConsolidationWorkflow.progress)).step == "done"
        # Nothing but the projector's own timer retries the rows: no new consolidation.
        lag = await client.admin.wait_for_projection(tenant, "lin", timeout=60)
        projector = client.services.temporal.get_workflow_handle(contract.projector_workflow_id(tenant, "lin"),
                                                                 result_type=ProjectorResult)
        outcome = await projector.result()
    assert lag.pending == 0 and lag.dead_letters == 0
    outbox = await scalar(services, tenant, "SELECT count(*) FROM projection_outbox WHERE tenant_id = %s", tenant)
    vectors = await scalar(services, tenant, "SELECT count(*) FROM memory_vectors WHERE tenant_id = %s", tenant)
    assert vectors == outbox > 4
    # The rows of the failed batches were retried (attempts counted, error cleared on success).
    retried = await rows(services, tenant, "SELECT attempts, last_error, processed_at IS NOT NULL "
                         "FROM projection_outbox WHERE tenant_id = %s AND attempts > 0", tenant)
    assert retried and all(err is None and done for _, err, done in retried)
    failed_items = sum(embedder.calls[:3])
    assert sum(a for a, _, _ in retried) == failed_items
    # One provider call per batch of at most batch_size texts; every row embedded exactly once.
    assert all(0 < n <= FAST.batch_size for n in embedder.calls)
    assert sum(embedder.calls[3:]) == outbox
    # The first call was the run's own batch (a remote embedder's, an ordinary activity): it failed
    # and left its rows to the projector, which retried them with the rest.
    assert embedder.calls[0] == FAST.batch_size
    assert outcome.vectors_upserted == outbox and outcome.retried == failed_items - embedder.calls[0]
    assert outcome.dead_lettered == 0 and outcome.batches >= len(embedder.calls) - 1
    runs = await client.admin.runs(tenant, "lin")
    assert [r.workflow_type for r in runs].count("ConsolidationWorkflow") == 1


async def test_a_stuck_row_is_projected_by_the_sweep_without_a_new_consolidation(
        client, services, tenant, running_worker, task_queue):
    embedder = ScriptedEmbedder(failures=1)
    slow = FAST.model_copy(update={"batch_size": 64, "backoff_initial_seconds": 3600.0,
                                   "backoff_max_seconds": 3600.0})
    async with running_worker(providers=providers_with(embedder), projection_policy=slow):
        await consolidate(client, tenant, "kai")
        projector = client.services.temporal.get_workflow_handle(contract.projector_workflow_id(tenant, "kai"))
        for _ in range(100):  # the run's own batch fails; its rows wait an hour
            progress = await projector.query(ProjectorWorkflow.progress)
            if progress.step == "waiting for the next attempt":
                break
            await asyncio.sleep(0.1)
        assert progress.step == "waiting for the next attempt" and len(embedder.calls) == 1
        lag = await client.admin.projection_lag(tenant, "kai")
        assert lag.pending == lag.retrying > 0 and lag.due == 0
        # The projector is gone (terminated by an operator, say) and the hour has passed.
        await projector.terminate("test: the projector is gone")
        await rows(services, tenant, "UPDATE projection_outbox SET next_attempt_at = now() "
                   "WHERE tenant_id = %s AND processed_at IS NULL RETURNING 1", tenant)
        assert (await client.admin.projection_lag(tenant, "kai")).due == lag.pending
        # The hourly Schedule's run, started by hand: it finds the tenant and wakes the projector.
        sweep = await client.services.temporal.start_workflow(
            contract.PROJECTION_SWEEP_WORKFLOW, ProjectionSweepInput(), id=f"sweep-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue, result_type=ProjectionSweepResult)
        swept = await sweep.result()
        assert swept.subjects_woken >= 1 and swept.tenants >= 1
        await client.admin.wait_for_projection(tenant, "kai", timeout=60)
    # The failed call, then one call after the sweep for this subject: nothing else. (The sweep
    # wakes every tenant's due rows, other tests' included, so calls are counted by tenant.)
    assert embedder.calls[0] == lag.pending
    assert await scalar(services, tenant, "SELECT count(*) FROM operations WHERE tenant_id = %s "
                        "AND kind = 'embed-batch' AND status = 'succeeded'", tenant) == 1
    assert await scalar(services, tenant, "SELECT count(*) FROM memory_vectors WHERE tenant_id = %s", tenant) == \
        await scalar(services, tenant, "SELECT count(*) FROM projection_outbox WHERE tenant_id = %s", tenant)
    runs = await client.admin.runs(tenant, "kai")
    assert [r.workflow_type for r in runs].count("ConsolidationWorkflow") == 1


async def test_a_permanently_failing_row_is_dead_lettered_and_stats_shows_it(
        client, services, tenant, running_worker, task_queue):
    embedder = ScriptedEmbedder(poison="Hangzhou")
    async with running_worker(providers=providers_with(embedder), projection_policy=FAST):
        await consolidate(client, tenant, "lin")
        lag = await client.admin.wait_for_projection(tenant, "lin", timeout=60)
        dead = await rows(services, tenant, "SELECT attempts, last_error FROM projection_outbox "
                          "WHERE tenant_id = %s AND dead_lettered_at IS NOT NULL", tenant)
        # Only the rows whose text the provider rejects: a batch that failed was retried item by
        # item, so their neighbours were projected.
        assert lag.pending == 0 and lag.dead_letters == len(dead) > 0
        assert all(attempts == 1 and err == "ProviderPermanentError (HTTP 400)" for attempts, err in dead)
        done = await scalar(services, tenant, "SELECT count(*) FROM projection_outbox WHERE tenant_id = %s "
                            "AND processed_at IS NOT NULL", tenant)
        assert done > 0 and done == await scalar(
            services, tenant, "SELECT count(*) FROM memory_vectors WHERE tenant_id = %s", tenant)

        stats = await asyncio.to_thread(run_cli, services, "stats", "--tenant", tenant, "--json")
        assert stats.returncode == 0, stats.stderr
        projection = json.loads(stats.stdout)["projection"]
        assert projection["dead_letters"] == len(dead) and projection["pending"] == 0
        text = await asyncio.to_thread(run_cli, services, "stats", "--tenant", tenant)
        assert f"{len(dead)} dead letter(s)" in text.stdout, text.stdout

        # Fixed provider: the operator requeues the dead letters; the projector embeds them.
        embedder.poison = None
        retried = await asyncio.to_thread(run_cli, services, "projection", "retry-dead-letters", "--tenant", tenant,
                                          "--json", task_queue=task_queue)
        assert retried.returncode == 0, retried.stderr
        assert json.loads(retried.stdout)["subjects_woken"] == ["lin"]
        lag = await client.admin.wait_for_projection(tenant, "lin", timeout=60)
    assert lag.dead_letters == 0
    assert await scalar(services, tenant, "SELECT count(*) FROM memory_vectors WHERE tenant_id = %s", tenant) == \
        await scalar(services, tenant, "SELECT count(*) FROM projection_outbox WHERE tenant_id = %s", tenant)


async def test_one_provider_call_per_batch_and_a_crash_after_the_call_never_calls_again(
        client, services, tenant):
    # Outbox rows without a worker: live writes (their wake-up finds no worker on this queue).
    await client.append_messages(tenant, "ana", session("s-a", "2024-01-01T10:00:00Z", "I live in Lisbon."))
    for i in range(10):
        await client.write_fact(tenant, "ana", "preference", f"thing_{i}", f"value number {i}", expected_version=0,
                                evidence_message_ids=["s-a:1"])
    assert (await client.admin.projection_lag(tenant, "ana")).due == 10

    embedder = ScriptedEmbedder()
    projector = OutboxProjector(services.pool, services.keyring, embedder, ProjectionPolicy(batch_size=4))
    crashes = []

    async def crash_once(operation_id: str) -> None:
        if not crashes:
            crashes.append(operation_id)
            raise RuntimeError("simulated crash between the recorded call and the vector write")

    projector.after_record = crash_once
    with pytest.raises(RuntimeError, match="simulated crash"):
        await projector.project_batch(tenant, "ana")
    assert embedder.calls == [4]
    assert await scalar(services, tenant, "SELECT count(*) FROM memory_vectors WHERE tenant_id = %s", tenant) == 0

    retry = await projector.project_batch(tenant, "ana")  # the retried activity
    assert embedder.calls == [4]  # the recorded embeddings were reused: no second call
    assert (retry.reused, retry.embedded, retry.vectors_upserted, retry.due) == (4, 0, 4, 6)
    while (outcome := await projector.project_batch(tenant, "ana")).due:
        pass
    assert outcome.pending == 0
    assert embedder.calls == [4, 4, 2]  # one call per batch of up to 4 texts
    per_row = await rows(services, tenant, "SELECT count(*) FROM memory_vectors WHERE tenant_id = %s "
                         "GROUP BY memory_id, version", tenant)
    assert len(per_row) == 10 and all(n == 1 for (n,) in per_row)  # no duplicate row
    ops = dict(await rows(services, tenant, "SELECT kind, count(*) FROM operations WHERE tenant_id = %s "
                          "AND kind LIKE 'embed%%' AND status = 'succeeded' GROUP BY kind", tenant))
    assert ops == {"embed": 10, "embed-batch": 3}
    # Once more: nothing due, nothing called.
    again = await projector.project_batch(tenant, "ana")
    assert (again.selected, embedder.calls) == (0, [4, 4, 2])


class SlowEmbedder(ScriptedEmbedder):
    """Takes `seconds` per call (a local model under load)."""

    def __init__(self, seconds: float):
        super().__init__()
        self.seconds = seconds

    async def embed(self, texts: list[str]) -> EmbeddingResult:
        self.calls.append(len(texts))
        await asyncio.sleep(self.seconds)
        return await self._inner.embed(texts)


async def test_a_slow_embedding_call_keeps_its_claims_while_it_runs(client, services, tenant):
    """An embedding call that outlasts its claims' lease renews them: a second projector attempt
    meanwhile (the sweep's, or a retry the server started) leaves the rows to the live call
    instead of embedding them again."""
    await client.append_messages(tenant, "ana", session("s-a", "2024-01-01T10:00:00Z", "I live in Lisbon."))
    for i in range(3):
        await client.write_fact(tenant, "ana", "preference", f"thing_{i}", f"value number {i}", expected_version=0,
                                evidence_message_ids=["s-a:1"])
    embedder = SlowEmbedder(7)  # more than twice the lease
    # Seconds, not fractions: at the start of a busy suite a renewal can wait a second for Postgres.
    projector = OutboxProjector(services.pool, services.keyring, embedder, ProjectionPolicy(batch_size=4),
                                lease=timedelta(seconds=3))
    first = asyncio.create_task(projector.project_batch(tenant, "ana"))
    await asyncio.sleep(4.5)  # the first call's claims would have lapsed by now without renewal
    second = await projector.project_batch(tenant, "ana")
    assert (second.selected, second.in_flight, second.embedded) == (3, 3, 0)
    assert (await first).embedded == 3
    assert embedder.calls == [3]
    ops = dict(await rows(services, tenant, "SELECT kind, count(*) FROM operations WHERE tenant_id = %s "
                          "AND kind LIKE 'embed%%' AND status = 'succeeded' GROUP BY kind", tenant))
    assert ops == {"embed": 3, "embed-batch": 1}


async def test_the_sweep_lists_tenants_from_a_table_the_app_role_may_read(services, client, tenant):
    """Row security scopes every transaction to one tenant; the sweep's list of tenants comes
    from the tenants registry (tenant ids only), which triggers fill at a tenant's first write. A tenant's
    transaction sees its own id only; a transaction with no tenant set (the sweep) sees them all."""
    other = f"{tenant}-b"
    for t in (tenant, other):
        await client.append_messages(t, "zoe", session("s-z", "2024-01-01T10:00:00Z", "I live in Oslo."))
        await client.write_fact(t, "zoe", "location", "home_city", "Oslo", expected_version=0,
                                evidence_message_ids=["s-z:1"])
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT tenant_id FROM tenants")  # no WHERE on purpose
        assert await cur.fetchall() == [(tenant,)]
    async with services.pool.connection() as conn, conn.transaction():
        cur = await conn.execute("SELECT current_user, count(*) FROM tenants WHERE tenant_id = ANY(%s)",
                                 ([tenant, other],))
        user, listed = await cur.fetchone()
        # Without app.tenant_id the outbox itself shows nothing (row security), the list does.
        cur = await conn.execute("SELECT count(*) FROM projection_outbox")
        assert (await cur.fetchone())[0] == 0
    assert user == "agent_memory_app" and listed == 2


async def test_histories_of_the_new_path_replay(client, services, tenant, running_worker):
    """The consolidation's patched path (wake the projector, no project_vectors) and a projector
    that failed, slept on its timer and finished replay deterministically; the old path is
    tests/histories/consolidation.json (tests/workflows/test_replay.py)."""
    # Three failures: the run's own batch takes one (two when a loaded machine has its step retried
    # before it gives the rows to the projector), the projector's first batch the next (so it sleeps
    # on its retry timer whenever it starts).
    embedder = ScriptedEmbedder(failures=3)
    async with running_worker(providers=providers_with(embedder), projection_policy=FAST):
        handle, _ = await consolidate(client, tenant, "lin")
        await client.admin.wait_for_projection(tenant, "lin", timeout=60)
        projector = client.services.temporal.get_workflow_handle(contract.projector_workflow_id(tenant, "lin"))
        await projector.result()
    consolidation = await handle.fetch_history()
    # The scripted embedder is remote (it does not say it runs in the worker): the batch of the
    # run's own rows is an ordinary activity on the model queue, beside the offline providers'
    # local activities. That batch failed, so the run woke the projector (a local activity: a marker).
    model = contract.model_task_queue(client.task_queue)
    assert history_steps(consolidation) == [
        ("locate_providers", LOCAL), ("extract_facts", LOCAL), ("score_importance", LOCAL),
        ("summarize_session", LOCAL), ("check_conflicts", LOCAL), ("commit_consolidation", LOCAL),
        ("project_outbox_batch", model), ("wake_projector", LOCAL)]
    assert (await handle.result()).projector_woken
    projection = await projector.fetch_history()
    assert any(e.HasField("timer_started_event_attributes") for e in projection.events)  # slept on a retry
    replayer = Replayer(workflows=WORKFLOWS, data_converter=services.temporal.data_converter)
    for history in (consolidation, projection):
        result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
        assert result.replay_failure is None


async def test_an_in_worker_embedder_that_fails_leaves_its_rows_to_the_projector(client, services, tenant,
                                                                                 running_worker):
    """The consolidation embeds its own rows when the embedder is in the worker; a transient
    failure is recorded on the rows (not raised: the run is not held) and the projector it wakes
    embeds them after their backoff."""
    embedder = ScriptedEmbedder(failures=1)
    embedder.runs_in_worker = True  # type: ignore[attr-defined]
    async with running_worker(providers=providers_with(embedder), projection_policy=FAST):
        handle, result = await consolidate(client, tenant, "lin")
        assert result.refused_reason is None and result.facts_written >= 3
        assert result.projector_woken and result.vectors_upserted == 0
        projector = client.services.temporal.get_workflow_handle(contract.projector_workflow_id(tenant, "lin"),
                                                                 result_type=ProjectorResult)
        done = await projector.result()
    assert done.vectors_upserted == await scalar(
        services, tenant, "SELECT count(*) FROM memory_vectors WHERE tenant_id = %s", tenant) > 3
    assert embedder.calls[0] == FAST.batch_size  # the run's own batch, the one that failed
    # The batch of the run's own rows ran in the workflow's worker (a local activity), then the wake.
    assert [name for name, queue in history_steps(await handle.fetch_history()) if queue == LOCAL] == [
        "locate_providers", "extract_facts", "score_importance", "summarize_session", "check_conflicts",
        "commit_consolidation", "project_outbox_batch", "wake_projector"]


async def test_a_rebuild_that_leaves_rows_due_wakes_the_projector(client, services, tenant, running_worker):
    async with running_worker(projection_policy=FAST):
        await consolidate(client, tenant, "lin")
        await client.admin.wait_for_projection(tenant, "lin")
        projector = client.services.temporal.get_workflow_handle(contract.projector_workflow_id(tenant, "lin"))
        await projector.result()  # done: nothing pending, the projector completed
        before = await scalar(services, tenant, "SELECT count(*) FROM memory_vectors WHERE tenant_id = %s", tenant)
        # A vector and its recorded embedding are lost, its outbox row is pending again: the
        # rebuild leaves it to the projection (it does not embed rows the outbox owns).
        async with await psycopg.AsyncConnection.connect(services.settings.database_admin_url) as conn:
            cur = await conn.execute("SELECT memory_id, version FROM memory_vectors WHERE tenant_id = %s "
                                     "AND memory_kind = 'fact' LIMIT 1", (tenant,))
            memory_id, version = await cur.fetchone()
            await conn.execute("DELETE FROM memory_vectors WHERE tenant_id = %s AND memory_id = %s", (tenant, memory_id))
            await conn.execute("DELETE FROM operations WHERE tenant_id = %s AND kind = 'embed' AND memory_id = %s "
                               "AND memory_version = %s", (tenant, memory_id, version))
            await conn.execute("UPDATE projection_outbox SET processed_at = NULL WHERE tenant_id = %s "
                               "AND memory_id = %s", (tenant, memory_id))
            await conn.commit()
        result = await client.admin.rebuild_result(await client.admin.rebuild(tenant, "lin"))
        assert result.subjects[0].vectors_reembedded == 0
        assert (await client.admin.projection_lag(tenant, "lin")).pending == 1 or \
            await scalar(services, tenant, "SELECT count(*) FROM memory_vectors WHERE tenant_id = %s", tenant) == before
        # Nothing but the rebuild's wake-up starts a projector run: the vector comes back.
        await client.admin.wait_for_projection(tenant, "lin", timeout=60)
    assert await scalar(services, tenant, "SELECT count(*) FROM memory_vectors WHERE tenant_id = %s", tenant) == before
