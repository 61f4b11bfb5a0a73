"""Why this item: an explained context gives each item the routes that found it with their ranks
and the terms of its score, and lists the best candidates below the budget, readable by the key
and clean of the leak filter; an explained recall gives each fact and episode its rank, vector rank,
similarity and staleness term. Unexplained reads carry neither."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from agent_memory.core.models import Session
from agent_memory.recall.context import LEXICAL_WEIGHT, RRF_K, VECTOR_WEIGHT, AssembledContext
from agent_memory.recall.recall_policy import DEFAULT_POLICY, STALE_WEIGHT
from agent_memory.store.db import acting_as, tenant_transaction
from tests.sessions import commit_notes, session

SUBJECT = "lin"
QUERY = "canoe at the lake"
# No access term: two reads of the same context score alike whenever the access statistics flush.
STEADY = DEFAULT_POLICY.model_copy(update={"access_weight": 0.0})
AS_OF = datetime(2024, 6, 1, tzinfo=UTC)  # and no clock: the time decay the same in both


def _private(s: Session, agent: str) -> Session:
    return s.model_copy(update={"messages": [m.model_copy(update={"agent_id": agent, "private": True})
                                             for m in s.messages]})


SHARED = session("shared", "2024-04-01T09:00:00Z", "I live in Oslo.", "I repaired the canoe at the lake.",
                 ("assistant", "Did the canoe float again?"), "We paddled the canoe across the lake to the island.",
                 "The canoe needs a new coat of paint before summer.")
SUPPORT = _private(session("support", "2024-04-02T09:00:00Z", "The canoe club locker code at the lake is 4711.",
                           "My canoe paddle broke at the lake yesterday.", ("assistant", "Shall I order a paddle?"),
                           "Order a canoe paddle for the lake, please."), "support")


async def stock(client, running_worker, tenant: str) -> None:
    """The shared session and one private to the support agent, consolidated and embedded."""
    async with running_worker():
        for s in (SHARED, SUPPORT):
            await client.append_messages(tenant, SUBJECT, s)
            outcome = await client.consolidation_result(await client.end_session(tenant, SUBJECT, s.session_id))
            assert outcome.refused_reason is None
        await client.admin.wait_for_projection(tenant, SUBJECT)


def _cited(items) -> set[str]:
    return {m for i in items for m in i.cited_message_ids}


async def _mark(services, tenant: str, kind: str, memory_id: str, fact_id: str | None = None) -> None:
    """A review mark in force on a memory, as the review's projection writes it."""
    async with tenant_transaction(services.pool, tenant) as conn:
        await conn.execute(
            "INSERT INTO stale_marks (tenant_id, subject_id, memory_id, marked_memory_id, marked_kind, fact_id, "
            "reason, state, marked_at, version, operation_id) VALUES (%s, %s, %s, %s, %s, %s, %s, 'open', now(), 1, "
            "%s)", (tenant, SUBJECT, str(uuid.uuid4()), memory_id, kind, fact_id,
                    "contradicted" if kind == "fact" else "duplicate", f"test-{uuid.uuid4()}"))


def _without_explanation(context: AssembledContext) -> dict:
    data = context.model_dump(mode="json")
    data.pop("below_budget")
    for item in data["items"]:
        item.pop("explanation")
    return data


async def test_an_explained_context_names_the_routes_and_every_term_of_each_score(client, services, tenant,
                                                                                   running_worker):
    await stock(client, running_worker, tenant)
    explained = await client.context(tenant, SUBJECT, QUERY, policy=STEADY, as_of=AS_OF, explain=True)
    plain = await client.context(tenant, SUBJECT, QUERY, policy=STEADY, as_of=AS_OF)

    # Unexplained, the response has neither key; explained, the rest of it is the same.
    assert "below_budget" not in plain.model_dump(mode="json")
    assert all("explanation" not in i for i in plain.model_dump(mode="json")["items"])
    assert _without_explanation(explained) == plain.model_dump(mode="json")

    episodic = explained.episodic_items
    assert episodic and explained.profile_items
    for item in explained.items:
        x = item.explanation
        assert x is not None and x.admitted and x.not_admitted is None and x.score == item.score
    for item in episodic:
        x = item.explanation
        assert x.tier == "episodic" and x.relevance == item.relevance
        # The product of the terms, in the order the scoring applies them, is the item's score.
        product = x.relevance * x.time_decay * x.importance_term * x.staleness_term * x.access_term
        assert product == pytest.approx(item.score, rel=1e-12)
        assert x.access_term == 1.0 and x.staleness_term == 1.0
        for name, hit in x.routes.items():
            weight = {"lexical": LEXICAL_WEIGHT, "vector": VECTOR_WEIGHT}.get(name, 0.3)
            assert hit.rank >= 1 and hit.score == pytest.approx(weight / (RRF_K + hit.rank))
        assert x.fused == pytest.approx(sum(hit.score for hit in x.routes.values()))
    # The best note is found by the words and by the meaning: both routes, with ranks, BM25 and similarity.
    best = episodic[0].explanation
    assert best.routes["lexical"].rank == 1 and best.routes["lexical"].bm25 > 0
    assert best.routes["vector"].rank >= 1 and 0 < best.routes["vector"].similarity <= 1
    assert best.relevance == pytest.approx(min(1.0, best.fused / ((LEXICAL_WEIGHT + VECTOR_WEIGHT) / (RRF_K + 1))))
    # The home fact: its rank in the profile and the query words it shares (none).
    [home] = [i for i in explained.profile_items if i.content == "Oslo"]
    assert home.explanation.profile.shared_terms == [] and home.explanation.profile.rank >= 1
    assert home.explanation.routes == {} and home.explanation.staleness_term == 1.0
    assert explained.below_budget == [] or all(not i.explanation.admitted for i in explained.below_budget)


async def test_a_marked_note_and_a_marked_fact_weigh_stale_weight(client, services, tenant, running_worker):
    await stock(client, running_worker, tenant)
    before = await client.context(tenant, SUBJECT, QUERY, policy=STEADY, explain=True)
    note = before.episodic_items[0]
    [home] = [f for f in await client.facts(tenant, SUBJECT) if f.key == "home_city"]
    await _mark(services, tenant, "observation", note.memory_id)
    await _mark(services, tenant, "fact", home.memory_id, home.fact_id)

    after = await client.context(tenant, SUBJECT, QUERY, policy=STEADY, explain=True)
    [marked] = [i for i in [*after.items, *after.below_budget] if i.memory_id == note.memory_id]
    assert marked.explanation.staleness_term == STALE_WEIGHT
    assert marked.score == pytest.approx(note.score * STALE_WEIGHT)
    [fact] = [i for i in after.profile_items if i.memory_id == home.memory_id]
    assert fact.explanation.staleness_term == STALE_WEIGHT
    assert all(i.explanation.staleness_term == 1.0 for i in after.episodic_items if i.memory_id != note.memory_id)

    recalled = await client.recall(tenant, SUBJECT, QUERY, explain=True)
    why = {x.memory_id: x for x in recalled.explanations}
    assert why[home.memory_id].staleness_term == STALE_WEIGHT and why[home.memory_id].kind == "fact"


async def test_below_budget_lists_only_what_the_key_may_read(client, services, tenant, running_worker):
    await stock(client, running_worker, tenant)
    small = STEADY.scaled(120)
    # A tenant-wide reader: the support agent's private notes are candidates like any other.
    whole = await client.context(tenant, SUBJECT, QUERY, policy=small, explain=True)
    assert whole.below_budget, "a small budget leaves candidates out"
    assert {m for m in _cited([*whole.items, *whole.below_budget]) if m.startswith("support:")}
    admitted = {i.memory_id for i in whole.items}
    for item in whole.below_budget:
        assert item.memory_id not in admitted
        assert not item.explanation.admitted and item.explanation.not_admitted in ("budget", "repeats",
                                                                                   "max_episodes")
    assert [i.explanation.score for i in whole.below_budget if i.tier == "episodic"] == sorted(
        (i.explanation.score for i in whole.below_budget if i.tier == "episodic"), reverse=True)

    # A key limited to another agent: nothing of the private session, admitted or below the budget.
    with acting_as(agent_id="travel"):
        limited = await client.context(tenant, SUBJECT, QUERY, policy=small, explain=True)
    assert limited.below_budget
    assert not {m for m in _cited([*limited.items, *limited.below_budget]) if m.startswith("support:")}


async def test_an_explained_recall_ranks_each_fact_and_episode(client, services, tenant, running_worker):
    await stock(client, running_worker, tenant)
    plain = await client.recall(tenant, SUBJECT, QUERY)
    assert "explanations" not in plain.model_dump(mode="json")
    recalled = await client.recall(tenant, SUBJECT, QUERY, explain=True)
    assert recalled.episodes and recalled.facts
    why = recalled.explanations
    assert [x.memory_id for x in why] == [*(f.memory_id for f in recalled.facts),
                                          *(e.memory_id for e in recalled.episodes)]
    episodes = [x for x in why if x.kind == "episode"]
    assert [x.rank for x in episodes] == list(range(1, len(episodes) + 1))
    for x, episode in zip(episodes, recalled.episodes, strict=True):
        assert x.similarity == episode.score and x.vector_rank >= x.rank and x.staleness_term == 1.0
    assert all(x.similarity is None and x.staleness_term == 1.0 for x in why if x.kind == "fact")


async def test_below_budget_passes_the_leak_filter(client, services, tenant):
    """A note naming another subject of the tenant, which its messages never name, is dropped by
    the leak filter when packed, and never listed below the budget either."""
    other = "kai-7fd2"
    said = ("I lent the canoe to a friend at the lake.", "The canoe at the lake needs new oars.",
            "We launched the canoe at the lake at dawn.", "The lake was calm, the canoe fast.")
    await commit_notes(client, services, tenant, other, session("kai", "2024-04-01T09:00:00Z", "Hello."), AS_OF)
    await commit_notes(client, services, tenant, SUBJECT, session("leaky", "2024-04-05T09:00:00Z", *said), AS_OF,
                       notes=[said[0].replace("a friend", other), *said[1:]])

    roomy = await client.context(tenant, SUBJECT, QUERY, policy=STEADY, as_of=AS_OF, explain=True)
    assert roomy.leak_filter_dropped == 1  # the note is a candidate, and packed, the filter drops it
    for budget in (80, 120, 200):
        small = await client.context(tenant, SUBJECT, QUERY, policy=STEADY.scaled(budget), as_of=AS_OF, explain=True)
        shown = [*small.items, *small.below_budget]
        assert not [i for i in shown if other in i.content], budget
        assert not {i.memory_id for i in small.items} & {i.memory_id for i in small.below_budget}
