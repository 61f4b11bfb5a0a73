"""The profile block: facts said together (one message, one namespace, one wording around their
objects) share a line, so a list said once costs the prompt one line and one citation. No server."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from agent_memory.core.models import FactRow
from agent_memory.recall.context import PROFILE_HEADER, block_tokens, pack_tiers, profile_items, render_block
from agent_memory.recall.recall_policy import DEFAULT_POLICY

T = datetime(2024, 2, 7, tzinfo=UTC)


def fact(namespace: str, key: str, value: str, *evidence: str, at: datetime = T) -> FactRow:
    return FactRow(fact_id=str(uuid.uuid4()), memory_id=str(uuid.uuid4()), tenant_id="t", subject_id="s", namespace=namespace,
                   key=key, value=value, version=1, interval_version=1, valid_from=at, valid_to=None, recorded_at=at,
                   confidence=0.9, claim_type="explicit", permanence="permanent", source_kind="consolidation",
                   status="current", evidence_message_ids=list(evidence), task_session_id=None, metadata={},
                   last_confirmed_at=at, extracted_by="rule-extractor/10")


def profile_block(facts: list[FactRow], query: str = "what does she like?", policy=DEFAULT_POLICY) -> str:
    chosen = pack_tiers(profile_items(facts, query, policy), policy)
    return render_block(PROFILE_HEADER, [i for i in chosen if i.tier == "profile"])


def test_facts_said_together_share_one_line_and_one_citation():
    facts = [fact("preference", "coconut_milk", "like", "m3"), fact("location", "home_city", "Oslo", "m1"),
             fact("preference", "chocolate", "like", "m3"), fact("diet", "allergy_peanuts", "peanuts", "m2"),
             fact("diet", "allergy_shellfish", "shellfish", "m2"), fact("pet", "rex", "dog", "m4"),
             fact("pet", "luna", "cat", "m4")]
    lines = profile_block(facts).splitlines()[1:]
    assert "- is allergic to peanuts, shellfish (diet: food to avoid) (since 7 February 2024) [m2]" in lines
    assert "- likes chocolate, coconut milk (since 7 February 2024) [m3]" in lines
    # A pet's name is its key: two pets said together keep a line each.
    assert "- has a pet Luna: cat (since 7 February 2024) [m4]" in lines
    assert "- has a pet Rex: dog (since 7 February 2024) [m4]" in lines
    assert len(lines) == 5


def test_facts_from_other_messages_or_times_keep_their_own_lines():
    later = datetime(2024, 3, 1, tzinfo=UTC)
    facts = [fact("preference", "tea", "like", "m1"), fact("preference", "coffee", "like", "m2"),
             fact("preference", "jazz", "like", "m1", at=later)]
    lines = profile_block(facts).splitlines()[1:]
    assert len(lines) == 3 and all(line.count("likes") == 1 for line in lines)


def test_a_shared_line_costs_less_than_its_facts_apart_and_stays_within_the_budget():
    facts = [fact("preference", f"flavour_{n}", "like", "m1") for n in range(40)]
    together = profile_block(facts)
    apart = profile_block([fact("preference", f"flavour_{n}", "like", f"m{n}") for n in range(40)])
    assert together.count("\n") == 1 and together.count("flavour") == 40
    assert block_tokens(together) < block_tokens(apart)
    small = DEFAULT_POLICY.model_copy(update={"profile_tokens": 60})
    assert block_tokens(profile_block(facts, policy=small)) <= 60
