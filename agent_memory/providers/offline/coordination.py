"""Coordinated values: "allergic to peanuts, shellfish and dust", "I speak Spanish and French",
对花生和虾过敏. A rule reads the first item; the items coordinated with it share its head (the verb
and everything before it), so each is read again with that head as a statement of its own.

Only rules whose key is made from the value distribute (a preference, an allergy, a language, a
pet): "I live in Lyon and Paris" names no two homes, and "I'm vegetarian and allergic to nuts" is
two statements the conjunct reader already finds (statements.py).

English lists are read after the first item: items separated by "and", "or", "as well as", "plus"
or commas, a comma-only list counting only when a conjunction closes it ("A, B and C"; "I love
Paris, it's lovely" is no list). An item that starts like a clause of its own (a pronoun, an
auxiliary, a common verb, a conjunction) ends the list: "I like tea and go running" likes one thing.
Chinese lists are inside the captured value: jieba's words tell 和 the conjunction from 和 inside a
word (和平), and 、 always separates.
"""

from __future__ import annotations

import re

from agent_memory.providers.offline.values import _has_cjk
from agent_memory.providers.offline.zh_segment import tagged

# What stands between two items, with an optional "also"/"even" after it.
_EN_SEPARATOR = re.compile(r"(?:\s*,\s*(?:(?P<c1>and|or|plus|&)\s+)?|\s+(?P<c2>and|or|plus|&|as\s+well\s+as|along\s+with|"
                           r"together\s+with)\s+)(?:also\s+|even\s+|especially\s+)?", re.I)
# An item runs to the next separator, a word that opens a clause, or the end of the clause.
# A hyphen inside a word joins it ("sci-fi", "world-building"); only a spaced one is a dash.
_EN_ITEM = re.compile(r"(?P<item>[^.,!?;:\n()&]+?)(?=\s*(?:,|\b(?:and|or|plus|as\s+well\s+as|along\s+with|together\s+with|"
                      r"so|because|but|which|that|when|while|if|who|since|though|although|until|unless|where|whenever)\b|&|"
                      r"[.!?;:\n()—]|$)|\s+-)", re.I)
# Words that open a clause rather than name a thing: the list has ended.
_CLAUSE_OPENER = frozenset(
    "i i'm i've i'd i'll me we we're we've you you're he he's she she's they they're it it's my our your his her their "
    "this that these those there then so but because which who whom whose when where while though although if not "
    "no never also just still now am is are was were be been being have has had do does did don't doesn't didn't "
    "will would can could should may might must won't can't cannot get got go goes going went come came make made "
    "take took work works worked live lives lived want wanted need needed think thought feel felt love like hate "
    "enjoy prefer know knew see saw say said tell told try tried keep kept start started stop stopped let put "
    "etc etcetera more stuff things everything anything all".split())
_EN_MAX_WORDS = 5
# Chinese coordinators (jieba words) and the enumeration comma.
_ZH_COORDINATORS = frozenset({"和", "跟", "与", "及", "以及", "还有", "或", "或者", "同", "、"})


def _en_item(item: str) -> bool:
    words = item.split()
    return 0 < len(words) <= _EN_MAX_WORDS and words[0].lower().strip("'") not in _CLAUSE_OPENER


def english_items(sentence: str, end: int) -> list[tuple[str, int]]:
    """The items coordinated after a value that ends at `end`: (item, where it ends), in order."""
    items: list[tuple[str, int]] = []
    closed = False
    pos = end
    while (sep := _EN_SEPARATOR.match(sentence, pos)) and (found := _EN_ITEM.match(sentence, sep.end())):
        item = found["item"].strip()
        if not _en_item(item):
            break
        items.append((item, found.end()))
        closed = closed or bool(sep["c1"] or sep["c2"])
        pos = found.end()
        if sep["c1"] or sep["c2"]:
            break  # the conjunction closes the list ("A, B and C")
    return items if closed else []


def chinese_items(value: str) -> list[str]:
    """The items of a Chinese value joined by coordinators ("花生和虾" -> 花生, 虾); [] when it is one."""
    if not _has_cjk(value):
        return []
    items: list[str] = []
    current = ""
    for word, _tag in tagged(value):
        if word in _ZH_COORDINATORS:
            if not current.strip():
                return []  # "和朋友一起": a preposition before its object, not a list
            items.append(current)
            current = ""
        else:
            current += word
    if not items or not current.strip():
        return []
    return [*items, current]


def distributes(key_template: str) -> bool:
    """Whether a rule's key is made from its value, so each coordinated item is a fact of its own."""
    return "{slug}" in key_template
