"""The offline extractor's relations: kinship, partners, friends, colleagues, work, study, home, pets
and visits stated by the subject-role speakers, English and Chinese, only between entities of the
same result (or the speaker); questions, plans and mere mentions state none."""

from __future__ import annotations

import asyncio

import pytest

from agent_memory.core.models import ExtractedRelation, Message
from agent_memory.core.relations import SUBJECT
from agent_memory.providers.offline import RuleFactExtractor
from tests.providers.offline.test_entities import session


def relations(messages: list[Message]) -> list[ExtractedRelation]:
    return asyncio.run(RuleFactExtractor().extract(messages)).relations


def edges(*turns: str | tuple[str, str | None, str]) -> list[tuple[str, str, str, str, str]]:
    return [(r.source, r.relation, r.target, r.role, r.operation) for r in relations(session(*turns))]


@pytest.mark.parametrize(("text", "expected"), [
    ("My sister Mia is visiting next week.", [(SUBJECT, "family", "sister", "sister", "assert")]),
    ("Mia, my sister, loves jazz.", [(SUBJECT, "family", "Mia", "sister", "assert")]),
    ("My mom called this morning.", [(SUBJECT, "family", "mom", "mother", "assert")]),
    ("My husband Tom cooks every night.", [(SUBJECT, "partner", "husband", "husband", "assert")]),
    ("My friend Jo is great.", [(SUBJECT, "friend", "Jo", "friend", "assert")]),
    ("My coworker Dana and my boss Raj are nice.", [(SUBJECT, "colleague", "Dana", "colleague", "assert"),
                                                    (SUBJECT, "colleague", "boss", "boss", "assert")]),
    ("I joined Acme Labs last month.", [(SUBJECT, "works_at", "Acme Labs", "", "assert")]),
    ("I study at Stanford University.", [(SUBJECT, "studies_at", "Stanford University", "", "assert")]),
    ("We moved to Berlin last year.", [(SUBJECT, "lives_in", "Berlin", "", "assert")]),
    ("My dog Max hates the rain.", [(SUBJECT, "owns", "Max", "", "assert")]),
    ("I joined the Photography Club.", [(SUBJECT, "member_of", "Photography Club", "", "assert")]),
    ("I went to the Pride Parade last weekend.", [(SUBJECT, "attended", "Pride Parade", "", "assert")]),
    ("We visited Kyoto in April.", [(SUBJECT, "visited", "Kyoto", "", "assert")]),
])
def test_english_statements_relate_the_speaker(text, expected):
    assert edges(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("I left Acme Labs.", [(SUBJECT, "works_at", "Acme Labs", "", "end")]),
    ("I quit my job.", [(SUBJECT, "works_at", "", "", "end")]),
    ("We broke up.", [(SUBJECT, "partner", "", "", "end")]),
    ("I don't live in Berlin anymore.", [(SUBJECT, "lives_in", "Berlin", "", "end")]),
    ("I graduated from Stanford University.", [(SUBJECT, "studies_at", "Stanford University", "", "end")]),
    ("My dog Max passed away last week.", [(SUBJECT, "owns", "Max", "", "end")]),
])
def test_english_endings(text, expected):
    assert edges(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("我姐姐小美下周来。", [(SUBJECT, "family", "姐姐", "older sister", "assert")]),
    ("我妈妈身体很好。", [(SUBJECT, "family", "妈妈", "mother", "assert")]),
    ("我老公做饭，我男朋友叫小明。", [(SUBJECT, "partner", "老公", "husband", "assert"),
                           (SUBJECT, "partner", "男朋友", "boyfriend", "assert")]),
    ("我的朋友小李很好。", [(SUBJECT, "friend", "小李", "friend", "assert")]),
    ("我在腾讯公司上班。", [(SUBJECT, "works_at", "腾讯公司", "", "assert")]),
    ("我住在杭州。", [(SUBJECT, "lives_in", "杭州", "", "assert")]),
    ("我搬到了苏州。", [(SUBJECT, "lives_in", "苏州", "", "assert")]),
    ("我家的狗叫豆豆。", [(SUBJECT, "owns", "豆豆", "", "assert")]),
    ("我去了上海。", [(SUBJECT, "visited", "上海", "", "assert")]),
    ("我从腾讯公司辞职了。", [(SUBJECT, "works_at", "腾讯公司", "", "end")]),
    ("我们分手了。", [(SUBJECT, "partner", "", "", "end")]),
    ("我在腾讯公司工作了三年，上个月离开了腾讯公司。", [(SUBJECT, "works_at", "腾讯公司", "", "assert"),
                                       (SUBJECT, "works_at", "腾讯公司", "", "end")]),
])
def test_chinese_statements_and_endings(text, expected):
    assert edges(text) == expected


@pytest.mark.parametrize("text", [
    "Do you live in Paris?", "你住在杭州吗？", "I love Paris in the spring.", "If I lived in Paris I'd be happy.",
    "I'm thinking about moving to Berlin.", "Should I move to Berlin?", "我想搬到苏州。", "I'm not moving to Berlin.",
    "She moved to Berlin.", "Mia is not my sister.", "She said her sister is a nurse.", "I used to live in Paris.",
])
def test_questions_plans_negations_and_mere_mentions_relate_nothing(text):
    assert edges(text) == []


def test_a_named_speaker_is_the_source_and_each_speakers_relatives_are_their_own():
    # Caroline holds the account (the first speaker): her sister is the subject's "sister".
    assert edges(("user", "Caroline", "My sister Anna moved to Toronto."),
                 ("user", "Melanie", "Our cat Luna says hi!")) == [
        ("Caroline", "family", "sister", "sister", "assert"),
        ("sister", "lives_in", "Toronto", "", "assert"),
        ("Melanie", "owns", "Luna", "", "assert")]


def test_chinese_speakers_relatives_and_anothers_mother():
    (mother,) = relations(session(("user", "王芳", "我妈下周来杭州。"), ("user", "李强", "王芳的妈妈人很好。")))
    # Her own 我妈 and 李强's 王芳的妈妈 are the same relation of 王芳's, the account holder's.
    assert (mother.source, mother.relation, mother.target, mother.role) == ("王芳", "family", "妈妈", "mother")
    assert mother.evidence_message_ids == ["m0", "m1"]


def test_a_named_third_persons_relatives_and_statements():
    assert edges("Mia's husband Tom is a chef.") == [("Mia", "partner", "Tom", "husband", "assert")]
    assert edges("I work at Acme Labs and my wife works at Globex Corp.") == [
        (SUBJECT, "works_at", "Acme Labs", "", "assert"), (SUBJECT, "partner", "wife", "wife", "assert"),
        ("wife", "works_at", "Globex Corp", "", "assert")]
    assert edges("我妈住在杭州。") == [(SUBJECT, "family", "妈妈", "mother", "assert"),
                                  ("妈妈", "lives_in", "杭州", "", "assert")]


def test_her_relative_belongs_to_the_one_person_named_before_it_else_nobody():
    one = edges(("user", "Caroline", "Yesterday Melanie said her sister Lou is coming."),
                ("user", "Melanie", "Yes!"))
    assert ("Melanie", "family", "Lou", "sister", "assert") in one
    several = edges(("user", "Caroline", "Melanie told Jonathan her sister Lou is coming."),
                    ("user", "Melanie", "Yes!"), ("user", "Jonathan", "Great."))
    assert not [e for e in several if e[2] == "Lou"]


def test_the_assistants_words_relate_nothing():
    assert edges(("assistant", None, "I hope your sister Mia likes living in Lisbon.")) == []


def test_each_relation_cites_its_messages_and_time():
    messages = session("My sister Mia lives in Leeds.", ("assistant", None, "Nice!"), "My sister Mia is great.")
    (sister, lives) = relations(messages)
    assert sister.evidence_message_ids == ["m0", "m2"] and sister.observed_at == messages[0].created_at
    assert (lives.source, lives.target, lives.evidence_message_ids) == ("sister", "Leeds", ["m0"])
