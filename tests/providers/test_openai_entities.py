"""The entities a model names in the extraction call: whoever mentions them, in the schema of
`ExtractedEntity`, citing only the messages they were shown, merged when found more than once (across
the chunks of a long session: test_openai_chunking), with the tenant's identifiers put back in their
names. Against the scripted server that speaks the chat-completions API, through the real openai client."""

from __future__ import annotations

import json

from agent_memory.core.models import ENTITY_ALIASES_MAX, ENTITY_NAME_MAX, ExtractedEntity, Message
from agent_memory.providers.openai.bundle import openai_providers
from agent_memory.providers.policy import REDACT_KINDS, Redactor, restored
from tests.providers.openai_server import FakeOpenAIServer, chat_completion
from tests.providers.test_openai_compat import config_for, msg

MESSAGES = [
    msg("m1", "My sister Melanie works at Acme in Lisbon."),
    msg("m2", "Does Mel like working at Acme?", role="assistant", minutes=1),
    msg("m3", "She does. Her dog Rex comes to the office.", minutes=2),
]


def entity(name: str, entity_type: str = "person", aliases: list[str] | None = None,
           ids: list[str] | None = None) -> dict:
    return {"name": name, "entity_type": entity_type, "aliases": aliases or [],
            "evidence_message_ids": ["m1"] if ids is None else ids}


async def extract(server: FakeOpenAIServer, answer: dict | str, messages: list[Message] = MESSAGES, **config):
    server.reply(chat_completion(answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)))
    bundle = openai_providers(config_for(server, **config))
    try:
        return await bundle.extractor.extract(messages)
    finally:
        await bundle.aclose()


async def test_the_entities_either_speaker_mentions_come_out_with_the_facts():
    answer = {"facts": [{"namespace": "location", "key": "home_city", "value": "Lisbon", "claim_type": "inference",
                         "permanence": "permanent", "valid_until": None, "confidence": 0.5,
                         "evidence_message_ids": ["m1"], "observed_at": None}],
              "entities": [entity("Melanie", aliases=["Mel", "my sister"], ids=["m1", "m2"]),
                           entity("Acme", "organization", ids=["m2", "m1"]),  # the American spelling
                           entity(" Lisbon ", "place"), entity("Rex", "pet", ids=["m3"])]}
    with FakeOpenAIServer() as server:
        result = await extract(server, answer)
    assert [(f.key, f.value) for f in result.facts] == [("home_city", "Lisbon")]
    assert result.entities == [
        ExtractedEntity(name="Melanie", entity_type="person", aliases=["Mel", "my sister"],
                        evidence_message_ids=["m1", "m2"]),
        ExtractedEntity(name="Acme", entity_type="organisation", evidence_message_ids=["m1", "m2"]),  # message order
        ExtractedEntity(name="Lisbon", entity_type="place", evidence_message_ids=["m1"]),
        ExtractedEntity(name="Rex", entity_type="pet", evidence_message_ids=["m3"]),
    ]


async def test_entities_cite_only_known_messages_and_keep_their_names_within_the_bounds():
    long_name = "Melanie " + "Anne-Sophie " * 10
    aliases = ["Melanie", "MEL", "mel", " ", *(f"Alias {i}" for i in range(12))]
    answer = {"facts": [], "entities": [
        entity("Melanie", aliases=aliases, ids=["m9", " m1 ", "m1"]),  # an unknown id dropped, the rest kept
        entity("Nobody", ids=["m9", "s-other:1"]),  # only unknown ids: dropped
        entity("Ghost", ids=[]),  # no evidence at all: dropped
        entity("Gotham", "city"),  # not one of the types: dropped
        entity("   "),  # no name: dropped
        entity(long_name, aliases=[long_name.upper()], ids=["m3"]),
    ]}
    with FakeOpenAIServer() as server:
        result = await extract(server, answer)
    assert [e.name for e in result.entities] == ["Melanie", " ".join(long_name.split())[:ENTITY_NAME_MAX].strip()]
    melanie, long_one = result.entities
    assert melanie.evidence_message_ids == ["m1"]
    # The name, a repeated alias and an empty one left out; at most ENTITY_ALIASES_MAX aliases.
    assert melanie.aliases == ["MEL", *(f"Alias {i}" for i in range(ENTITY_ALIASES_MAX - 1))]
    assert len(long_one.name) <= ENTITY_NAME_MAX and long_one.aliases == []  # the same name in capitals


async def test_an_answer_of_facts_alone_has_no_entities():
    # A server without strict output may leave the entities out, or answer with a bare list of facts.
    fact = {"namespace": "profile", "key": "name", "value": "Ana", "claim_type": "explicit",
            "permanence": "permanent", "valid_until": None, "confidence": 0.9, "evidence_message_ids": ["m1"],
            "observed_at": None}
    with FakeOpenAIServer() as server:
        alone = await extract(server, {"facts": [fact]}, response_format="json_object")
        bare = await extract(server, json.dumps([fact]), response_format="none")
    assert [f.value for f in alone.facts] == [f.value for f in bare.facts] == ["Ana"]
    assert alone.entities == bare.entities == []


async def test_two_entities_found_apart_are_joined_by_a_mention_that_names_both():
    answer = {"facts": [], "entities": [entity("Melanie", ids=["m1"]), entity("Mel", ids=["m2"]),
                                        entity("Mel", aliases=["Melanie"], ids=["m3"])]}
    with FakeOpenAIServer() as server:
        result = await extract(server, answer)
    assert result.entities == [ExtractedEntity(name="Melanie", entity_type="person", aliases=["Mel"],
                                               evidence_message_ids=["m1", "m2", "m3"])]


async def test_the_schema_sent_asks_for_entities_citing_the_chunks_own_ids():
    with FakeOpenAIServer() as server:
        await extract(server, {"facts": [], "entities": []}, cite_from_enum=True, max_entities=3, max_citations=2)
        schema = server.last.body["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["facts", "entities", "relations"]
    assert schema["properties"]["entities"] == {"items": {"$ref": "#/$defs/EntityOut"}, "maxItems": 3,
                                                "title": "Entities", "type": "array"}
    entity_schema = schema["$defs"]["EntityOut"]
    assert entity_schema["required"] == ["name", "entity_type", "aliases", "evidence_message_ids"]
    assert entity_schema["additionalProperties"] is False
    assert entity_schema["properties"]["entity_type"]["enum"] == ["person", "pet", "place", "organisation", "event",
                                                                   "thing"]
    cited = entity_schema["properties"]["evidence_message_ids"]
    assert cited["items"] == {"type": "string", "enum": ["m1", "m2", "m3"]}
    assert (cited["minItems"], cited["maxItems"]) == (1, 2)
    assert entity_schema["properties"]["aliases"]["maxItems"] <= ENTITY_ALIASES_MAX
    prompt = server.last.body["messages"][0]["content"]
    assert "entities" in prompt and "organisation" in prompt and '"entities": []' in prompt


async def test_the_identifiers_in_entity_names_are_put_back():
    email, phone = "mel.dupont@example.com", "+47 912 34 567"
    messages = [msg("m1", f"My sister Mel writes from {email} and answers on {phone}.")]
    redactor = Redactor(REDACT_KINDS)
    sent = redactor.messages(messages)
    assert email not in sent[0].content and phone not in sent[0].content
    with FakeOpenAIServer() as server:
        # A model that names the one it only knows by an address, and gives the phone number as an alias.
        found = await extract(server, {"facts": [], "entities": [
            entity("[EMAIL_1]", aliases=["Mel", "[PHONE_1]"]), entity("Mel", aliases=["[EMAIL_1]"])]},
            messages=sent)
        received = json.dumps(server.last.body, ensure_ascii=False)
    assert email not in received and "[EMAIL_1]" in received
    assert found.entities[0].name == "[EMAIL_1]"  # the model's answer, as it was given
    result = restored(found, redactor)
    assert result.entities == [ExtractedEntity(name=email, entity_type="person", aliases=["Mel", phone],
                                               evidence_message_ids=["m1"])]
    assert result.redacted == {"email": 1, "phone": 1}


async def test_a_value_longer_than_its_placeholder_is_held_to_the_name_bound():
    email = "a" * 70 + "@example.com"
    redactor = Redactor(["email"])
    sent = redactor.messages([msg("m1", f"Write to {email}, my landlord.")])
    with FakeOpenAIServer() as server:
        found = await extract(server, {"facts": [], "entities": [entity("[EMAIL_1]", aliases=["my landlord"])]},
                              messages=sent)
    (landlord,) = restored(found, redactor).entities
    assert landlord.name == email[:ENTITY_NAME_MAX] and landlord.aliases == ["my landlord"]
    ExtractedEntity.model_validate(landlord.model_dump())  # still a valid record


async def test_a_chinese_conversation_names_its_entities_in_chinese():
    messages = [msg("c1", "我妈妈下个月从杭州来看我。"),
                msg("c2", "太好了！你妈会住多久？", role="assistant", minutes=1),
                msg("c3", "我妈住两周，还会带我们家的狗豆豆。", minutes=2),
                msg("c4", "我们打算一起去西湖，顺便参加阿里巴巴的开放日。", minutes=3)]
    answer = {"facts": [{"namespace": "pet", "key": "豆豆", "value": "dog", "claim_type": "explicit",
                         "permanence": "permanent", "valid_until": None, "confidence": 0.9,
                         "evidence_message_ids": ["c3"], "observed_at": None}],
              "entities": [entity("妈妈", aliases=["我妈", "你妈", "妈妈"], ids=["c1", "c2", "c3"]),
                           entity("杭州", "place", ids=["c1"]), entity("豆豆", "pet", ids=["c3"]),
                           entity("西湖", "place", ids=["c4"]), entity("阿里巴巴", "organisation", ids=["c4"]),
                           entity("阿里巴巴开放日", "event", aliases=["开放日"], ids=["c4"]),
                           entity("我妈", ids=["c3"])]}  # found again under an alias: the same one
    with FakeOpenAIServer() as server:
        result = await extract(server, answer, messages=messages)
        prompt = server.last.body["messages"][-1]["content"]
    assert "豆豆" in prompt and "\\u" not in prompt  # the conversation is sent as written
    assert [(e.name, e.entity_type, e.aliases, e.evidence_message_ids) for e in result.entities] == [
        ("妈妈", "person", ["我妈", "你妈"], ["c1", "c2", "c3"]),
        ("杭州", "place", [], ["c1"]),
        ("豆豆", "pet", [], ["c3"]),
        ("西湖", "place", [], ["c4"]),
        ("阿里巴巴", "organisation", [], ["c4"]),
        ("阿里巴巴开放日", "event", ["开放日"], ["c4"]),
    ]
