"""The relations a model states in the extraction call: between the entities of the same answer or a
speaker, through the same check as the offline extractor's, citing only the messages they were shown,
with the tenant's identifiers put back in their ends. Against the scripted server that speaks the
chat-completions API, through the real openai client."""

from __future__ import annotations

import json

from agent_memory.core.models import ExtractedRelation
from agent_memory.core.relations import SUBJECT
from agent_memory.providers.policy import REDACT_KINDS, Redactor, restored
from tests.providers.openai_server import FakeOpenAIServer
from tests.providers.test_openai_compat import msg
from tests.providers.test_openai_entities import MESSAGES, entity, extract

ENTITIES = [entity("Melanie", aliases=["Mel", "my sister"], ids=["m1", "m2"]),
            entity("Acme", "organisation", ids=["m1", "m2"]), entity("Lisbon", "place"),
            entity("Rex", "pet", ids=["m3"])]


def relation(source: str, kind: str, target: str, role: str = "", operation: str = "assert",
             ids: list[str] | None = None) -> dict:
    return {"source": source, "relation": kind, "target": target, "role": role, "operation": operation,
            "evidence_message_ids": ["m1"] if ids is None else ids}


def edges(relations: list[ExtractedRelation]) -> list[tuple[str, str, str, str, str]]:
    return [(r.source, r.relation, r.target, r.role, r.operation) for r in relations]


async def test_relations_between_the_answers_entities_and_the_speaker_come_out_checked():
    answer = {"facts": [], "entities": ENTITIES, "relations": [
        relation("subject", "family", "mel", " Sister "),  # an alias: written as the entity's name
        relation("Melanie", "works at", "ACME", ids=["m1", "m2"]),  # a spelling of the type
        relation("Melanie", "lives_in", "Lisbon"), relation("Melanie", "owns", "Rex", ids=["m3"]),
        relation("subject", "family", "Melanie", "sister", ids=["m1"]),  # the same again
    ]}
    with FakeOpenAIServer() as server:
        result = await extract(server, answer)
    assert edges(result.relations) == [(SUBJECT, "family", "Melanie", "sister", "assert"),
                                       ("Melanie", "works_at", "Acme", "", "assert"),
                                       ("Melanie", "lives_in", "Lisbon", "", "assert"),
                                       ("Melanie", "owns", "Rex", "", "assert")]
    assert result.relations[1].evidence_message_ids == ["m1", "m2"]
    assert result.relations[1].observed_at == MESSAGES[1].created_at  # its latest evidence
    assert result.relations[3].observed_at == MESSAGES[2].created_at


async def test_relations_to_unknown_names_types_or_messages_are_dropped():
    answer = {"facts": [], "entities": ENTITIES, "relations": [
        relation("subject", "lives_in", "Paris"),  # not an entity of the answer
        relation("Tom", "partner", "Melanie"),
        relation("subject", "enemy", "Melanie"),  # not a relation type
        relation("subject", "friend", "Melanie", ids=["m9"]),  # an unknown message only
        relation("subject", "friend", "Melanie", ids=[]),
        relation("subject", "works_at", ""),  # an empty target asserts nothing
        relation("subject", "works_at", "", operation="end"),  # … but ends whatever is current
        relation("subject", "friend", "Melanie", operation="confirm"),
    ]}
    with FakeOpenAIServer() as server:
        result = await extract(server, answer)
    assert edges(result.relations) == [(SUBJECT, "works_at", "", "", "end")]


async def test_an_answer_without_relations_has_none():
    with FakeOpenAIServer() as server:
        alone = await extract(server, {"facts": [], "entities": ENTITIES}, response_format="json_object")
    assert alone.relations == [] and len(alone.entities) == 4


async def test_a_named_speaker_is_a_source_without_being_listed_as_an_entity():
    messages = [msg("m1", "My husband Tom and I moved to Lisbon.").model_copy(update={"speaker": "Ana"})]
    answer = {"facts": [], "entities": [entity("Tom"), entity("Lisbon", "place")], "relations": [
        relation("Ana", "partner", "Tom", "husband"), relation("Ana", "lives_in", "Lisbon"),
        relation("Tom", "lives_in", "Lisbon")]}
    with FakeOpenAIServer() as server:
        result = await extract(server, answer, messages=messages)
    assert edges(result.relations) == [("Ana", "partner", "Tom", "husband", "assert"),
                                       ("Ana", "lives_in", "Lisbon", "", "assert"),
                                       ("Tom", "lives_in", "Lisbon", "", "assert")]


async def test_the_schema_sent_asks_for_relations_within_the_small_models_bound():
    with FakeOpenAIServer() as server:
        await extract(server, {"facts": [], "entities": [], "relations": []}, cite_from_enum=True, max_relations=2,
                      max_citations=2)
        schema = server.last.body["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["facts", "entities", "relations"]
    assert schema["properties"]["relations"]["maxItems"] == 2
    out = schema["$defs"]["RelationOut"]
    assert out["required"] == ["source", "relation", "target", "role", "operation", "evidence_message_ids"]
    assert out["additionalProperties"] is False
    assert out["properties"]["relation"]["enum"] == ["family", "partner", "friend", "colleague", "works_at",
                                                     "studies_at", "lives_in", "member_of", "owns", "attended",
                                                     "visited"]
    assert out["properties"]["operation"]["enum"] == ["assert", "end"]
    cited = out["properties"]["evidence_message_ids"]
    assert cited["items"] == {"type": "string", "enum": ["m1", "m2", "m3"]}
    assert (cited["minItems"], cited["maxItems"]) == (1, 2)
    prompt = server.last.body["messages"][0]["content"]
    assert "relations" in prompt and '"relations": []' in prompt


async def test_a_chinese_conversation_relates_its_entities_in_chinese():
    messages = [msg("c1", "我妈妈住在杭州。"), msg("c2", "我在阿里巴巴上班，上个月搬到了苏州。", minutes=1)]
    answer = {"facts": [], "entities": [entity("妈妈", aliases=["我妈"], ids=["c1"]), entity("杭州", "place", ids=["c1"]),
                                        entity("阿里巴巴", "organisation", ids=["c2"]),
                                        entity("苏州", "place", ids=["c2"])],
              "relations": [relation("subject", "family", "我妈", "mother", ids=["c1"]),
                            relation("妈妈", "lives_in", "杭州", ids=["c1"]),
                            relation("subject", "works_at", "阿里巴巴", ids=["c2"]),
                            relation("subject", "lives_in", "苏州", ids=["c2"])]}
    with FakeOpenAIServer() as server:
        result = await extract(server, answer, messages=messages)
    assert edges(result.relations) == [(SUBJECT, "family", "妈妈", "mother", "assert"),
                                       ("妈妈", "lives_in", "杭州", "", "assert"),
                                       (SUBJECT, "works_at", "阿里巴巴", "", "assert"),
                                       (SUBJECT, "lives_in", "苏州", "", "assert")]


async def test_the_identifiers_in_relation_ends_are_put_back():
    email = "mel.dupont@example.com"
    redactor = Redactor(REDACT_KINDS)
    sent = redactor.messages([msg("m1", f"My sister writes from {email}.")])
    with FakeOpenAIServer() as server:
        found = await extract(server, {"facts": [], "entities": [entity("[EMAIL_1]", aliases=["my sister"])],
                                       "relations": [relation("subject", "family", "[EMAIL_1]", "sister")]},
                              messages=sent)
        received = json.dumps(server.last.body, ensure_ascii=False)
    assert email not in received
    result = restored(found, redactor)
    assert edges(result.relations) == [(SUBJECT, "family", email, "sister", "assert")]
    assert result.entities[0].name == email  # the relation still names the entity
