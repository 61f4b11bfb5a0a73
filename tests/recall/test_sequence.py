"""Questions about a sequence: "after"/"before" (and 之后/之前) bring in the notes next in time to the
best hits, though they share no word with the question; other questions do not."""

from __future__ import annotations

import pytest

from agent_memory.core.models import ConflictPlan, ExtractionResult, ImportanceResult, Observation, SummaryResult
from agent_memory.core.operation_keys import CommitKey
from agent_memory.memory.memory_store import commit_consolidation
from agent_memory.providers.offline import offline_providers
from agent_memory.recall.context import assemble_context
from agent_memory.recall.recall_policy import DEFAULT_POLICY
from agent_memory.recall.sequence import NEIGHBOURS, sequence_direction
from tests.sessions import session


@pytest.mark.parametrize(("query", "direction"), [
    ("What did Melanie do after the race?", "after"),
    ("What happened next?", "after"),
    ("Where did they go later that week?", "after"),
    ("What did she read before the trip?", "before"),
    ("Had he been there previously?", "before"),
    ("露营之后她做了什么？", "after"),
    ("搬家以前他住在哪里？", "before"),
    ("What did Melanie paint?", None),
    ("Did she go before or after the wedding?", None),  # both sides: neither is favoured
    ("Which afternoon was it?", None),  # a word that only starts like a cue
])
def test_the_direction_of_a_sequence_question(query, direction):
    assert sequence_direction(query) == direction


# One session in turn order: the road trip, then what came after it, then unrelated turns.
TURNS = ["We packed the car for the coast.", "The road trip to the coast took two days.",
         "Back home I signed up for a pottery class.", "My first bowl cracked in the kiln.",
         "Our neighbour repainted his fence.", "The library moved to a new building."]


async def _commit_turns(client, services, tenant) -> list[str]:
    s = session("s1", "2024-05-01T09:00:00Z", *TURNS)
    await client.append_messages(tenant, "lin", s)
    extraction = ExtractionResult(provider="test", extractor="written-out", extractor_version="1", facts=[])
    summary = SummaryResult(sentences=[], token_count=0, observations=[
        Observation(text=f"Lin: {m.content}", source_message_ids=[m.message_id], happened_at=m.created_at)
        for m in s.messages])
    request = {"session": "s1"}
    await commit_consolidation(
        services.pool, services.keyring, tenant_id=tenant, subject_id="lin", session_id="s1",
        key=CommitKey.for_request("s1", request), request=request, extraction=extraction,
        plan=ConflictPlan(decisions=[]), importance=ImportanceResult(importance=5), summary=summary,
        happened_at=s.messages[-1].created_at)
    return [m.message_id for m in s.messages]


async def test_after_and_before_bring_in_the_turns_next_to_a_hit(client, services, tenant):
    ids = await _commit_turns(client, services, tenant)
    embedder = offline_providers().embedder

    async def cited(question: str) -> set[str]:
        context = await assemble_context(services.pool, services.keyring, embedder, tenant, "lin", question)
        return {m for item in context.items for m in item.cited_message_ids}

    plain = await cited("How long was the road trip?")
    assert ids[1] in plain and ids[2] not in plain and ids[3] not in plain
    after = await cited("What did she start after the road trip?")
    assert {ids[1], ids[2], ids[3]} <= after and ids[4] not in after  # two turns on, not three
    assert NEIGHBOURS == 2
    before = await cited("What did she do before the road trip?")
    assert {ids[0], ids[1]} <= before and ids[2] not in before


async def test_a_minimum_relevance_leaves_weak_matches_out(client, services, tenant):
    ids = await _commit_turns(client, services, tenant)
    embedder = offline_providers().embedder
    question = "How long was the road trip to the coast?"
    loose = await assemble_context(services.pool, services.keyring, embedder, tenant, "lin", question)
    relevances = sorted((item.relevance or 0.0 for item in loose.episodic_items), reverse=True)
    assert len(relevances) >= 2 and relevances[0] > relevances[1]
    floor = (relevances[0] + relevances[1]) / 2  # between the best match and the next
    strict = await assemble_context(services.pool, services.keyring, embedder, tenant, "lin", question,
                                    policy=DEFAULT_POLICY.model_copy(update={"min_relevance": floor}))
    assert [item.memory_id for item in strict.episodic_items] == [loose.episodic_items[0].memory_id]
    assert ids[1] in strict.episodic_items[0].cited_message_ids
