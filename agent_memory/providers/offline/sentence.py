"""Reading one sentence: its statement part (questions cut off), and whether a statement is hedged,
negated, said in jest or in irony."""

from __future__ import annotations

import re
import unicodedata

from agent_memory.providers.offline.subject import _clause_start
from agent_memory.providers.offline.values import _has_cjk

_IMAGE_TAG = re.compile(r"\s*\[image:[^\]]*\]")
_HYPOTHETICAL = re.compile(r"\b(?:if|wish|would|could|imagine|suppose|supposing|pretend|maybe|perhaps|might|"
                           r"someday|dream|unless|whether|hope|hoping|thinking about|considering|plan\s+to|planning\s+(?:to|on)|"
                           r"don't\s+think|do\s+not\s+think|not\s+sure|unsure|doubt|"
                           r"want to|wanna|going to|gonna|should|used to|it'd|i'd)\b|如果|假如|要是|假设|希望|但愿|"
                           r"也许|或许|梦想|想象|幻想|万一|好想|真想|多想|要是能", re.I)
# Chinese words of intent hedge their own clause only ("装修计划取消了，…所以那笔预算也不存在了" states an end).
_ZH_INTENT = re.compile(r"打算|想要|考虑|准备|计划|等[^,，。]{1,6}(?:了|以后|之后)(?:再|就)?想|想(?=搬|去|换|回|住|当|做|辞|跳|转行|买|养)")
_NEGATION = re.compile(r"\b(?:not|never|no|don't|doesn't|didn't|isn't|aren't|wasn't|won't|can't|cannot|nor|"
                       r"hardly|haven't|hasn't)\b|(?<![受对忍])不(?!过|错|久|少|仅|但|管|欢|了了)|没(?!救)|(?<![特分区类级个])别(?!人)|未(?!婚)|并非", re.I)
_NO_LONGER = re.compile(r"\bno\s+longer\b|\b(?:anymore|any\s+more)\b|不再|已经不|不.{0,8}了[。.!]*$|没有.{0,6}了", re.I)
_SARCASM = re.compile(r"(?:^|\s)/s\b|\(并不\)|\(?才怪\)?|呵呵|^\s*(?:对对对|是是是|好好好|对对)|🙄|(?:简直|真是)(?:是)?人生巅峰|\bnot!\s*$|\byeah,?\s+right\b|^\s*oh\s+(?:sure|yeah|great|totally)\b.{0,40}"
                      r"\b(?:just|totally|absolutely|really)\s+(?:love|adore|enjoy)|\bbest\s+\w+\s+ever\b.*\bnot\b", re.I)
_JOKE_SKIP = re.compile(r"\bjust\s+kidding\b|\bj/?k\b|\bkidding\b|开玩笑|逗你", re.I)
_JOKE_SOFT = re.compile(r"\blol\b|\blmao\b|\bha(?:ha)+\b|\brofl\b|哈哈|😂|🤣|😆", re.I)
_QUESTION_START = re.compile(r"^\s*(?:do|does|did|am|are|is|can|could|would|will|should|shall|where|what|why|who|"
                             r"whom|whose|have you|has)(?=\s)", re.I)
_SENTENCE_SPLIT = re.compile(r"(?<!\bSt\.)(?<!\bMt\.)(?<!\bDr\.)(?<!\bMr\.)(?<!Mrs\.)(?<!\bMs\.)(?<=[.!?])\s+|(?<=[。!?])(?![!?])\s*|\n+")


def _prepare(content: str) -> str:
    # NFKC folds full-width punctuation (，？！) to ASCII so one character class serves both languages.
    text = unicodedata.normalize("NFKC", _IMAGE_TAG.sub(" ", content))
    text = re.sub(r"\b(?:im|Im|IM)\b(?=\s+[a-z])", "I'm", text)
    text = re.sub(r"\b(?:ive|Ive)\b(?=\s+(?:been|got|moved|lived|started|had|always))", "I've", text)
    # Texting drops the apostrophe of a negation ("cant stand olives", "dont eat meat").
    text = re.sub(r"\b(can|don|doesn|didn|isn|aren|wasn|weren|haven|hasn|couldn|wouldn|shouldn)t\b", r"\1't", text,
                  flags=re.I)
    # Voice-note fillers carry nothing and break phrases apart ("we named him, um, Waffles").
    text = re.sub(r"(?:,\s*)?\b(?:u+m+|u+h+|e+r+m+|hmm+)\b,?", "", text, flags=re.I)
    return text.replace("’", "'").replace("‘", "'").replace(" - ", " — ")


# A tag or rhetorical question after a statement ("single again and honestly?", "…, right?").
_TAG_QUESTION = re.compile(r"(?:,?\s+(?:and\s+)?(?:honestly|right|you\s+know|ya\s+know|huh|eh|no|tbh|lol|"
                           r"isn't\s+it|aren't\s+we|wild|crazy|guess\s+what)\?+)+\s*$|(?:,?\s*(?:对吧|是吧|你知道吗)\?+)\s*$",
                           re.I)


def _statement_part(sentence: str) -> str:
    """The sentence minus any question: "I live in Oslo, and you?" keeps "I live in Oslo"."""
    s = sentence.strip()
    if _QUESTION_START.match(s):
        # A rhetorical opener before a statement ("who even am I, I really enjoy …") is cut off.
        if not s.endswith("?") and "," in s:
            return s[s.index(",") + 1:].strip()
        return ""
    s = _TAG_QUESTION.sub("", s) or s
    if re.search(r"(?:\?\?|\?!|!\?)$", s) and not _has_cjk(s):
        return s.rstrip("?! ")  # "been seeing someone for like three weeks??": a statement said in disbelief
    if s.endswith("?") or s.endswith("吗") or re.search(r"怎么样|好不好|行不行|呢\?*$", s):
        # The question is the last clause; a comma inside a number ("$1,200") ends no clause.
        cut = max((i for i, ch in enumerate(s) if ch in ",;:、—～~"
                   and not (ch == "," and 0 < i < len(s) - 1 and s[i - 1].isdigit() and s[i + 1].isdigit())), default=-1)
        return s[:cut] if cut > 0 and not re.search(r"怎么样|好不好|行不行", s[:cut]) else ""
    return s


# A contrast opens a clause of its own: a hedge or a past before it does not reach past it ("I used
# to live in Paris but now I'm in Rome", "想过搬家，不过还住在苏州").
_CONTRAST = re.compile(r"\b(?:but|though|although|whereas|yet|however|now|these\s+days|nowadays|today)\b|但是|不过|可是|但|"
                       r"现在|如今|目前|后来|然后", re.I)
# Words that put a statement in the past: a state that held and no longer does.
_PAST = re.compile(r"\b(?:used\s+to|formerly|previously|back\s+then|once\s+upon\s+a\s+time|in\s+my\s+\w+\s+days)\b|"
                   r"以前|之前|原来|曾经|过去|早年|当年|那时候?|从前", re.I)
_SAID = re.compile(r"\b(?:said|told|say)\b|说|讲", re.I)


def _scope_start(sentence: str, start: int) -> int:
    """Where the part of a sentence that can hedge or date a statement starting at `start` begins:
    after a colon's lead-in ("I should clarify: …") and after the last contrast before it."""
    begin = sentence.rfind(":", 0, start) + 1
    for m in _CONTRAST.finditer(sentence, begin, start):
        begin = m.start() if _has_cjk(m.group(0)) else m.end()
    return begin


def _past_state(sentence: str, start: int) -> bool:
    """Whether a statement says what held before, not what holds ("I used to live in Paris",
    "以前在华为上班"): its clause puts it in the past and reports no earlier words ("之前说…")."""
    scope = sentence[max(_scope_start(sentence, start), _clause_start(sentence, start)):start]
    return bool(_PAST.search(scope)) and not _SAID.search(scope)


def _hypothetical(sentence: str, start: int) -> bool:
    return bool(_HYPOTHETICAL.search(sentence[_scope_start(sentence, start):start])
                or _ZH_INTENT.search(sentence[max(_clause_start(sentence, start), sentence.rfind("，", 0, start) + 1):start]))


def _negated(sentence: str, start: int) -> bool:
    return bool(_NEGATION.search(sentence[_clause_start(sentence, start):start]))
