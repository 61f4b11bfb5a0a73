"""Corrections: a message that corrects an earlier one ("I meant", "it's A, not B", 说错了) turns
its statements into CORRECT operations on the slot whose value it replaces."""

from __future__ import annotations

import re
from difflib import SequenceMatcher

from agent_memory.core.fact_text import normalise_value
from agent_memory.core.models import ExtractedFact, KnownFact, Message
from agent_memory.providers.offline.gazetteer import is_chinese_city
from agent_memory.providers.offline.lexicon import (
    _BREEDS,
    _CANONICAL_VALUES,
    _EN_SPECIES,
    _PARTNER,
    _SPECIES,
    _STATUS_WORDS,
    _ZH_BREEDS,
    _ZH_JOB_TAIL,
    _ZH_SPECIES,
    _species,
)
from agent_memory.providers.offline.values import _CJK, _PRONOUNS, _has_cjk, _proper_noun, _slug

_CORRECTION = re.compile(r"\bI\s+meant\b|\bmisspoke\b|\bmis-spoke\b|\bmy\s+mistake\b|\bmy\s+bad\b|"
                         r"\bI\s+was\s+wrong\b|\bcorrection\b|\bscratch\s+(?:that|what\s+I\s+said|the\s+(?:part|bit)\s+about)\b|\bwait,?\s+no\b|"
                         r"\bto\s+correct\b|\btypo\b|\bsaid\s+the\s+wrong\b|\bgot\s+(?:it|that)\s+wrong\b|\bmix(?:ed)?\s+(?:them|it|those)\s+up\b|"
                         r"\bcorrected\s+me\b|\bI\s+misspoke\b|\bwrong\s+(?:city|company|job|name|number|one|place|employer|town)\b|"
                         r"\bgave\s+you\s+the\s+wrong\b|\bI\s+(?:told|gave)\s+you\s+(?-i:[A-Z])[^.!?]{0,40}?(?:it's|it\s+is)\b|\bmade\s+a\s+mistake\b|\bout\s+of\s+habit\b|\bkeep\s+calling\b|\bI\s+was\s+mistaken\b|\bwas\s+off\b|\bshould\s+clarify\b|\bby\s+mistake\b|\bmy\s+old\s+job\b|"
                         r"\bcorrection\s+to\b|→|\bdid\s+I\s+say\b|\bI\s+(?:said|wrote|typed)\s+[^.,]{1,30}?\s+but\b|"
                         r"\b(?:real|actual|correct)\s+(?:figure|number|amount)\b|\bI\s+must\s+correct\b|\bfix\s+a\s+number\b|\bignore\s+what\s+I\s+said\b|\bshould\s+(?:read|say|be)\b|"
                         r"\b(?:one|profile|quick|small)\s+fix\b|\bcorrecting\s+myself\b|\b(?:was|is)\s+wrong\b|\bgot\s+that\s+wrong\b|\bwhat\s+I\s+meant\b|\b(?:fix|correct)\s+something\b|\bnot\s+\w+,\s*sorry\b|\bsorry,\s*(?:I\s+mean|not)\b|"
                         r"\bI\s+said\s+\w+.{0,20}(?:last\s+time|before|earlier)\b|"
                         r"\bactually\b.{0,40},\s*not\s+(?-i:[A-Z])|不是.{1,10}[,，]\s*(?:而)?是|"
                         r"说错了|说成|记错了|口误|更正|纠正|搞错了|搞混了?|说反了?|笔误|打错字了?|说岔了|实为|误会了?|少说了|[\u4e00-\u9fff]{1,3}错了|重新说|作废|不算数?|我说的是|我指的是|打错了|写错了|看错|手滑|骗你的|别写成|表达有误|说法不对|其实就?是|准确(?:地)?说|确切(?:地)?说|说大了|说反了|不对不对", re.I)

# "it's A, not B", "A actually, not B", "not B, (it's) A": A replaces B wherever B is the value.
_CONTRAST = re.compile(r"(?P<a>[^.!?;:]{1,60}?)(?:\s+actually,?|,)\s*(?:and\s+)?not\s+(?:a\s+|an\s+|the\s+)?"
                       r"(?P<b>[^,.!?;:]{1,40}?)(?=\s*(?:$|[.!?;:,]|[^\w\s'])|\s+(?:actually|lol|haha)\b)|"
                       r"(?P<b3>(?-i:[A-Z])[\w.&'-]*)\s*(?:→|->)\s*(?P<a3>(?-i:[A-Z])[\w.&'-]*)|"
                       r"(?P<a5>[$€£¥]?\d[\d,.]*\s?k?(?:\s+(?:a|per)\s+(?:month|week|year))?)\s+not\s+(?P<b5>[$€£¥]?\d[\d,.]*\s?k?)\b|"
                       r"\bdid\s+I\s+(?:say|write|put)\s+(?P<b8>(?-i:[A-Z])[\w'-]*)[^.!?]{0,20}?[?!]+\s*(?:it's|its|it\s+is|I\s+meant)\s+"
                       r"(?P<a8>(?-i:[A-Z])[\w'-]*)|"
                       r"\bcalled\s+(?-i:[A-Z])[a-z]+\s+(?:a|an)\s+(?P<b9>[a-z]+)\b[^.]{0,30}?\bbut\s+(?:she's|he's|it's|she\s+is|he\s+is)\s+"
                       r"(?:a|an)\s+(?P<a9>[a-z]+(?:\s+(?:pig|dog|fish|dragon|gecko|snake|rat|mouse))?)|"
                       r"\b(?:told|gave|wrote)\s+(?:you\s+)?(?P<b6>(?-i:[A-Z])[\w'-]*)\b[^.!?]{0,40}?(?:it's|it\s+is|it\s+was)\s+"
                       r"(?P<a6>(?-i:[A-Z])[\w'-]*)|"
                       r"\b(?:I'm|I\s+am|we're|it's|its|it\s+is)\s+(?:at\s+|in\s+|with\s+)?(?P<a7>(?-i:[A-Z])[\w&'-]*)\s+not\s+"
                       r"(?P<b7>(?-i:[A-Z])[\w&'-]*)\b|"
                       r"\bnot\s+(?:in|at|with)\s+(?P<b4>(?-i:[A-Z])[\w'-]*(?:\s+(?-i:[A-Z])[\w'-]*)?),\s*(?:I'm|we're|I\s+am)\s+(?:in|at|with)\s+"
                       r"(?P<a4>(?-i:[A-Z])[\w'-]*(?:\s+(?-i:[A-Z])[\w'-]*)?)|"
                       r"\b(?:it's|its|it\s+is)\s+not\s+(?P<b2>[^,.!?;:]{1,40}?),\s*(?:it's|its|it\s+is|but)\s+(?P<a2>[^,.!?;:]{1,40}?)"
                       r"(?=\s*(?:$|[.!?;:,]))|"
                       # "是测试开发，不是前端开发"; "豆豆不是仓鼠" names the subject, not the right value.
                       r"(?:(?:是|叫|在|住)(?P<za>[" + _CJK + r"\w]{1,10}?)[,]?|(?P<zc>(?:(?![了说错岔误])[" + _CJK + r"\w]){1,6}?)[,])\s*不(?:是|在|叫|住)(?P<zb>[" + _CJK
                       + r"\w]{1,10}?)(?=$|[,.!。\s\u2600-\u27bf\U0001f000-\U0001faff]|啦|哈|了)|"
                       r"不(?:是|在|叫|住)(?P<zb3>[" + _CJK + r"\w]{1,8}?)(?:啦|了|哈|呀|啊)?[,]\s*(?P<za3>[" + _CJK + r"\w]{1,6}?)(?=\s*(?:$|[!.。]))|"
                       r"不(?:是|在|叫)(?P<zb2>[" + _CJK + r"\w]{1,10}?)[,]\s*(?:而)?(?:是|在)(?:在|叫)?(?P<za2>[" + _CJK + r"\w]{1,10}?)(?=$|[,.!。\s\u2600-\u27bf\U0001f000-\U0001faff]|啦|哈|了)",
                       re.I)
_MEANT = re.compile(r"\bcorrection\b[^:.!?]{0,40}:\s*(?P<lc>(?-i:[a-z])[a-z -]{2,40}?)(?=\s*[.!]|$)|"
                    r"^\s*\*\s*(?P<star>(?-i:[A-Z])[\w'-]*(?:\s+(?-i:[A-Z])[\w'-]*)?)(?=\s*(?:$|[.,!;]|\s+(?:lol|haha|oops|sorry)\b))|"
                    r"\b(?:misspel\w*|mis-spel\w*|spelt\s+\w+\s+wrong|spelled\s+\w+\s+wrong|wrong\s+spelling)\b[^.!?]{0,60}[.!?]?\s*"
                    r"(?:it's|it\s+is|it\s+should\s+be|should\s+be)\s+(?P<a2>(?-i:[A-Z])[\w'-]*)|"
                    r"(?:\bwas\s+off|\bwrong\s+number|\bmy\s+bad|\bsorry|\bscratch\s+(?:that|the)|\bignore\s+(?:the|that|what)|\bdisregard|\bmisread|\b(?:real|actual|correct)\s+(?:figure|number|amount))\b[^!?]{0,100}?"
                    r"\b(?:it's|it\s+is|it\s+should\s+be|is)\s+(?P<money>[$€£¥]\s?[\d,.]+\s?k?|[\d,.]+\s?k?\s+(?:euros?|dollars|pounds|bucks|quid))|"
                    r"\b(?:I\s+meant|I\s+mean|correction\s*:|(?:sorry|oops|my\s+bad|scratch\s+that)\s*[,:—-]+\s*(?:it's|it\s+is)?)\s*"
                    r"(?P<a>(?-i:[A-Z])[\w'-]*(?:\s+(?-i:[A-Z])[\w'-]*)?)(?!\s*,?\s*not\b)(?=\s*(?:$|[.,!;]))|"
                    r"(?:说错了|记错了|口误|更正一下|纠正一下|打错字?了|输错了?|拼错了?|搞错了|搞混了|写错了|看错了?表?了?|手滑|不对|我说的|我指的|笔误|"
                    r"[\u4e00-\u9fff]{1,3}错了)[,，]?(?:\s|[\u2600-\u27bf\U0001f000-\U0001faff])*(?:[^,，。!?]{0,12}[,，]\s*)?(?:我)?(?:其实|应该|实际上)?(?:就)?(?:是|实为|应为|实际为)"
                    r"(?:在|叫)?(?P<z>[^\s,，。!?、]{1,10}?)(?=$|[,，。!?]|哈|啦|呀|的)", re.I)
_CONTRAST_LEAD = re.compile(r"^.*\b(?:it's|its|it\s+is|is|was|are|'s|I'm|I\s+am|we're|meant|called|named|read|say|be)\s+|^(?:oh|ok|okay|no|wait)\b,?\s*",
                            re.I)


def _canonical_word(word: str) -> str:
    """The vocabulary's value for a word said in a correction ("a bunny" -> rabbit, "my wife" -> married)."""
    w = word.lower().strip()
    return (_PARTNER.get(w) or _STATUS_WORDS.get(w) or _SPECIES.get(w) or _BREEDS.get(w) or _ZH_BREEDS.get(w)
            or _CANONICAL_VALUES.get(w) or w)


def _zh_contrast_value(raw: str) -> str:
    """"我在银行是客户经理" -> 客户经理, "我搬去的是保定" -> 保定: the value after the last copula."""
    value = re.split(r"(?:是|叫|在|当|做|住|去了|搬到|搬去)", raw)[-1] or raw
    value = re.sub(r"^(?:说|讲|指)(?:的)?", "", value) or value  # "我是说三万": what was meant
    value = re.sub(r"(?:的|啦|了|哈|呀)+$", "", value) or value
    return value.rsplit("的", 1)[-1] if len(value.rsplit("的", 1)[-1]) >= 2 else value  # 检验科的检验师 -> 检验师


def _contrast_value(raw: str) -> str:
    v = raw.split(",")[-1].strip()
    v = _CONTRAST_LEAD.sub("", v)
    return re.sub(r"^(?:(?:a|an|the|just|my|our|at|in|with|for)\s+)+", "", v, flags=re.I).strip(" ,.!")


def _contrast_corrections(text: str, message: Message, known: list[ExtractedFact | KnownFact],
                          found: list[ExtractedFact]) -> list[ExtractedFact]:
    """A correction that names the wrong value instead of the slot: the slot is the one whose
    value is B, among the facts said before in the session or known as current. A contrast that
    names no known value ("宜家的宜，不是怡") leaves the word to a correction phrase ("口误，是静宜")."""
    pairs = [((m["a3"] or m["a4"] or m["a5"] or m["a6"] or m["a7"] or m["a8"] or m["a9"] or "").strip(" ,.!") or (_contrast_value(m["a"] or m["a2"]) if m["a"] or m["a2"]
                                     else _zh_contrast_value(m["za"] or m["zc"] or m["za2"] or m["za3"] or "")),
              (m["b3"] or m["b4"] or m["b5"] or m["b6"] or m["b7"] or m["b8"] or m["b9"] or "").strip(" ,.!") or (_contrast_value(m["b"] or m["b2"]) if m["b"] or m["b2"]
                                     else _zh_contrast_value(m["zb"] or m["zb2"] or m["zb3"] or "")))
             for m in _CONTRAST.finditer(text)]
    out = _corrected_slots(pairs, message, known, found)
    return out or _corrected_slots(_meant_pairs(text, [*known, *found]), message, known, found)


def _meant_pairs(text: str, facts: list[ExtractedFact | KnownFact]) -> list[tuple[str, str]]:
    """"sorry, I meant Linz!", "口误，是常州": the value of its kind said before it is what it replaces."""
    pairs: list[tuple[str, str]] = []
    for m in _MEANT.finditer(text):
        proper = m["a"] or m["star"] or m["a2"]
        said = [f for f in facts if f.namespace != "pet" and f.value
                and (f.value[:1].isupper() if proper else f.value[:1].islower() if m["lc"]
                     else f.namespace == "budget" if m["money"] else _has_cjk(f.value) or f.value[:1].isdigit())]
        if not said:
            continue
        new = (proper or m["lc"] or m["money"] or m["z"]).strip().rstrip(",.")
        if m["z"]:  # a Chinese value replaces one of its kind: a title, a city, an amount, else a name or an organisation
            kind = ("job" if re.search(_ZH_JOB_TAIL + "$", new) else "city" if is_chinese_city(new)
                    else "amount" if re.search(r"\d|[一二两三四五六七八九十百千万]{2,}", new) else "other")
            said = [f for f in said if {"job": f.namespace == "work" and f.key == "job",
                                        "city": f.namespace in ("location", "travel"),
                                        "amount": f.namespace == "budget"}.get(kind, not (
                                            (f.namespace == "work" and f.key == "job") or f.namespace in ("location", "travel", "budget")))]
            if not said:
                continue
        # A respelling ("*Bristol", "it's Katrine, with an e", "是静宜") fixes the value it most resembles;
        # otherwise the latest one of its kind.
        alike = max(said, key=lambda f: SequenceMatcher(None, f.value.lower(), new.lower()).ratio())
        close = SequenceMatcher(None, alike.value.lower(), new.lower()).ratio() >= 0.5
        pairs.append((new, alike.value if m["star"] or m["a2"] or close else said[-1].value))
    return pairs


_A_SPECIES = re.compile(r"(?:a\s+|an\s+)?" + _EN_SPECIES + "|" + _ZH_SPECIES.replace("?P<s>", "?:"), re.I)


def _corrected_slots(pairs: list[tuple[str, str]], message: Message, known: list[ExtractedFact | KnownFact],
                     found: list[ExtractedFact]) -> list[ExtractedFact]:
    out: list[ExtractedFact] = []
    for a, b in pairs:
        a = re.sub(r"^(?:I|we|We)\s+[^A-Z]*(?=[A-Z])", "", a.strip())  # "I live in Leipzig, not Dresden" -> Leipzig
        if a[:1].isupper() and len(a.split()) > 1:
            a = _proper_noun(a)  # "It was Exmouth that we relocated to" -> Exmouth
        if not a or not b or len(a.split()) > 4 or normalise_value(a) == normalise_value(b) \
                or a.lower() in _PRONOUNS or b.lower() in _PRONOUNS:
            continue
        for fact in reversed([*known, *found]):
            if any((f.namespace, f.key) == (fact.namespace, fact.key) and normalise_value(f.value) == normalise_value(a)
                   and f.operation == "correct" for f in found + out):
                continue  # already corrected to this value
            if fact.namespace in ("pet", "preference") and fact.key == _slug(b) != _slug(a) and fact.value \
                    and not _A_SPECIES.fullmatch(a):
                # The key itself was wrong ("it's Mochi, not Mocha", "猫叫雪团，不是雪球"): nothing ever
                # held under it, and its value holds under the right key from the same start.
                start = fact.observed_at or message.created_at
                out += [ExtractedFact(namespace=fact.namespace, key=fact.key, value="", operation="correct",
                                      confidence=0.9, evidence_message_ids=[message.message_id],
                                      observed_at=message.created_at),
                        ExtractedFact(namespace=fact.namespace, key=_slug(a), value=fact.value, confidence=0.9,
                                      evidence_message_ids=[message.message_id], observed_at=start)]
                break
            value = fact.value
            # An amount is named by its number ("1500 a month, not 1800" corrects "1800 a month").
            same_amount = fact.namespace == "budget" and re.fullmatch(r"[$€£¥]?\d[\d,.]*\s?k?", b) is not None \
                and re.sub(r"\D", "", value.split()[0] if value.split() else "") == re.sub(r"\D", "", b)
            if not value or (normalise_value(value) not in {normalise_value(b), normalise_value(_canonical_word(b))}
                             and not same_amount):
                continue
            new = _species(a) if fact.namespace == "pet" else _CANONICAL_VALUES.get(a, _canonical_word(a)
                                                                                      if fact.namespace == "relationship" else a)
            out.append(ExtractedFact(namespace=fact.namespace, key=fact.key, value=new, operation="correct",
                                     confidence=0.9, evidence_message_ids=[message.message_id],
                                     observed_at=message.created_at))
            break
    return out
