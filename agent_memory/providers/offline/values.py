"""Value normalisation: a captured phrase trimmed to the thing it names (a place, an employer, an
object of a taste), and the keys made from it."""

from __future__ import annotations

import re

from agent_memory.providers.offline.gazetteer import is_chinese_city, leading_city, leading_name
from agent_memory.providers.offline.zh_segment import leading_noun

_CJK = "\u3400-\u9fff\uf900-\ufaff"

# Captured English values stop at the first connective: "Paris and I love it" -> "Paris".
_EN_CUT = re.compile(r"\s+(?-i:I)\b.*$|\s+(?:and|but|because|so|since|although|though|which|who|that|where|when|"
                     r"while|then|whereas|if|or|as well|lol|haha|after|before|until)\b.*$", re.I)
_EN_FILLER = re.compile(r"(?:\s+(?:now|recently|lately|already|anymore|any more|too|as well|these days|"
                        r"nowadays|today|again|actually|though|honestly|all the time|every day|on weekends|"
                        r"last (?:year|month|week)|this (?:year|month|week)|lol|lmao|haha|tbh|ngl|rn|fr|xd))+\s*$", re.I)
# Places additionally stop at prepositions and time words ("Tokyo next week", "Berlin in 2020").
_TIME_CUT = re.compile(r"\s+(?:in|on|since|from|until|by|last|this|next|over\s+the)\s+(?:the\s+)?(?:jan|feb|mar|apr|may|jun|"
                       r"jul|aug|sep|oct|nov|dec|monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
                       r"spring|summer|autumn|fall|winter|week|month|year|weekend|\d{4})\w*\b.*$", re.I)
_PLACE_CUT = re.compile(r"\s+(?:for|until|till|from|on|next|this|in|at|by|to|last|ago|with|during|"
                        r"after|before|around|about|right|since|now|as|again|yesterday|today|tomorrow|"
                        r"couldn't|could|still|five|two|three|four|six|ten|starting|leaving|returning|back|soon|"
                        r"the\s+(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekend|week|day))\b.*$", re.I)
_PLACE_REJECT = re.compile(r"^(?:a|an|my|our|his|her|their|your|this|that|here|there|it|home|where|work|mars|the\s+moon|moon|"
                           r"school|bed|town|the city|the office|the (?:new\s+)?(?:house|place|apartment))\b", re.I)
_PREF_CUT = re.compile(r"\s+(?:over|than|instead|rather|more|a lot|so much|very much|the most|best|after|tbh|tho|habit|"
                       r"altogether|completely|entirely|for\s+good|cold\s+turkey|"
                       r"honestly|lol|haha|too|either|at\s+all|right\s+now|to\s+tears|"
                       r"because|since|these days|all the time|anymore|any more|now)\b.*$", re.I)
# Words that never name a place or an object on their own.
_FUNCTION_WORDS = frozenset("to in on at for of by with from into onto up out off over about as so too a an the and "
                            "or but if then than".split())
_PRONOUNS = {"you", "it", "that", "this", "them", "him", "her", "me", "myself", "us", "everything",
             "nothing", "things", "my life", "think", "say", "know", "believe", "see", "hear", "mention",
             "你", "他", "她", "它", "我", "你们", "他们", "这个", "那个", "家", "家里", "这边", "那边", "这里", "那里"}
_ZH_CUT = re.compile(r"(?<=.)(?:因为|但是|但|所以|然后|而且|并且|不过|可是|已经|的时候|今年|去年|现在|目前|"
                     r"以内|左右|上下|之内|的味道|味道|[一二三四五六七八九十两\d]+个?(?:年|月|天|周|星期)).*$")
_ZH_HEAD = re.compile(r"^(?:了)?(?:[一二三四五六七八九十两\d]+个?(?:年|月|天|周|星期)(?:的)?)?")
_ZH_FILLER = re.compile(r"(?:了|啦|呀|啊|呢|吧|哦|嘛|喔|哈+|的)+$")
_ZH_PLACE_TAIL = re.compile(r"(?:工作|生活|居住|定居|住|上班|上学|读书|发展|租房|租|买房|打拼|养老|安家|落户|帮忙|支援|挂职|驻场|出差|培训|"
                            r"开会|旅游|度假|漂|去|来|市)+$")
_ZH_PLACE_HEAD = re.compile(r"^(?:了|到|在|去|回)+")
# Places one stays in that employ nobody ("在农村待了五年").
_NOT_WORKPLACES = frozenset("农村 乡下 城里 老家 家里 山里 国外 海外 外地 本地 学校 宿舍 医院 家乡 部队 监狱".split())
_ZH_NOT_PLACE = re.compile(r"(?:家|酒店|宾馆|民宿|医院|学校|宿舍|周末|晚上|早上|白天|平时|业余|空闲|假期|家里|路上|家门口|附近|本地|地铁口)$|^(?:这|那|哪|第)|"
                           r"^(?:好几|几|十几|[一二三四五六七八九十两半\d]+)(?:个)?(?:年|月|天|周|星期)")
_ZH_GENERIC_PLACE = {"月球", "火星", "外太空", "外星", "喵星", "汪星", "天堂", "一起", "一块", "公司", "单位", "家", "家里", "学校", "这边", "那边", "这里", "那里", "外地", "老家", "国外",
                     "一家公司", "一家电商公司", "路上", "医院"}


def _slug(text: str) -> str:
    # \w is Unicode-aware, so Chinese objects keep their characters as the key.
    return re.sub(r"\W+", "_", text.lower()).strip("_")[:60]


def _has_cjk(text: str) -> bool:
    return bool(re.search(f"[{_CJK}]", text))


def _clean(value: str, *, place: bool = False, pref: bool = False, max_words: int = 6) -> str | None:
    """Trim a captured value to the clause that names the object; None if nothing usable."""
    v = re.sub(r"[\u2600-\u27bf\U0001f000-\U0001faff\ufe0f]+", " ", value).strip().strip("\"'“”")
    if _has_cjk(v):
        v = _ZH_FILLER.sub("", _ZH_CUT.sub("", _ZH_HEAD.sub("", v)))
        if place:
            headless = _ZH_PLACE_HEAD.sub("", v)
            tailless = _ZH_PLACE_TAIL.sub("", headless)
            v = _ZH_FILLER.sub("", tailless if len(tailless) >= 2 else headless)  # 蔚来 is a name, not 蔚 + 来
            v = _ZH_FILLER.sub("", leading_noun(v)) if v else v
            # A known city followed by what one does there ("南京定下来了"): the city.
            v = next((v[:n] for n in (4, 3, 2) if len(v) > n and is_chinese_city(v[:n])), v) if v and not is_chinese_city(v) else v
            if re.match(r"(?:一|某|这|那|哪)(?:家|个|所|间)", v) or v in _ZH_GENERIC_PLACE or (_ZH_NOT_PLACE.search(v) and v not in {"上海", "老家"}):
                return None
    else:
        v = _EN_FILLER.sub("", _EN_CUT.sub("", _TIME_CUT.sub("", v)))
        if place:
            v = re.sub(r"^the\s+(?=(?-i:[A-Z]))", "", _PLACE_CUT.sub("", v))
            if _PLACE_REJECT.match(v):
                return None
            if not re.match(r"(?-i:[A-Z0-9])", v):
                # English places and organisations are proper nouns; in chat written in lower
                # case, only a known city is taken.
                city = leading_city(v)
                if city is None or city.lower() in _FUNCTION_WORDS:
                    return None  # "I'm in to help": a gazetteer's one-word town is no reading of "to"
                v = city
            else:
                v = _proper_noun(v)
        if pref:
            v = re.sub(r"^(?:to|a|an|the|my|some)\s+", "", _PREF_CUT.sub("", v), flags=re.I)
        v = _EN_FILLER.sub("", v).strip()
        if len(v.split()) > max_words:
            return None
    v = v.strip(" -'\"")
    if not v or v.lower() in _PRONOUNS or re.match(r"(?:it|that|this|you|your|those|these)\b|[你他她它]", v, re.I):
        return None
    return v


_NAME_LINKS = {"of", "de", "du", "des", "la", "le", "les", "del", "della", "da", "di", "do", "dos", "am", "an", "upon",
               "on", "sur", "y", "&", "and", "the", "van", "von", "der", "den"}


_NOT_POSSESSED = frozenset("in on at for since until till last this next and but so now from to with by as "
                           "after before during".split())


def _proper_noun(v: str) -> str:
    """The proper noun a value starts with: capitalised words and the links inside names
    ("University of Sheffield", "Médecins Sans Frontières"); the rest is the sentence going on
    ("Zurich has its perks")."""
    words = v.split()
    kept: list[str] = []
    for i, w in enumerate(words):
        if re.match(r"(?-i:[A-Z0-9])|[$€£]", w) or (i == 0) or (w.lower() in _NAME_LINKS and i + 1 < len(words) and re.match(r"(?-i:[A-Z])", words[i + 1]) and kept):
            kept.append(w)
        else:
            break
    name = " ".join(kept)
    rest = words[len(kept):]
    if rest and name.endswith("'s") and re.match(r"[a-z]", rest[0]) and rest[0] not in _NOT_POSSESSED:
        name = name[:-2]  # "Airbnb's payments team": the name is Airbnb
    return name.rstrip(" &-'") or v


def _place(v: str) -> str | None:
    return _clean(v, place=True, max_words=5)


def _lowercase_org(v: str) -> str | None:
    """An employer written in lower case ("started at klarna"): a name that is no dictionary word."""
    v = v.strip()
    if _has_cjk(v) or _PLACE_REJECT.match(v) or re.match(r"(?-i:[A-Z0-9])", v):
        return None
    return leading_name(v)


_SAME_PLACE = frozenset("老地方 原单位 原公司 老单位 老东家 那边 这边 那里 这里 那儿 这儿 公司 单位 厂里 店里 工地 工地上 车间 工厂 门店".split())


def _no_city(raw: str) -> str | None:
    """A proper noun that is no known city ("first time I've left Toowoomba" leaves no employer)."""
    v = _place(raw)
    return v if v and leading_city(v.lower()) != v.lower() else None


def _employer(raw: str) -> str | None:
    """An organisation as an employer rule reads it: a proper noun, or a lower-case name no dictionary
    has; "还在老地方熬着" names no organisation."""
    v = _place(raw) or _lowercase_org(raw)
    if v and re.fullmatch(r"[$€£¥]?\s?[\d.,]+\s?(?:万|千|百|k|K|元|块|w|W)?", v):
        return None  # an amount ("涨到了12万"), not an organisation
    return None if v in _SAME_PLACE else v


def _org(v: str) -> str | None:
    """An organisation named as such ("一家私立医院，叫和睦家"): a name that may end in 家 or 店."""
    if _has_cjk(v):
        v = _ZH_FILLER.sub("", v.strip())
        return v if len(v) >= 2 and v not in _PRONOUNS else None
    return _place(v)


# Verbs that only carry an activity: the object is what is liked ("playing video games" ->
# video games, 喝咖啡 -> 咖啡, 打游戏 -> 游戏); 追剧 and 爬山 are activities in their own right.
_EN_ACTIVITY_VERB = re.compile(r"^(?:playing|watching|eating|drinking|listening\s+to|having|doing|reading)\s+", re.I)
_ZH_ACTIVITY_VERB = re.compile(r"^(?:吃|喝)(?=[" + _CJK + r"])|^(?:打|玩|看|听|追|刷)(?=[" + _CJK + r"]{2,})")


# What follows "like"/"love"/"enjoy" without being a thing liked: a manner or a time ("playing for
# fun", "a job I enjoy every day"), a degree ("having such a great time"), or a pronoun whose
# referent is in another sentence ("I also like holding them").
_EN_NO_OBJECT = re.compile(
    r"^(?:for|to|with|in|on|at|about|by|from|such|so|too|very|really)\b"
    r"|^(?:every|each|all)\s+(?:day|night|morning|evening|week|weekend|time|year)s?$"
    r"|^(?:a\s+lot|so\s+much|too\s+much|very\s+much|today|tonight|now|anymore|again|lately)$"
    r"|\b(?:them|it|him|her|those|these)$", re.I)
# A gerund that needs what follows it ("Knowing I'm helping … is amazing"): alone it likes nothing.
_EN_LONE_GERUND = re.compile(r"(?:knowing|having|being|getting|making|doing|seeing|feeling|going|taking|trying|"
                             r"finding|thinking|saying|telling|letting|keeping)", re.I)


def _object(v: str) -> str | None:
    cleaned = _clean(v, pref=True)
    if not cleaned:
        return None
    if _has_cjk(cleaned):
        # "爱上了…", "烦死下雨天" (死 intensifies the verb), then the noun the object starts with.
        cleaned = _ZH_ACTIVITY_VERB.sub("", re.sub(r"^(?:死了|死|上了|上|了)", "", cleaned))
        # Time words and adverbs around the object are no part of it ("韩剧现在基本不看了").
        cleaned = re.sub(r"^(?:现在|基本上?|已经|早就|最近|都|也|还|就)+|(?:现在|基本上?|已经|早就|最近|都|也|还|就)+$", "", cleaned)
        if cleaned in {"在", "是", "了", "的", "有", "没", "不", "就", "也", "都", "还", "那", "这", "它"} \
                or (len(cleaned) == 1 and len(v.strip()) > 1 and not re.match(r"(?:吃|喝|打|玩|看|听|追|刷)", v.strip())):
            return None  # a function word, or one character left of a longer phrase ("基本" -> "本")
        cleaned = leading_noun(cleaned) if cleaned and not cleaned.startswith("的") else None
    else:
        stripped = _EN_ACTIVITY_VERB.sub("", cleaned)
        if _EN_NO_OBJECT.search(stripped) or _EN_LONE_GERUND.fullmatch(stripped):
            return None
        cleaned = stripped
    return cleaned or None
