"""Consolidation activities under ActivityEnvironment, against the embedded Postgres."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.consolidation import ConsolidationActivities
from agent_memory.contract import MAX_CONFLICT_ROUNDS
from agent_memory.db import tenant_transaction
from agent_memory.memory_store import list_facts
from agent_memory.models import CommitInput, ConflictPlanInput, ImportanceResult, ProjectionInput, StepInput
from agent_memory.operation_keys import ProviderStepKey
from agent_memory.operations import OperationRecorder
from agent_memory.providers.offline import RuleFactExtractor, offline_providers
from tests.sessions import session


class CountingExtractor(RuleFactExtractor):
    """The real offline extractor, counting how often it is called (the provider's view)."""

    def __init__(self):
        super().__init__()
        self.calls = 0
        self.seen = None

    async def extract(self, messages, *, subject_role="user", current_facts=None):
        self.calls += 1
        self.seen = current_facts
        return await super().extract(messages, subject_role=subject_role, current_facts=current_facts)


class Crash(Exception):
    pass


def make_activities(services, extractor=None) -> ConsolidationActivities:
    p = offline_providers()
    return ConsolidationActivities(services.pool, services.keyring, extractor or p.extractor, p.scorer,
                                   p.summarizer, p.embedder)


async def _events(services, tenant) -> int:
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM memory_events WHERE tenant_id = %s", (tenant,))
        return (await cur.fetchone())[0]


async def test_recorded_result_is_reused_after_a_crash_between_call_and_write(client, services, tenant):
    await client.append_messages(tenant, "lin", session("s1", "2024-03-01T09:00:00Z", "I live in Hangzhou."))
    extractor = CountingExtractor()
    acts = make_activities(services, extractor)
    step = StepInput(tenant_id=tenant, subject_id="lin", session_id="s1")

    async def crash(_operation_id):
        raise Crash("worker died after the provider result was recorded")

    acts.recorder.after_record = crash
    with pytest.raises(Crash):
        await ActivityEnvironment().run(acts.extract_facts, step)
    acts.recorder.after_record = None

    retried = await ActivityEnvironment().run(acts.extract_facts, step)
    again = await ActivityEnvironment().run(acts.extract_facts, step)
    assert extractor.calls == 1  # one provider call per operation id, however often we retry
    assert retried.reused and again.reused and retried.operation_id == again.operation_id
    assert retried.count == 1
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT status, attempts, provider FROM operations WHERE tenant_id = %s "
                                 "AND operation_id = %s", (tenant, retried.operation_id))
        assert await cur.fetchone() == ("succeeded", 1, "rule-extractor")


async def test_commit_is_idempotent_and_guards_versions(client, services, tenant):
    acts = make_activities(services)
    env = ActivityEnvironment()
    await client.append_messages(tenant, "lin", session("a", "2024-03-01T09:00:00Z", "I live in Hangzhou."))
    await client.append_messages(tenant, "lin", session("b", "2024-05-01T09:00:00Z", "I moved to Shanghai."))
    await client.append_messages(tenant, "lin", session("c", "2024-06-01T09:00:00Z", "I moved to Suzhou."))

    async def commit_input(session_id: str, round_: int = 0) -> CommitInput:
        step = StepInput(tenant_id=tenant, subject_id="lin", session_id=session_id)
        extraction = await env.run(acts.extract_facts, step)
        plan = await env.run(acts.check_conflicts, ConflictPlanInput(
            **step.model_dump(), extraction_operation_id=extraction.operation_id, round=round_))
        importance = await env.run(acts.score_importance, step)
        summary = await env.run(acts.summarize_session, step)
        return CommitInput(**step.model_dump(), extraction_operation_id=extraction.operation_id,
                           plan_operation_id=plan.operation_id, importance_operation_id=importance.operation_id,
                           summary_operation_id=summary.operation_id)

    first = await env.run(acts.commit_consolidation, await commit_input("a"))
    events = await _events(services, tenant)
    replayed = await env.run(acts.commit_consolidation, await commit_input("a"))
    assert replayed == first and await _events(services, tenant) == events == 3  # fact + episode + observation, once

    # Two sessions planned against the same version: the second commit must not overwrite.
    plan_b, plan_c = await commit_input("b"), await commit_input("c")
    await env.run(acts.commit_consolidation, plan_b)
    with pytest.raises(ApplicationError) as err:
        await env.run(acts.commit_consolidation, plan_c)
    assert err.value.type == "VersionConflict" and err.value.non_retryable
    # Re-read and re-decide (what the workflow does): now it applies on top of b.
    await env.run(acts.commit_consolidation, await commit_input("c", round_=1))
    cities = [(f.value, f.interval_version, f.version) for f in await client.facts(tenant, "lin", history=True)
              if f.key == "home_city"]
    assert cities == [("Hangzhou", 1, 3), ("Shanghai", 2, 3), ("Suzhou", 3, 3)]


async def test_a_live_write_between_plan_and_commit_makes_the_consolidation_re_decide(client, services, tenant):
    acts = make_activities(services)
    env = ActivityEnvironment()
    await client.append_messages(tenant, "lin", session("a", "2024-03-01T09:00:00Z", "I live in Hangzhou."))
    await client.append_messages(tenant, "lin", session("b", "2024-05-01T09:00:00Z", "I moved to Shanghai."))
    step_a = StepInput(tenant_id=tenant, subject_id="lin", session_id="a")
    step_b = StepInput(tenant_id=tenant, subject_id="lin", session_id="b")

    async def commit(step: StepInput, round_: int = 0):
        extraction = await env.run(acts.extract_facts, step)
        plan = await env.run(acts.check_conflicts, ConflictPlanInput(
            **step.model_dump(), extraction_operation_id=extraction.operation_id, round=round_))
        importance = await env.run(acts.score_importance, step)
        summary = await env.run(acts.summarize_session, step)
        return await env.run(acts.commit_consolidation, CommitInput(
            **step.model_dump(), extraction_operation_id=extraction.operation_id,
            plan_operation_id=plan.operation_id, importance_operation_id=importance.operation_id,
            summary_operation_id=summary.operation_id))

    await commit(step_a)
    # Session b is planned against version 1 (Hangzhou)…
    extraction = await env.run(acts.extract_facts, step_b)
    plan = await env.run(acts.check_conflicts, ConflictPlanInput(
        **step_b.model_dump(), extraction_operation_id=extraction.operation_id))
    # …then the user corrects the city live, at version 1 → 2.
    await client.write_fact(tenant, "lin", "location", "home_city", "Suzhou", expected_version=1,
                            evidence_message_ids=["a:1"], observed_at=datetime(2024, 6, 1, tzinfo=UTC))
    with pytest.raises(Exception) as stale:  # a second writer at the same version loses
        await client.write_fact(tenant, "lin", "location", "home_city", "Ningbo", expected_version=1,
                                evidence_message_ids=["a:1"])
    assert "expected version 1, found 2" in str(stale.value)
    importance = await env.run(acts.score_importance, step_b)
    summary = await env.run(acts.summarize_session, step_b)
    with pytest.raises(ApplicationError) as err:
        await env.run(acts.commit_consolidation, CommitInput(
            **step_b.model_dump(), extraction_operation_id=extraction.operation_id,
            plan_operation_id=plan.operation_id, importance_operation_id=importance.operation_id,
            summary_operation_id=summary.operation_id))
    assert err.value.type == "VersionConflict"
    await commit(step_b, round_=1)  # re-read, re-decide: the older statement must not win
    current = {f.key: f for f in await client.facts(tenant, "lin", as_of=datetime(2024, 7, 1, tzinfo=UTC))}
    assert current["home_city"].value == "Suzhou" and current["home_city"].version == 2
    held = [f for f in await list_facts(services.pool, services.keyring, tenant, "lin", include_history=True,
                                         include_candidates=True)
            if f.status == "candidate"]
    assert [(f.key, f.value) for f in held] == [("home_city", "Shanghai")]  # kept, with its evidence, as a candidate


async def test_the_version_a_read_returns_is_the_one_a_write_accepts(services, client, tenant):
    """A restatement (confirmation) moves the memory's version; the facts a
    read returns show that version, on every interval of the memory, and a conditional write at
    it succeeds."""
    env = ActivityEnvironment()
    acts = make_activities(services)

    async def consolidate(session_id: str, at: str, text: str) -> None:
        await client.append_messages(tenant, "ivo", session(session_id, at, text))
        step = StepInput(tenant_id=tenant, subject_id="ivo", session_id=session_id)
        extraction = await env.run(acts.extract_facts, step)
        plan = await env.run(acts.check_conflicts, ConflictPlanInput(
            **step.model_dump(), extraction_operation_id=extraction.operation_id))
        importance = await env.run(acts.score_importance, step)
        summary = await env.run(acts.summarize_session, step)
        await env.run(acts.commit_consolidation, CommitInput(
            **step.model_dump(), extraction_operation_id=extraction.operation_id,
            plan_operation_id=plan.operation_id, importance_operation_id=importance.operation_id,
            summary_operation_id=summary.operation_id))

    await consolidate("v1", "2024-01-01T10:00:00Z", "I live in Porto.")
    await consolidate("v2", "2024-02-01T10:00:00Z", "I live in Porto.")  # restated: a confirmation
    [row] = [f for f in await client.facts(tenant, "ivo") if f.key == "home_city"]
    assert (row.value, row.version, row.interval_version) == ("Porto", 2, 1)
    assert len(row.evidence_message_ids) == 2
    await client.write_fact(tenant, "ivo", "location", "home_city", "Braga", expected_version=row.version,
                            evidence_message_ids=["v2:1"], observed_at=datetime(2024, 3, 1, tzinfo=UTC))
    history = await client.facts(tenant, "ivo", history=True)
    assert sorted((f.value, f.status, f.version, f.interval_version) for f in history if f.key == "home_city") == [
        ("Braga", "active", 3, 3), ("Porto", "closed", 3, 1)]
    with pytest.raises(Exception, match="expected version 2, found 3"):
        await client.write_fact(tenant, "ivo", "location", "home_city", "Faro", expected_version=row.version,
                                evidence_message_ids=["v2:1"])


async def test_runs_from_before_the_projector_still_project_their_vectors_inline(services, client, tenant):
    """The project_vectors activity (consolidations recorded before the projector existed finish
    through it): every pending outbox row gets its vector once; a second run finds nothing."""
    env = ActivityEnvironment()
    acts = make_activities(services)
    await client.append_messages(tenant, "ola", session("p1", "2024-01-01T10:00:00Z", "I live in Porto.",
                                                        "I love jazz."))
    step = StepInput(tenant_id=tenant, subject_id="ola", session_id="p1")
    extraction = await env.run(acts.extract_facts, step)
    plan = await env.run(acts.check_conflicts, ConflictPlanInput(
        **step.model_dump(), extraction_operation_id=extraction.operation_id))
    importance = await env.run(acts.score_importance, step)
    summary = await env.run(acts.summarize_session, step)
    commit = await env.run(acts.commit_consolidation, CommitInput(
        **step.model_dump(), extraction_operation_id=extraction.operation_id, plan_operation_id=plan.operation_id,
        importance_operation_id=importance.operation_id, summary_operation_id=summary.operation_id))
    first = await env.run(acts.project_vectors, ProjectionInput(tenant_id=tenant, subject_id="ola"))
    assert first.vectors_upserted == first.outbox_done == commit.outbox_rows > 0
    again = await env.run(acts.project_vectors, ProjectionInput(tenant_id=tenant, subject_id="ola"))
    assert again.vectors_upserted == again.outbox_done == 0
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM memory_vectors WHERE tenant_id = %s", (tenant,))
        assert (await cur.fetchone())[0] == commit.outbox_rows


async def test_the_extractor_is_shown_the_subjects_current_facts(client, services, tenant):
    """extract_facts reads the current facts and passes them on; a run again after the commit
    (the facts have changed) reuses the recorded extraction, so its commit replays."""
    await client.append_messages(tenant, "lin", session("a", "2024-03-01T09:00:00Z", "I live in Hangzhou."))
    await client.append_messages(tenant, "lin", session("b", "2024-05-01T09:00:00Z", "I moved to Shanghai."))
    extractor = CountingExtractor()
    acts = make_activities(services, extractor)
    env = ActivityEnvironment()

    async def consolidate(session_id: str):
        step = StepInput(tenant_id=tenant, subject_id="lin", session_id=session_id)
        extraction = await env.run(acts.extract_facts, step)
        plan = await env.run(acts.check_conflicts, ConflictPlanInput(
            **step.model_dump(), extraction_operation_id=extraction.operation_id))
        return extraction, await env.run(acts.commit_consolidation, CommitInput(
            **step.model_dump(), extraction_operation_id=extraction.operation_id, plan_operation_id=plan.operation_id,
            importance_operation_id=(await env.run(acts.score_importance, step)).operation_id,
            summary_operation_id=(await env.run(acts.summarize_session, step)).operation_id))

    first, commit_a = await consolidate("a")
    assert extractor.seen == []
    await consolidate("b")
    assert [(f.namespace, f.key, f.value) for f in extractor.seen] == [("location", "home_city", "Hangzhou")]
    assert extractor.seen[0].observed_at == datetime(2024, 3, 1, 9, tzinfo=UTC)
    again, replayed = await consolidate("a")
    assert again.operation_id == first.operation_id and again.reused and replayed == commit_a
    assert extractor.calls == 2


async def test_a_slow_call_keeps_its_claim_while_it_runs(services, tenant):
    """A call that outlasts the claim's lease (a local model under load) renews it: a second
    attempt meanwhile waits for the first one's result instead of calling again."""
    # Seconds, not fractions: at the start of a busy suite a renewal can wait a second for Postgres.
    recorder = OperationRecorder(services.pool, services.keyring, lease=timedelta(seconds=3))
    key = ProviderStepKey("importance", "lin", "slow", "p", "1", "d")
    calls = 0

    async def slow() -> ImportanceResult:
        nonlocal calls
        calls += 1
        await asyncio.sleep(7)  # more than twice the lease
        return ImportanceResult(importance=7)

    async def run():
        return await recorder.run(tenant_id=tenant, subject_id="lin", key=key, request={"session": "slow"},
                                  result_type=ImportanceResult, call=slow)

    first = asyncio.create_task(run())
    await asyncio.sleep(4.5)  # the first attempt's lease would have lapsed by now without renewal
    (a, reused_a), (b, reused_b) = await asyncio.gather(first, run())
    assert calls == 1 and a == b and (reused_a, reused_b) == (False, True)


async def _count(services, tenant: str, query: str) -> int:
    async with tenant_transaction(services.pool, tenant) as conn:
        return (await (await conn.execute(query, (tenant,))).fetchone())[0]


async def _two_facts_session(client, services, tenant, extractor) -> tuple[ConsolidationActivities, StepInput]:
    await client.append_messages(tenant, "lin", session("s1", "2024-03-01T09:00:00Z",
                                                        "I live in Hangzhou.", "I am allergic to peanuts."))
    return make_activities(services, extractor), StepInput(tenant_id=tenant, subject_id="lin", session_id="s1")


async def _commits_embeds_and_runs_again_without_a_second_call(services, tenant, env, run, step, extractor):
    """`run` (either route's one activity) commits both facts and an episode and embeds the run's
    rows; run again (a retry, a restarted worker) it returns the recorded results: no provider
    call, no new row. Returns the first run's outcome."""
    done = await env.run(run, step)
    assert done.refused_reason is None and done.conflict_retries == 0
    assert done.facts_extracted == done.decisions == 2
    assert done.commit is not None and done.commit.facts_written == 2 and done.commit.episode_written
    assert done.projection is not None and done.projection.pending == 0
    vectors = await _count(services, tenant, "SELECT count(*) FROM memory_vectors WHERE tenant_id = %s")
    assert vectors == done.projection.vectors_upserted == done.commit.outbox_rows > 2
    events = await _events(services, tenant)

    again = await env.run(run, step)
    assert extractor.calls == 1 and again.commit == done.commit
    assert again.projection is not None and again.projection.vectors_upserted == 0
    assert await _events(services, tenant) == events
    assert await _count(services, tenant, "SELECT count(*) FROM memory_vectors WHERE tenant_id = %s") == vectors
    return done


async def test_consolidate_in_worker_commits_embeds_and_runs_again_without_a_second_call(client, services, tenant):
    """The in-worker route's one local activity: every step, the run's rows embedded; run again
    (a retry, a restarted worker) it returns the recorded results: no provider call, no new row."""
    extractor = CountingExtractor()
    acts, step = await _two_facts_session(client, services, tenant, extractor)
    env = ActivityEnvironment()

    done = await _commits_embeds_and_runs_again_without_a_second_call(
        services, tenant, env, acts.consolidate_in_worker, step, extractor)
    # The steps' operations are the ones the step-by-step route records: either route finds them.
    extraction = await env.run(acts.extract_facts, step)
    assert extraction.reused and extraction.count == done.facts_extracted


async def test_consolidate_in_worker_re_decides_when_a_live_write_lands_between_plan_and_commit(
        client, services, tenant):
    await client.append_messages(tenant, "lin", session("a", "2024-03-01T09:00:00Z", "I live in Hangzhou."))
    await client.append_messages(tenant, "lin", session("b", "2024-05-01T09:00:00Z", "I moved to Shanghai."))
    acts = make_activities(services)
    env = ActivityEnvironment()
    await env.run(acts.consolidate_in_worker, StepInput(tenant_id=tenant, subject_id="lin", session_id="a"))

    async def live_write_after_the_first_plan(key):
        if key.operation_id.startswith("plan/b/") and key.operation_id.endswith("/0"):
            await client.write_fact(tenant, "lin", "location", "home_city", "Suzhou", expected_version=1,
                                    evidence_message_ids=["a:1"], observed_at=datetime(2024, 6, 1, tzinfo=UTC))

    acts.recorder.after_record = live_write_after_the_first_plan
    done = await env.run(acts.consolidate_in_worker, StepInput(tenant_id=tenant, subject_id="lin", session_id="b"))
    assert done.conflict_retries == 1  # the commit of round 0 was refused; round 1 was decided on version 2
    current = {f.key: f for f in await client.facts(tenant, "lin", as_of=datetime(2024, 7, 1, tzinfo=UTC))}
    assert current["home_city"].value == "Suzhou" and current["home_city"].version == 2
    held = [f for f in await list_facts(services.pool, services.keyring, tenant, "lin", include_history=True,
                                         include_candidates=True) if f.status == "candidate"]
    assert [(f.key, f.value) for f in held] == [("home_city", "Shanghai")]


async def test_consolidate_in_worker_refuses_an_erased_subject_before_any_call(client, services, tenant,
                                                                                running_worker):
    extractor = CountingExtractor()
    acts = make_activities(services, extractor)
    async with running_worker():
        await client.append_messages(tenant, "zoe", session("s1", "2024-03-01T09:00:00Z", "I live in Oslo."))
        await client.erasure_receipt(await client.erase(tenant, "zoe", reason="test"))
    with pytest.raises(ApplicationError) as refused:
        await ActivityEnvironment().run(acts.consolidate_in_worker,
                                        StepInput(tenant_id=tenant, subject_id="zoe", session_id="s1"))
    assert refused.value.type == "SubjectErased" and refused.value.non_retryable and extractor.calls == 0


async def test_consolidate_in_worker_leaves_a_remote_models_steps_to_the_workflow(client, services, tenant):
    """A provider that does not compute in the worker's process: nothing is called or written,
    and the placement it returns sends the workflow down the route of ordinary activities."""
    await client.append_messages(tenant, "lin", session("s1", "2024-03-01T09:00:00Z", "I live in Hangzhou."))
    extractor = CountingExtractor()
    extractor.runs_in_worker = False  # as a remote model's client says
    acts = make_activities(services, extractor)
    done = await ActivityEnvironment().run(acts.consolidate_in_worker,
                                           StepInput(tenant_id=tenant, subject_id="lin", session_id="s1"))
    assert done.commit is None and done.projection is None and extractor.calls == 0
    assert not done.placement.model_steps_in_worker and done.placement.embedder_in_worker
    assert await _events(services, tenant) == 0
    assert await _count(services, tenant, "SELECT count(*) FROM operations WHERE tenant_id = %s") == 0


class SlowRemoteExtractor(CountingExtractor):
    """The offline extractor as a remote model's client says it is: elsewhere, and slow."""

    runs_in_worker = False

    async def extract(self, messages, *, subject_role="user", current_facts=None):
        await asyncio.sleep(1.5)  # a heartbeat (every second here) falls inside the call
        return await super().extract(messages, subject_role=subject_role, current_facts=current_facts)


async def test_consolidate_with_remote_providers_runs_every_step_in_one_heartbeating_activity(
        client, services, tenant):
    """The remote route's one ordinary activity: every step, the run's rows embedded, heartbeats
    that name the step in progress (one heartbeat loop: the steps it runs in line add none of their
    own); run again it returns the recorded results: no provider call, no new row."""
    extractor = SlowRemoteExtractor()
    acts, step = await _two_facts_session(client, services, tenant, extractor)
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(seconds=3))  # a beat every second
    beats: list[dict] = []
    env.on_heartbeat = lambda *details: beats.append(details[0])

    done = await _commits_embeds_and_runs_again_without_a_second_call(
        services, tenant, env, acts.consolidate_with_remote_providers, step, extractor)
    assert not done.placement.model_steps_in_worker and done.placement.embedder_in_worker
    # Beats about 1 s apart over a first run of about 1.5 s (the second, recorded, is quick): a
    # loop per step run in line would send several at once.
    assert any(b.get("step") == "extract_facts" for b in beats) and 1 <= len(beats) <= 4, beats


async def test_consolidation_in_one_activity_gives_up_after_the_last_conflict_round(client, services, tenant):
    """A live write lands between every plan and its commit (observed before the session's move,
    which still supersedes it): each round re-reads and re-decides, and after the last one the
    conflict is permanent (the workflow fails the run on it)."""
    await client.append_messages(tenant, "lin", session("a", "2024-03-01T09:00:00Z", "I live in Hangzhou."))
    await client.append_messages(tenant, "lin", session("b", "2024-05-01T09:00:00Z", "I moved to Shanghai."))
    acts = make_activities(services)
    env = ActivityEnvironment()
    await env.run(acts.consolidate_in_worker, StepInput(tenant_id=tenant, subject_id="lin", session_id="a"))
    plans: list[str] = []

    async def live_write_after_every_plan(key):
        if key.operation_id.startswith("plan/b/"):
            plans.append(key.operation_id)
            await client.write_fact(tenant, "lin", "location", "home_city", f"Suzhou {len(plans)}",
                                    expected_version=len(plans), evidence_message_ids=["a:1"],
                                    observed_at=datetime(2024, 4, len(plans), tzinfo=UTC))

    acts.recorder.after_record = live_write_after_every_plan
    with pytest.raises(ApplicationError) as refused:
        await env.run(acts.consolidate_in_worker, StepInput(tenant_id=tenant, subject_id="lin", session_id="b"))
    assert refused.value.type == "VersionConflict" and refused.value.non_retryable
    assert f"during {MAX_CONFLICT_ROUNDS} commit attempts" in refused.value.message
    assert [p.rsplit("/", 1)[1] for p in plans] == [str(r) for r in range(MAX_CONFLICT_ROUNDS)]
    # Nothing of session b was committed: its episode is not there, the live writes are.
    current = {f.key: f for f in await client.facts(tenant, "lin", as_of=datetime(2024, 7, 1, tzinfo=UTC))}
    assert current["home_city"].value == f"Suzhou {MAX_CONFLICT_ROUNDS}"
    assert await _count(services, tenant, "SELECT count(*) FROM episodes WHERE tenant_id = %s") == 1


class _Meeting:
    """Importance and the summary each return only once both calls have started: made one after
    the other, the first would wait in vain and fail."""

    def __init__(self):
        self.started: set[str] = set()
        self.everyone = asyncio.Event()

    async def arrive(self, who: str) -> None:
        self.started.add(who)
        if self.started == {"score", "summarize"}:
            self.everyone.set()
        await asyncio.wait_for(self.everyone.wait(), timeout=5)


class _MeetingProvider:
    """The scorer or the summarizer it wraps, meeting the other before it answers (as a remote
    model's client: it does not compute in the worker)."""

    def __init__(self, inner, meeting):
        self.inner, self.meeting = inner, meeting
        self.name, self.version, self.runs_in_worker = inner.name, inner.version, False

    async def score(self, messages):
        await self.meeting.arrive("score")
        return await self.inner.score(messages)

    async def summarize(self, messages):
        await self.meeting.arrive("summarize")
        return await self.inner.summarize(messages)


async def test_one_activity_runs_importance_and_the_summary_at_once(client, services, tenant):
    """Both read only what the extraction saw: the two model calls are made at once (a
    consolidation waits for two model calls in a row, not three)."""
    await client.append_messages(tenant, "lin", session("s1", "2024-03-01T09:00:00Z", "I live in Hangzhou."))
    p, meeting = offline_providers(), _Meeting()
    acts = ConsolidationActivities(services.pool, services.keyring, p.extractor, _MeetingProvider(p.scorer, meeting),
                                   _MeetingProvider(p.summarizer, meeting), p.embedder)
    done = await ActivityEnvironment().run(acts.consolidate_with_remote_providers,
                                           StepInput(tenant_id=tenant, subject_id="lin", session_id="s1"))
    assert meeting.started == {"score", "summarize"} and done.commit is not None and done.commit.episode_written
