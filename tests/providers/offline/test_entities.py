"""The offline extractor's entities: people, pets, places, organisations, events and things read
from every message of a session (whoever said it), merged by name and alias, each with every
message that mentions it, the same for the same session every time; the facts stay as they are."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from agent_memory.core.models import ENTITY_ALIASES_MAX, ENTITY_NAME_MAX, ExtractedEntity, Message
from agent_memory.core.seat import session_holder
from agent_memory.providers.offline import RuleFactExtractor
from agent_memory.providers.offline.entities import extract_entities
from agent_memory.providers.offline.extractor import _extract_facts

AT = datetime(2024, 5, 8, 10, 0, tzinfo=UTC)


def session(*turns: str | tuple[str, str | None, str]) -> list[Message]:
    """Messages m0, m1, …: a plain string is the user's; (role, speaker, content) otherwise."""
    out = []
    for i, turn in enumerate(turns):
        role, speaker, content = ("user", None, turn) if isinstance(turn, str) else turn
        out.append(Message(message_id=f"m{i}", turn_index=i, role=role, speaker=speaker, content=content,
                           created_at=AT + timedelta(minutes=i)))
    return out


def entities(messages: list[Message]) -> list[ExtractedEntity]:
    result = asyncio.run(RuleFactExtractor().extract(messages))
    return result.entities


def by_name(found: list[ExtractedEntity]) -> dict[str, ExtractedEntity]:
    return {e.name: e for e in found}


def test_a_relative_named_by_the_phrase_keeps_the_name_as_alias_and_every_mention():
    found = by_name(entities(session("My sister Anna is visiting next week.", ("assistant", None, "How lovely!"),
                                     "Anna said she wants to see the old harbour.")))
    sister = found["sister"]
    assert sister.entity_type == "person"
    assert sister.aliases == ["Anna"]
    assert sister.evidence_message_ids == ["m0", "m2"]
    assert "Anna" not in found  # the bare name is the sister, not another person


def test_two_siblings_with_their_own_names_stay_two_people():
    found = by_name(entities(session("My sister Anna lives in Leeds.", "My sister Beth lives in York.")))
    assert found["sister"].aliases == ["Anna"]
    assert found["Beth"].aliases == ["sister"] and found["Beth"].evidence_message_ids == ["m1"]


def test_both_speakers_mentions_and_the_speakers_themselves():
    found = by_name(entities(session(
        ("user", "Caroline", "Hey Mel! I went to the Pride Parade last weekend."),
        ("user", "Melanie", "That's great, Caroline! My husband and I took the kids to a concert in Boston."),
        ("user", "Caroline", "My sister Anna came along to the parade too."),
    )))
    assert found["Caroline"].entity_type == "person"
    assert found["Caroline"].evidence_message_ids == ["m0", "m1"]  # she first speaks, then is spoken to
    assert found["Melanie"].evidence_message_ids == ["m0", "m1"]
    assert found["Melanie"].aliases == ["Mel"] and "Mel" not in found  # a speaker's short name is the speaker
    # Two speakers share the role: the account holder's "my" is the subject's, the other's is hers.
    assert found["Melanie's husband"].entity_type == "person"
    # The holder (the first speaker) speaks for the subject: her sister is the subject's, and
    # "Caroline's sister" to anyone else in the session.
    assert found["sister"].aliases == ["Anna", "Caroline's sister"] and "Caroline's sister" not in found
    assert found["Pride Parade"].entity_type == "event"
    assert found["concert"].entity_type == "event"
    assert found["Boston"].entity_type == "place"


def test_a_named_pet_and_its_later_mentions():
    found = by_name(entities(session("We adopted a puppy named Biscuit!", "My dog Max hates the rain.",
                                     "Max and Biscuit get along great.", "Our cat ignores them both.")))
    assert found["Biscuit"].entity_type == "pet" and found["Biscuit"].aliases == ["puppy"]
    assert found["Biscuit"].evidence_message_ids == ["m0", "m2"]
    assert found["Max"].entity_type == "pet" and found["Max"].aliases == ["dog"]
    assert found["Max"].evidence_message_ids == ["m1", "m2"]
    assert found["cat"].entity_type == "pet" and found["cat"].evidence_message_ids == ["m3"]
    assert not any(e.entity_type == "person" for e in found.values())


def test_a_pet_first_unnamed_then_named_is_one_pet_called_by_its_name():
    found = entities(session("My dog is snoring again.", "My dog Rex, I mean, he never stops."))
    assert [(e.name, e.entity_type, e.aliases, e.evidence_message_ids) for e in found] == [
        ("Rex", "pet", ["dog"], ["m0", "m1"])]


def test_places_organisations_events_and_possessions():
    found = by_name(entities(session(
        "I moved to Lisbon from Japan last year and I work at Zalando now.",
        "My brother studies at Stanford University.",
        "The wedding is in June and my car is in the shop.",
        "I still need a suit for the wedding.",
    )))
    assert {n: e.entity_type for n, e in found.items()} == {
        "Lisbon": "place", "Japan": "place", "Zalando": "organisation", "brother": "person",
        "Stanford University": "organisation", "wedding": "event", "car": "thing"}
    assert found["wedding"].evidence_message_ids == ["m2", "m3"]


def test_chinese_relatives_pets_cities_and_organisations():
    found = by_name(entities(session(
        ("user", "林伟", "我妈下周来杭州看我，我姐李娜也来。"),
        ("assistant", None, "太好了！"),
        ("user", "林伟", "我家的狗叫豆豆，豆豆很乖。我在腾讯公司上班。"),
        ("user", "林伟", "妈妈说李娜在招商银行工作，周末一起去上海。"),
    )))
    assert found["林伟"].entity_type == "person"
    assert found["妈妈"].aliases == ["我妈"] and found["妈妈"].evidence_message_ids == ["m0", "m3"]
    assert found["姐姐"].aliases == ["我姐", "李娜"] and found["姐姐"].evidence_message_ids == ["m0", "m3"]
    assert found["豆豆"].entity_type == "pet" and found["豆豆"].aliases == ["狗"]
    assert found["杭州"].entity_type == "place" and found["上海"].entity_type == "place"
    assert found["腾讯公司"].entity_type == "organisation" and found["招商银行"].entity_type == "organisation"
    assert "李娜" not in found


def test_chinese_speakers_relatives_are_named_for_them():
    found = by_name(entities(session(("user", "王芳", "我妈下周来杭州，我姐王丽也一起来。"),
                                     ("user", "李强", "我老婆每天都陪着我家的猫。"))))
    # 王芳 holds the account: her relatives are the subject's, named as 李强 would name them too.
    assert found["妈妈"].aliases == ["我妈", "王芳的妈妈"]
    assert found["姐姐"].aliases == ["我姐", "王丽", "王芳的姐姐"]
    assert found["李强的老婆"].entity_type == "person"
    assert found["李强的猫"].entity_type == "pet"
    assert "老婆" not in found and "王芳的妈妈" not in found


def test_someone_elses_relative_and_kinds_of_company_are_not_entities():
    found = by_name(entities(session("他妈妈在一家互联网公司上班。", "She said her sister is a nurse.")))
    assert found == {}


def test_plain_sentences_without_names_give_nothing():
    for text in ["I had a good day.", "Nice to meet you. Will you help me with my budget?",
                 "Thanks, that was really helpful!", "今天天气不错，我很开心。", "My laptop budget is 1200 dollars."]:
        assert entities(session(text)) == [], text


def test_the_same_session_gives_the_same_entities():
    messages = session(("user", "Caroline", "My sister Anna moved to Toronto. Anna loves it."),
                       ("user", "Melanie", "Our cat Luna says hi! We're going to the Boston Marathon."),
                       ("user", "Caroline", "我妈在北京大学工作。"))
    first = [e.model_dump_json() for e in entities(messages)]
    assert first == [e.model_dump_json() for e in entities(messages)]
    assert first == [e.model_dump_json() for e in extract_entities(messages, "user", session_holder(messages))]
    assert len(first) >= 6


def test_names_and_aliases_stay_within_bounds():
    surnames = ["Smith", "Jones", "Brown", "Taylor", "Wilson", "Davies", "Evans", "Thomas", "Roberts", "Walker",
                "Wright", "Hughes"]
    long_name = " ".join(["Xylophonicus"] * 8) + " University"
    long_speaker = " ".join(["Bartholomewington" + "x" * 12] * 3)  # a name-like speaker over the bound
    messages = session(("user", "Lin", "Hi there."), *[f"Yesterday Lin {s} called." for s in surnames],
                       f"I study at {long_name}.", ("user", long_speaker, "Hello from me too."))
    found = entities(messages)
    for entity in found:
        assert len(entity.name) <= ENTITY_NAME_MAX
        assert len(entity.aliases) <= ENTITY_ALIASES_MAX
        assert len(set(entity.aliases)) == len(entity.aliases) and entity.name not in entity.aliases
        assert entity.evidence_message_ids == sorted(set(entity.evidence_message_ids), key=lambda i: int(i[1:]))
    lin = [e for e in found if e.name.startswith("Lin")]
    assert len(lin) == 1 and len(lin[0].aliases) == ENTITY_ALIASES_MAX
    assert len(lin[0].evidence_message_ids) == len(surnames) + 1
    assert len(long_speaker) > ENTITY_NAME_MAX
    assert all("Xylophonicus" not in e.name and "Bartholomew" not in e.name for e in found)


def test_entities_leave_the_facts_as_they_are():
    messages = session("My sister Anna and I moved to Lisbon.", "I work at Zalando now, my dog Max loves the office.",
                       "我家的狗叫豆豆，我住在杭州。")
    result = asyncio.run(RuleFactExtractor().extract(messages))
    assert result.entities
    assert result.facts == _extract_facts(messages, "user", None)
    assert {(f.namespace, f.key, f.value) for f in result.facts} >= {("work", "employer", "Zalando")}


def test_a_word_that_few_people_are_named_is_no_person_on_its_own():
    for text in ["I'm a huge fan of Marvel movies.", "We watched a film about the King last night.",
                 "In October the weather turns."]:
        assert not [e for e in entities(session(text)) if e.entity_type == "person"], text
    assert [(e.name, e.entity_type) for e in entities(session("Yesterday Grace called about the rota."))] == [
        ("Grace", "person")]
