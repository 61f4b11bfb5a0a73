"""Statements in one sentence: every rule applied, its subject, hedges and negations checked, and
the operation (assert, end, correct) and time of each fact decided."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from agent_memory.core.models import ExtractedFact, FactOperation, Message
from agent_memory.core.timeexpr import is_short_stay, stay_end
from agent_memory.providers.offline.changes import Change, find_change, said_plainly
from agent_memory.providers.offline.coordination import chinese_items, distributes, english_items
from agent_memory.providers.offline.lexicon import _CANONICAL_VALUES
from agent_memory.providers.offline.rules import RULES
from agent_memory.providers.offline.rules.base import _Rule
from agent_memory.providers.offline.sentence import _NEGATION, _NO_LONGER, _hypothetical, _negated, _past_state
from agent_memory.providers.offline.subject import _EN_THIRD, _clause_start, _subject_ok
from agent_memory.providers.offline.timing import _observed_at, _time_scope
from agent_memory.providers.offline.values import _clean, _has_cjk, _lowercase_org, _no_city, _place, _slug
from agent_memory.providers.offline.zh_segment import could_be_a_name

_ORG_WORDS = re.compile(r"\b(?:university|college|hospital|clinic|bank|inc|ltd|llc|gmbh|group|school|company|council|"
                        r"institute|office|agency|studio|labs?|corp|foundation|charity|ministry)\b|大学|医院|公司|银行|集团|学校",
                        re.I)


def _read(rule: _Rule, m: re.Match[str], sentence: str) -> list[tuple[str, str, tuple[int, int]]]:
    """[(key, value, span of the statement up to the cleaned value)]; empty if nothing usable."""
    if rule.make:
        made = rule.make(m, sentence) or []
        span = m.span()
        if "v" in rule.pattern.groupindex and m.group("v"):
            # The statement ends where its cleaned value does: "love hiking and I live in …"
            raw = m.group("v")
            trimmed = _clean(raw, pref=True) or raw
            at = raw.find(trimmed)
            if at >= 0:
                span = (m.start(), m.start("v") + at + len(trimmed))
        return [(k or rule.key, v, span) for k, v in made if (k or rule.key)]
    raw = m.group("v")
    value = rule.clean(raw)
    if value and rule.namespace == "location" and _ORG_WORDS.search(value):
        return []  # "moved over to the University of Sheffield": an employer, not a city
    if value and rule.namespace == "location" and _has_cjk(value) and not could_be_a_name(value):
        return []  # "回老家躺平了": 躺平 is something one does, not a place
    if not value and rule.namespace == "work" and rule.key == "employer" and rule.clean in (_place, _no_city):
        value = _lowercase_org(raw)
    if not value:
        return []
    at = raw.find(value)
    end = m.start("v") + at + len(value) if at >= 0 else m.end()
    return [(rule.key.format(slug=_slug(value)), value, (m.start(), end))]


# Reported speech of one's own earlier words ("之前说我搬到了合肥", "上次说我是护士长"): what was said
# then, not a statement now.
_REPORTED = re.compile(r"^\s*(?:(?:之前|上次|刚才|前面|以前)(?:我)?(?:说|讲)(?:过|的)?|说成|(?:之前|以前|原来|曾经|过去)(?:我)?(?:也)?(?:是|在|做|当)(?!我家|我的|我们家)|I\s+(?:said|told\s+you)\s+(?:that\s+)?)",
                       re.I)


# "used to" hedges nothing when it puts the statement in the past ("I used to live in Paris").
_USED_TO = re.compile(r"\bused\s+to\b", re.I)
# A state that held until the message said so holds until just before it.
PAST_STATE_END = timedelta(seconds=1)


def past_state(fact: ExtractedFact, said_at: datetime) -> ExtractedFact:
    """A statement of what held before: a closed interval ending when it was said. Its start is
    unknown; it holds from just before (or from the time its clause names)."""
    start = min(fact.observed_at, said_at - PAST_STATE_END)
    return fact.model_copy(update={"observed_at": start, "valid_until": said_at})


def is_past_state(fact: ExtractedFact) -> bool:
    return fact.permanence == "permanent" and fact.valid_until is not None and fact.operation == "assert"


# A change in the progressive with a future time is a plan ("moving to Oslo next year", "明年搬去上海").
_PLANNED = re.compile(r"\b(?:moving|relocating|starting|joining|heading|transferring|switching)\b|搬|去|入职|跳槽", re.I)
_FUTURE = re.compile(r"\bnext\s+(?:year|month|spring|summer|fall|autumn|winter|january|february|march|april|may|june|july|"
                     r"august|september|october|november|december)\b|\bin\s+(?:a\s+few|a\s+couple\s+of|two|three|\d+)\s+"
                     r"(?:weeks|months|years)\b|\blater\s+this\s+year\b|\bafter\s+the\s+summer\b|明年|下个月|下半年|年底前|过完年", re.I)


_SOMEONE_ELSES = re.compile(r"(?:^[^,。]{0,4}?)?的(?:人)?(?:是|其实是)(?:我)?(?:老公|老婆|爸|妈|爸爸|妈妈|男朋友|女朋友|朋友|同事|他|她|别人|孩子|儿子|女儿)")


# A sentence opening with the speaker as subject ("I'm", "I", "we've"), after any interjection;
# not when that clause is negated, past, wished or planned ("I'm not vegan and …", "I used to live
# in Paris and …", "I'm thinking of moving and …"): the conjunct shares that, and is left alone.
_OPENING_SUBJECT = re.compile(
    r"^(?:(?:so|well|oh|ok|okay|yeah|yes|also|and|but|actually)\b[\s,]*)*"
    r"(?P<s>(?:I|we)(?:'m|'ve|'re|\s+am|\s+are|\s+have)?)\s+"
    r"(?!(?:not|never|no\s+longer|used|will|would|want|wanted|wish|hope|hoping|plan|planning|going|gonna|thinking|"
    r"considering|trying|about|might|may|could|should|can|can't|cannot|don't|didn't|won't|wouldn't|"
    r"had|was|were|if)\b)", re.I)
# A conjunct that brings its own subject is read on its own already.
_CONJUNCT = re.compile(r"(?:,\s*|\s+)and\s+(?!(?:i|i'm|i've|we|we're|you|he|she|they|it|my|our|his|her|their|this|"
                       r"that|there|then|also|so|but|not)\b)(?=\w)", re.I)


def _sentence_facts(sentence: str, message: Message, *, correction: int | None,
                    confidence_cap: float) -> list[tuple[int, ExtractedFact]]:
    """The facts one sentence states, with where each starts: a change from one value to another
    as the old value's past state and the new value (changes.py), else the sentence as said."""
    if (change := find_change(sentence)) is not None:
        # The first template under which both values read as the same kind of fact; else the first
        # that reads the new one ("moved from my parents' place to Austin" names no old city).
        fallback: list[tuple[int, ExtractedFact]] | None = None
        for template in change.templates:
            found, new = _said_as(sentence, change, template, change.new, message, correction, confidence_cap)
            if not new:
                continue
            slots = {(f.namespace, f.key) for f in new}
            namespaces = {f.namespace for f in new}
            until = min(fact.observed_at for fact in new)  # the old state held until the new one began
            old = [(-1, past_state(fact, until))  # before every statement of the sentence
                   for fact in _said_as(sentence, change, template, change.old, message, None, confidence_cap)[1]
                   if fact.operation == "assert" and fact.namespace in namespaces
                   and ((fact.namespace, fact.key) in slots or fact.namespace in VALUE_KEYED)]
            if old:
                return old + found
            fallback = found if fallback is None else fallback
        if fallback is not None:
            return fallback
    return _statement_facts(sentence, message, correction=correction, confidence_cap=confidence_cap)


def _said_as(sentence: str, change: Change, template: str, value: str, message: Message, correction: int | None,
             confidence_cap: float) -> tuple[list[tuple[int, ExtractedFact]], list[ExtractedFact]]:
    """The facts of the sentence with its change said plainly of `value`, and those the plain
    statement itself gives."""
    plain, at = said_plainly(sentence, change, template, value)
    found = _statement_facts(plain, message, correction=correction, confidence_cap=confidence_cap)
    said = plain[at:at + len(template) + len(value)]
    return found, [fact for start, fact in found if at <= start < at + len(said) or (fact.value and fact.value in said)]


# Namespaces whose key is made from the value: an old and a new value are two keys.
VALUE_KEYED = frozenset({"preference", "language", "pet"})


def _statement_facts(sentence: str, message: Message, *, correction: int | None,
                     confidence_cap: float) -> list[tuple[int, ExtractedFact]]:
    """The facts a sentence states as said. A conjunct that shares the sentence's subject ("I'm
    vegetarian and allergic to peanuts") is read with that subject too, so each part gets its own fact."""
    found = _clause_facts(sentence, message, correction=correction, confidence_cap=confidence_cap)
    opening = _OPENING_SUBJECT.match(sentence)
    if opening is None or _has_cjk(sentence):
        return found
    keys = {(f.namespace, f.key) for _, f in found}
    for conjunct in _CONJUNCT.finditer(sentence, opening.end()):
        prefix = opening["s"] + " "
        for start, fact in _clause_facts(prefix + sentence[conjunct.end():], message, correction=correction,
                                         confidence_cap=confidence_cap):
            if (fact.namespace, fact.key) not in keys:
                keys.add((fact.namespace, fact.key))
                found.append((conjunct.end() + max(0, start - len(prefix)), fact))
    return found


def _coordinated(rule: _Rule, m: re.Match[str], sentence: str,
                 reads: list[tuple[str, str, tuple[int, int]]]) -> list[tuple[str, str, tuple[int, int]]]:
    """The reads of a match plus those of the items coordinated with its value ("allergic to
    peanuts and shellfish", 对花生和虾过敏), each read again under the same head by the same rule."""
    group = next((g for g in ("v", "w") if g in rule.pattern.groupindex and m.group(g)), None)
    if group is None or not distributes(rule.key):
        return reads
    start, end = m.span(group)
    if _has_cjk(m.group(group)):
        variants = [(sentence[:start] + item + sentence[end:], m.end()) for item in chinese_items(m.group(group))]
    else:
        variants = [(sentence[:start] + item, item_end)
                    for item, item_end in english_items(sentence, max(r[2][1] for r in reads))]
    found: list[tuple[str, str, tuple[int, int]]] = []
    for variant, item_end in variants:
        again = rule.pattern.search(variant, m.start())
        if again is None or again.start() != m.start():
            continue
        found += [(key, value, (m.start(), item_end)) for key, value, _ in _read(rule, again, variant)]
    if _has_cjk(m.group(group)):
        return found if len({key for key, _, _ in found}) > 1 else reads
    keys = {key for key, _, _ in reads}
    return reads + [r for r in found if r[0] not in keys and not keys.add(r[0])]  # type: ignore[func-returns-value]


def _clause_facts(sentence: str, message: Message, *, correction: int | None,
                  confidence_cap: float) -> list[tuple[int, ExtractedFact]]:
    found: list[tuple[int, ExtractedFact]] = []
    taken: list[tuple[int, int]] = []
    no_longer = bool(_NO_LONGER.search(sentence))
    for rule in RULES:
        pos = 0
        while m := rule.pattern.search(sentence, pos):
            pos = m.start() + 1
            reads = _read(rule, m, sentence)
            if not reads:
                continue
            reads = _coordinated(rule, m, sentence, reads)
            span = (m.start("v") if rule.value_span else m.start(), max(r[2][1] for r in reads))
            # Overlap is judged on the span up to the cleaned value: "I love hiking and I live
            # in Denver" keeps "I love hiking" although its raw capture ran over "I live in".
            if any(span[0] < e and s < span[1] for s, e in taken):
                continue
            taken.append(span)  # blocked spans too: a looser rule must not re-read them
            pos = max(span[1], m.end()) if _has_cjk(m.group(0)) else span[1]  # nor the same rule inside its own match
            past = not rule.temporary and rule.op == "assert" and _past_state(sentence, m.start())
            if _hypothetical(sentence, m.start()) and not (past and _USED_TO.search(sentence, 0, m.start())):
                continue
            if rule.subject and not _subject_ok(sentence, m.start()):
                continue
            if _REPORTED.match(sentence[_clause_start(sentence, m.start()):]) and not past:
                continue
            if _SOMEONE_ELSES.match(sentence[m.end():]) or _SOMEONE_ELSES.search(m.group(0)):
                continue  # "喜欢榴莲的是我老公": the one who likes it is somebody else
            before = sentence[_clause_start(sentence, m.start()):m.start()]
            if not rule.subject and _EN_THIRD.search(before) and not re.search(r"\b(?:he|she)(?:'s|\s+is)\s+$", before, re.I) \
                    and not re.search(r"\b(?:me|us)\b", m.group(0), re.I):  # "they've seconded me to Glasgow" is about me
                continue  # "my mom calls him my fiancé": somebody else's words ("she's my fiancée" is about us)
            op: FactOperation = rule.op
            if rule.namespace == "location" and op == "assert" and is_short_stay(sentence):
                continue  # "going back to Paris for a week" is a stay, not a move
            if not rule.temporary and op == "assert" and _PLANNED.search(m.group(0)) and _FUTURE.search(sentence):
                continue  # "we're moving to Trondheim next year": a plan, not yet a fact
            if op == "end" and rule.on_negation != "keep" and _negated(sentence, m.start()):
                continue  # "I won't quit on my dreams", "don't ever quit"
            value_at = next((m.start(g) for g in ("v", "w") if g in rule.pattern.groupindex and m.group(g)), m.start())
            negated = rule.op == "assert" and (_negated(sentence, value_at) or (
                no_longer and re.search(r"^(?:(?!\b(?:and|but|so|because|which|while)\b)[^,;:])*\b(?:anymore|any\s+more)\b",
                                        sentence[m.start():], re.I) is not None))
            for key, value, _span in reads:
                if negated:
                    if rule.on_negation == "drop":
                        continue
                    if rule.on_negation == "flip" and value == "like":
                        value = "dislike"
                        if no_longer:  # "don't like X anymore", "不喜欢X了": the liking ended
                            op, value = "end", ""
                    elif rule.on_negation == "keep":
                        pass
                    else:  # "end", "end_value": a negated statement of a fact ends it
                        op = "end"
                elif op == "assert" and correction is not None and m.start() >= correction:
                    op = "correct"
                if rule.namespace == "preference" and value == "dislike" and no_longer and _NEGATION.search(m.group(0)):
                    op, value = "end", ""  # "don't like jazz anymore", "不喜欢喝咖啡了": the liking ended
                if rule.namespace == "diet" and rule.key == "restriction":
                    value = value.lower()
                fact = ExtractedFact(
                    namespace=rule.namespace, key=key, value=_CANONICAL_VALUES.get(value, value), operation=op,
                    permanence="temporary" if rule.temporary else "permanent",
                    confidence=min(rule.confidence, confidence_cap),
                    evidence_message_ids=[message.message_id],
                    # A stay's start may be said in any clause ("…for two weeks, leaving tomorrow").
                    observed_at=_observed_at(sentence if rule.temporary else _time_scope(sentence, m.start(), m.end()),
                                             message.created_at,
                                             temporary=rule.temporary, held=op == "assert"),
                )
                if rule.temporary and op == "assert":
                    start = fact.observed_at.date()
                    fact = fact.model_copy(update={"valid_until": stay_end(sentence, message.created_at, start)})
                if past and op == "assert":
                    fact = past_state(fact, message.created_at)
                found.append((m.start(), fact))
    return found
