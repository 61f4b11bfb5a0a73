"""The offline extractor v4's mechanisms, each on phrasing that no rule names word for word:
dropped subjects, verb classes of moving and changing jobs, the segmenter's value boundaries in
Chinese, corrections that name the wrong value instead of the slot, laughter as tone, and amounts
that are budgets by the words around them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from agent_memory.models import KnownFact, Message
from agent_memory.providers.offline import RuleFactExtractor
from agent_memory.providers.zh_segment import leading_noun

AT = datetime(2024, 5, 8, 10, 0, tzinfo=UTC)


def facts(*contents: str, known: dict[str, str] | None = None):
    messages = [Message(message_id=f"m{i}", turn_index=i, role="user", content=c, created_at=AT + timedelta(minutes=i))
                for i, c in enumerate(contents)]
    current = [KnownFact(namespace=k.split("/")[0], key=k.split("/")[1], value=v) for k, v in (known or {}).items()]
    result = asyncio.run(RuleFactExtractor().extract(messages, current_facts=current))
    return {(f.operation, f"{f.namespace}/{f.key}", f.value) for f in result.facts}


@pytest.mark.parametrize(("text", "expected"), [
    ("relocated back to Tampere after the whole Oulu thing, so good to be home", ("assert", "location/home_city", "Tampere")),
    ("headed back north to Leeds last month, the south was too pricey", ("assert", "location/home_city", "Leeds")),
    ("been back in Ghent since march, way closer to my sister", ("assert", "location/home_city", "Ghent")),
    ("got poached by Zalando, couldn't say no", ("assert", "work/employer", "Zalando")),
    ("quit Aldi, I'm at Tesco now, the hours are better", ("assert", "work/employer", "Tesco")),
    ("bumped my bike budget up to €900, the cheap ones kept breaking", ("assert", "budget/bike", "€900")),
    ("tied the knot in a tiny ceremony last saturday", ("assert", "relationship/status", "married")),
])
def test_verb_classes_and_dropped_subjects(text, expected):
    assert expected in facts(text)


@pytest.mark.parametrize("text", [
    "my brother relocated back to Tampere",
    "my sister got poached by Zalando",
    "I don't think I moved back to Leeds for good",
])
def test_someone_else_or_a_hedge_stores_nothing_of_it(text):
    assert not {f for f in facts(text) if f[1] in ("location/home_city", "work/employer")}


@pytest.mark.parametrize(("raw", "name"), [("合肥快一年了", "合肥"), ("健身房那种氛围", "健身房"), ("无锡啊不对", "无锡"),
                                           ("米哈游了", "米哈游")])
def test_the_segmenter_ends_a_chinese_value_at_the_first_function_word(raw, name):
    assert leading_noun(raw) == name


def test_a_correction_that_names_the_wrong_value_finds_its_slot_among_the_current_facts():
    # Nothing in the sentence says "employer"; the wrong value does.
    assert facts("wait, it's Globex actually, not Initech, I mixed them up",
                 known={"work/employer": "Initech", "location/home_city": "Oslo"}) == {
        ("correct", "work/employer", "Globex")}
    assert ("correct", "location/home_city", "芜湖") in facts("说错了，其实是芜湖，不是合肥。",
                                                             known={"location/home_city": "合肥"})


def test_a_slip_corrected_in_the_same_message_is_not_a_correction_of_itself():
    found = facts("I live in Graz. sorry, I meant Linz! Graz is where my parents are")
    assert {f[2] for f in found if f[1] == "location/home_city"} == {"Linz"}


def test_laughter_is_tone_in_a_message_that_goes_on_and_a_hedge_in_a_bare_quip():
    long_one = asyncio.run(RuleFactExtractor().extract([Message(
        message_id="a", turn_index=0, role="user", created_at=AT,
        content="finally got the keys!! so yeah, I live in Porto now lol. still sleeping on a mattress")])).facts
    quip = asyncio.run(RuleFactExtractor().extract([Message(
        message_id="b", turn_index=0, role="user", created_at=AT, content="lol I live in Porto now")])).facts
    assert [f.confidence for f in long_one] == [0.9]
    assert [f.confidence for f in quip] == [0.4]


def test_a_tag_question_does_not_turn_a_statement_into_a_question():
    assert ("assert", "relationship/status", "single") in facts("single again and honestly? loving it")


@pytest.mark.parametrize(("text", "expected"), [
    # Lower-case chat: a known city is a place, a name no dictionary has is an organisation.
    ("living in porto now, the rent is way better", ("assert", "location/home_city", "porto")),
    ("started at wealthsimple last week, still learning the ropes", ("assert", "work/employer", "wealthsimple")),
    # Profile-style self descriptions and lists.
    ("About me: Ines, 31, lives in Aarhus, works as a sound engineer.", ("assert", "location/home_city", "Aarhus")),
    ("Name: Ines. Employer: Vestas. Role: sound engineer.", ("assert", "work/employer", "Vestas")),
    ("life update: new job (Klarna), new flat, new cat (Pesto)", ("assert", "pet/pesto", "cat")),
    # Amounts in words are budgets by the words around them.
    ("I've got fifteen hundred quid to spend on a new bike", ("assert", "budget/bike", "fifteen hundred quid")),
    # Chinese: the segmenter ends the value, GeoNames knows which names are cities.
    ("目前在宁波，平时就在宁波上班。", ("assert", "location/home_city", "宁波")),
    ("近况：换了工作（米哈游），搬了家。", ("assert", "work/employer", "米哈游")),
])
def test_names_in_lower_case_lists_and_chinese_are_found_by_what_they_are(text, expected):
    assert expected in facts(text)


@pytest.mark.parametrize("text", [
    "started at noon, finished late",          # "noon" is a word, not an employer
    "moved to a bigger desk at work",          # "a bigger desk" is no city
    "我在京东上班，做运营",                        # 京东 is a company, not a city
])
def test_common_words_are_not_taken_for_names(text):
    assert not {f for f in facts(text) if f[1] == "location/home_city"
                or (f[1] == "work/employer" and f[2] in {"noon", "a bigger desk"})}


def test_an_answer_to_the_assistants_question_fills_the_slot_it_asks_about():
    def answered(question: str, answer: str):
        messages = [Message(message_id="q", turn_index=0, role="assistant", content=question, created_at=AT),
                    Message(message_id="a", turn_index=1, role="user", content=answer,
                            created_at=AT + timedelta(minutes=1))]
        return {(f.namespace, f.key, f.value) for f in asyncio.run(RuleFactExtractor().extract(messages)).facts}

    assert ("location", "home_city", "Tucson") in answered("Are you still in Phoenix?", "No, Tucson now. Moved in May.")
    assert ("work", "employer", "小米") in answered("还在华为吗？", "早不在了，现在在小米")
    assert ("budget", "bike", "$900") in answered("What's your budget for the new bike?", "$900")
    assert ("relationship", "status", "in a relationship") in answered("你有对象吗？", "有，谈了两年了")


@pytest.mark.parametrize(("text", "known", "expected"), [
    ("the missus reckons I need a haircut", {}, ("assert", "relationship/status", "married")),
    ("me and my other half have been together since uni", {}, ("assert", "relationship/status", "in a relationship")),
    ("my ex-husband has the kids this weekend", {}, ("assert", "relationship/status", "divorced")),
    ("I'm not with Marco anymore. it's fine", {}, ("end", "relationship/status", "")),
    ("Hazel (my greyhound) refuses to go out in the rain", {}, ("assert", "pet/hazel", "dog")),
    ("I make my living as a tattoo artist", {}, ("assert", "work/job", "tattoo artist")),
    ("wrong company in my last message: Oracle → Okta.", {"work/employer": "Oracle"},
     ("correct", "work/employer", "Okta")),
    ("我们家的团子是只橘猫，特别能吃", {}, ("assert", "pet/团子", "cat")),
    ("被派去拉萨支援一个月，今天刚落地", {}, ("assert", "travel/trip_city", "拉萨")),
    ("我说反了，我是讨厌榴莲，喜欢榴莲的是我老公。", {"preference/榴莲": "like"}, ("correct", "preference/榴莲", "dislike")),
])
def test_more_ways_of_saying_a_fact_an_end_or_a_correction(text, known, expected):
    assert expected in facts(text, known=known)
