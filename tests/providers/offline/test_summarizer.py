"""The offline summarizer: a session's salient sentences rewritten in the third person, each citing
its message, within the token cap. No server: pure functions on messages."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta

import pytest

from agent_memory.core.models import Message, SummaryResult
from agent_memory.providers.base import SUMMARY_TOKEN_CAP, estimate_tokens
from agent_memory.providers.offline import ExtractiveSummarizer

T0 = datetime(2024, 5, 8, 10, 0, tzinfo=UTC)


def conversation(*turns: tuple[str, str | None, str]) -> list[Message]:
    """(role, speaker, content) turns; ids m1, m2, …"""
    return [Message(message_id=f"m{i + 1}", turn_index=i, role=role, speaker=speaker, content=content,  # type: ignore[arg-type]
                    created_at=T0 + timedelta(minutes=i)) for i, (role, speaker, content) in enumerate(turns)]


def summarize(messages: list[Message], cap: int = SUMMARY_TOKEN_CAP) -> SummaryResult:
    return asyncio.run(ExtractiveSummarizer().summarize(messages, token_cap=cap))


MOVE = conversation(
    ("user", "Lin", "Hi! Big news: I moved from Hangzhou to Shanghai last week."),
    ("assistant", "Assistant", "Congratulations! How is the new place?"),
    ("user", "Lin", "It's great, my apartment is near Jing'an Park. Can you suggest some dinner places near my new home?"),
    ("assistant", "Assistant", "You could try the dumpling shop on Yuyuan Road."),
    ("user", "Lin", "Thanks! I'm allergic to peanuts, by the way. ok"),
)
ZH = conversation(
    ("user", "林伟", "你好！我上个月从杭州搬到上海了。"),
    ("assistant", "助手", "恭喜！新家怎么样？"),
    ("user", "林伟", "挺好的，我的公司在陆家嘴。你能推荐几家附近的餐厅吗？"),
    ("assistant", "助手", "你可以试试静安寺附近的本帮菜馆。"),
    ("user", "林伟", "谢谢！我下周去北京出差三天。"),
)
SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself)\b", re.I)
FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'll|I'd|me|my|mine|myself)\b")


def words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z']+|\d+", text)}


def assert_well_formed(result: SummaryResult, messages: list[Message], cap: int) -> None:
    """Within the cap; every sentence cites one message that holds its content words, in the
    session's order; no speaker prefix, no first or second person, no turn copied whole."""
    by_id = {m.message_id: m for m in messages}
    assert result.sentences
    assert result.token_count == estimate_tokens(result.text) <= cap
    order = []
    for sentence in result.sentences:
        [cited] = sentence.source_message_ids
        source = by_id[cited]
        order.append(source.turn_index)
        speakers = {m.speaker for m in messages if m.speaker}
        assert not any(sentence.text.startswith(f"{s}:") or sentence.text.startswith(f"{s}：") for s in speakers)
        assert not SECOND_PERSON.search(sentence.text) and not FIRST_PERSON.search(sentence.text), sentence.text
        assert "我" not in sentence.text and "你" not in sentence.text, sentence.text
        assert sentence.text not in source.content, "rewritten, not quoted"
        # Its words come from the message it cites (the speaker's name and the reporting verbs aside).
        extra = words(sentence.text) - words(source.content) - words(" ".join(speakers)) - {
            "the", "user", "assistant", "said", "asked", "suggested", "that", "to", "they", "their", "them", "is",
            "has", "s", "lin's", "for", "whether", "was", "were", "are", "have", "others", "and", "recommended"}
        assert not {w for w in extra if w.rstrip("s") not in words(source.content)}, (sentence.text, extra)
    assert order == sorted(order), "the session's order"
    for m in messages:
        assert m.content.strip() not in result.text


def test_an_english_session_is_summarized_in_the_third_person():
    result = summarize(MOVE)
    assert_well_formed(result, MOVE, SUMMARY_TOKEN_CAP)
    cited = {s.text: s.source_message_ids for s in result.sentences}
    assert cited["Lin moved from Hangzhou to Shanghai last week."] == ["m1"]
    assert cited["Lin asked the assistant to suggest some dinner places near their new home."] == ["m3"]
    assert cited["Lin is allergic to peanuts, by the way."] == ["m5"]
    assert cited["The assistant suggested that Lin try the dumpling shop on Yuyuan Road."] == ["m4"]
    # Greetings, thanks and acknowledgements say nothing; the assistant's question is not memory.
    assert not re.search(r"\b(?:Hi|Thanks|ok|Congratulations)\b", result.text) and "How is" not in result.text


def test_a_chinese_session_is_summarized_in_chinese_in_the_third_person():
    result = summarize(ZH)
    assert_well_formed(result, ZH, SUMMARY_TOKEN_CAP)
    cited = {s.text: s.source_message_ids for s in result.sentences}
    assert cited["林伟上个月从杭州搬到上海了。"] == ["m1"]
    assert cited["林伟的公司在陆家嘴。"] == ["m3"]
    assert cited["林伟请助手推荐几家附近的餐厅。"] == ["m3"]
    assert cited["林伟下周去北京出差三天。"] == ["m5"]
    assert cited["助手建议林伟试试静安寺附近的本帮菜馆。"] == ["m4"]
    assert "你好" not in result.text and "谢谢" not in result.text and "挺好的" not in result.text


def test_a_speaker_without_a_name_is_the_user():
    messages = conversation(("user", None, "I live in Porto and I work as a nurse."),
                            ("user", "user", "My sister visits me every summer."),
                            ("user", None, "我住在波尔图。"))
    result = summarize(messages)
    assert [s.text for s in result.sentences] == [
        "The user lives in Porto and they work as a nurse.", "The user's sister visits them every summer.",
        "用户住在波尔图。"]
    assert [s.source_message_ids for s in result.sentences] == [["m1"], ["m2"], ["m3"]]


def test_statements_without_a_self_reference_are_reported_and_other_questions_left_out():
    messages = conversation(("user", "Sam", "The weather in Porto is lovely in May."),
                            ("user", "Sam", "Where should I take my dog this weekend?"),
                            ("user", "Sam", "Do you ever dream?"),
                            ("user", "Sam", "天气越来越热了。"))
    texts = [s.text for s in summarize(messages).sentences]
    assert texts == ["Sam said the weather in Porto is lovely in May.",
                     "Sam asked where they should take their dog this weekend.", "Sam提到天气越来越热了。"]


def test_a_second_person_in_the_conversation_is_summarized_like_the_user():
    messages = conversation(("user", "Caroline", "I went to a support group yesterday."),
                            ("assistant", "Melanie", "I ran a charity race for mental health last Saturday."),
                            ("assistant", "Melanie", "Painting is how I relax after work."),
                            ("assistant", "Assistant", "I am an assistant and I love helping."))
    texts = [s.text for s in summarize(messages).sentences]
    assert texts == ["Caroline went to a support group yesterday.",
                     "Melanie ran a charity race for mental health last Saturday.",
                     "Painting is how Melanie relaxes after work."]


def test_a_reported_statement_keeps_a_capital_only_for_a_name():
    messages = conversation(("user", "Sam", "Hiking keeps the mind clear."),
                            ("user", "Sam", "Porto is lovely in May."),
                            ("user", "Sam", "The best trip was the one to Porto."))
    texts = [s.text for s in summarize(messages).sentences]
    assert texts[:2] == ["Sam said hiking keeps the mind clear.", "Sam said Porto is lovely in May."]


@pytest.mark.parametrize("cap", [160, 60, 25, 10, 3, 1])
def test_the_summary_keeps_within_the_token_cap(cap):
    messages = MOVE + ZH[:1] + conversation(*[("user", "Lin", f"I visited museum number {i} in Shanghai on Sunday.")
                                               for i in range(40)])
    result = summarize(messages, cap)
    assert result.sentences and result.token_count == estimate_tokens(result.text) <= cap
    assert all(len(s.source_message_ids) == 1 for s in result.sentences)
    if cap == SUMMARY_TOKEN_CAP:
        assert_well_formed(result, messages, cap)
        assert len(result.sentences) < 20, "a summary, not every sentence"


def test_an_overlong_sentence_is_cut_at_a_word_boundary():
    long = conversation(("user", "Lin", "I collect " + " ".join(f"word{i}" for i in range(200)) + "."))
    result = summarize(long, 20)
    (sentence,) = result.sentences
    assert result.token_count <= 20 and sentence.text.startswith("Lin collects word0 word1")
    assert re.fullmatch(r"Lin collects word0(?: word\d+)*", sentence.text)
    chinese = conversation(("user", None, "我" + "很" * 300 + "喜欢杭州。"))
    result = summarize(chinese, 12)
    assert result.token_count <= 12 and result.sentences[0].text.startswith("用户很很")


def test_small_talk_and_empty_messages_give_no_sentences():
    assert summarize(conversation(("user", None, "  "), ("user", None, ""))).sentences == []
    result = summarize(conversation(("user", "Lin", "Hi!"), ("assistant", None, "Hello! How are you?"),
                                    ("user", "Lin", "Good, thanks. lol"), ("user", None, "哈哈，谢谢！")))
    assert result.sentences == [] and result.token_count == 0


def test_the_summary_is_the_same_on_every_run():
    first = summarize(MOVE + ZH)
    assert all(summarize(MOVE + ZH) == first for _ in range(3))
