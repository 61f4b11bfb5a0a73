"""Rules: the user's name."""

from __future__ import annotations

import re

from agent_memory.providers.offline.gazetteer import is_dictionary_word
from agent_memory.providers.offline.lexicon import _NOT_NAMES, _ZH_BREEDS, _ZH_NAME, _ZH_SURNAMES, _may_be_given_name
from agent_memory.providers.offline.rules.base import _ZC, _r, _Rule
from agent_memory.providers.offline.values import _CJK, _clean
from agent_memory.providers.offline.zh_segment import could_be_a_name


def _name(m: re.Match[str], sentence: str) -> list[tuple[str, str]] | None:
    return _name_of(m.group("v"))


def _name_of(raw: str) -> list[tuple[str, str]] | None:
    v = _clean(re.sub(r"(?:就行|就好|就可以|便可|即可|就成|就得|吧|好了|哦|啊|呀|哈|(?<=[\u3400-\u9fff])h+|~|～)+$", "", raw), max_words=3)
    if not v or v.lower() in _NOT_NAMES or re.match(r"(?:就|也|这么|那么|都|还|你|他|她)", v):
        return None
    return [("name", v)]


RULES: list[_Rule] = [
    # --- name
    _r(r"\b(?:my|the)\s+name(?:'s|\s+is)\s+(?P<v>[A-Za-z][\w'-]*(?:\s+(?-i:[A-Z])[\w'-]*){0,2})", "profile", "name",
       make=_name, on_negation="drop", subject=False),
    _r(r"\b(?:sign\s+me\s+up\s+as|put\s+me\s+down\s+as|you\s+can\s+(?:just\s+)?(?:say|use|put)|sign\s+(?:it\s+)?(?:off\s+)?"
       r"(?:from\s+me|from|as|with)\s*,?|(?:everybody|everyone|people|friends|they\s+all)\s+(?:just\s+)?says?)\s+(?P<v>(?-i:[A-Z])[\w'-]*)",
       "profile", "name", make=_name, on_negation="drop", subject=False),
    _r(r"\b(?:call\s+me|(?:started|start|keep|kept|took\s+to)\s+calling\s+me|I(?:'m|\s+am)\s+called|(?:everyone|people|friends)\s+calls?\s+me|I\s+go\s+by)\s+"
       r"(?P<v>(?-i:[A-Z])[\w'-]*(?:\s+(?-i:[A-Z])[\w'-]*){0,2})", "profile", "name", make=_name,
       on_negation="drop", subject=False),
    _r(r"^\s*(?:(?:hey|hi|hello|yo|hiya|heya|cheers|morning|evening|ok|okay|right|aye|och|oi|well|so)\s*,?\s*(?:there\s*,?\s*)?)?(?:it's\s+|this\s+is\s+|I'm\s+)?(?P<v>(?-i:[A-Z])"
       r"[a-z]+)\s+(?:here|again|checking\s+in)(?!['\w]|\s+(?:is|are|was))", "profile", "name", make=_name,
       on_negation="drop"),
    _r(r"^\s*(?:(?:hey|hi|hello|yo)(?:\s+hi)?\s*,?\s*)+(?:it's|this\s+is|I'm)\s+(?P<v>(?-i:[A-Z])[a-z]+)\s*[.!]*$",
       "profile", "name", make=_name, on_negation="drop"),
    _r(r"\b(?:I'm|I\s+am|it's|it\s+is|name's)\s+(?P<lc>(?-i:[a-z])[a-z]+)\s*,?\s+(?:by\s+the\s+way|btw|nice\s+to\s+meet\s+you)\b",
       "profile", "name", make=lambda m, s: None if is_dictionary_word(m.group("lc")) else _name_of(m.group("lc")),
       on_negation="drop", subject=False),
    _r(r"\b(?:I'm|I\s+am|it's|it\s+is|name's)\s+(?P<v>(?-i:[A-Z])[a-z]+)\s*,?\s+(?:by\s+the\s+way|btw|nice\s+to\s+meet\s+you)\b|"
       r"\bnice\s+to\s+meet\s+you(?:\s+too)?\s*[,!.]?\s*(?:I'm|I\s+am)\s+(?P<w>(?-i:[A-Z])[a-z]+)\b", "profile", "name",
       make=lambda m, s: _name_of(m.group("v") or m.group("w")), on_negation="drop", subject=False),
    _r(r"(?:^|[:,;]\s*)(?:about\s+me|name)\s*:?\s+(?P<v>(?-i:[A-Z])[a-z]+)\b", "profile", "name", make=_name, subject=False),
    # A self-introduction opening a sentence ("Hello, I am Thanh, I come from Vietnam"); "it's"/"this is"
    # only after a greeting ("hi, it's Priya").
    _r(r"^\s*(?:(?:hey|hi|hiya|hello|good\s+(?:morning|afternoon|evening)|greetings)\b(?:\s+(?:there|all|everyone))?[\s,!.]*)*"
       r"(?:I'm|I\s+am|im|this\s+is)\s+"
       r"(?P<v>(?-i:[A-Z])[a-z]+)(?=\s*(?:[,.!;]|$)|\s+(?:and|from|here)\b)|^\s*(?:(?:hey|hi|hiya|hello|good\s+(?:morning|"
       r"afternoon|evening))\b[\s,!.]*)+(?:this\s+is|it's)\s+(?P<w>(?-i:[A-Z])[a-z]+)(?=\s*(?:[,.!;]|$)|\s+(?:from|here)\b)",
       "profile", "name", make=lambda m, s: _name_of(n) if _may_be_given_name(n := m["v"] or m["w"]) else None,
       on_negation="drop", subject=False),
    _r(r"落款(?:就)?(?:写|用|署)?(?P<v>[A-Za-z][A-Za-z-]+|" + _ZC + r"{2,4}?)(?=就行|就好|吧|$|[,，。!！])|"
       r"(?:我的)?名字(?:就|叫|是)?(?:俩字|两个字|三个字)?[,，:：]\s*(?P<w>[" + _ZH_SURNAMES + r"][" + _CJK + r"]{1,2})(?=$|[,，。!！])",
       "profile", "name", make=lambda m, s: _name_of(m["v"] or m["w"]), on_negation="drop", subject=False),
    _r(r"(?:网名|昵称|外号|绰号)(?:叫|是)(?P<v>" + _ZC + r"{1,6}?)(?=$|[,.!?。]|吧|哈)", "profile", "name", make=_name,
       on_negation="drop"),
    _r(r"(?:^|[^他她它])(?:我叫(?!了|车|外卖|醒)|我的名字(?:是|叫)|我名字叫|(?:大家|朋友们?|别人|他们)?都?(?:叫|喊)我)"
       r"(?P<v>" + _ZC + r"{1,8})", "profile", "name", make=_name, on_negation="drop", subject=False),
    _r(r"(?:^|,)\s*(?:我是|是)" + _ZH_NAME + r"(?=$|[,.!?;:\s。]|啊|呀|哦)", "profile", "name",
       make=lambda m, s: _name(m, s) if could_be_a_name(m.group("v")) and m.group("v") not in _ZH_BREEDS else None,
       on_negation="drop", subject=False),
]
