"""Changes said as from → to: "moved from Denver to Austin", "left Leeds for Bristol", "swapped
coffee for tea", "went from barista to shift manager", 从杭州搬到了深圳, 从字节跳槽到了腾讯.

Such a sentence names two states of one thing: the new one holds from the message, the old one
held until it. The rule tables know how each kind of fact is said; this module does not repeat
them. It rewrites the change into plain statements of the new value under a few templates ("I moved
to B", "I switched to B", "I work at B", "I'm a B now", 搬到了B, 在B上班, 做B), takes the first
template the rules read as a fact, and reads the old value under the same template as a past state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent_memory.providers.offline.gazetteer import is_chinese_city, leading_city
from agent_memory.providers.offline.rules.base import _ZC
from agent_memory.providers.offline.subject import _EN_THIRD, _ZH_THIRD

_ARTICLE = r"(?:(?:being|a|an|the|my|our)\s+)*"
# A character of a value: a clause ends at punctuation, but not at the comma or point inside a number.
_PHRASE = r"(?:[^,.;!?]|(?<=\d)[,.](?=\d))"
_EN_FROM_TO = re.compile(
    r"\b(?P<verb>moved|moving|relocated|relocating|switched|switching|changed|went|gone|transferred|jumped|converted|"
    r"shifted|progressed|got\s+promoted|upgraded|downgraded|made\s+the\s+(?:move|switch|jump)|bumped|raised|increased|"
    r"upped|lowered|cut|reduced|dropped|brought|pushed|moved|went\s+(?:up|down))\s+(?:\w+\s+){0,2}?"
    r"(?P<from>from\s+" + _ARTICLE + r"(?P<a>" + _PHRASE + r"+?)\s+)(?:(?:up\s+|down\s+)?to|into)\s+" + _ARTICLE + r"(?P<b>" + _PHRASE + r"+)", re.I)
_EN_FOR = re.compile(
    r"\b(?P<verb>left|swapped|swapping|traded|trading|exchanged|ditched|dropped|quit|gave\s+up|replaced)\s+" + _ARTICLE
    + r"(?P<a>" + _PHRASE + r"+?)\s+(?:for|with)\s+" + _ARTICLE + r"(?P<b>" + _PHRASE + r"+)", re.I)
_ZH_FROM_TO = re.compile(
    r"(?P<from>(?:从|由)(?P<a>" + _ZC + r"{1,10}?))(?P<verb>搬|调|跳槽|跳|换|转行|转岗|转|改|回|提|涨|加|降|减|升|变)(?:到了|到|去了|去|成了|成|为|做)"
    r"(?P<b>" + _ZC + r"{1,12})")
_ZH_REPLACED = re.compile(r"把(?P<a>" + _ZC + r"{1,10}?)换成了?(?P<b>" + _ZC + r"{1,12})")

# Templates by what the verb changes: a home, a role or an employer, or a thing one takes.
_EN_MOVES = ("I moved to {}",)
_EN_ROLES = ("I'm a {} now", "I'm {} now", "I work at {}", "I switched to {}", "I like {}")
_EN_THINGS = ("I like {}", "I work at {}", "I'm a {} now")
_ZH_MOVES = ("我搬到了{}",)
_ZH_ROLES = ("我在{}上班", "我是{}", "我喜欢{}")
_ZH_AMOUNT_VERBS = frozenset("提涨加降减升变")  # said as themselves ("预算提到了1万"); the others by template
_EN_SWAPS = ("swapp", "trad", "exchang", "ditch", "dropp", "gave", "replac")


@dataclass(frozen=True)
class Change:
    """A change found in a sentence: where it stands, and how its new and old values can be said."""

    start: int
    end: int
    old: str
    new: str
    templates: tuple[str, ...]


def _named(value: str) -> str:
    """A value as its name: "a startup called Fernwood" is Fernwood, 一家叫蔚来的公司 is 蔚来."""
    value = value.strip()
    if m := re.match(r"^(?:[\w'-]+\s+){1,3}(?:called|named)\s+(?P<n>.+)$", value, re.I):
        return m["n"]
    if m := re.match(r"^(?:一家|一个|一所)?叫(?P<n>.+?)的", value):
        return m["n"]
    return value


def _is_city(value: str) -> bool:
    value = value.strip()
    return bool(is_chinese_city(value) or leading_city(value.lower()))


def find_change(sentence: str) -> Change | None:
    """The first from → to change the sentence states, if any."""
    m = _EN_FROM_TO.search(sentence) or _EN_FOR.search(sentence) or _ZH_FROM_TO.search(sentence) \
        or _ZH_REPLACED.search(sentence)
    if m is None:
        return None
    old, new = _named(m["a"]), _named(m["b"])
    verb = (m.groupdict().get("verb") or "").lower()
    chinese = m.re in (_ZH_FROM_TO, _ZH_REPLACED)
    moving = verb.startswith(("mov", "reloc", "搬")) or (_is_city(old) and _is_city(new.split()[0] if not chinese else new))
    templates: tuple[str, ...]
    if chinese:
        templates = _ZH_MOVES if moving else _ZH_ROLES
    else:
        templates = _EN_MOVES if moving else _EN_THINGS if verb.startswith(_EN_SWAPS) else _EN_ROLES
    if m.groupdict().get("from") and (not chinese or verb in _ZH_AMOUNT_VERBS):
        # The sentence itself without its "from A" comes first: "bumped it to $1,200", "预算提到了1万".
        said = sentence[m.start():m.start("from")] + sentence[m.end("from"):m.start("b")]
        templates = (said.replace("{", "(").replace("}", ")") + "{}", *templates)
    return Change(start=m.start(), end=m.end(), old=old, new=new, templates=templates)


def said_plainly(sentence: str, change: Change, template: str, value: str) -> tuple[str, int]:
    """The sentence with its change said as a plain statement of `value`, and where that starts.
    The template brings its own subject, which stands for the clause's ("We relocated from …")."""
    before = sentence[:change.start]
    subject = re.search(r"\b(?:I|we|I've|we've|I'd|we'd|I\s+just|we\s+just)\s+(?:\w+\s+)?$", before, re.I) \
        or re.search(r"(?:我|我们)[^,，。]{0,4}$", before)
    if subject and re.match(r"I\b|我", template):
        before = before[:subject.start()]
    elif _someone_else(before):
        # "My friend … moved from Bristol to Bath": the change is theirs, and so stays the subject.
        template = re.sub(r"^(?:I\s+|我)", "", template)
    return before + template.format(value) + sentence[change.end:], len(before)


def _someone_else(before: str) -> bool:
    """Whether the words before a change name somebody else as its subject, with no "I" after them."""
    third = list(_EN_THIRD.finditer(before)) or list(_ZH_THIRD.finditer(before))
    return bool(third) and not re.search(r"\b(?:I|I'm|I've|we|we're)\b|我|咱", before[third[-1].end():])
