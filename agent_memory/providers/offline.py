"""Deterministic offline providers: rule-based fact extraction, heuristic importance,
extractive summaries and feature-hashing embeddings.

They let the system run (and be tested) without a model endpoint. Everything is pure stdlib:
no network, no randomness and no built-in hash() (it is salted per process), so a replayed
activity gets byte-identical results in any worker.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import lru_cache

from agent_memory.models import (
    EmbeddingResult,
    ExtractedFact,
    ExtractionResult,
    ImportanceResult,
    Message,
    SummaryResult,
    SummarySentence,
)
from agent_memory.providers.base import EMBEDDING_DIMENSIONS, SUMMARY_TOKEN_CAP, estimate_tokens
from agent_memory.providers.notes import write_observations
from agent_memory.timeexpr import find_time_mentions

_CJK = "\u3400-\u9fff\uf900-\ufaff"
_IMAGE_TAG = re.compile(r"\s*\[image:[^\]]*\]")
_TRAILING_IMAGE_TAGS = re.compile(r"(?:\s*\[image:[^\]]*\])+\s*$")

# --- text helpers ------------------------------------------------------------------------------

# Captured English values stop at the first connective: "Paris and I love it" -> "Paris".
_EN_CUT = re.compile(r"\s+(?-i:I)\b.*$|\s+(?:and|but|because|so|since|although|though|which|who|that|where|when|"
                     r"while|then|whereas|if|or|as well|lol|haha)\b.*$", re.I)
_EN_FILLER = re.compile(r"(?:\s+(?:now|recently|lately|already|anymore|any more|too|as well|these days|"
                        r"nowadays|today|again|actually|though|last (?:year|month|week)|"
                        r"this (?:year|month|week)))+\s*$", re.I)
# Places additionally stop at prepositions and time words ("Tokyo next week", "Berlin in 2020").
_PLACE_CUT = re.compile(r"\s+(?:for|until|till|from|on|next|this|in|at|by|to|last|ago|with|during|"
                        r"after|before|around|about|right|since|now|as)\b.*$", re.I)
_PLACE_REJECT = re.compile(r"^(?:a|an|my|our|his|her|their|your|this|that|here|there|it|home)\b", re.I)
_PREF_CUT = re.compile(r"\s+(?:over|than|instead|rather|more|a lot|so much|very much|the most|best)\b.*$", re.I)
_PRONOUNS = {"you", "it", "that", "this", "them", "him", "her", "me", "myself", "us", "everything",
             "nothing", "things", "my life", "think", "say", "know", "believe", "see", "hear", "mention",
             "你", "他", "她", "它", "我", "你们", "他们", "这个", "那个", "家", "家里"}
_ZH_CUT = re.compile(r"(?<=.)(?:因为|但是|但|所以|然后|而且|并且|不过|可是|已经|的时候|今年|去年|现在|目前).*$")
_ZH_FILLER = re.compile(r"(?:了|啦|呀|啊|呢|吧|哦|嘛|喔|哈+|的)+$")
_ZH_PLACE_TAIL = re.compile(r"(?:工作|生活|居住|定居|住|上班|上学|读书|发展|去|来)+$")


def _slug(text: str) -> str:
    # \w is Unicode-aware, so Chinese objects keep their characters as the key.
    return re.sub(r"\W+", "_", text.lower()).strip("_")[:60]


def _clean(value: str, *, place: bool = False, pref: bool = False, max_words: int = 6) -> str | None:
    """Trim a captured value to the clause that names the object; None if nothing usable."""
    v = value.strip().strip("\"'“”")
    if re.search(f"[{_CJK}]", v):
        v = _ZH_FILLER.sub("", _ZH_CUT.sub("", v))
        if place:
            v = _ZH_FILLER.sub("", _ZH_PLACE_TAIL.sub("", v))
    else:
        v = _EN_FILLER.sub("", _EN_CUT.sub("", v))
        if place:
            v = _PLACE_CUT.sub("", v)
            if _PLACE_REJECT.match(v):
                return None
        if pref:
            v = re.sub(r"^(?:to|a|an|the)\s+", "", _PREF_CUT.sub("", v), flags=re.I)
        v = _EN_FILLER.sub("", v).strip()
        if len(v.split()) > max_words:
            return None
    v = v.strip(" -'\"")
    if not v or v.lower() in _PRONOUNS or re.match(r"(?:it|that|this|you|your|those|these)\b|[你他她它]", v, re.I):
        return None
    return v


def _place(v: str) -> str | None:
    return _clean(v, place=True, max_words=5)


def _pref(v: str) -> str | None:
    return _clean(v, pref=True)


# --- extraction rules -------------------------------------------------------------------------

_IM = r"\bI(?:'m|\s+am)\s+"
_EV = r"(?P<v>[^.,!?;:\n()]{1,80})"  # English value: up to the clause boundary
_ZC = r"[^\s,.!?;:。、()\"]"  # one character of a Chinese value (text is NFKC-normalised)
_ZV = rf"(?P<v>{_ZC}{{1,16}})"
_ZT = (r"(?:现在|目前|最近|刚刚|刚|已经|去年|今年|前年|上个月|上周|上个星期|这周|本周|下周|下个星期|"
       r"下星期|下个月|这个月|明天|后天|今天|也|都|就|一直|还|终于|马上)*")
_ZADV = r"(?:很|最|非常|特别|真的|也|还|超|挺|蛮|一直|都|比较|更|好)*"
_JOBS = (r"(?:software\s+|civil\s+|mechanical\s+)?(?:engineer|developer|programmer|teacher|professor|tutor|"
         r"nurse|doctor|physician|surgeon|dentist|pharmacist|therapist|designer|manager|student|writer|"
         r"author|journalist|editor|lawyer|attorney|chef|cook|baker|artist|musician|actor|actress|scientist|"
         r"researcher|accountant|analyst|consultant|architect|pilot|farmer|electrician|plumber|mechanic|"
         r"photographer|translator|librarian|entrepreneur|founder|freelancer|intern|barista|waiter|"
         r"waitress|cashier|driver|veterinarian|vet|counselor|social\s+worker|economist|banker|coach|"
         r"trainer|carpenter|officer|firefighter|salesperson|marketer|recruiter|retiree|data\s+scientist)")
_ZH_JOBS = (r"(?:工程师|程序员|老师|教师|医生|护士|学生|研究生|大学生|博士生|设计师|律师|会计师|会计|厨师|"
            r"经理|作家|记者|司机|教授|科学家|研究员|分析师|销售|画家|艺术家|演员|歌手|警察|公务员|军人|"
            r"农民|店主|创业者|自由职业者|实习生|编辑|翻译|摄影师|建筑师|药剂师|咨询师|顾问)")
_SPECIES = {"puppy": "dog", "kitten": "cat", "bunny": "rabbit", "tortoise": "turtle", "小猫": "cat",
            "猫咪": "cat", "猫": "cat", "小狗": "dog", "狗狗": "dog", "狗": "dog", "兔子": "rabbit",
            "小兔子": "rabbit", "鹦鹉": "parrot", "仓鼠": "hamster", "金鱼": "fish", "鱼": "fish", "乌龟": "turtle"}
_EN_SPECIES = r"(?P<s>dog|puppy|cat|kitten|rabbit|bunny|hamster|parrot|bird|fish|turtle|tortoise|horse|snake|lizard|ferret)"
_ZH_SPECIES = r"(?P<s>小兔子|兔子|小猫|猫咪|猫|小狗|狗狗|狗|鹦鹉|仓鼠|金鱼|鱼|乌龟)"
_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_MONEY = (rf"(?P<v>(?:[$€£¥]\s?{_NUM}(?:\s?(?:k|thousand|million)\b)?|{_NUM}(?:\s?(?:k|thousand|million)\b)?"
          r"(?:\s?(?:dollars|bucks|usd|eur|euros?|gbp|pounds|yuan|rmb|cny)\b)?)"
          r"(?:\s+(?:per|a)\s+(?:month|week|year|night|day|person)\b)?)")
_ZH_MONEY = rf"(?P<v>(?:[$¥]\s?)?(?:{_NUM}|[一二两三四五六七八九十百千万]+)\s?(?:万元|万块|万|千元|千|元|块钱|块|美元|欧元|人民币|刀)?)"
_BUDGET_TOPIC = r"(?:\s+for\s+(?:the\s+|my\s+|our\s+|this\s+|a\s+)?(?P<t>[a-z][a-z ]{0,25}?))?"


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    namespace: str
    key: str  # a literal key, or a template using {slug} of the value
    clean: Callable[[str], str | None] = _clean
    confidence: float = 0.9
    temporary: bool = False
    make: Callable[[re.Match[str]], tuple[str, str] | None] | None = None  # custom (key, value)


def _r(pattern: str, namespace: str, key: str, **kw: object) -> _Rule:
    return _Rule(re.compile(pattern, re.I), namespace, key, **kw)  # type: ignore[arg-type]


def _const(key: str, value: str) -> Callable[[re.Match[str]], tuple[str, str]]:
    return lambda m: (key, value)


def _pet(m: re.Match[str]) -> tuple[str, str]:
    said = m.group("s")
    name = m.groupdict().get("n")
    return _SPECIES.get(said.lower(), said.lower()), (_clean(name) or said) if name else said


def _budget(m: re.Match[str]) -> tuple[str, str]:
    topic = m.groupdict().get("t") or m.groupdict().get("t2") or ""
    topic = re.sub(r"^(?:我们的|我的|我们|我|把|将|这次|这个|那个|的|总)+|的$", "", topic.strip())
    if topic.lower() in {"", "total", "overall", "whole", "entire", "max", "maximum", "monthly", "current", "new"}:
        topic = "general"
    return _slug(topic), m.group("v").strip()


# Order is priority: a span taken by an earlier rule (e.g. "不吃辣") is not re-read by a later one
# (e.g. "不吃X" -> avoid_辣), and negative forms ("don't like") win over positive ones.
_RULES: list[_Rule] = [
    # diet: spicy food is one key so "不吃辣" is superseded by "最近能吃辣了"
    _r(r"\bI\s+(?:don't|do\s+not|can't|cannot|never)\s+(?:eat|handle|do|like)\s+spicy(?:\s+food)?",
       "diet", "spicy", make=_const("spicy", "no spicy food")),
    _r(r"(?:不|没法|没办法)(?:太|怎么|能|敢|喜欢|爱|会)*吃辣", "diet", "spicy", make=_const("spicy", "no spicy food")),
    _r(r"\bI\s+(?:can\s+(?:now\s+)?|now\s+|(?:started|start|began)\s+(?:to\s+)?)?(?:eat|eating|handle)\s+spicy(?:\s+food)?",
       "diet", "spicy", make=_const("spicy", "eats spicy food")),
    _r(r"(?:能|可以|开始|敢|会|爱)吃辣", "diet", "spicy", make=_const("spicy", "eats spicy food")),
    _r(_IM + r"(?:a\s+|an\s+)?(?:strict\s+|fully\s+|now\s+|mostly\s+)?(?P<v>vegetarian|vegan|pescatarian|halal|kosher)\b",
       "diet", "restriction"),
    _r(r"\bI\s+(?:only\s+)?(?:eat|keep|went|became|have\s+become)\s+(?P<v>vegetarian|vegan|halal|kosher)\b", "diet", "restriction"),
    _r(r"我" + _ZT + r"(?:只)?(?:是)?(?P<v>吃素|素食)", "diet", "restriction"),
    _r(_IM + r"(?:severely\s+|very\s+|mildly\s+|also\s+)?allergic\s+to\s+" + _EV, "diet", "allergy_{slug}", clean=_pref),
    _r(r"\bI\s+have\s+(?:a|an)\s+(?:severe\s+|mild\s+)?(?P<v>[a-z]+(?:\s[a-z]+)?)\s+allergy", "diet", "allergy_{slug}"),
    _r(r"我对(?P<v>" + _ZC + r"{1,10}?)过敏", "diet", "allergy_{slug}"),
    _r(r"\bI\s+(?:don't|do\s+not|can't|cannot|never|won't)\s+eat\s+" + _EV, "diet", "avoid_{slug}", clean=_pref),
    _r(r"我" + _ZT + r"(?:不|不能|从不|从来不)吃" + _ZV, "diet", "avoid_{slug}"),
    # dislikes before likes
    _r(r"\bI\s+(?:really\s+|absolutely\s+|just\s+|also\s+)*(?:hate|dislike|detest|can't\s+stand|cannot\s+stand|"
       r"don't\s+like|do\s+not\s+like|don't\s+enjoy)\s+" + _EV, "dislike", "{slug}", clean=_pref),
    _r(r"我" + _ZADV + r"(?:不喜欢|不爱|讨厌|受不了)" + _ZV, "dislike", "{slug}"),
    # temporary trips before home city: they must never touch location/home_city
    _r(r"\bI(?:'m|\s+am|'ll\s+be|\s+will\s+be)\s+(?:currently\s+|now\s+)?on\s+(?:a|my|an)\s+(?:\w+\s+)?trip\s+(?:to|in)\s+" + _EV,
       "travel", "trip_city", clean=_place, temporary=True),
    _r(r"\bI(?:'m|\s+am|'ll\s+be|\s+will\s+be)\s+(?:traveling|travelling|flying)\s+to\s+" + _EV,
       "travel", "trip_city", clean=_place, temporary=True),
    _r(r"\b(?:business|work)\s+trip\s+to\s+" + _EV, "travel", "trip_city", clean=_place, temporary=True),
    _r(r"\bI(?:'m|\s+am|'ll\s+be|\s+will\s+be)\s+visiting\s+(?P<v>[^.,!?;:\n]{1,40}?)\s+for\s+(?:\d+|an?|one|two|three|"
       r"four|five|six|seven|eight|nine|ten|(?:a\s+)?couple\s+of|(?:a\s+)?few)\s+(?:days?|nights?|weeks?)",
       "travel", "trip_city", clean=_place, temporary=True),
    _r(r"我" + _ZT + r"(?:要|会|将|准备|打算|正在)?" + _ZT + r"(?:去|到)(?P<v>" + _ZC + r"{1,10}?)(?:出差|旅游|旅行|度假|玩)",
       "travel", "trip_city", clean=_place, temporary=True),
    _r(r"我" + _ZT + r"(?:正)?在(?P<v>" + _ZC + r"{1,10}?)(?:出差|旅游|旅行|度假)",
       "travel", "trip_city", clean=_place, temporary=True),
    # home city; a move uses the same key, the store closes the previous interval
    _r(_IM + r"(?:currently\s+|now\s+)?(?:based|living|located)\s+in\s+" + _EV, "location", "home_city", clean=_place),
    _r(r"\bI\s+(?:currently\s+|now\s+|still\s+)?live\s+in\s+" + _EV, "location", "home_city", clean=_place),
    _r(r"\bI(?:'ve|\s+have)?\s+(?:just\s+|recently\s+|finally\s+|already\s+|now\s+)?(?:moved|relocated)\s+to\s+" + _EV,
       "location", "home_city", clean=_place),
    _r(r"我" + _ZT + r"(?:住在|家在|定居在|生活在|定居于)" + _ZV, "location", "home_city", clean=_place),
    _r(r"我" + _ZT + r"在(?P<v>" + _ZC + r"{1,10}?)(?:生活|定居|居住|安家)", "location", "home_city", clean=_place),
    _r(r"我" + _ZT + r"(?:搬到了|搬到|搬去了|搬去|搬家到|搬家去了|搬家去|搬回了|搬回)" + _ZV,
       "location", "home_city", clean=_place),
    # name
    _r(r"\bmy\s+name\s+is\s+(?P<v>[A-Za-z][\w'-]*(?:\s+(?-i:[A-Z])[\w'-]*){0,2})", "profile", "name"),
    _r(r"\b(?:call\s+me|I(?:'m|\s+am)\s+called)\s+(?P<v>(?-i:[A-Z])[\w'-]*(?:\s+(?-i:[A-Z])[\w'-]*){0,2})", "profile", "name"),
    _r(r"我(?:叫(?!了|车|外卖)|的名字(?:是|叫))(?P<v>" + _ZC + r"{1,8})", "profile", "name"),
    # work: only job-like nouns, so "I'm a bit tired" is not a job
    _r(r"\bI\s+work\s+as\s+(?:a|an)\s+" + _EV, "work", "job", clean=_place),
    _r(_IM + r"(?:a|an)\s+(?P<v>(?:[a-z-]+\s+){0,2}?" + _JOBS + r")\b", "work", "job"),
    _r(r"\bmy\s+(?:job|occupation|profession)\s+is\s+(?:a|an)\s+" + _EV, "work", "job", clean=_place),
    _r(r"\bI\s+(?:currently\s+|now\s+)?work\s+(?:at|for)\s+(?P<v>(?-i:[A-Z0-9])[^.,!?;:\n]{0,60})", "work", "employer",
       clean=_place),
    _r(r"我" + _ZT + r"是(?:一名|一位|一个|个|名)?(?P<v>" + _ZC + r"{0,8}?" + _ZH_JOBS + r")", "work", "job"),
    _r(r"我" + _ZT + r"是一名" + _ZV, "work", "job", confidence=0.6),
    _r(r"我" + _ZT + r"在(?P<v>" + _ZC + r"{1,12}?)(?:工作|上班|任职)", "work", "employer"),
    # pets
    _r(r"\bI\s+(?:have|own|got|adopted|just\s+got|have\s+got)\s+(?:a|an|one)\s+(?!hot\s)(?:[a-z]+\s+)?" + _EN_SPECIES
       + r"\b(?:\s*,?\s+(?:named|called)\s+(?P<n>[A-Za-z][\w'-]*))?", "pet", "", make=_pet),
    _r(r"\bmy\s+(?!hot\s)(?:[a-z]+\s+)?" + _EN_SPECIES + r"\s*,?\s+(?P<n>(?-i:[A-Z])[a-z][\w'-]*)", "pet", "", make=_pet),
    _r(r"我" + _ZT + r"(?:养了|养着|养|有)(?:一|两|二|三|几)?(?:只|条|个|头|匹)" + _ZH_SPECIES
       + r"(?:,?\s*(?:它|他|她)?(?:叫|名叫|名字叫|叫做)(?P<n>" + _ZC + r"{1,6}))?", "pet", "", make=_pet),
    # budgets and spending constraints
    _r(r"(?:\b(?:my|our|the)\s+(?:(?P<t2>[a-z]+)\s+)?)?\bbudget" + _BUDGET_TOPIC
       + r"\s+(?:is|was|of|will\s+be|has\s+been|is\s+now)\s+(?:now\s+|only\s+|about\s+|around\s+|roughly\s+|just\s+|up\s+to\s+)?"
       + _MONEY, "budget", "", make=_budget),
    _r(r"(?:\b(?:my|our|the)\s+(?:(?P<t2>[a-z]+)\s+)?)?\bbudget" + _BUDGET_TOPIC
       + r"\s+(?:has\s+been\s+|was\s+|got\s+|is\s+)?(?:raised|increased|bumped(?:\s+up)?|lowered|reduced|cut|changed|"
       r"went\s+up|went\s+down|dropped)\s+to\s+" + _MONEY, "budget", "", make=_budget),
    _r(r"\bI\s+(?:can't|cannot|can\s+not|don't\s+want\s+to|won't)\s+spend\s+more\s+than\s+" + _MONEY,
       "budget", "", make=_budget),
    _r(r"(?:(?P<t>[" + _CJK + r"]{2,6}?)的?)?预算(?:是|为|有|在|只有|大概|大约|约|差不多|提高到|提高了|提高|增加到|增加了|"
       r"降到|降低到|减少到|降低了|调整到|调到|改成|改为|变成|涨到|上调到|下调到|到)+\s*" + _ZH_MONEY,
       "budget", "", make=_budget),
    # likes last: the most generic verbs
    _r(r"\bI\s+(?:really\s+|absolutely\s+|also\s+|just\s+|do\s+|still\s+|totally\s+)*(?:love|like|enjoy|prefer|adore)\s+"
       + _EV, "preference", "{slug}", clean=_pref),
    _r(_IM + r"(?:a\s+)?(?:huge|big|great)\s+fan\s+of\s+" + _EV, "preference", "{slug}", clean=_pref),
    _r(_IM + r"(?:really\s+|very\s+)?into\s+" + _EV, "preference", "{slug}", clean=_pref, confidence=0.6),
    _r(r"我" + _ZADV + r"(?:喜欢|爱(?!人|好))" + _ZV, "preference", "{slug}"),
]

_JOKE_SKIP = re.compile(r"\bjust\s+kidding\b|\bj/?k\b|\bkidding\b|开玩笑|逗你", re.I)
_JOKE_SOFT = re.compile(r"\blol\b|\blmao\b|\bha(?:ha)+\b|\brofl\b|哈哈|😂|🤣|😆", re.I)
_HYPOTHETICAL = re.compile(r"\b(?:if|wish|would|could|imagine|suppose|supposing|pretend|maybe|perhaps|might|"
                           r"someday|dream|unless|whether|hope|hoping)\b|如果|假如|要是|假设|希望|但愿|也许|或许|梦想|想象|幻想|万一",
                           re.I)
_NEGATION = re.compile(r"\b(?:not|never|no|don't|doesn't|didn't|isn't|aren't|wasn't|won't|can't|cannot|nor|hardly)\b"
                       r"|不(?!过|错|久|少|仅|但|管)|没|别|未|并非", re.I)
_QUESTION_START = re.compile(r"^\s*(?:do|does|did|am|are|is|can|could|would|will|should|shall|where|what|why|who|whom|"
                             r"whose)\b", re.I)
_SENTENCE_SPLIT = re.compile(r"(?<=\.)\s+|(?<=[。!?])\s*|\n+")


def _prepare(content: str) -> str:
    # NFKC folds full-width punctuation (，？！) to ASCII so one character class serves both languages.
    text = unicodedata.normalize("NFKC", _IMAGE_TAG.sub(" ", content))
    return text.replace("’", "'").replace("‘", "'")


def _statement_part(sentence: str) -> str:
    """The sentence minus any question: "I live in Oslo, and you?" keeps "I live in Oslo"."""
    s = sentence.strip()
    if _QUESTION_START.match(s):
        return ""
    if s.endswith("?") or s.endswith("吗"):
        cut = max(s.rfind(ch) for ch in ",;:、")
        return s[:cut] if cut > 0 else ""
    return s


def _blocked(sentence: str, start: int) -> bool:
    """A match is not a fact when a hypothetical opens its sentence or a negation its clause."""
    prefix = sentence[:start]
    if _HYPOTHETICAL.search(prefix):
        return True
    return bool(_NEGATION.search(re.split(r"[,;:、]", prefix)[-1]))


# --- trip end dates ----------------------------------------------------------------------------

_WORD_NUMS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
              "eight": 8, "nine": 9, "ten": 10, "couple of": 2, "a couple of": 2, "few": 3, "a few": 3}
_ZH_DIGITS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_UNIT_DAYS = {"day": 1, "night": 1, "week": 7, "month": 30, "天": 1, "晚": 1, "周": 7, "星期": 7, "礼拜": 7, "月": 30}
_DUR_EN = re.compile(r"\bfor\s+(?:the\s+next\s+)?(\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|"
                     r"(?:a\s+)?couple\s+of|(?:a\s+)?few)\s+(day|night|week|month)s?\b")
_DUR_ZH = re.compile(r"(\d+|[一二两三四五六七八九十]+)\s*个?(天|晚|周|星期|礼拜|月)")
_MON = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_UNTIL_EN = re.compile(r"\b(?:until|till|til|through|thru)\s+(?:the\s+)?(?:(\d{4})-(\d{1,2})-(\d{1,2})|" + _MON
                       + r"\s+(\d{1,2})(?:st|nd|rd|th)?|(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MON + "|("
                       + "|".join(_WEEKDAYS) + r"))\b")
_UNTIL_ZH = re.compile(r"(?:到|至)(?:(\d{1,2}|[一二三四五六七八九十]+)月)?(\d{1,2}|[一二三四五六七八九十]+)[日号]")
_NEXT_WEEK = re.compile(r"\bnext\s+week\b|下周|下个星期|下星期|下礼拜")
_THIS_WEEK = re.compile(r"\bthis\s+week(?:end)?\b|这周|本周|这个星期|这星期|这礼拜|这个?周末")


def _zh_num(text: str) -> int:
    if text.isdigit():
        return int(text)
    if "十" in text:
        tens, _, ones = text.partition("十")
        return _ZH_DIGITS.get(tens, 1) * 10 + _ZH_DIGITS.get(ones, 0)
    return _ZH_DIGITS.get(text, 0)


def _month_day(month: int, day: int, today: date) -> date | None:
    try:
        d = date(today.year, month, day)
        return d if d >= today else date(today.year + 1, month, day)
    except ValueError:
        return None


def _trip_until(sentence: str, created: datetime) -> datetime | None:
    text, today = sentence.lower(), created.date()
    next_week = bool(_NEXT_WEEK.search(text))
    start = today + timedelta(days=7 - today.weekday()) if next_week else today
    end: date | None = None
    if m := _DUR_EN.search(text):
        n = int(m[1]) if m[1].isdigit() else _WORD_NUMS.get(re.sub(r"\s+", " ", m[1]), 1)
        end = start + timedelta(days=n * _UNIT_DAYS[m[2]])
    elif m := _DUR_ZH.search(text):
        end = start + timedelta(days=_zh_num(m[1]) * _UNIT_DAYS[m[2]])
    elif m := _UNTIL_EN.search(text):
        if m[1]:
            try:
                end = date(int(m[1]), int(m[2]), int(m[3]))
            except ValueError:
                end = None
        elif m[4] or m[7]:
            mon, day = (m[4], m[5]) if m[4] else (m[7], m[6])
            end = _month_day(_MONTHS.index(mon) + 1, int(day), today)
        else:
            end = today + timedelta(days=(_WEEKDAYS.index(m[8]) - today.weekday()) % 7)
    elif m := _UNTIL_ZH.search(text):
        end = _month_day(_zh_num(m[1]) if m[1] else today.month, _zh_num(m[2]), today)
    elif next_week:
        end = start + timedelta(days=6)
    elif _THIS_WEEK.search(text):
        end = today + timedelta(days=6 - today.weekday())
    return datetime.combine(end, time(23, 59, 59), tzinfo=created.tzinfo) if end else None


# --- providers ---------------------------------------------------------------------------------


def _read(rule: _Rule, m: re.Match[str]) -> tuple[str, str, tuple[int, int]] | None:
    """(key, value, span of the statement up to the cleaned value) or None if nothing usable."""
    if rule.make:
        made = rule.make(m)
        return (made[0], made[1], m.span()) if made and made[0] else None
    raw = m.group("v")
    value = rule.clean(raw)
    if not value:
        return None
    at = raw.find(value)
    end = m.start("v") + at + len(value) if at >= 0 else m.end()
    return rule.key.format(slug=_slug(value)), value, (m.start(), end)


# One value per meaning across languages, so "我吃素" confirms "I'm vegetarian" rather than
# superseding it.
_CANONICAL_VALUES = {"吃素": "vegetarian", "素食": "vegetarian", "纯素": "vegan"}


def _observed_at(sentence: str, written_at: datetime, *, temporary: bool) -> datetime:
    """When the stated change happened: "I moved here last month" happened last month. Only
    past times count for lasting facts; a trip may start in the future ("next week")."""
    for mention in find_time_mentions(sentence, written_at):
        start = datetime.combine(mention.day, time(0), tzinfo=written_at.tzinfo)
        if start < written_at or temporary:
            return start
    return written_at


def _message_facts(message: Message) -> list[ExtractedFact]:
    text = _prepare(message.content)
    if _JOKE_SKIP.search(text):
        return []  # a retracted statement is not evidence of anything
    confidence_cap = 0.4 if _JOKE_SOFT.search(text) else 1.0
    found: list[tuple[int, int, ExtractedFact]] = []
    for sentence_index, raw_sentence in enumerate(_SENTENCE_SPLIT.split(text)):
        sentence = _statement_part(raw_sentence or "")
        if not sentence:
            continue
        taken: list[tuple[int, int]] = []
        for rule in _RULES:
            pos = 0
            while m := rule.pattern.search(sentence, pos):
                pos = m.start() + 1
                read = _read(rule, m)
                if read is None:
                    continue
                key, value, span = read
                # Overlap is judged on the span up to the cleaned value: "I love hiking and I live
                # in Denver" keeps "I love hiking" although its raw capture ran over "I live in".
                if any(span[0] < e and s < span[1] for s, e in taken):
                    continue
                taken.append(span)  # negated spans too: a looser rule must not re-read them
                pos = span[1]
                if _blocked(sentence, m.start()):
                    continue
                fact = ExtractedFact(
                    namespace=rule.namespace, key=key, value=_CANONICAL_VALUES.get(value, value),
                    permanence="temporary" if rule.temporary else "permanent",
                    valid_until=_trip_until(sentence, message.created_at) if rule.temporary else None,
                    confidence=min(rule.confidence, confidence_cap),
                    evidence_message_ids=[message.message_id],
                    observed_at=_observed_at(sentence, message.created_at, temporary=rule.temporary),
                )
                found.append((sentence_index, m.start(), fact))
    return [f for _, _, f in sorted(found, key=lambda t: (t[0], t[1]))]


def _extract_facts(messages: list[Message], subject_role: str) -> list[ExtractedFact]:
    merged: dict[tuple[str, str], ExtractedFact] = {}
    for message in messages:
        if message.role != subject_role:
            continue
        for fact in _message_facts(message):
            identity = (fact.namespace, fact.key)
            if identity in merged:
                # The last statement wins, but every message that said it stays as evidence.
                earlier = merged.pop(identity).evidence_message_ids
                ids = earlier + [i for i in fact.evidence_message_ids if i not in earlier]
                fact = fact.model_copy(update={"evidence_message_ids": ids})
            merged[identity] = fact  # re-inserted at the end: order follows the kept statement
    return list(merged.values())


class RuleFactExtractor:
    name = "rule-extractor"
    version = "2"  # 2: canonical diet values, observed_at from resolved time expressions

    async def extract(self, messages: list[Message], *, subject_role: str = "user") -> ExtractionResult:
        return ExtractionResult(provider=self.name, extractor=self.name, extractor_version=self.version,
                                facts=_extract_facts(messages, subject_role))


_LIFE_EVENT = re.compile(
    r"\b(?:moved|moving|relocat\w*|married|engaged|wedding|divorc\w*|new job|hired|promot\w*|fired|laid off|"
    r"quit my job|retired|born|pregnan\w*|gave birth|died|passed away|funeral|diagnos\w*|surgery|hospital\w*|"
    r"graduat\w*|accident|broke up)\b|搬家|搬到|搬去|结婚|订婚|离婚|新工作|换工作|找到工作|升职|辞职|被裁|退休|出生|"
    r"怀孕|去世|过世|葬礼|确诊|诊断|手术|住院|毕业|分手|车祸", re.I)
_CONSTRAINT = re.compile(r"\b(?:allerg\w*|budget|must|deadline|can't afford)\b|预算|过敏|必须|不能", re.I)
_EMOTION = re.compile(r"\b(?:excited|thrilled|devastated|heartbroken|scared|anxious|worried|grateful|proud)\b|"
                      r"激动|难过|伤心|害怕|焦虑|担心|感激|骄傲", re.I)


class HeuristicImportanceScorer:
    name = "heuristic-importance"
    version = "1"

    async def score(self, messages: list[Message]) -> ImportanceResult:
        text = "\n".join(_prepare(m.content) for m in messages if m.content.strip())
        if not text.strip():
            return ImportanceResult(provider=self.name, importance=1, rationale="no content")
        score, signals = 3, ["base 3"]
        events = sorted({e.lower() for e in _LIFE_EVENT.findall(text)})
        if events:
            points = min(5, 2 + len(events))
            score += points
            signals.append(f"life events {', '.join(events)} (+{points})")
        facts = _extract_facts(messages, "user")
        if facts:
            points = 1 if len(facts) < 3 else 2
            score += points
            signals.append(f"{len(facts)} first-person facts (+{points})")
        if any(f.namespace in {"preference", "dislike", "diet", "budget"} for f in facts) or _CONSTRAINT.search(text):
            score += 1
            signals.append("preference or constraint (+1)")
        if _EMOTION.search(text):
            score += 1
            signals.append("strong emotion (+1)")
        tokens = estimate_tokens(text)
        if tokens > 150:
            points = 1 if tokens <= 600 else 2
            score += points
            signals.append(f"length {tokens} tokens (+{points})")
        return ImportanceResult(provider=self.name, importance=max(1, min(10, score)), rationale="; ".join(signals))


_STOPWORDS = frozenset(
    "a an the and or but if then so of to in on at by for with from as is am are was were be been being it its "
    "this that these those i me my we our you your he him his she her they them their what which who whom do does "
    "did have has had not no yes just very really too also can could would should will shall may might must about "
    "into over than there here when where why how all any some more most such only own same other out up down off "
    "again once ok okay oh yeah hi hello thanks thank well like get got go going know think".split())
_LATIN_WORD = re.compile(r"[^\W\d_][^\W_]*(?:'[^\W_]+)?|\d+")
_CJK_RUN = re.compile(f"[{_CJK}]+")
_SUMMARY_SPLIT = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")


def _terms(text: str) -> set[str]:
    lower = text.lower()
    words = {w for w in _LATIN_WORD.findall(_CJK_RUN.sub(" ", lower))
             if len(w) >= 3 and w not in _STOPWORDS and "'" not in w}  # contractions are function words
    bigrams = {run[i:i + 2] for run in _CJK_RUN.findall(lower) for i in range(len(run) - 1)}
    return words | bigrams


def _salience(text: str, doc_freq: Counter[str], role: str) -> float:
    terms = _terms(text)
    score = sum(math.log1p(doc_freq[t]) for t in terms) / math.sqrt(max(1, len(terms)))
    if re.search(r"\b(?:I|I'm|I've|my|me)\b|我", text):
        score += 1.0
    score += 0.5 * min(3, len(re.findall(r"(?<=\s)[A-Z][a-z]+", text)))  # capitalised, not sentence-initial
    if re.search(r"\d|[一二三四五六七八九十]月|星期|周[一二三四五六日]", text):
        score += 0.7
    if role == "user":
        score += 0.3
    if len(terms) < 2:
        score -= 1.5  # "ok", "Thanks!" carry nothing
    if text.rstrip().endswith(("?", "？")):
        score -= 0.5
    return score


def _truncate(prefix: str, text: str, cap: int) -> str:
    """Longest prefix of text, cut at a word boundary (or between CJK characters), that fits."""
    cjk = re.compile(f"[{_CJK}]")
    cuts = [i for i in range(1, len(text) + 1)
            if i == len(text) or text[i].isspace() or cjk.match(text[i - 1]) or cjk.match(text[i])]
    best = ""
    for i in cuts:
        piece = text[:i].rstrip()
        if estimate_tokens(prefix + piece) > cap:
            break
        best = piece
    if not best:  # one unbroken token longer than the cap (a URL): cut between characters
        for i in range(1, len(text) + 1):
            if estimate_tokens(prefix + text[:i]) > cap:
                break
            best = text[:i]
    return best.rstrip()


class ExtractiveSummarizer:
    name = "extractive-summarizer"
    version = "4"  # 2: observations; 3: with the question they answer; 4: greetings no longer hide statements

    async def summarize(self, messages: list[Message], *, token_cap: int = SUMMARY_TOKEN_CAP) -> SummaryResult:
        candidates: list[tuple[int, str, str, Message]] = []  # (order, prefix, sentence, message)
        for message in messages:
            # Only trailing image tags are dropped, so every sentence stays a verbatim substring.
            content = _TRAILING_IMAGE_TAGS.sub("", message.content)
            prefix = f"{message.speaker}: " if message.speaker else ""
            for sentence in _SUMMARY_SPLIT.split(content):
                sentence = sentence.strip()
                if re.search(r"\w", sentence):
                    candidates.append((len(candidates), prefix, sentence, message))
        if not candidates or token_cap <= 0:
            return SummaryResult(provider=self.name, sentences=[], token_count=0,
                                 observations=write_observations(messages))
        doc_freq: Counter[str] = Counter(t for _, _, s, _ in candidates for t in _terms(s))
        # "ok", "Thanks!", "It's fine." would only pad the cap; keep them out unless nothing else exists.
        pool = [c for c in candidates if len(_terms(c[2])) >= 2] or candidates
        ranked = sorted(pool, key=lambda c: (-_salience(c[2], doc_freq, c[3].role), c[0]))

        def joined(chosen: list[tuple[int, str, str, Message]]) -> str:
            return " ".join(p + s for _, p, s, _ in sorted(chosen, key=lambda c: c[0]))

        chosen: list[tuple[int, str, str, Message]] = []
        for candidate in ranked:  # greedy by salience; re-estimate the whole text, the estimate is not additive
            if estimate_tokens(joined([*chosen, candidate])) <= token_cap:
                chosen.append(candidate)
        if not chosen:
            order, prefix, sentence, message = ranked[0]
            piece = _truncate(prefix, sentence, token_cap)
            if not piece:
                prefix = ""  # a speaker name is dispensable, the words are not
                piece = _truncate(prefix, sentence, token_cap)
            if piece:
                chosen = [(order, prefix, piece, message)]
        chosen.sort(key=lambda c: c[0])
        sentences = [SummarySentence(text=p + s, source_message_ids=[m.message_id]) for _, p, s, m in chosen]
        return SummaryResult(provider=self.name, sentences=sentences, token_count=estimate_tokens(joined(chosen)),
                             observations=write_observations(messages))


# Feature weights: whole words and CJK bigrams carry meaning; n-grams and single CJK characters
# add robustness to inflection and segmentation at a lower weight.
_WEIGHTS = {"w": 1.0, "g": 0.35, "b": 1.0, "u": 0.5}


@lru_cache(maxsize=65536)
def _slot(feature: str, dimensions: int) -> tuple[int, float]:
    h = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
    return h % dimensions, (1.0 if (h >> 63) & 1 == 0 else -1.0)


def _features(text: str) -> Counter[str]:
    lower = unicodedata.normalize("NFKC", text).lower()
    feats: Counter[str] = Counter()
    for run in _CJK_RUN.findall(lower):
        feats.update("u:" + ch for ch in run)
        feats.update("b:" + run[i:i + 2] for i in range(len(run) - 1))
    words = _LATIN_WORD.findall(_CJK_RUN.sub(" ", lower))
    content = [w for w in words if w not in _STOPWORDS] or words  # keep stopwords only if nothing else
    for word in content:
        feats["w:" + word] += 1
        padded = f"<{word}>"
        if len(word) > 2 and not word.isdigit():
            feats.update("g:" + padded[i:i + n] for n in (3, 4) for i in range(len(padded) - n + 1))
    return feats


class HashingEmbedder:
    name = "hashing-embedder"
    version = "1"
    dimensions = EMBEDDING_DIMENSIONS

    def _vector(self, text: str) -> list[float]:
        vec = [0.0] * self.dimensions
        for feature, tf in sorted(_features(text).items()):  # sorted: identical float summation order
            index, sign = _slot(feature, self.dimensions)
            vec[index] += sign * _WEIGHTS[feature[0]] * (1.0 + math.log(tf))
        norm = math.sqrt(sum(v * v for v in vec))
        return [v / norm for v in vec] if norm > 0 else vec

    async def embed(self, texts: list[str]) -> EmbeddingResult:
        return EmbeddingResult(provider=self.name, model=f"{self.name}-v{self.version}-{self.dimensions}",
                               vectors=[self._vector(t) for t in texts])


@dataclass(frozen=True)
class OfflineProviders:
    extractor: RuleFactExtractor
    scorer: HeuristicImportanceScorer
    summarizer: ExtractiveSummarizer
    embedder: HashingEmbedder


def offline_providers() -> OfflineProviders:
    return OfflineProviders(RuleFactExtractor(), HeuristicImportanceScorer(), ExtractiveSummarizer(), HashingEmbedder())
