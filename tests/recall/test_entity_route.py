"""The entity route: a question that names an entity (by name or alias) brings in the notes of the
messages that mention it, though their text never names it; whole words only; the same context
on every run."""

from __future__ import annotations

import pytest

from agent_memory.core.models import (
    CommitOutcome,
    ConflictPlan,
    ExtractedEntity,
    ExtractedRelation,
    ExtractionResult,
    ImportanceResult,
    Observation,
    Session,
    SummaryResult,
)
from agent_memory.core.operation_keys import CommitKey
from agent_memory.memory.memory_store import commit_consolidation
from agent_memory.providers.offline import offline_providers
from agent_memory.recall.context import assemble_context
from agent_memory.recall.entity_route import entity_hits, follows, named_in
from agent_memory.store.db import tenant_transaction
from tests.sessions import session


@pytest.mark.parametrize(("query", "names", "named"), [
    ("What did Caroline paint?", ["Caroline"], True),
    ("what did caroline paint", ["Caroline"], True),
    ("Did Mel call?", ["Melanie", "Mel"], True),
    ("Is the melody nice?", ["Mel"], False),  # a word that only starts with the name
    ("Did Al go?", ["Al"], False),  # Latin names shorter than three letters link too much
    ("妈妈在做什么？", ["我妈", "妈妈"], True),
    ("爸爸在做什么？", ["妈妈"], False),
])
def test_a_name_counts_as_a_whole_word(query, names, named):
    assert named_in(query, names) is named


async def commit_notes(services, tenant: str, s: Session, extraction: ExtractionResult) -> CommitOutcome:
    """Commit session `s` of subject "lin" with a note per message and the extraction given."""
    summary = SummaryResult(sentences=[], token_count=0, observations=[
        Observation(text=m.content, source_message_ids=[m.message_id], happened_at=m.created_at)
        for m in s.messages])
    request = {"session": s.session_id}
    return await commit_consolidation(
        services.pool, services.keyring, tenant_id=tenant, subject_id="lin", session_id=s.session_id,
        key=CommitKey.for_request(s.session_id, request), request=request, extraction=extraction,
        plan=ConflictPlan(decisions=[]), importance=ImportanceResult(importance=5), summary=summary,
        happened_at=s.messages[-1].created_at)


# Notes that never name the entity; the entity's mentions link the first two to it.
NOTES = {
    "english": ("Caroline", ["She signed the papers at the agency.", "She picked a name for the baby.",
                             "The weather was grey all week."], "What did Caroline do?"),
    "chinese": ("妈妈", ["她开始学钢琴了。", "她买了一台新钢琴。", "这周一直下雨。"], "妈妈最近在忙什么？"),
}


@pytest.mark.parametrize("lang", ["english", "chinese"])
async def test_a_named_entity_brings_in_the_notes_of_its_mentions(lang, client, services, tenant):
    name, texts, question = NOTES[lang]
    s = session("s1", "2024-05-01T09:00:00Z", *texts)
    await client.append_messages(tenant, "lin", s)
    # Two more sessions of the subject that do not mention the entity: it is specific to one in three.
    for n in (2, 3):
        await client.append_messages(tenant, "lin", session(f"s{n}", f"2024-05-0{n}T09:00:00Z", "Hello."))
    ids = [m.message_id for m in s.messages]
    extraction = ExtractionResult(provider="test", extractor="written-out", extractor_version="1", facts=[],
                                  entities=[ExtractedEntity(name=name, entity_type="person",
                                                            evidence_message_ids=ids[:2])])
    outcome = await commit_notes(services, tenant, s, extraction)
    assert outcome.observations_written == 3 and outcome.entities_noted == 1

    embedder = offline_providers().embedder
    contexts = [await assemble_context(services.pool, services.keyring, embedder, tenant, "lin", question)
                for _ in range(2)]
    cited = [sorted(m for item in c.items for m in item.cited_message_ids) for c in contexts]
    assert cited[0] == ids[:2]  # the two linked notes; not the unlinked one
    assert cited[1] == cited[0] and contexts[1].text == contexts[0].text  # the same context every run
    # A question that names no entity gets nothing from the route (and here nothing at all).
    other = await assemble_context(services.pool, services.keyring, embedder, tenant, "lin",
                                   "What happened with Jordan?" if lang == "english" else "爸爸最近在忙什么？")
    assert not [item for item in other.items if item.kind == "observation"]


async def test_an_entity_mentioned_in_half_of_the_sessions_or_more_links_nothing(client, services, tenant):
    """Like a word in BM25: a name in most sessions (a speaker's own) says nothing about which
    memory a question is after."""
    for n in (1, 2):
        s = session(f"s{n}", f"2024-05-0{n}T09:00:00Z", "She signed the papers.")
        await client.append_messages(tenant, "lin", s)
        request = {"session": s.session_id}
        await commit_consolidation(
            services.pool, services.keyring, tenant_id=tenant, subject_id="lin", session_id=s.session_id,
            key=CommitKey.for_request(s.session_id, request), request=request,
            extraction=ExtractionResult(provider="test", extractor="written-out", extractor_version="1", facts=[],
                                        entities=[ExtractedEntity(name="Caroline", entity_type="person",
                                                                  evidence_message_ids=[f"s{n}:1"])]),
            plan=ConflictPlan(decisions=[]), importance=ImportanceResult(importance=5),
            summary=SummaryResult(sentences=[], token_count=0, observations=[
                Observation(text=m.content, source_message_ids=[m.message_id], happened_at=m.created_at)
                for m in s.messages]),
            happened_at=s.messages[-1].created_at)
    context = await assemble_context(services.pool, services.keyring, offline_providers().embedder, tenant, "lin",
                                     "What did Caroline do?")
    assert context.items == []


@pytest.mark.parametrize(("query", "relations"), [
    ("Where does Caroline work?", {"works_at"}),
    ("What did Melanie's husband build?", {"partner"}),
    ("Who are her friends?", {"friend"}),
    ("小美的妈妈住在哪里？", {"family", "lives_in"}),
    ("What did Caroline paint?", set()),
    ("Is the network working?", {"works_at"}),  # words, not meaning: a link still needs a named entity
])
def test_the_relations_a_question_asks_about(query, relations):
    assert follows(query) == relations


# Caroline works at Acme; one note mentions only Acme, another only Caroline.
HOP = {
    "english": ("Caroline", "Acme", ["Caroline signed the papers.", "The office has a rooftop garden."],
                "Where does Caroline work?", "What did Caroline sign?"),
    "chinese": ("小美", "星光公司", ["小美签了合同。", "那里的楼顶有个花园。"], "小美在哪里工作？", "小美签了什么？"),
}


@pytest.mark.parametrize("lang", ["english", "chinese"])
async def test_a_question_about_a_relation_follows_it_one_hop(lang, client, services, tenant):
    person, employer, texts, asked, unasked = HOP[lang]
    s = session("s1", "2024-05-01T09:00:00Z", *texts)
    await client.append_messages(tenant, "lin", s)
    for n in (2, 3):
        await client.append_messages(tenant, "lin", session(f"s{n}", f"2024-05-0{n}T09:00:00Z", "Hello."))
    ids = [m.message_id for m in s.messages]
    edge = ExtractedRelation(source=person, relation="works_at", target=employer, evidence_message_ids=ids[:1],
                             observed_at=s.messages[0].created_at)
    extraction = ExtractionResult(
        provider="test", extractor="written-out", extractor_version="1", facts=[], relations=[edge],
        entities=[ExtractedEntity(name=person, entity_type="person", evidence_message_ids=ids[:1]),
                  ExtractedEntity(name=employer, entity_type="organisation", evidence_message_ids=ids[1:])])
    outcome = await commit_notes(services, tenant, s, extraction)
    assert outcome.relations_noted == 1

    async def linked(question: str) -> set[str]:
        async with tenant_transaction(services.pool, tenant) as conn:
            pointers = await entity_hits(conn, tenant, "lin", question, 10)
            cur = await conn.execute("SELECT message_id FROM observations WHERE tenant_id = %s "
                                     "AND memory_id = ANY(%s::uuid[])", (tenant, [p[0] for p in pointers]))
            return {row[0] for row in await cur.fetchall()}

    assert await linked(asked) == set(ids)  # the employer's note, one hop from the named person
    assert await linked(unasked) == {ids[0]}  # no relation asked about: the person's own note only
    context = await assemble_context(services.pool, services.keyring, offline_providers().embedder, tenant, "lin",
                                     asked)
    assert ids[1] in {m for item in context.items for m in item.cited_message_ids}
