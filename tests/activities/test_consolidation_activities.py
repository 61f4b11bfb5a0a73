"""Consolidation activities under ActivityEnvironment, against the embedded Postgres."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.consolidation import ConsolidationActivities
from agent_memory.core.models import CommitInput, ConflictPlanInput, ImportanceResult, ProjectionInput, StepInput
from agent_memory.core.operation_keys import ProviderStepKey
from agent_memory.memory.memory_store import list_facts
from agent_memory.memory.operations import OperationRecorder
from agent_memory.providers.offline import RuleFactExtractor, offline_providers
from agent_memory.store.db import tenant_transaction
from agent_memory.telemetry.metrics import REGISTRY, tenant_label
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
    # Four messages: a shorter session gets no episode (the substance gate), and a's is counted below.
    # The assistant's questions are no notes, and the user's request states no fact.
    await client.append_messages(tenant, "lin", session("a", "2024-03-01T09:00:00Z", "I live in Hangzhou.",
                                                        ("assistant", "How long have you lived there?"),
                                                        "Can you recommend a quiet tea house?",
                                                        ("assistant", "Do you prefer green tea or oolong?")))
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

    committed = {"name": "agent_memory_consolidations_total", "labels": {"tenant": tenant_label(tenant),
                                                                          "outcome": "committed"}}
    before = REGISTRY.get_sample_value(**committed) or 0.0
    first = await env.run(acts.commit_consolidation, await commit_input("a"))
    events = await _events(services, tenant)
    replayed = await env.run(acts.commit_consolidation, await commit_input("a"))
    # fact + episode + observation + two entities (the speaker, Hangzhou) + the edge lin lives in
    # Hangzhou, once
    assert first.entities_noted == 2 and first.relations_noted == 1
    assert replayed == first and await _events(services, tenant) == events == 6
    # Counted once: the retried commit found its outcome recorded.
    assert REGISTRY.get_sample_value(**committed) == before + 1

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
