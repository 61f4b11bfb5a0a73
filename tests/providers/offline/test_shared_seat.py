"""The shared seat: several people speaking under one account in one session. Only the account
holder's statements are the subject's facts; what another speaker says about themselves is that
person's (their edges), or withheld; English and Chinese (agent_memory.core.seat)."""

from __future__ import annotations

import asyncio

from agent_memory.core.models import ExtractionResult, KnownFact, Message
from agent_memory.core.relations import SUBJECT
from agent_memory.core.seat import ANOTHER_SPEAKER, session_holder
from agent_memory.providers.offline import RuleFactExtractor
from tests.providers.offline.test_entities import session


def extract(messages: list[Message], known: list[KnownFact] | None = None) -> ExtractionResult:
    return asyncio.run(RuleFactExtractor().extract(messages, current_facts=known))


def facts(result: ExtractionResult) -> set[tuple[str, str, str]]:
    return {(f.namespace, f.key, f.value) for f in result.facts}


def edges(result: ExtractionResult) -> set[tuple[str, str, str]]:
    return {(r.source, r.relation, r.target) for r in result.relations}


EN = [("user", "Lin", "I live in Berlin and I'm vegetarian."),
      ("user", "Mia", "I'm allergic to peanuts. I work at Charité and I live in Porto."),
      ("assistant", "Assistant", "Noted!"),
      ("user", "Lin", "My sister Anna is visiting.")]
ZH = [("user", "林晓", "我住在杭州，我吃素。"),
      ("user", "米娅", "我对花生过敏。我在华为公司上班，住在苏州。"),
      ("assistant", "Assistant", "好的！"),
      ("user", "林晓", "我的猫叫年糕。")]


def test_english_only_the_holders_statements_are_the_subjects_facts():
    result = extract(session(*EN))
    assert facts(result) == {("location", "home_city", "Berlin"), ("diet", "restriction", "vegetarian")}
    assert all(f.evidence_message_ids in (["m0"], ["m3"]) for f in result.facts)
    # Mia is a person of her own, with the edges her own statements give her.
    people = {e.name for e in result.entities if e.entity_type == "person"}
    assert {"Lin", "Mia"} <= people
    assert {("Mia", "works_at", "Charité"), ("Mia", "lives_in", "Porto"), ("Lin", "lives_in", "Berlin"),
            ("Lin", "family", "sister")} <= edges(result)
    assert not {e for e in edges(result) if e[0] == "Lin" and e[2] in ("Charité", "Porto")}
    # Her allergy is no relation's: withheld, never the subject's.
    assert result.withheld == {ANOTHER_SPEAKER: 1}


def test_chinese_only_the_holders_statements_are_the_subjects_facts():
    result = extract(session(*ZH))
    assert facts(result) == {("location", "home_city", "杭州"), ("diet", "restriction", "vegetarian"),
                             ("pet", "年糕", "cat")}
    assert {"林晓", "米娅"} <= {e.name for e in result.entities if e.entity_type == "person"}
    assert {("米娅", "works_at", "华为公司"), ("米娅", "lives_in", "苏州"), ("林晓", "lives_in", "杭州"),
            ("林晓", "owns", "年糕")} <= edges(result)
    assert result.withheld == {ANOTHER_SPEAKER: 1}


def test_another_speakers_relatives_are_theirs_and_the_holders_the_subjects():
    result = extract(session(("user", "Lin", "My sister Anna moved to Toronto."),
                             ("user", "Mia", "My brother Tom works at Globex Corp.")))
    assert facts(result) == set()  # the sister's move is hers, not the subject's
    assert {("Lin", "family", "sister"), ("Mia", "family", "Mia's brother"),
            ("Mia's brother", "works_at", "Globex Corp")} <= edges(result)
    sister = next(e for e in result.entities if e.name == "sister")
    assert "Lin's sister" in sister.aliases  # as the others would call her


def test_another_speakers_answer_to_the_assistant_is_not_the_subjects():
    result = extract(session(("user", "Lin", "Hi, we're planning a trip."),
                             ("assistant", None, "Which city do you live in?"),
                             ("user", "Mia", "Porto!")))
    assert facts(result) == set()


def test_one_speaker_or_unnamed_speakers_are_the_subject_as_in_any_session():
    texts = [EN[0][2], EN[1][2]]
    one = session(*[("user", "Lin", text) for text in texts])
    assert session_holder(one) is None
    named, unnamed = extract(one), extract(session(*texts))
    generic = extract(session(*[("user", "user", text) for text in texts]))
    assert facts(named) == facts(unnamed) == facts(generic)
    # Every statement is the subject's: the allergy and the employer too.
    assert {("diet", "restriction", "vegetarian"), ("diet", "allergy_peanuts", "peanuts"),
            ("work", "employer", "Charité")} <= facts(named)
    assert named.withheld == unnamed.withheld == generic.withheld == {}
    assert ("Lin", "works_at", "Charité") in edges(named)


def test_the_holder_is_the_speaker_with_the_subjects_known_name():
    messages = session(("user", "Mia", "I'm allergic to peanuts."), ("user", "Lin Wei", "I'm vegetarian."))
    known = [KnownFact(namespace="profile", key="name", value="Lin")]
    assert session_holder(messages) == "mia"  # the first speaker, without a known name
    assert session_holder(messages, known=known) == "lin wei"  # the known name's first word
    assert facts(extract(messages)) == {("diet", "allergy_peanuts", "peanuts")}
    by_name = extract(messages, known)
    assert facts(by_name) == {("diet", "restriction", "vegetarian")}
    assert by_name.withheld == {ANOTHER_SPEAKER: 1}
    zh = session(("user", "米娅", "我对花生过敏。"), ("user", "林晓", "我吃素。"))
    assert facts(extract(zh, [KnownFact(namespace="profile", key="name", value="林晓")])) == {
        ("diet", "restriction", "vegetarian")}


def test_a_message_without_a_speaker_in_a_shared_session_is_the_holders():
    result = extract(session(("user", "Lin", "I'm vegetarian."), ("user", "Mia", "I'm a nurse."),
                             "I live in Berlin."))
    assert facts(result) == {("diet", "restriction", "vegetarian"), ("location", "home_city", "Berlin")}
    assert result.withheld == {ANOTHER_SPEAKER: 1}
    assert ("Lin", "lives_in", "Berlin") in edges(result)  # from the holder, not from an unnamed "subject"
    assert SUBJECT not in {e.name for e in result.entities} | {r.source for r in result.relations}
