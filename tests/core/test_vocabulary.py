"""The shared key vocabulary (agent_memory/core/vocabulary.py): what any provider says maps onto one key
per thing, the mapping is idempotent, the rule extractor's output passes through it unchanged, and
a trip whose end nobody could parse still ends."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.testing import ActivityEnvironment

from activities.consolidation import ConsolidationActivities
from agent_memory.core.models import CommitInput, ConflictPlanInput, ExtractedFact, ExtractionResult, StepInput
from agent_memory.core.vocabulary import DEFAULT_TEMPORARY_DAYS, canonical_extraction, canonical_fact
from agent_memory.providers.offline import RuleFactExtractor, offline_providers
from tests.sessions import session
from tools.evaluation.probes import DATA, case_sessions, load_probes

T0 = datetime(2024, 5, 8, 10, 0, tzinfo=UTC)
SAMPLES = DATA


def said(namespace: str, key: str, value: str, **fields) -> ExtractedFact:
    return ExtractedFact(namespace=namespace, key=key, value=value, confidence=0.9, evidence_message_ids=["m1"],
                         observed_at=T0, **fields)


@pytest.mark.parametrize(("given", "canonical"), [
    # location: home versus trip
    (("location", "city", "Lisbon"), ("location", "home_city", "Lisbon")),
    (("location", "home", "杭州"), ("location", "home_city", "杭州")),
    (("profile", "home_city", "Denver"), ("location", "home_city", "Denver")),
    (("Location", "Current City", "Denver"), ("location", "home_city", "Denver")),
    (("travel", "destination", "Tokyo"), ("travel", "trip_city", "Tokyo")),
    (("travel", "trip", "Tokyo"), ("travel", "trip_city", "Tokyo")),
    (("location", "trip_city", "Tokyo"), ("travel", "trip_city", "Tokyo")),  # a trip never lands on home
    # work and profile
    (("work", "job_title", "nurse"), ("work", "job", "nurse")),
    (("work", "occupation", "nurse"), ("work", "job", "nurse")),
    (("work", "company", "Acme"), ("work", "employer", "Acme")),
    (("profile", "full_name", "Lin Wei"), ("profile", "name", "Lin Wei")),
    (("relationship", "marital_status", "Married"), ("relationship", "status", "married")),
    (("relationship", "status", "dating"), ("relationship", "status", "in a relationship")),
    # preferences: object is the key, polarity the value
    (("dislike", "cilantro", "cilantro"), ("preference", "cilantro", "dislike")),
    (("preference", "jazz", "love"), ("preference", "jazz", "like")),
    (("preference", "jazz", "Enjoys"), ("preference", "jazz", "like")),
    (("preference", "hiking", "likes"), ("preference", "hiking", "like")),
    (("preference", "food", "sushi"), ("preference", "sushi", "like")),
    (("dislike", "food", "Olives"), ("preference", "olives", "dislike")),
    (("preference", "咖啡", "喜欢"), ("preference", "咖啡", "like")),
    # diet
    (("diet", "diet", "Vegetarian"), ("diet", "restriction", "vegetarian")),
    (("diet", "restriction", "吃素"), ("diet", "restriction", "vegetarian")),
    (("diet", "spicy_food", "不吃辣"), ("diet", "spicy", "no spicy food")),
    (("diet", "allergy", "peanuts"), ("diet", "allergy_peanuts", "peanuts")),
    (("allergy", "shellfish", "shellfish"), ("diet", "allergy_shellfish", "shellfish")),
    # budgets by canonical purpose
    (("budget", "laptop", "900 euros"), ("budget", "computer", "900 euros")),
    (("budget", "notebook", "900 euros"), ("budget", "computer", "900 euros")),
    (("budget", "电脑", "5000元"), ("budget", "computer", "5000元")),
    (("budget", "monthly_rent", "1200"), ("budget", "housing", "1200")),
    (("budget", "apartment", "1200"), ("budget", "housing", "1200")),
    (("finance", "laptop_budget", "900"), ("budget", "computer", "900")),
    (("travel", "budget", "2000"), ("budget", "trip", "2000")),
    (("budget", "monthly", "300"), ("budget", "general", "300")),
    (("budget", "wedding", "20k"), ("budget", "wedding", "20k")),
    (("budget", "自行车", "2000"), ("budget", "bike", "2000")),
    (("budget", "买车", "10万"), ("budget", "car", "10万")),
    # pets: the name is the key, the species the value
    (("pet", "Mochi", "Cat"), ("pet", "mochi", "cat")),
    (("pet", "dog", "Rex"), ("pet", "rex", "dog")),
    (("pets", "rex", "puppy"), ("pet", "rex", "dog")),
    (("pet", "豆豆", "小狗"), ("pet", "豆豆", "dog")),
    # unknown things are left alone
    (("hobby_gear", "bike_brand", "Trek"), ("hobby_gear", "bike_brand", "Trek")),
    (("work", "salary", "5k"), ("work", "salary", "5k")),
])
def test_aliases_map_to_the_vocabulary_and_the_mapping_is_idempotent(given, canonical):
    fact = canonical_fact(said(*given))
    assert (fact.namespace, fact.key, fact.value) == canonical
    assert canonical_fact(fact) == fact  # idempotent


def test_an_end_keeps_its_operation_and_the_value_it_ends():
    fact = canonical_fact(said("dislike", "coffee", "", operation="end"))
    assert (fact.namespace, fact.key, fact.value, fact.operation) == ("preference", "coffee", "dislike", "end")
    trip_end = canonical_fact(said("travel", "trip_city", "Tokyo", operation="end", permanence="temporary"))
    assert trip_end.valid_until is None  # an end lasts no while: no default end is given to it


def test_a_temporary_fact_without_an_end_gets_the_default_one():
    trip = canonical_fact(said("travel", "destination", "Tokyo"))  # even said as permanent: a trip is temporary
    assert trip.permanence == "temporary" and trip.valid_until == T0 + timedelta(days=DEFAULT_TEMPORARY_DAYS)
    until = T0 + timedelta(days=3)
    dated = canonical_fact(said("travel", "trip_city", "Tokyo", permanence="temporary", valid_until=until))
    assert dated.valid_until == until  # a parsed end is kept
    assert canonical_fact(said("location", "home_city", "Lisbon")).valid_until is None


def test_an_extraction_that_is_canonical_is_returned_as_it_is():
    result = ExtractionResult(provider="p", extractor="x", extractor_version="1",
                              facts=[said("location", "home_city", "Lisbon"), said("preference", "jazz", "like")])
    assert canonical_extraction(result) is result
    mixed = result.model_copy(update={"facts": [*result.facts, said("work", "company", "Acme")]})
    assert [(f.namespace, f.key) for f in canonical_extraction(mixed).facts] == [
        ("location", "home_city"), ("preference", "jazz"), ("work", "employer")]


def test_the_rule_extractors_output_passes_through_unchanged():
    """Over every session of the probe set and the phrasing corpus: the normaliser changes no key
    the rule extractor writes; it only gives a trip it could not date the default end, and writes a
    fixed value in the vocabulary's case ("Vegetarian here." → vegetarian)."""
    cases = load_probes() + load_probes(SAMPLES / "phrasing-dev.jsonl") + load_probes(SAMPLES / "phrasing-test.jsonl")
    extractor = RuleFactExtractor()
    facts = [f for case in cases for s in case_sessions(case)
             for f in asyncio.run(extractor.extract(s.messages)).facts]
    assert len(facts) > 300
    ended = []
    for old in facts:
        new = canonical_fact(old)
        if new.valid_until != old.valid_until:
            assert old.valid_until is None and old.permanence == "temporary", old
            ended.append(old)
        if new.value != old.value:
            assert new.value == old.value.lower() and (old.namespace, old.key) == ("diet", "restriction"), old
        assert new.model_copy(update={"valid_until": old.valid_until, "value": old.value}) == old
    assert ended  # some trips are said without an end ("I'm flying to Tokyo.")


async def test_a_trip_whose_end_cannot_be_parsed_still_ends(client, services, tenant):
    """A trip whose end the extractor cannot parse still ends. Through the real
    activities: the trip holds after it was said, and no longer DEFAULT_TEMPORARY_DAYS later."""
    p = offline_providers()
    acts = ConsolidationActivities(services.pool, services.keyring, p.extractor, p.scorer, p.summarizer, p.embedder)
    env = ActivityEnvironment()
    await client.append_messages(tenant, "ana", session("t1", "2024-05-08T10:00:00Z", "I'm flying to Tokyo."))
    step = StepInput(tenant_id=tenant, subject_id="ana", session_id="t1")
    extraction = await env.run(acts.extract_facts, step)
    plan = await env.run(acts.check_conflicts, ConflictPlanInput(**step.model_dump(),
                                                                 extraction_operation_id=extraction.operation_id))
    importance = await env.run(acts.score_importance, step)
    summary = await env.run(acts.summarize_session, step)
    await env.run(acts.commit_consolidation, CommitInput(
        **step.model_dump(), extraction_operation_id=extraction.operation_id, plan_operation_id=plan.operation_id,
        importance_operation_id=importance.operation_id, summary_operation_id=summary.operation_id))

    async def trip(days: int) -> str | None:
        facts = await client.facts(tenant, "ana", as_of=T0 + timedelta(days=days))
        return next((f.value for f in facts if (f.namespace, f.key) == ("travel", "trip_city")), None)

    assert await trip(1) == "Tokyo"
    assert await trip(DEFAULT_TEMPORARY_DAYS + 1) is None
