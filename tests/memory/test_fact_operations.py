"""Fact operations beyond replace: an explicit "end" closes a fact
with no new value (a negation, "no longer", a pet that died), a "correct" voids the mistaken
value retroactively, and neither is mistaken for a confirmation. Driven through the real conflict
checker and commit on the embedded Postgres, with extractions written out (the extractor is
tested on its own)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent_memory.core.models import ConflictPlan, ExtractedFact, ExtractionResult, ImportanceResult, SummaryResult
from agent_memory.core.operation_keys import CommitKey
from agent_memory.memory.conflicts import decide
from agent_memory.memory.memory_store import (
    commit_consolidation,
    current_candidates,
    current_facts,
    ended_fact_versions,
)
from agent_memory.projection.rebuild import rebuild_subject
from agent_memory.store.db import tenant_transaction

SUBJECT = "noa"
T0 = datetime(2024, 3, 1, 9, tzinfo=UTC)


def day(n: int) -> datetime:
    return T0 + timedelta(days=n)


def said(namespace: str, key: str, value: str, at: datetime, *, operation: str = "assert",
         claim_type: str = "explicit") -> ExtractedFact:
    return ExtractedFact(namespace=namespace, key=key, value=value, operation=operation, claim_type=claim_type,
                         confidence=0.9, evidence_message_ids=[f"m-{at:%j%H%M}"], observed_at=at)


async def consolidate(services, tenant: str, session_id: str, *facts: ExtractedFact):
    """check_conflicts + commit_consolidation, as the workflow's activities run them."""
    async with tenant_transaction(services.pool, tenant) as conn:
        current = await current_facts(conn, tenant, SUBJECT)
        held = await current_candidates(conn, tenant, SUBJECT)
        ended = await ended_fact_versions(conn, tenant, SUBJECT)
    extraction = ExtractionResult(provider="test", extractor="written-out", extractor_version="1", facts=list(facts))
    plan = ConflictPlan(decisions=decide(extraction.facts, current, held, ended))
    request = {"session": session_id, "facts": [f.model_dump(mode="json") for f in facts]}
    await commit_consolidation(
        services.pool, services.keyring, tenant_id=tenant, subject_id=SUBJECT, session_id=session_id,
        key=CommitKey.for_request(session_id, request), request=request, extraction=extraction, plan=plan,
        importance=ImportanceResult(importance=3), summary=SummaryResult(sentences=[], token_count=0),
        happened_at=facts[0].observed_at)
    return plan


async def values(client, tenant: str, *, as_of: datetime | None = None) -> dict[str, str]:
    return {f"{f.namespace}/{f.key}": f.value for f in await client.facts(tenant, SUBJECT, as_of=as_of)}


async def test_a_negation_ends_the_fact_and_a_later_value_starts_it_again(services, client, tenant):
    await consolidate(services, tenant, "s1", said("diet", "restriction", "vegetarian", day(0)))
    plan = await consolidate(services, tenant, "s2", said("diet", "restriction", "vegetarian", day(10),
                                                          operation="end"))
    assert [d.action for d in plan.decisions] == ["end"]  # not a confirmation of the value it ends
    assert "diet/restriction" not in await values(client, tenant)
    assert (await values(client, tenant, as_of=day(5)))["diet/restriction"] == "vegetarian"
    [closed] = [f for f in await client.facts(tenant, SUBJECT, history=True) if f.key == "restriction"]
    assert closed.status == "closed" and closed.valid_to == day(10) and closed.version == 2
    # A later value of the key expects the ended fact's version: no conflict, a new interval.
    await consolidate(services, tenant, "s3", said("diet", "restriction", "pescatarian", day(20)))
    assert (await values(client, tenant))["diet/restriction"] == "pescatarian"
    history = sorted((f.value, f.status, f.version) for f in await client.facts(tenant, SUBJECT, history=True))
    assert history == [("pescatarian", "active", 3), ("vegetarian", "closed", 3)]


async def test_a_pet_that_died_is_no_longer_current_and_an_end_of_another_value_changes_nothing(
        services, client, tenant):
    await consolidate(services, tenant, "s1", said("pet", "rex", "dog", day(0)),
                      said("location", "home_city", "Berlin", day(0)))
    plan = await consolidate(services, tenant, "s2", said("pet", "rex", "", day(3), operation="end"),
                             said("location", "home_city", "Paris", day(3), operation="end"))
    assert [(d.action, d.key) for d in plan.decisions] == [("end", "rex")]  # not in Paris: nothing ended
    assert await values(client, tenant) == {"location/home_city": "Berlin"}


async def test_an_inferred_end_changes_nothing(services, client, tenant):
    await consolidate(services, tenant, "s1", said("work", "employer", "Acme", day(0)))
    plan = await consolidate(services, tenant, "s2", said("work", "employer", "Acme", day(2), operation="end",
                                                          claim_type="inference"))
    assert plan.decisions == []
    assert await values(client, tenant) == {"work/employer": "Acme"}


async def test_a_correction_voids_the_mistaken_value_retroactively(services, client, tenant):
    await consolidate(services, tenant, "s1", said("location", "home_city", "Lyon", day(0)))
    plan = await consolidate(services, tenant, "s2", said("location", "home_city", "Lille", day(4),
                                                          operation="correct"))
    assert [d.action for d in plan.decisions] == ["correct"]
    assert (await values(client, tenant))["location/home_city"] == "Lille"
    # Lyon was never true: a read as of any day since the first session says Lille.
    for n in (0, 1, 3, 5):
        assert (await values(client, tenant, as_of=day(n) + timedelta(hours=1)))["location/home_city"] == "Lille"
    history = {f.value: f for f in await client.facts(tenant, SUBJECT, history=True)}
    assert history["Lyon"].status == "voided" and history["Lyon"].valid_to == history["Lyon"].valid_from
    assert history["Lille"].valid_from == day(0) and history["Lille"].version == 2
    # The write path and the replay agree on ends and corrections (one apply_event).
    report = await rebuild_subject(services.pool, services.keyring, tenant, SUBJECT)
    assert report.equal and report.events >= 2


async def test_a_correction_of_the_key_voids_it_and_the_right_key_holds_from_the_same_start(services, client, tenant):
    # "it's Mochi, not Mocha": the pet was never called Mocha.
    await consolidate(services, tenant, "s1", said("pet", "mocha", "cat", day(0)))
    plan = await consolidate(services, tenant, "s2", said("pet", "mocha", "", day(6), operation="correct"),
                             said("pet", "mochi", "cat", day(0)))
    assert [(d.action, d.key, d.voided) for d in plan.decisions] == [("end", "mocha", True), ("create", "mochi", False)]
    assert {k: v for k, v in (await values(client, tenant)).items() if k.startswith("pet/")} == {"pet/mochi": "cat"}
    for n in (0, 2, 5):  # no as-of read ever says Mocha
        assert "pet/mocha" not in await values(client, tenant, as_of=day(n) + timedelta(hours=1))
    history = {f.key: f for f in await client.facts(tenant, SUBJECT, history=True) if f.namespace == "pet"}
    assert history["mocha"].status == "voided" and history["mocha"].valid_to == history["mocha"].valid_from
    report = await rebuild_subject(services.pool, services.keyring, tenant, SUBJECT)
    assert report.equal


def test_a_void_with_nothing_current_asserts_nothing():
    assert decide([said("pet", "mocha", "", day(1), operation="correct")], {}) == []


def test_preferences_are_told_apart_by_their_object_not_their_polarity():
    """preference/<object> holds like|dislike: a new liked object is a new fact, a change of
    polarity supersedes the same object's, a similar object name is the same preference."""
    from agent_memory.memory.conflicts import CurrentFact

    current = {("preference", "jazz"): CurrentFact("preference", "jazz", "like", 1, "explicit", 0.9, 1, day(0))}
    hiking, jazz_off, jazz_music = (said("preference", "hiking", "like", day(1)),
                                    said("preference", "jazz", "dislike", day(2)),
                                    said("preference", "jazz_music", "like", day(3)))
    assert [(d.action, d.key) for d in decide([hiking], current)] == [("create", "hiking")]
    assert [(d.action, d.key) for d in decide([jazz_off], current)] == [("supersede", "jazz")]
    assert [(d.action, d.key) for d in decide([jazz_music], current)] == [("confirm", "jazz")]
    no_more = said("preference", "jazz_music", "", day(4), operation="end")
    assert [(d.action, d.key) for d in decide([no_more], current)] == [("end", "jazz")]


async def test_one_budget_said_under_a_general_and_a_specific_key_stays_one_budget(services, client, tenant):
    # Key fragmentation: "our wedding budget is 30k" … "budget's 35k now" changes the one budget.
    await consolidate(services, tenant, "s1", said("budget", "wedding", "30k", day(0)))
    plan = await consolidate(services, tenant, "s2", said("budget", "general", "35k", day(30)))
    assert [(d.action, d.key) for d in plan.decisions] == [("supersede", "wedding")]
    assert {k: v for k, v in (await values(client, tenant)).items() if k.startswith("budget/")} == {"budget/wedding": "35k"}


def test_the_same_amount_under_another_purpose_is_the_budget_restated():
    from agent_memory.memory.conflicts import CurrentFact

    current = {("budget", "housing"): CurrentFact("budget", "housing", "三千", 1, "explicit", observed_at=day(0))}
    assert [(d.action, d.key) for d in decide([said("budget", "house", "三千", day(14))], current)] == [("confirm", "housing")]
    assert [(d.action, d.key) for d in decide([said("budget", "house", "四千", day(14))], current)] == [("create", "house")]


def test_a_general_budget_is_not_folded_into_one_of_several_specific_budgets():
    from agent_memory.memory.conflicts import CurrentFact

    current = {("budget", k): CurrentFact("budget", k, v, 1, "explicit", observed_at=day(0))
               for k, v in (("computer", "1500 euros"), ("trip", "800 euros"))}
    (decision,) = decide([said("budget", "general", "3000 euros", day(5))], current)
    assert (decision.action, decision.key) == ("create", "general")


async def test_a_session_consolidated_again_cites_each_message_once(services, client, tenant):
    """The same session consolidated after more messages: its earlier statement is confirmed by
    the new message only, not by itself a second time."""
    def home(*evidence: str) -> ExtractedFact:
        return ExtractedFact(namespace="location", key="home_city", value="Hangzhou", confidence=0.9,
                             evidence_message_ids=list(evidence), observed_at=day(0))

    await consolidate(services, tenant, "s1", home("s1:1"))
    plan = await consolidate(services, tenant, "s1", home("s1:1", "s1:3"))
    assert [d.action for d in plan.decisions] == ["confirm"]
    await consolidate(services, tenant, "s1", home("s1:1", "s1:3", "s1:3"))
    [fact] = await client.facts(tenant, SUBJECT)
    assert fact.value == "Hangzhou" and fact.evidence_message_ids == ["s1:1", "s1:3"]
    assert (await rebuild_subject(services.pool, services.keyring, tenant, SUBJECT)).equal


async def test_last_confirmed_is_the_latest_restatement_whatever_order_sessions_commit_in(services, client, tenant):
    """A restatement moves the fact's last confirmation forward; one from an earlier session
    consolidated later leaves it where it is. A correction's value was confirmed when the
    correction was said, though it holds from the voided value's start. The replay agrees."""
    await consolidate(services, tenant, "s1", said("location", "home_city", "Hangzhou", day(0)),
                      said("work", "employer", "Acme", day(0)))
    await consolidate(services, tenant, "s3", said("location", "home_city", "Hangzhou", day(10)))
    plan = await consolidate(services, tenant, "s2", said("location", "home_city", "Hangzhou", day(5)))
    assert [d.action for d in plan.decisions] == ["confirm"]
    await consolidate(services, tenant, "s4", said("work", "employer", "Initech", day(7), operation="correct"))
    facts = {f.key: f for f in await client.facts(tenant, SUBJECT)}
    assert (facts["home_city"].valid_from, facts["home_city"].last_confirmed_at) == (day(0), day(10))
    assert (facts["employer"].valid_from, facts["employer"].last_confirmed_at) == (day(0), day(7))
    assert {f.extracted_by for f in facts.values()} == {"written-out/1"}  # the extraction's name and version
    assert (await rebuild_subject(services.pool, services.keyring, tenant, SUBJECT)).equal
