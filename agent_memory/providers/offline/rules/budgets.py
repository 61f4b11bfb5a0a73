"""Rules: budgets and spending limits, keyed by their canonical purpose."""

from __future__ import annotations

import re

from agent_memory.providers.offline.lexicon import _purpose
from agent_memory.providers.offline.rules.base import _MONEY, _MONEY_MARKED, _PURPOSE_WORDS, _ZC, _ZH_MONEY, _r, _Rule
from agent_memory.providers.offline.values import _CJK


def _budget(m: re.Match[str], sentence: str) -> list[tuple[str, str]]:
    gd = m.groupdict()
    topic = " ".join(t for t in (gd.get("t"), gd.get("t2")) if t)
    return [(_purpose(topic, sentence), m.group("v").strip())]


RULES: list[_Rule] = [
    # --- budgets and spending constraints
    _r(r"\bno\s+(?:more\s+)?(?:(?P<t2>[a-z]+)\s+)?budget\s+(?:at\s+all\s+)?(?:anymore|any\s+more|now)\b|\b(?:forget|scrap|drop|cancel|ditch|"
       r"shelve|shelving|scrapping|dropping)\s+(?:the|my|our)\s+(?:(?P<t3>[a-z]+)\s+)?(?:budget|idea|plan|money|fund|savings)", "budget", "",
       # The budget named ("scrap the sofa money"), not another purpose the sentence goes on about.
       make=lambda m, s: [(_purpose(topic) if (topic := m.group("t2") or m.group("t3")) else _purpose(s), "")], op="end",
       on_negation="keep", subject=False),
    # Money set aside, changed by a verb of change ("the honeymoon money's been cut to $8,000").
    _r(r"\b(?P<t>[a-z]+\s+)?(?:money|fund|funds|pot|kitty|savings|allowance|budget)(?:'s|\s+has|\s+is|\s+was)?\s+(?:been\s+|now\s+|just\s+)?"
       r"(?:cut|reduced|lowered|dropped|slashed|trimmed|raised|increased|bumped|upped|capped|topped\s+up)(?:\s+(?:down|up|back))?\s+to\s+"
       + _MONEY, "budget", "", make=lambda m, s: [(_purpose(m.group("t"), s), m.group("v").strip())], on_negation="drop",
       subject=False),
    _r(r"\b(?:upped|raised|bumped|increased|lowered|cut|dropped|reduced|stretched|pushed|moved|knock(?:ed)?|brought|scaled|trimmed|"
       r"slashed)\s+(?:it|that|the\s+(?:budget|limit|cap)|my\s+(?:budget|limit|cap)|our\s+(?:budget|limit|cap)|(?:the\s+)?(?:whole\s+)?"
       r"(?:wedding|trip|holiday|renovation|car|house|flat|kitchen|budget|thing))\s+(?:up\s+|down\s+)?to\s+" + _MONEY_MARKED, "budget", "",
       make=lambda m, s: [(_purpose(s), m.group("v").strip())], on_negation="drop", subject=False),
    _r(r"\b(?:go|stretch|going)\s+(?:up\s+)?(?:to|as\s+high\s+as)\s+" + _MONEY + r"(?=[^.]*\b(?:rent|budget|max|maximum|no\s+higher|tops|"
       r"limit|at\s+most)\b)", "budget", "", make=lambda m, s: [(_purpose(s), m.group("v").strip())], on_negation="drop"),
    _r(r"(?P<t>[车房电脑手机]|房子|电脑|手机|笔记本)(?:也|就|先)?不买了|预算(?:那事|的事|那个)?(?:你)?就当我没说", "budget", "",
       make=lambda m, s: [(_purpose(m.group("t"), s), "")], op="end", on_negation="keep"),
    _r(r"(?P<t>" + _ZC + r"{0,4}?)预算(?:也|就|都)?(?:不存在了|没了|取消了|作废了|不用了|用不上了|泡汤了)", "budget", "",
       make=lambda m, s: [(_purpose(m.group("t"), s), "")], op="end", on_negation="keep"),
    _r(r"\b(?:forget|scrap|drop|cancel|ditch)\s+(?:the|my|our)\s+(?:(?P<t2>[a-z]+)\s+)?budget", "budget", "",
       make=lambda m, s: [(_purpose(m.group("t2"), s), "")], op="end", on_negation="drop"),
    _r(r"(?:\b(?P<t2>[a-z]+(?:\s+[a-z]+)?)\s+)?\bbudget" + r"(?:\s+for\s+(?:the\s+|my\s+|our\s+|this\s+|a\s+)?"
       r"(?P<t>[a-z][a-z ]{0,25}?))?\s*(?:'s|:|is|was|of|will\s+be|has\s+been|is\s+now|at|around|about|"
       r"roughly|stands\s+at|sits\s+at|is\s+set\s+at)?\s+(?:now\s+|only\s+|about\s+|around\s+|roughly\s+|just\s+|"
       r"up\s+to\s+|maybe\s+)?" + _MONEY, "budget", "", make=_budget, on_negation="drop", subject=False),
    _r(r"(?:\b(?P<t2>[a-z]+(?:\s+[a-z]+)?)\s+)?\bbudget(?:\s+for\s+(?:the\s+|my\s+|our\s+|this\s+|a\s+)?"
       r"(?P<t>[a-z][a-z ]{0,25}?))?\s+(?:has\s+been\s+|was\s+|got\s+|is\s+|has\s+)?(?:raised|increased|bumped(?:\s+up)?|"
       r"lowered|reduced|cut|changed|went\s+up|went\s+down|dropped|doubled|tripled|halved|grown|grew|risen|rose|"
       r"climbed|jumped|fell|shrunk|moved|gone\s+up|gone\s+down)\s+(?:up\s+|down\s+)?to\s+" + _MONEY, "budget", "",
       make=_budget, on_negation="drop", subject=False),
    _r(r"\b(?:can't|cannot|can\s+not|don't\s+want\s+to|won't|not\s+going\s+to)\s+(?:spend|pay)\s+more\s+than\s+"
       + _MONEY + r"(?:\s+(?:on|for)\s+(?:the\s+|a\s+|my\s+|our\s+)?(?P<t>[a-z]+(?:\s+[a-z]+)?))?", "budget", "",
       make=_budget, on_negation="keep"),
    _r(r"\b(?:can|could|will|'ll)\s+(?:now\s+|finally\s+|only\s+)?(?:spend|afford|pay|go\s+up\s+to|stretch\s+to|"
       r"stretch\s+my\s+budget\s+to|go\s+as\s+high\s+as)\s+(?:up\s+to\s+|about\s+|around\s+|at\s+most\s+)?" + _MONEY,
       "budget", "", make=_budget, on_negation="drop"),
    _r(r"\b(?:willing|able|happy|prepared|ready)\s+to\s+(?:spend|pay|go\s+up\s+to|go\s+to|stretch\s+to)\s+(?:up\s+to\s+|about\s+|around\s+)?" + _MONEY
       + r"(?:\s+(?:on|for)\s+(?:the\s+|a\s+|my\s+|our\s+)?(?P<t>[a-z]+(?:\s+[a-z]+)?))?", "budget", "",
       make=_budget, on_negation="drop"),
    _r(r"\bmy\s+(?:(?P<t2>[a-z]+)\s+)?(?:max|maximum|limit|cap|spending\s+limit)\s+(?:is|was|of)\s+" + _MONEY,
       "budget", "", make=_budget, on_negation="drop", subject=False),
    _r(r"\b(?:cutting|cut|capped|capping|cap|limit|limiting|limited|raising|raised|lowering|lowered|bumping|bumped|"
       r"increasing|increased|reducing|reduced|keeping|kept)\s+(?:my\s+|our\s+|the\s+)?(?P<t>[a-z]+(?:\s+[a-z]+)?)"
       r"(?:\s+(?:spending|budget|costs?))?\s+(?:down\s+|up\s+)?(?:to|at)\s+" + _MONEY, "budget", "", make=_budget,
       on_negation="drop"),
    _r(r"\bbudget(?:'s)?\b[^.;!?$€£¥\d]{0,30}?\bfrom\s+[$€£¥]?[\d,.]+\s*k?(?:\s+\w+)?\s+to\s+" + _MONEY, "budget", "",
       make=_budget, on_negation="drop", subject=False),
    _r(r"\b(?:got|have|has|saved(?:\s+up)?)\s+(?:about\s+|around\s+|roughly\s+)?" + _MONEY_MARKED
       + r"\s+(?:to\s+spend|for)\b(?:\s+on)?", "budget", "", make=_budget, on_negation="drop"),
    # Generic forms: a spending-limit word, then an amount within a few words ("keep the laptop
    # under $1.2k", "eating out is capped at £200/month", "I give myself $150 a week for groceries")
    # A change by an amount, then the total ("bumped the budget by 200, so 1,400 dollars now").
    _r(r"\b(?:budget|fund|allowance)\b[^.;!?]{0,30}?\bby\s+[$€£¥]?[\d,.]+\s*k?\s*,?\s+(?:so|making\s+it|to)\s+" + _MONEY,
       "budget", "", make=_budget, on_negation="drop", subject=False),
    _r(r"\b(?:another|an\s+extra|a\s+further)\s+[$€£¥]?[\d,.]+\s*k?\s+(?:into|to|onto|on)\s+(?:the|my|our)\s+(?P<t>[a-z]+)\s+"
       r"(?:fund|budget|pot|savings)\b[^.;!?]{0,12}?,?\s+(?:so|making\s+it)\s+" + _MONEY, "budget", "", make=_budget,
       on_negation="drop"),
    _r(r"\b(?:put|set)\s+aside\s+" + _MONEY + r"\s+for\s+(?:the\s+|a\s+|my\s+|our\s+)?(?P<t>[a-z]+)", "budget", "", make=_budget,
       on_negation="drop"),
    _r(r"\b(?:budget(?:'s)?|allowance|fund|under|below|capped|cap|limit(?:ed)?|max(?:imum)?|afford|no\s+more\s+than|nothing\s+(?:over|above|more\s+than)|"
       r"at\s+most|give\s+(?:myself|ourselves))\b[^.;!?$€£¥\d]{0,40}?" + _MONEY_MARKED, "budget", "",
       make=_budget, on_negation="drop", subject=False),
    _r(r"\bbudget(?:'s)?\b[^.;!?$€£¥\d]{0,40}?" + _MONEY, "budget", "", make=_budget, on_negation="drop",
       subject=False),
    # …and an amount of a named purpose that moved ("groceries went up to $180 a week").
    _r(r"\b(?P<t>" + _PURPOSE_WORDS + r")s?\b[^.;!?$€£¥\d]{0,30}?\b(?:up|down|back)\s+to\s+" + _MONEY_MARKED,
       "budget", "", make=_budget, on_negation="drop", subject=False),
    # "从A调成B", "提了三万，到十八万": the amount it ends at.
    _r(r"(?:预算|budget|经费)(?:[^,.!?。]{0,12}?[,]\s*|[^,.!?。]{0,12}?)(?:从[^,.!?。]{1,8}?)?(?:调成|改成|降到|涨到|变成|提到|加到|追加到|"
       r"降至|增至|到)\s*" + _ZH_MONEY + r"(?![倍次个点遍])", "budget", "", make=_budget, on_negation="drop", subject=False),
    _r(r"(?:(?P<t>[" + _CJK + r"]{2,8}?)的?)?(?:总)?预算(?:是|为|有|在|只有|大概|大约|约|差不多|(?:提高|增加|降低|降|减少|调整|调|"
       r"改|涨|上调|下调|提|加|定|控制|变)(?:到|在|为|成)?了?|到|了|就|又|只|最多|顶多|从[^,.。]{1,8}?(?=提|增|降|减|调|"
       r"改|涨|上|下|加|变))*\s*" + _ZH_MONEY, "budget", "", make=_budget, on_negation="drop"),
    _r(r"(?:(?P<t>[" + _CJK + r"]{2,8}?)的?)?(?:预算|经费)[^\d一二两三四五六七八九十百千万,.!?;。]{0,6}?" + _ZH_MONEY + r"(?![倍次个点半遍])", "budget", "",
       make=_budget, on_negation="drop"),
    # An amount of a purpose that moved ("婚纱照那块降到六千了", "沙发能加到4500块了").
    _r(r"(?P<t>[" + _CJK + r"]{2,8}?)(?:那块|这块|那边|这边|的钱)?(?:最多|最少|顶多)?(?:能|可以|只能)?(?:降到|涨到|加到|提到|提高到|减到|砍到|压到|"
       r"放宽到|增加到|调到|降低到|减少到|控制在|凑到|凑够|调整到|追加到|缩到|缩减到|改成|调成|变成|提升到)了?" + _ZH_MONEY, "budget", "",
       make=_budget, on_negation="drop"),
    _r(r"(?:(?P<t>[" + _CJK + r"]{2,8}?))?(?:最多|顶多|最高|不超过|控制在)(?:能|可以|只能)?(?:花|出|付)?" + _ZH_MONEY,
       "budget", "", make=_budget, on_negation="drop"),
]
