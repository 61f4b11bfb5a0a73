"""Tests of the deterministic offline providers (agent_memory.providers.offline)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_memory.core.models import Message
from agent_memory.providers.base import EMBEDDING_DIMENSIONS, estimate_tokens
from agent_memory.providers.offline import (
    ExtractiveSummarizer,
    HashingEmbedder,
    HeuristicImportanceScorer,
    OfflineProviders,
    RuleFactExtractor,
    offline_providers,
)

WEDNESDAY = datetime(2024, 5, 8, 10, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[3]


def msg(content: str, mid: str = "m1", *, role: str = "user", speaker: str | None = None,
        turn: int = 0, at: datetime = WEDNESDAY) -> Message:
    return Message(message_id=mid, turn_index=turn, role=role, speaker=speaker, content=content, created_at=at)


def session(*contents: str) -> list[Message]:
    return [msg(c, f"m{i + 1}", turn=i, at=WEDNESDAY + timedelta(minutes=i)) for i, c in enumerate(contents)]


def extract(*contents: str, subject_role: str = "user"):
    return asyncio.run(RuleFactExtractor().extract(session(*contents), subject_role=subject_role)).facts


def triples(facts) -> list[tuple[str, str, str]]:
    return [(f.namespace, f.key, f.value) for f in facts]


# --- extractor: one statement, one fact ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("My name is Caroline.", ("profile", "name", "Caroline")),
        ("Hi, call me Bob please", ("profile", "name", "Bob")),
        ("我叫小明，今年25岁", ("profile", "name", "小明")),
        ("我的名字是王芳。", ("profile", "name", "王芳")),
        ("I live in Hangzhou.", ("location", "home_city", "Hangzhou")),
        ("I'm based in New York now.", ("location", "home_city", "New York")),
        ("I just moved to Shanghai last year!", ("location", "home_city", "Shanghai")),
        ("I relocated to Berlin in 2020", ("location", "home_city", "Berlin")),
        ("我住在杭州已经五年了", ("location", "home_city", "杭州")),
        ("我在上海生活", ("location", "home_city", "上海")),
        ("我搬到了深圳", ("location", "home_city", "深圳")),
        ("我去年搬去了成都工作", ("location", "home_city", "成都")),
        ("I work as a nurse at the hospital", ("work", "job", "nurse")),
        ("I'm a software engineer at a startup", ("work", "job", "software engineer")),
        ("my job is a teacher", ("work", "job", "teacher")),
        ("I work at Google as a PM", ("work", "employer", "Google")),
        ("我是一名工程师", ("work", "job", "工程师")),
        ("我是中学老师", ("work", "job", "中学老师")),
        ("我在腾讯工作", ("work", "employer", "腾讯")),
        # preference/<object> carries the polarity (PHRASING.md vocabulary)
        ("I love hiking", ("preference", "hiking", "like")),
        ("I really like Italian food", ("preference", "italian_food", "like")),
        ("I prefer tea over coffee", ("preference", "tea", "like")),
        ("I'm a big fan of jazz", ("preference", "jazz", "like")),
        ("我喜欢爬山", ("preference", "爬山", "like")),
        ("我爱吃火锅", ("preference", "火锅", "like")),
        ("I enjoy playing video games", ("preference", "video_games", "like")),
        ("I hate mornings", ("preference", "mornings", "dislike")),
        ("I don't like cilantro", ("preference", "cilantro", "dislike")),
        ("I can't stand traffic", ("preference", "traffic", "dislike")),
        ("I'm not into games", ("preference", "games", "dislike")),
        ("我不喜欢香菜", ("preference", "香菜", "dislike")),
        ("我讨厌下雨天", ("preference", "下雨天", "dislike")),
        ("I'm vegetarian", ("diet", "restriction", "vegetarian")),
        ("I am vegan", ("diet", "restriction", "vegan")),
        ("我吃素", ("diet", "restriction", "vegetarian")),
        ("I'm allergic to peanuts", ("diet", "allergy_peanuts", "peanuts")),
        ("我对花生过敏", ("diet", "allergy_花生", "花生")),
        ("I don't eat pork", ("diet", "avoid_pork", "pork")),
        ("我不吃牛肉", ("diet", "avoid_牛肉", "牛肉")),
        ("不吃辣", ("diet", "spicy", "no spicy food")),
        ("I can eat spicy food now", ("diet", "spicy", "eats spicy food")),
        # pet/<name> holds the species; an unnamed pet is keyed by its species
        ("I have a dog named Max", ("pet", "max", "dog")),
        ("I have a cat", ("pet", "cat", "cat")),
        ("my dog Max is sick", ("pet", "max", "dog")),
        ("Meet Sir Waddles, my very round hamster.", ("pet", "sir_waddles", "hamster")),
        ("Our dog's name is Biscuit.", ("pet", "biscuit", "dog")),
        ("Adopted a rescue greyhound called Dash", ("pet", "dash", "dog")),
        ("我养了一只猫", ("pet", "cat", "cat")),
        ("我有一只狗叫旺财", ("pet", "旺财", "dog")),
        ("家里的猫叫团团。", ("pet", "团团", "cat")),
        ("My budget is 5000", ("budget", "general", "5000")),
        ("My budget for the trip is $2,000", ("budget", "trip", "$2,000")),
        ("budget raised to 8000", ("budget", "general", "8000")),
        ("I can't spend more than $300 a month", ("budget", "general", "$300 a month")),
        ("预算是5000元", ("budget", "general", "5000元")),
        ("预算提高到8000", ("budget", "general", "8000")),
        ("我的旅行预算是三千元", ("budget", "trip", "三千元")),
        ("For the notebook I can go up to 1400 dollars.", ("budget", "computer", "1400 dollars")),
        ("We're cutting groceries down to 450 dollars a month.", ("budget", "food", "450 dollars a month")),
        ("装修预算降到十五万了", ("budget", "renovation", "十五万")),
        # no first-person pronoun: "we", verb-first sentences, dropped Chinese subjects
        ("We live in Utrecht now, the kids love cycling to school.", ("location", "home_city", "Utrecht")),
        ("Moved to Denver last spring, still getting used to the altitude.", ("location", "home_city", "Denver")),
        ("Finally settled in Porto! Best decision ever.", ("location", "home_city", "Porto")),
        ("Home is Melbourne these days.", ("location", "home_city", "Melbourne")),
        ("I'm based out of Calgary, though I travel a lot.", ("location", "home_city", "Calgary")),
        ("Just started at Stripe on Monday, so far so good.", ("work", "employer", "Stripe")),
        ("Been vegan for three years now.", ("diet", "restriction", "vegan")),
        ("刚搬到成都，还在适应。", ("location", "home_city", "成都")),
        ("在腾讯上班，天天加班。", ("work", "employer", "腾讯")),
        ("在苏州待了三年多了。", ("location", "home_city", "苏州")),
        # job titles outside a fixed list, relationship status, names said casually
        ("I'm a UX researcher.", ("work", "job", "UX researcher")),
        ("Work as a dental hygienist, three days a week.", ("work", "job", "dental hygienist")),
        ("我做产品经理。", ("work", "job", "产品经理")),
        ("My girlfriend and I just hit two years together.", ("relationship", "status", "in a relationship")),
        ("Divorced since 2021, co-parenting two kids.", ("relationship", "status", "divorced")),
        ("还是单身，家里天天催。", ("relationship", "status", "single")),
        ("Hey, Priya here!", ("profile", "name", "Priya")),
        ("It's Marcus again, forgot to ask you something.", ("profile", "name", "Marcus")),
        ("大家都叫我阿杰。", ("profile", "name", "阿杰")),
        ("I'm Sarah, by the way.", ("profile", "name", "Sarah")),
        ("叫我小王就行", ("profile", "name", "小王")),
        ("我住杭州。", ("location", "home_city", "杭州")),
        ("已经定居杭州了", ("location", "home_city", "杭州")),
        ("结婚三年了", ("relationship", "status", "married")),
        ("Got promoted to senior engineer last month.", ("work", "job", "senior engineer")),
        ("Just landed a job as a paralegal!", ("work", "job", "paralegal")),
        ("I'm now head of marketing.", ("work", "job", "head of marketing")),
        ("当了两年护士。", ("work", "job", "护士")),
        ("跳槽到了阿里。", ("work", "employer", "阿里")),
        ("入职腾讯三个月了。", ("work", "employer", "腾讯")),
        ("Switched jobs, now at Spotify.", ("work", "employer", "Spotify")),
        ("Been in Berlin for about two years now.", ("location", "home_city", "Berlin")),
        ("We've settled down in Perth.", ("location", "home_city", "Perth")),
        ("现在家在厦门。", ("location", "home_city", "厦门")),
        ("预算从五千提高到了八千。", ("budget", "general", "八千")),
        ("So excited - just got engaged!", ("relationship", "status", "engaged")),
        ("和女朋友分手了。", ("relationship", "status", "single")),
        ("I'm a teacher [image: I live in Paris]", ("work", "job", "teacher")),
    ],
)
def test_single_statement_gives_exactly_that_fact(text, expected):
    assert triples(extract(text)) == [expected]


def test_fact_carries_evidence_time_and_explicit_defaults():
    (fact,) = extract("I live in Hangzhou.")
    assert fact.evidence_message_ids == ["m1"]
    assert fact.observed_at == WEDNESDAY
    assert fact.claim_type == "explicit" and fact.permanence == "permanent" and fact.valid_until is None
    assert fact.confidence == pytest.approx(0.9)


def test_two_statements_in_one_message_both_found_in_order():
    assert triples(extract("I love hiking and I live in Denver. I have a dog named Rex")) == [
        ("preference", "hiking", "like"),
        ("location", "home_city", "Denver"),
        ("pet", "rex", "dog"),
    ]


@pytest.mark.parametrize(
    ("first", "second", "old", "new"),
    [("I live in Hangzhou.", "I moved to Shanghai last month.", "Hangzhou", "Shanghai"),
     ("我住在杭州。", "我搬到了上海。", "杭州", "上海")],
)
def test_a_move_uses_the_home_city_key(first, second, old, new):
    assert triples(extract(first)) == [("location", "home_city", old)]
    assert triples(extract(second)) == [("location", "home_city", new)]
    *earlier, fact = extract(first, second)
    assert (fact.namespace, fact.key, fact.value) == ("location", "home_city", new)
    if "last month" in second:
        # A move dated before the earlier statement: the later statement wins, both messages its evidence.
        assert earlier == [] and fact.evidence_message_ids == ["m1", "m2"]
        assert fact.observed_at == datetime(2024, 4, 1, tzinfo=UTC)
    else:
        # Two states in the order said, each dated by its own message: the earlier held until the move.
        (home,) = earlier
        assert (home.value, home.evidence_message_ids, home.observed_at) == (old, ["m1"], WEDNESDAY)
        assert fact.evidence_message_ids == ["m2"] and fact.observed_at == WEDNESDAY + timedelta(minutes=1)


@pytest.mark.parametrize(
    ("text", "city", "until"),
    [
        # an n-day stay from day S covers S … S+n-1
        ("I'm on a business trip to Tokyo next week.", "Tokyo", datetime(2024, 5, 19, 23, 59, 59, tzinfo=UTC)),
        ("I'm traveling to Paris for 3 days", "Paris", datetime(2024, 5, 10, 23, 59, 59, tzinfo=UTC)),
        ("I'm visiting Rome for 5 days", "Rome", datetime(2024, 5, 12, 23, 59, 59, tzinfo=UTC)),
        ("Spending four days in Lisbon", "Lisbon", datetime(2024, 5, 11, 23, 59, 59, tzinfo=UTC)),
        ("Work is sending me to Singapore for two weeks, leaving tomorrow.", "Singapore",
         datetime(2024, 5, 22, 23, 59, 59, tzinfo=UTC)),
        ("Headed to Anchorage for a week of training, starting today.", "Anchorage",
         datetime(2024, 5, 14, 23, 59, 59, tzinfo=UTC)),
        ("Been in Tokyo since Saturday for a client project, back Friday.", "Tokyo",
         datetime(2024, 5, 10, 23, 59, 59, tzinfo=UTC)),
        ("公司派我去深圳培训一周，今天出发。", "深圳", datetime(2024, 5, 14, 23, 59, 59, tzinfo=UTC)),
        ("要去杭州出差三天", "杭州", datetime(2024, 5, 10, 23, 59, 59, tzinfo=UTC)),
        ("I'm on a trip to Lisbon until May 20.", "Lisbon", datetime(2024, 5, 20, 23, 59, 59, tzinfo=UTC)),
        ("I'm on a work trip in Chicago", "Chicago", None),
        ("我下周去上海出差三天", "上海", datetime(2024, 5, 15, 23, 59, 59, tzinfo=UTC)),
        ("我这周在北京出差", "北京", datetime(2024, 5, 12, 23, 59, 59, tzinfo=UTC)),
        ("我要去大理旅游", "大理", None),
    ],
)
def test_trips_are_temporary_and_never_home_city(text, city, until):
    facts = extract(text)
    assert triples(facts) == [("travel", "trip_city", city)]
    assert facts[0].permanence == "temporary"
    assert facts[0].valid_until == until
    assert not any(f.key == "home_city" for f in facts)


def test_trip_and_home_in_one_session_keep_separate_keys():
    facts = extract("I live in Osaka.", "I'm traveling to Tokyo next week.")
    assert triples(facts) == [("location", "home_city", "Osaka"), ("travel", "trip_city", "Tokyo")]


@pytest.mark.parametrize(
    "text",
    [
        "I don't think I live in Paris anymore",
        "Do you live in Paris?",
        "Do I live in Paris",
        "If I moved to Paris I'd be happy",
        "I wish I live in Paris",
        "I'm thinking about moving to Austin",
        "My sister lives in Boston",
        "I'm a bit tired",
        "I love you",
        "I have a hot dog",
        "你住在哪里？",
        "我住在哪里？",
        "如果我搬到上海就好了",
        "我爱人是医生",
        "I live in Paris, just kidding",
        "I'm a doctor jk",
        "我住在火星，开玩笑的",
        "Nice view! [image: I live in Paris and I love hiking]",
        "   ",
    ],
)
def test_negations_questions_hypotheticals_and_jokes_give_no_facts(text):
    assert extract(text) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [("I live in Oslo, how about you?", [("location", "home_city", "Oslo")]),
     ("我住在上海，你呢？", [("location", "home_city", "上海")]),
     ("Do I live in Oslo, or in Bergen?", []),
     ("我住在上海吗？", [])],
)
def test_a_trailing_question_does_not_hide_the_statement_before_it(text, expected):
    assert triples(extract(text)) == expected


@pytest.mark.parametrize("text", ["I live in Paris lol", "我住在上海哈哈"])
def test_laughing_lowers_confidence_below_half(text):
    (fact,) = extract(text)
    assert fact.key == "home_city" and fact.confidence < 0.5


def test_weak_pattern_has_lower_confidence():
    (fact,) = extract("I'm really into birdwatching")
    assert (fact.namespace, fact.key, fact.confidence) == ("preference", "birdwatching", pytest.approx(0.6))


def test_spicy_food_change_keeps_the_key_and_changes_the_value():
    (before,) = extract("我不吃辣")
    (after,) = extract("最近能吃辣了")
    assert (before.namespace, before.key) == (after.namespace, after.key) == ("diet", "spicy")
    assert before.value != after.value
    # Said in two messages of one session: two states in order, the later one current.
    assert [(f.value, f.evidence_message_ids) for f in extract("我不吃辣", "最近能吃辣了")] == [
        (before.value, ["m1"]), (after.value, ["m2"])]
    (restated,) = extract("我不吃辣", "真的不能吃辣")
    assert restated.value == before.value and restated.evidence_message_ids == ["m1", "m2"]
    # "不吃辣" is the spicy rule's, not a generic "avoid" fact
    assert not any(f.key.startswith("avoid_") for f in extract("我不吃辣", "我不太能吃辣"))


def test_only_subject_role_messages_count():
    messages = [msg("I live in Paris.", "a1", role="assistant"), msg("I love jazz", "u1", turn=1)]
    facts = asyncio.run(RuleFactExtractor().extract(messages)).facts
    assert triples(facts) == [("preference", "jazz", "like")]
    facts = asyncio.run(RuleFactExtractor().extract(messages, subject_role="assistant")).facts
    assert triples(facts) == [("location", "home_city", "Paris")]


def test_extraction_result_bookkeeping_and_determinism():
    messages = session("My name is Ann. I live in Oslo.", "我喜欢爬山", "I have a cat")
    first = asyncio.run(RuleFactExtractor().extract(messages))
    second = asyncio.run(RuleFactExtractor().extract(messages))
    assert first.extractor == "rule-extractor" and first.extractor_version == RuleFactExtractor.version
    assert first.model_dump() == second.model_dump()
    assert [f.evidence_message_ids for f in first.facts] == [["m1"], ["m1"], ["m2"], ["m3"]]


# --- importance ---------------------------------------------------------------------------------


def score(*contents: str):
    return asyncio.run(HeuristicImportanceScorer().score(session(*contents)))


def test_importance_bounds_and_ordering():
    small_talk = score("ok", "thanks")
    life_event = score("I got married last week and we moved to Boston!")
    huge = score(*(["I moved to Paris, got married, graduated, was diagnosed with asthma. I'm allergic to cats, "
                    "my budget is 5000, I love jazz and I'm a nurse. I'm so excited!"] * 20))
    for result in (small_talk, life_event, huge, score("")):
        assert 1 <= result.importance <= 10
    assert life_event.importance > small_talk.importance
    assert huge.importance == 10
    assert "life events" in life_event.rationale
    assert score("   ").importance == 1


@pytest.mark.parametrize("text", [
    "I got a job offer from the hospital and I start next month.", "I lost my dad last spring.",
    "She proposed to me on the beach!", "我拿到了一家大厂的offer，下个月入职。", "我明天一早回老家奔丧。"])
def test_job_changes_and_bereavements_are_life_events(text):
    assert "life events" in score(text).rationale and score(text).importance > score("I lost my keys again.").importance


def test_importance_rationale_lists_signals_in_chinese():
    result = score("我下个月结婚，然后搬到上海。我对花生过敏。")
    assert result.importance >= 7
    assert "结婚" in result.rationale and "preference or constraint" in result.rationale


# --- summarizer ---------------------------------------------------------------------------------

CONVERSATION = [
    msg("Hi! I just moved to Shanghai last month. The new apartment is near Jing'an Park. "
        "[image: boxes in a living room]", "m1", speaker="Caroline"),
    msg("Congrats! How is the apartment? Is the commute to your office at Alibaba okay?", "m2",
        role="assistant", speaker="Melanie", turn=1),
    msg("   ", "m3", speaker="Caroline", turn=2),
    msg("It's fine. I start my new job at Alibaba on June 3. I'm a bit nervous but excited! ok", "m4",
        speaker="Caroline", turn=3),
    msg("我下周去杭州出差三天。我的预算是5000元。谢谢！", "m5", turn=4),
]


def summarize(messages, cap):
    return asyncio.run(ExtractiveSummarizer().summarize(messages, token_cap=cap))


@pytest.mark.parametrize("cap", [160, 60, 25, 10, 3, 1])
def test_summary_respects_cap_and_quotes_its_sources(cap):
    result = summarize(CONVERSATION, cap)
    by_id = {m.message_id: m for m in CONVERSATION}
    assert result.sentences, "at least one sentence when there is text"
    assert result.token_count == estimate_tokens(result.text) <= cap
    positions = []
    for sentence in result.sentences:
        assert len(sentence.source_message_ids) == 1
        source = by_id[sentence.source_message_ids[0]]
        prefix = f"{source.speaker}: " if source.speaker else ""
        body = sentence.text[len(prefix):] if sentence.text.startswith(prefix) else sentence.text
        assert body and body in source.content
        assert "[image:" not in body
        positions.append((source.turn_index, source.content.index(body)))
    assert positions == sorted(positions), "original message order"


def test_summary_prefers_salient_sentences_over_filler():
    text = summarize(CONVERSATION, 60).text
    assert "Shanghai" in text and "Alibaba" in text
    assert "ok" not in text.split() and "谢谢" not in text


def test_summary_truncates_an_overlong_sentence_at_a_word_boundary():
    words = [f"word{i}" for i in range(200)]
    long = msg(" ".join(words) + ".", "m1")
    result = summarize([long], 20)
    (sentence,) = result.sentences
    assert result.token_count <= 20 and sentence.text in long.content
    assert sentence.text.split() == words[: len(sentence.text.split())]
    chinese = msg("我" + "很" * 300 + "喜欢杭州。", "m2")
    result = summarize([chinese], 12)
    assert result.token_count <= 12 and result.sentences[0].text in chinese.content


def test_summary_is_identical_across_processes():
    """Salience sums per-term weights; summed in a fixed order, ties break the same way in every worker."""
    texts = [f"I visited {a}, {b} and {c} with my sister in May." for a, b, c in
             (("Lisbon", "Porto", "Braga"), ("Porto", "Braga", "Faro"), ("Faro", "Evora", "Lisbon"),
              ("Braga", "Evora", "Sintra"))] * 4
    code = ("import asyncio, json; from datetime import datetime, timezone; "
            "from agent_memory.core.models import Message; "
            "from agent_memory.providers.offline import ExtractiveSummarizer; "
            f"ms = [Message(message_id=f'm{{i}}', turn_index=i, role='user', content=t, "
            f"created_at=datetime(2024, 5, 8, tzinfo=timezone.utc)) for i, t in enumerate({texts!r})]; "
            "r = asyncio.run(ExtractiveSummarizer().summarize(ms, token_cap=60)); "
            "print(json.dumps([[s.text, s.source_message_ids] for s in r.sentences]))")
    outputs = {subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                              env={"PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}).stdout for seed in ("1", "2", "3")}
    assert len(outputs) == 1 and json.loads(outputs.pop())


def test_summary_of_empty_messages_is_empty():
    result = summarize([msg("  ", "m1"), msg("", "m2")], 160)
    assert result.sentences == [] and result.token_count == 0


# --- embedder -----------------------------------------------------------------------------------


def embed(texts):
    return asyncio.run(HashingEmbedder().embed(texts))


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_embeddings_shape_norm_and_empty_text():
    result = embed(["I love hiking", "", "   "])
    assert result.model == "hashing-embedder-v1-384"
    assert all(len(v) == EMBEDDING_DIMENSIONS for v in result.vectors)
    assert math.isclose(math.sqrt(sum(x * x for x in result.vectors[0])), 1.0, rel_tol=1e-9)
    assert result.vectors[1] == [0.0] * EMBEDDING_DIMENSIONS == result.vectors[2]
    assert not any(math.isnan(x) for v in result.vectors for x in v)


@pytest.mark.parametrize(
    ("anchor", "similar", "unrelated"),
    [
        ("I love hiking in the mountains", "I enjoy mountain hikes on weekends", "The quarterly tax report is due Friday"),
        ("My dog Max likes long walks", "Max the dog loves walking", "Quantum computing uses qubits"),
        ("我喜欢在山里徒步", "我爱徒步和爬山", "明天的会议改到下午三点"),
        ("我住在杭州", "我搬到了杭州", "预算提高到八千元"),
    ],
)
def test_similar_texts_are_closer_than_unrelated(anchor, similar, unrelated):
    a, s, u = embed([anchor, similar, unrelated]).vectors
    assert cosine(a, s) > cosine(a, u) + 0.1


def test_embeddings_are_identical_across_processes():
    texts = ["I love hiking in the mountains", "我住在杭州", "mixed 中文 and English 123"]
    here = embed(texts).vectors
    code = ("import asyncio, json; from agent_memory.providers.offline import HashingEmbedder; "
            f"print(json.dumps(asyncio.run(HashingEmbedder().embed({texts!r})).vectors))")
    for seed in ("1", "2"):  # different string-hash salts must not matter
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                             env={"PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)})
        assert json.loads(out.stdout) == here


# --- bundle -------------------------------------------------------------------------------------


def test_offline_providers_bundle():
    bundle = offline_providers()
    assert isinstance(bundle, OfflineProviders)
    assert (bundle.extractor.name, bundle.scorer.name, bundle.summarizer.name, bundle.embedder.name) == (
        "rule-extractor", "heuristic-importance", "extractive-summarizer", "e5-small")  # the offline default
    assert all(p.version for p in (bundle.extractor, bundle.scorer, bundle.summarizer, bundle.embedder))
    assert bundle.embedder.dimensions == EMBEDDING_DIMENSIONS
    with pytest.raises(dataclasses.FrozenInstanceError):
        bundle.extractor = RuleFactExtractor()  # type: ignore[misc]


# --- extractor: operations, third parties, irony, dates ----------------------------------------


def ops(facts) -> list[tuple[str, str, str, str]]:
    return [(f.operation, f.namespace, f.key, f.value) for f in facts]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # "no longer" and negations of a current fact end it (value: what ended, "" for whatever is current)
        ("No longer vegan, it didn't work for me.", [("end", "diet", "restriction", "vegan")]),
        ("Started eating fish again, so I'm not strictly vegetarian anymore.",
         [("end", "diet", "restriction", "vegetarian")]),
        ("I don't live in Austin, haven't since the spring.", [("end", "location", "home_city", "Austin")]),
        ("我不住在北京", [("end", "location", "home_city", "北京")]),
        ("已经不住重庆了。", [("end", "location", "home_city", "重庆")]),
        ("我已经不在华为了。", [("end", "work", "employer", "华为")]),
        ("Bad news, I lost my job at DoorDash this month.", [("end", "work", "employer", "DoorDash")]),
        ("Not a student anymore, graduated!", [("end", "work", "job", "student")]),
        ("现在没有女朋友了。", [("end", "relationship", "status", "in a relationship")]),
        # stopping a preference ends it; a change of taste flips the polarity of the same key
        ("I don't listen to jazz anymore.", [("end", "preference", "jazz", "")]),
        ("Quit coffee in January, only tea now.", [("end", "preference", "coffee", "")]),
        ("Honestly I'm done with Marvel movies.", [("end", "preference", "marvel_movies", "")]),
        ("戒游戏了，没意思。", [("end", "preference", "游戏", "")]),
        ("Weirdly, I've started to like cilantro.", [("assert", "preference", "cilantro", "like")]),
        ("现在受不了榴莲的味道了。", [("assert", "preference", "榴莲", "dislike")]),
        # a pet's death ends pet/<name>; a grandparent's does not touch any pet
        ("Pepper passed away last night. I'm wrecked.", [("end", "pet", "pepper", "")]),
        ("We had to say goodbye to Max, he was family for ten years.", [("end", "pet", "max", "")]),
        ("团团去世了，十五岁。", [("end", "pet", "团团", "")]),
        ("My old dog died yesterday.", [("end", "pet", "dog", "")]),
        ("Sadly we had to put Biscuit down yesterday.", [("end", "pet", "biscuit", "")]),
        ("I don't like jazz anymore.", [("end", "preference", "jazz", "")]),
        ("不喜欢喝咖啡了。", [("end", "preference", "咖啡", "")]),
        ("Not into sushi anymore.", [("end", "preference", "sushi", "")]),
        ("Back to eating meat, sorry veggies.", [("end", "diet", "restriction", "")]),
        ("Left Google and joined Meta.", [("end", "work", "employer", "Google"), ("assert", "work", "employer", "Meta")]),
        ("Actually I live in Houston, not Austin.", [("correct", "location", "home_city", "Houston")]),
        ("My grandma passed away last week.", []),
        ("奶奶去世了。", []),
        # leaving one employer for another: the end comes before the new value
        ("离开华为了，现在在小米。", [("end", "work", "employer", "华为"), ("assert", "work", "employer", "小米")]),
        ("I'm not at Amazon anymore, I'm with Microsoft now.",
         [("end", "work", "employer", "Amazon"), ("assert", "work", "employer", "Microsoft")]),
        # corrections void the earlier value
        ("Sorry, I said Lille last time, I meant Lyon. I live in Lyon.",
         [("correct", "location", "home_city", "Lyon")]),
        ("I misspoke before, I'm a midwife, not a nurse.", [("correct", "work", "job", "midwife")]),
        ("记错了，豆豆是我的猫，不是狗。", [("correct", "pet", "豆豆", "cat")]),
    ],
)
def test_operations_end_and_correct(text, expected):
    assert ops(extract(text)) == expected


@pytest.mark.parametrize(
    "text",
    [
        "My brother's budget for his bike is 2000 dollars.",
        "My friend Raj lives in Pune and works at Infosys.",
        "My sister lives in Boston",
        "我妈喜欢跳广场舞。",
        "Hey Mel, good to chat again!",
        "At the event I got talking to someone named David.",
        "我是北京人。",
        "Oh yeah, I just LOVE sitting in traffic for two hours /s",
        "My budget is unlimited, obviously /s",
        "Oh sure, I just adore doing my taxes. Best hobby ever.",
        "我超爱堵车的，真的 /s",
        "真是太好了呢（并不）",
        "I'll have to look into shelters near me soon, it'd be great to have a pup around.",
        "I'm not much of a hiker, but there's a nice trail just north of where I live.",
        "要是我有一百万预算就好了。",
        "Just got back from a family road trip yesterday, it was fun!",
        "Love the necklace, any special meaning?",
        "Wow, the love around you is awesome!",
        "I won't quit on my dreams.",
        "Great speech, it got us fired up.",
        "I can't let go of my dream to make a difference.",
        "A fellow chef in the kitchen is always a great help!",
        "Thanks again!",
        "我弟弟住在上海。",
        "朋友在华为上班。",
        "Going back to Paris for a week.",
    ],
)
def test_third_parties_irony_and_plans_give_no_facts(text):
    assert extract(text) == []


@pytest.mark.parametrize(
    ("text", "key", "observed"),
    [
        # Wednesday 8 May 2024: "last weekend" is 4-5 May, not the message time
        ("We moved into our new place in Leeds last weekend.", "home_city", datetime(2024, 5, 4, tzinfo=UTC)),
        ("Moved to Swansea two weeks ago, still unpacking.", "home_city", datetime(2024, 4, 24, tzinfo=UTC)),
        ("两周前搬去了株洲。", "home_city", datetime(2024, 4, 24, tzinfo=UTC)),
        ("前天入职了滴滴。", "employer", datetime(2024, 5, 6, tzinfo=UTC)),
        ("I've been living in Lyon for six years.", "home_city", datetime(2018, 5, 8, tzinfo=UTC)),
        ("我在深圳生活了五年了。", "home_city", datetime(2019, 5, 8, tzinfo=UTC)),
        # each clause is dated by its own time words; a fronted time clause dates the next one
        ("Last month, I moved to Oslo.", "home_city", datetime(2024, 4, 1, tzinfo=UTC)),
        ("We're back in San Diego, sold the Phoenix place last week.", "home_city", WEDNESDAY),
    ],
)
def test_changes_are_dated_by_the_time_they_name(text, key, observed):
    (fact,) = extract(text)
    assert fact.key == key and fact.observed_at == observed


@pytest.mark.parametrize(
    ("text", "start", "until"),
    [
        ("Spent last weekend in Annecy, gorgeous lake.", datetime(2024, 5, 4, tzinfo=UTC),
         datetime(2024, 5, 5, 23, 59, 59, tzinfo=UTC)),
        ("大前天到大理出差，要待五天。", datetime(2024, 5, 5, tzinfo=UTC), datetime(2024, 5, 9, 23, 59, 59, tzinfo=UTC)),
        ("下周去广州培训三天。", datetime(2024, 5, 13, tzinfo=UTC), datetime(2024, 5, 15, 23, 59, 59, tzinfo=UTC)),
        ("Got sent to Houston for a project, back in ten days.", datetime(2024, 5, 8, 10, 0, tzinfo=UTC),
         datetime(2024, 5, 17, 23, 59, 59, tzinfo=UTC)),
        ("去杭州玩三天。", datetime(2024, 5, 8, 10, 0, tzinfo=UTC), datetime(2024, 5, 10, 23, 59, 59, tzinfo=UTC)),
    ],
)
def test_stays_start_when_said_and_last_n_days(text, start, until):
    (fact,) = extract(text)
    assert (fact.key, fact.observed_at, fact.valid_until) == ("trip_city", start, until)


def test_a_bare_answer_fills_the_slot_the_assistant_asked_for():
    messages = [msg("Big news, I just signed with a new team!", "u1"),
                msg("Congrats! Which team?", "a1", role="assistant", turn=1),
                msg("The Minnesota Wolves!", "u2", turn=2)]
    facts = asyncio.run(RuleFactExtractor().extract(messages)).facts
    assert triples(facts) == [("work", "employer", "Minnesota Wolves")]


def test_pets_named_in_a_later_clause_or_answer():
    assert triples(extract("Guess what, I got a puppy two weeks ago! She's called Coco.")) == [("pet", "coco", "dog")]
    assert triples(extract("养了两条金鱼，一条叫红红一条叫白白。")) == [("pet", "红红", "fish"), ("pet", "白白", "fish")]
    messages = [msg("We have a pup and a kitty.", "u1"), msg("What are their names?", "a1", role="assistant", turn=1),
                msg("Luna and Oliver!", "u2", turn=2)]
    facts = asyncio.run(RuleFactExtractor().extract(messages)).facts
    assert triples(facts) == [("pet", "luna", "dog"), ("pet", "oliver", "cat")]


@pytest.mark.parametrize(
    ("first", "second"),
    [("Laptop budget: 1200 dollars.", "For the notebook I can go up to 1400 dollars."),
     ("Monthly rent budget is 1500.", "For the apartment I can pay up to 1700 a month."),
     ("My grocery budget is 400 a month.", "I've capped food spending at 350 a month."),
     ("旅游预算五千。", "这次旅行的预算提到了六千。"),
     ("手机预算三千。", "买新手机最多花三千五。")],
)
def test_one_budget_said_two_ways_has_one_key(first, second):
    (a,), (b,) = extract(first), extract(second)
    assert (a.namespace, a.key) == (b.namespace, b.key) and a.value != b.value
