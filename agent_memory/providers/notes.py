"""Observations: one compact note per informative message, for recall at message granularity.

A note keeps the speaker, the message's informative sentences (greetings, thanks and bare
reactions dropped), the image caption, and every relative time resolved against the message
time. It cites exactly the one message it condenses.
"""

from __future__ import annotations

import re

from agent_memory.core.models import Message, Observation
from agent_memory.core.timeexpr import annotate

_IMAGE_TAG = re.compile(r"\s*\[image:[^\]]*\]")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")
_WORD = re.compile(r"[^\W\d_][^\W_]*(?:'[^\W_]+)?|\d+")
_CJK = re.compile(r"[\u3400-\u9fff]")
# Openers of conversational reactions; a short sentence starting with one carries no memory.
_REACTION = re.compile(
    r"^(?:wow|woah|whoa|aw+|omg|oh|hey|hi|hello|thanks|thank you|thx|congrats|congratulations|yay|haha|lol|"
    r"sure|ok|okay|yeah|yep|yes|no problem|sounds|that sounds|that's|that is|it sounds|glad|so glad|i'm glad|"
    r"good luck|take care|bye|see you|nice|great|awesome|cool|amazing|love that|me too|same here|exactly|"
    r"definitely|totally|absolutely|good to|you're welcome|no worries|keep it up|you got this)\b", re.I)
_FUNCTION_WORDS = frozenset(
    "a an the and or but so to of in on at for with by from is are was were be been am it its this that these those "
    "i me my you your we our they them he she his her him just really very too also so such what how".split())
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|we|our|us)\b|我")


def _content_words(sentence: str) -> list[str]:
    return [w for w in _WORD.findall(sentence.lower()) if w not in _FUNCTION_WORDS and len(w) > 2]


# A greeting or interjection opening a sentence ("Hi, my name is Lin."): judged without it.
_OPENER = re.compile(r"^(?:hi|hey|hello|wow|woah|whoa|oh|ah|aw+|omg|yay|haha|lol|ok|okay|yeah|yep|yes|well|so)"
                     r"(?:\s+\w+)?\s*[,!.]+\s*", re.I)


def informative(sentence: str) -> bool:
    """Whether a sentence says something worth remembering (not a greeting or a reaction)."""
    sentence = _OPENER.sub("", sentence.strip(), count=1) or sentence
    if _CJK.search(sentence):
        return len(_CJK.findall(sentence)) >= 4 and not re.match(r"^(?:谢谢|哈哈|好的|嗯|哦|太好了|没问题)", sentence)
    words = _content_words(sentence)
    if sentence.rstrip().endswith("?") and not _FIRST_PERSON.search(sentence):
        return False  # a question to the other person: the answer, not the question, is memory
    if _REACTION.match(sentence.strip()) and len(words) <= 5:
        return False
    return len(words) >= 2 or bool(re.search(r"\d", sentence))


def write_observation(message: Message) -> Observation | None:
    content = _IMAGE_TAG.sub("", message.content).strip()
    kept = [s.strip() for s in _SENTENCE_SPLIT.split(content) if s.strip() and informative(s.strip())]
    caption = (message.image_caption or "").strip()
    if not kept and not caption:
        return None
    body = annotate(" ".join(kept), message.created_at) if kept else ""
    if caption:
        body = f"{body} [photo: {caption}]".strip()
    speaker = message.speaker or message.role
    return Observation(text=f"{speaker}: {body}", source_message_ids=[message.message_id],
                       happened_at=message.created_at)


def _question_answered(previous: Message | None, message: Message) -> str | None:
    """The other speaker's question just before this message, if there was one."""
    if previous is None or previous.speaker == message.speaker:
        return None
    questions = [s for s in _SENTENCE_SPLIT.split(_IMAGE_TAG.sub("", previous.content)) if s.strip().endswith(("?", "？"))]
    return " ".join(questions)[:300] or None


def write_observations(messages: list[Message]) -> list[Observation]:
    notes: list[Observation] = []
    for previous, message in zip([None, *messages], messages, strict=False):  # previous runs one behind
        note = write_observation(message)
        if note is not None:
            notes.append(note.model_copy(update={"answers": _question_answered(previous, message)}))
    return notes
