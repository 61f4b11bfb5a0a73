"""Rule-based fact extraction for the offline provider, English and Chinese.

The extractor works sentence by sentence and clause by clause:

- **Subject.** A rule does not need "I"/"我": a match counts when the words before it in its
  clause are first-person pronouns, adverbs, time words or interjections ("Just moved to …",
  "We live in …", "Finally settled in …", "刚搬到成都", "我们住在苏州"). A third party named before
  it in the sentence ("my brother's budget", "my friend Raj lives in …", "我妈喜欢…") keeps the
  clause out, and so does a subjectless clause that continues that third party's sentence
  ("… and works at Infosys").
- **Verb classes.** Rules are written over classes of verbs and nouns (moving, moving back,
  settling; raising/lowering an amount; starting at, being hired by, leaving an employer;
  agentive job nouns rather than a fixed list; kinship words for relationship status).
- **Operations.** A statement asserts a value; "no longer"/"not … anymore"/不再/不…了, a
  negated current-fact statement, leaving a job, quitting a habit and a pet's death END the fact;
  a message that corrects an earlier one ("I meant", "I misspoke", 说错了, 记错了) turns its
  statements into CORRECT operations.
- **Time.** The change is dated by the relative time it names ("last weekend", 大前天, "since
  Saturday", "for six years" for how long a state has held); an n-day stay covers n days.
- **Dialogue.** A user's bare answer to the assistant's question ("Which team?" → "The Minnesota
  Wolves!") fills the slot the question asked for.

Keys follow the vocabulary in docs/recall.md ("What gets written") and agent_memory/samples/PHRASING.md:
`preference/<object>` = like|dislike, `pet/<name>` = species, `relationship/status`,
`budget/<canonical purpose>`.

Pure stdlib and deterministic (no randomness, no salted hash()), so a replayed activity gets
byte-identical results.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from difflib import SequenceMatcher

from agent_memory.conflicts import normalise_value
from agent_memory.models import ExtractedFact, ExtractionResult, FactOperation, KnownFact, Message
from agent_memory.providers.gazetteer import (
    is_chinese_city,
    is_dictionary_word,
    is_first_name,
    leading_city,
    leading_name,
)
from agent_memory.providers.zh_segment import (
    could_be_a_name,
    is_place_word,
    leading_noun,
    names_a_person,
    tagged,
)
from agent_memory.timeexpr import find_time_mentions
from agent_memory.vocabulary import BUDGET_PURPOSES

_CJK = "\u3400-\u9fff\uf900-\ufaff"
_IMAGE_TAG = re.compile(r"\s*\[image:[^\]]*\]")

# --- text helpers ------------------------------------------------------------------------------

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
                if city is None:
                    return None
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
        cleaned = _EN_ACTIVITY_VERB.sub("", cleaned)
    return cleaned or None


# --- vocabularies ------------------------------------------------------------------------------

_SPECIES = {"puppy": "dog", "pup": "dog", "doggo": "dog", "kitten": "cat", "kitty": "cat", "bunny": "rabbit",
            "guinea pigs": "guinea pig", "geckos": "gecko", "tortoises": "tortoise", "betta": "fish", "小猫": "cat", "猫咪": "cat", "猫": "cat", "小狗": "dog", "狗狗": "dog", "狗": "dog",
            "兔子": "rabbit", "小兔子": "rabbit", "鹦鹉": "parrot", "仓鼠": "hamster", "金鱼": "fish", "鱼": "fish",
            "乌龟": "turtle", "dogs": "dog", "cats": "cat", "puppies": "dog", "kittens": "cat", "rabbits": "rabbit",
            "hamsters": "hamster", "birds": "bird", "turtles": "turtle", "goldfish": "fish", "budgie": "parrot"}
_BREEDS = {"greyhound": "dog", "labrador": "dog", "lab": "dog", "poodle": "dog", "beagle": "dog", "husky": "dog",
           "corgi": "dog", "terrier": "dog", "retriever": "dog", "shepherd": "dog", "bulldog": "dog",
           "dachshund": "dog", "chihuahua": "dog", "pug": "dog", "collie": "dog", "spaniel": "dog",
           "tabby": "cat", "siamese": "cat", "persian": "cat",
           # Common breeds and casual breed names (a breed said alone names the species).
           "westie": "dog", "springer": "dog", "cocker": "dog", "cockapoo": "dog", "cavapoo": "dog",
           "labradoodle": "dog", "goldendoodle": "dog", "schnauzer": "dog", "shih tzu": "dog",
           "rottweiler": "dog", "doberman": "dog", "pomeranian": "dog",
           "yorkie": "dog", "dalmatian": "dog", "whippet": "dog", "lurcher": "dog", "staffie": "dog",
           "staffy": "dog", "pitbull": "dog", "pittie": "dog", "mastiff": "dog", "malamute": "dog",
           "samoyed": "dog", "shiba": "dog", "akita": "dog", "vizsla": "dog", "weimaraner": "dog",
           "sheepdog": "dog", "bloodhound": "dog", "basset": "dog",
           "mutt": "dog", "heeler": "dog", "kelpie": "dog", "frenchie": "dog", "sausage dog": "dog",
           "dachshunds": "dog", "mongrel": "dog", "newfie": "dog", "bernese": "dog",
           "ragdoll": "cat", "maine coon": "cat", "sphynx": "cat", "moggy": "cat",
           "moggie": "cat", "calico": "cat", "tortie": "cat", "tomcat": "cat", "british shorthair": "cat",
           "cockatoo": "parrot", "macaw": "parrot", "lovebird": "parrot", "parakeet": "parrot",
           "african grey": "parrot", "bearded dragon": "lizard", "leopard gecko": "gecko", "corn snake": "snake"}
_EN_SPECIES = (r"(?P<s>dogs?|pup(?:py|pies)?|doggo|cats?|kitt(?:en|ens|y)|rabbits?|bunny|hamsters?|parrots?|budgie|"
               r"birds?|goldfish|betta(?:\s+fish)?|fish|turtles?|tortoises?|guinea\s+pigs?|geckos?|horse|snakes?|lizards?|"
               r"ferrets?|chinchillas?|hedgehogs?|cockatiels?|canar(?:y|ies)|iguanas?|axolotls?|gerbils?|mice|rats?|"
               + "|".join(sorted(_BREEDS, key=len, reverse=True)) + ")")
_ZH_BREEDS = {"柯基": "dog", "泰迪": "dog", "金毛": "dog", "哈士奇": "dog", "柴犬": "dog", "比熊": "dog", "拉布拉多": "dog",
              "边牧": "dog", "博美": "dog", "京巴": "dog", "萨摩": "dog", "雪纳瑞": "dog", "阿拉斯加": "dog", "布偶": "cat", "英短": "cat", "美短": "cat", "暹罗": "cat", "蓝猫": "cat",
              "二哈": "dog", "德牧": "dog", "萨摩耶": "dog", "贵宾": "dog", "法斗": "dog", "腊肠": "dog", "吉娃娃": "dog",
              "中华田园犬": "dog", "田园犬": "dog", "串串": "dog", "马尔济斯": "dog", "杜宾": "dog", "罗威纳": "dog",
              "三花": "cat", "狸花": "cat", "橘猫": "cat", "大橘": "cat", "加菲": "cat", "缅因": "cat", "无毛猫": "cat",
              "蓝白": "cat", "银渐层": "cat", "金渐层": "cat", "奶牛猫": "cat", "虎斑": "cat", "豚鼠": "guinea pig",
              "荷兰猪": "guinea pig", "龙猫": "chinchilla", "玄凤": "parrot", "虎皮鹦鹉": "parrot", "八哥": "bird",
              "刺猬": "hedgehog", "守宫": "gecko", "蜥蜴": "lizard", "雪貂": "ferret",
              "巴西龟": "turtle", "草龟": "turtle", "陆龟": "tortoise", "垂耳兔": "rabbit", "侏儒兔": "rabbit", "柯尔鸭": "duck"}
# A species is named by its head character (橘猫, 垂耳兔, 巴西龟, 柴犬) or a breed.
_ZH_SPECIES = (r"(?P<s>小兔子|兔子|小猫|猫咪|小狗|狗狗|鹦鹉|仓鼠|金鱼|乌龟|" + "|".join(sorted(_ZH_BREEDS, key=len, reverse=True))
               + r"|(?:橘|黑|白|花|狸花|三花|奶)?猫|(?:土|小|大|老)?狗|(?:[" + _CJK + r"](?<![只条个头匹那这]))?(?:犬|兔|龟)|鱼)")


def _species(said: str) -> str:
    if _has_cjk(said) and said not in _SPECIES:
        head = {"猫": "cat", "狗": "dog", "犬": "dog", "兔": "rabbit", "龟": "turtle", "鱼": "fish"}
        return _ZH_BREEDS.get(said) or head.get(said[-1], said)
    s = re.sub(r"\s+", " ", said.lower())
    s = "fish" if s.startswith("betta") else s
    return _SPECIES.get(s) or _BREEDS.get(s) or s


# Agentive nouns name jobs ("researcher", "hygienist", "attendant"); these agentive nouns do not.
_JOB_SUFFIX = re.compile(r"(?:er|or|ist|yst|ian|ant|ent|ect|eer|ee|ista|man|woman|ive|ary|ic|ch)$")
_JOB_NOUNS = {"nurse", "chef", "cook", "lead", "midwife", "vet", "coach", "pilot", "judge", "clerk", "barista",
              "intern", "nanny", "medic", "paramedic", "ceo", "cto", "cfo", "pm", "dj", "model", "tailor",
              "surgeon", "physician", "attorney", "engineer", "mechanic", "maid", "cop", "soldier"}
_NOT_JOBS = {"jobs", "work", "fan", "lover", "beginner", "runner", "reader", "believer", "member", "user", "owner", "customer",
             "follower", "survivor", "smoker", "drinker", "eater", "sleeper", "worrier", "dreamer", "partner",
             "parent", "resident", "citizen", "foreigner", "stranger", "introvert", "extrovert", "newbie",
             "volunteer", "gamer", "sucker", "talker", "thinker", "listener", "learner", "winner", "loser",
             "other", "mother", "father", "brother", "sister", "daughter", "grandmother", "grandfather",
             "neighbor", "neighbour", "person", "human", "man", "woman", "monster", "character", "hater",
             "baker's", "fighter", "dancer", "singer", "swimmer", "hiker", "climber", "cyclist", "player",
             "collector", "traveler", "traveller", "walker", "cheater", "boomer", "millennial", "patient",
             "vegetarian", "vegan", "pescatarian", "romantic", "optimist", "pessimist", "perfectionist",
             "ambassador", "advocate", "supporter", "donor", "visitor", "tourist", "guest", "regular", "teenager",
             "immigrant", "migrant", "refugee", "native", "relative", "participant", "applicant", "recipient",
             "adult", "child", "kid", "veteran", "newcomer", "homeowner", "homebody", "nerd", "geek", "fanatic",
             "addict", "servant", "descendant", "catholic", "muslim", "christian", "atheist",
             "student's", "bit", "lot", "mess", "wreck", "night", "morning", "cat", "dog"}
_JOB_FIXED = {"student", "teacher", "tutor", "nurse", "doctor", "lawyer", "engineer"}
_ZH_JOB_TAIL = (r"(?:工程师|程序员|老师|教师|医生|护士|学生|研究生|大学生|博士生|设计师|律师|会计师|会计|厨师|"
                r"经理|作家|记者|司机|教授|科学家|研究员|分析师|销售|画家|艺术家|演员|歌手|警察|公务员|军人|"
                r"农民|店主|创业者|自由职业者|实习生|编辑|翻译|摄影师|建筑师|药剂师|咨询师|顾问|总监|主管|助理|"
                r"专员|开发|运营|测试|主任|老板|总裁|总经理|行政|人事|客服|前台|文员|导游|保安|快递员|"
                r"外卖员|医师|技师|工人|店员|空姐|空乘|秘书|律师助理|架构师|策划|主播|博主|UP主|店长|骑手|教练|护工|保姆|"
                r"厨子|司机|法官|检察官|飞行员|程序猿|产品经理|设计|老师傅|私教|全职宝妈|全职妈妈|宝妈|家庭主妇|全职太太|领班|店长|"
                r"电工|钳工|焊工|木工|瓦工|水电工|电焊工|仓管|库管|网管|[" + _CJK + r"]{1,3}?(?:员|师|手))")


def _job_value(raw: str) -> str | None:
    v = _clean(re.sub(r"\s+(?:at|for|in|with|on|since|from)\b.*$", "", raw, flags=re.I), max_words=4)
    if not v:
        return None
    words = v.split()
    head = words[-1].lower()
    if head in _NOT_JOBS or any(w.lower() in {"fan", "bit", "lot", "huge", "big"} for w in words):
        return None
    if not (head in _JOB_NOUNS or head in _JOB_FIXED or _JOB_SUFFIX.search(head)):
        return None
    # Lower case, except acronyms ("UX researcher").
    return " ".join(w if w.isupper() and len(w) > 1 else w.lower() for w in words)


_STATUS_WORDS = {"single": "single", "engaged": "engaged", "married": "married", "divorced": "divorced",
                 "widowed": "widowed", "a widow": "widowed", "a widower": "widowed", "dating": "in a relationship",
                 "in a relationship": "in a relationship", "seeing someone": "in a relationship",
                 "taken": "in a relationship"}
_ZH_STATUS = {"在一": "in a relationship", "复合": "in a relationship", "证早": "married", "证已": "married", "证领": "married",
              "又是": "single", "恢复": "single", "又单": "single", "老伴": "married", "母胎": "single", "在约": "in a relationship", "约会": "in a relationship", "求婚": "engaged", "被求": "engaged", "分了": "single", "离了": "divorced", "分手": "single", "单身": "single", "领证": "married", "结婚": "married", "已婚": "married",
              "订婚": "engaged", "嫁人": "married", "脱单": "in a relationship", "恋爱": "in a relationship",
              "在谈": "in a relationship", "离婚": "divorced", "离异": "divorced", "丧偶": "widowed"}
_PARTNER = {"girlfriend": "in a relationship", "boyfriend": "in a relationship", "partner": "in a relationship",
            "gf": "in a relationship", "bf": "in a relationship", "fiance": "engaged", "fiancé": "engaged",
            "fiancee": "engaged", "fiancée": "engaged", "husband": "married", "wife": "married",
            "hubby": "married", "spouse": "married", "wifey": "married", "missus": "married",
            "other half": "in a relationship", "better half": "in a relationship",
            "女朋友": "in a relationship", "男朋友": "in a relationship", "对象": "in a relationship",
            "未婚夫": "engaged", "未婚妻": "engaged", "老公": "married", "老婆": "married", "丈夫": "married",
            "妻子": "married", "爱人": "married", "媳妇": "married", "老伴": "married", "另一半": "in a relationship"}

# Budget purposes: one thing, one key ("notebook" and "laptop" budgets are one budget); the table is
# the vocabulary's, shared with every provider.
_PURPOSES = BUDGET_PURPOSES


def _purpose(*texts: str | None) -> str:
    """The canonical purpose named in the budget's own words, else anywhere in the sentence."""
    for text in texts:
        if not text:
            continue
        low = text.lower()
        for canonical, words in _PURPOSES.items():
            for w in words:
                if (_has_cjk(w) and w in low) or re.search(rf"\b{re.escape(w)}s?\b", low):
                    return canonical
    return "general"


# --- subject analysis ----------------------------------------------------------------------------

_SELF_WORDS = frozenset(
    "i i'm i've i'd i'll im ive we we're we've we'd we'll me myself us am are is was were have has had will "
    "just finally recently also really actually honestly still now so well oh yeah yes yep ok okay guess what big "
    "news good bad great hey hi hello weirdly anyway anyways btw currently already then sorry totally officially "
    "happily too literally basically kinda pretty much last this next year month week weekend spring summer fall "
    "autumn winter today yesterday lol haha and but since because as of course, um uh hmm alright right sadly "
    "luckily fortunately unfortunately surprisingly funny enough update quick heads up fyi mostly newly lately "
    "one two three four five six seven eight nine ten few couple a my our the been being be got get gotten started start starting began begun stopped kept not no never don't didn't can't cannot won't isn't wasn't aren't haven't though although even when while since wow omg yay whew phew thankfully somehow eventually even apparently, guys folks all in all at long "
    "only never ever again the after before months weeks years ago days back".split())
_EN_THIRD = re.compile(
    r"\b(?:my|our|his|her|their|your)\s+(?:\w+\s+)?(?:friend|friends|brother|sister|mom|mum|mother|dad|father|son|"
    r"daughter|kids?|children|colleague|coworker|co-worker|boss|neighbou?r|cousin|aunt|uncle|grandma|grandpa|"
    r"grandmother|grandfather|roommate|parents|family|niece|nephew|in-laws?|classmate|teammate)s?(?:'s)?\b"
    r"|\b(?:he|she|they|someone|somebody|a friend|everyone|nobody|people)\b", re.I)
_EN_FIRST = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|we|we're|we've|we'd)\b", re.I)
_ZH_ALLOWED = re.compile(
    r"(?:我们|咱们|我|咱|俺|本人|自己|现在|目前|最近|刚刚|刚|已经|已|去年|今年|前年|上个?月|上周|上个?星期|这周|"
    r"本周|下周|这个?月|明天|后天|今天|昨天|大前天|前天|也|都|就|一直|还|终于|马上|又|才|正在|正|总算|其实|本来|"
    r"平时|一般|从小|早就|早已|再|继续|真的|很|超|挺|特别|非常|好|嗯|哎|唉|啊|哈+|对|是啊|是的|好吧|嘿|诶|所以|"
    r"然后|而且|但是|不过|可是|结果|后来|如今|这两年|这几年|这些年|这阵子|前阵子|年初|年底|月初|上半年|下半年|"
    r"开始|改|重新|正式|决定|还是|依然|仍然|仍|是|没有|没|不再|不|别|(?:和|跟|与)(?:女朋友|男朋友|对象|老公|老婆|未婚夫|未婚妻|爱人|另一半|家人)|在[^\s,.!?;:。]{1,10}?|\d+年|[一二三四五六七八九十两\d]+(?:年|个月|个星期|周|天)前|一年前|半年前|从此|以后|之后|以前|总之|说实话|老实说|对了|顺便说一下|"
    r"告诉你|跟你说|报告|好消息|坏消息|唉呀|哎呀|天哪|哇|呜呜|总|居然|竟然|果然|反正|毕竟|原来|难怪|怪不得|没想到|\s)*")
_ZH_THIRD = re.compile(r"(?:我|我们|俺)?(?:单位|公司|学校|工厂|爸妈|爹妈|老爸老妈|公婆|岳父母|妈妈?|爸爸?|父母|爷爷|奶奶|外公|外婆|姥姥|姥爷|哥哥?|姐姐?|弟弟?|妹妹?|"
                       r"儿子|女儿|孩子|老公|老婆|朋友|同事|同学|室友|邻居|领导|老板|表哥|表姐|表弟|表妹|堂哥|"
                       r"舅舅|叔叔|阿姨|姑姑|家人|爱人|丈夫|妻子|媳妇|男朋友|女朋友|对象|老伴|闺蜜|男友|女友|未婚夫|未婚妻)|[他她]们?|别人|大家")


# Words before a person that make them an object or a companion, not the subject ("被同事带着", "跟朋友").
_ZH_NOT_SUBJECT = re.compile(r"(?:被|跟|和|同|给|陪|带|与|帮|替|为|让|叫|请|找|随|跟着|随着|在|去|到|回|进|从|离开)(?:我|俺|咱)?(?:的|们)?$")


def _zh_own_clause(local: str) -> bool:
    """A Chinese clause drops its subject; it is the user's unless it names somebody else as its
    subject (a relative, a colleague, 他/她, a person's name) with no 我 after them."""
    for m in reversed(list(_ZH_THIRD.finditer(local))):
        if _ZH_NOT_SUBJECT.search(local[:m.start()]):
            continue
        return bool(re.search(r"我(?![妈爸哥姐弟妹老朋同室])|咱", local[m.end():]))
    return not names_a_person(local) or bool(re.search(r"我|咱", local))


def _clause_start(sentence: str, start: int) -> int:
    cut = max(sentence.rfind(ch, 0, start) for ch in ",;:、—(")
    return cut + 1


def _subject_ok(sentence: str, start: int) -> bool:
    """Whether the clause before `start` leaves the user (or "we") as the subject."""
    prefix = sentence[:start]
    local = prefix[_clause_start(sentence, start):]
    if _has_cjk(local) or (not local.strip() and _has_cjk(sentence)):
        if _ZH_ALLOWED.fullmatch(local) is None and not _zh_own_clause(local):
            return False
        # A subjectless clause continues the sentence's subject: "我妈住在杭州，喜欢跳舞".
        if not re.search(r"我|咱", local):
            before = prefix[:_clause_start(sentence, start)]
            third = [t for t in _ZH_THIRD.finditer(before) if not _ZH_NOT_SUBJECT.search(before[:t.start()])]
            if third and not re.search(r"我(?![妈爸哥姐弟妹老朋同室])|咱", before[third[-1].end():]):
                return False
        return True
    # English: the local clause may only hold first-person words, adverbs, time words, interjections.
    local = re.split(r"\b(?:and|but|so|because|since|then)\b", local, flags=re.I)[-1]
    # A fronted adverbial ("For the notebook I can …", "In March we moved …") is not a subject.
    local = re.sub(r"^\s*(?:for|on|at|in|with|after|since|from|by|during|as\s+for)\b.*?(?=\b(?:I|we)\b)", "", local,
                   flags=re.I)
    local = re.sub(r"^\s*\w+[\s-]?wise\b,?", "", local, flags=re.I)  # "work wise im a farrier"
    words = re.findall(r"[a-z']+", local.lower())
    if any(w not in _SELF_WORDS for w in words) and not _predicate_of_self(local):
        return False
    # The match itself may open with the subject ("My brother's in Calgary; I'm in Regina").
    opens_with_self = re.match(r"\s*(?:(?-i:I)\b|I'm\b|I've\b|we\b|we're\b|we've\b)", sentence[start:], re.I) is not None
    if not opens_with_self and not any(w in {"i", "i'm", "i've", "i'd", "i'll", "im", "ive", "we", "we're", "we've", "we'd", "we'll"}
                                       for w in words):
        third = list(_EN_THIRD.finditer(prefix))
        if third and not _EN_FIRST.search(prefix[third[-1].end():]):
            return False
    return True


_FIRST_PERSON = {"i", "i'm", "i've", "i'd", "i'll", "im", "ive", "we", "we're", "we've", "we'd", "we'll"}
_IRREGULAR_PAST = frozenset(
    "got went came took made found left bought sold felt kept began begun quit split flew drove ran put set "
    "brought caught gave had heard held knew lost met paid said saw sent spent stood told thought won wrote "
    "ended finally just threw chose drew grew rode ate drank swore wore broke spoke woke stole froze bit hid "
    "shook forgot understood became".split())


def _predicate_of_self(local: str) -> bool:
    """The clause before a match is the user's own predicate: it opens with "I"/"we" (after
    fillers) and names nobody else after it, or it opens with a verb (a dropped subject:
    "bumped my laptop budget up to …", "ended up in Perth")."""
    words = re.findall(r"[A-Za-z']+", local)
    lower = [w.lower() for w in words]
    mine = [i for i, w in enumerate(lower) if w in _FIRST_PERSON]
    if mine:
        # The last "I"/"we" is the clause's subject; what comes before it is an adverbial ("after a
        # year in Seattle we …", "aaand I've …").
        rest = " ".join(words[mine[-1] + 1:])
        return not _EN_THIRD.search(rest) and not re.search(r"\b(?-i:[A-Z])[a-z]+", rest)
    for w in lower:
        if w in _SELF_WORDS:
            continue
        # The first content word: a verb form means the subject was dropped.
        return (w.endswith("ed") or w.endswith("ing") or w in _IRREGULAR_PAST) and not _EN_THIRD.search(local)
    return True


# --- operations on the sentence ---------------------------------------------------------------

_HYPOTHETICAL = re.compile(r"\b(?:if|wish|would|could|imagine|suppose|supposing|pretend|maybe|perhaps|might|"
                           r"someday|dream|unless|whether|hope|hoping|thinking about|considering|plan\s+to|planning\s+(?:to|on)|"
                           r"don't\s+think|do\s+not\s+think|not\s+sure|unsure|doubt|"
                           r"want to|wanna|going to|gonna|should|used to|it'd|i'd)\b|如果|假如|要是|假设|希望|但愿|"
                           r"也许|或许|梦想|想象|幻想|万一", re.I)
# Chinese words of intent hedge their own clause only ("装修计划取消了，…所以那笔预算也不存在了" states an end).
_ZH_INTENT = re.compile(r"打算|想要|考虑|准备|计划|等[^,，。]{1,6}(?:了|以后|之后)(?:再|就)?想|想(?=搬|去|换|回|住|当|做|辞|跳|转行|买|养)")
_NEGATION = re.compile(r"\b(?:not|never|no|don't|doesn't|didn't|isn't|aren't|wasn't|won't|can't|cannot|nor|"
                       r"hardly|haven't|hasn't)\b|(?<![受对忍])不(?!过|错|久|少|仅|但|管|欢|了了)|没(?!救)|(?<![特分区类级个])别(?!人)|未(?!婚)|并非", re.I)
_NO_LONGER = re.compile(r"\bno\s+longer\b|\b(?:anymore|any\s+more)\b|不再|已经不|不.{0,8}了[。.!]*$|没有.{0,6}了", re.I)
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
                         r"说错了|记错了|口误|更正|纠正|搞错了|搞混了?|说反了?|笔误|打错字了?|说岔了|实为|误会了?|少说了|[\u4e00-\u9fff]{1,3}错了|重新说|作废|不算数?|我说的是|我指的是|打错了|写错了|看错|手滑|骗你的|别写成|表达有误|说法不对|其实就?是|准确(?:地)?说|确切(?:地)?说|说大了|说反了|不对不对", re.I)
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


def _hypothetical(sentence: str, start: int) -> bool:
    # A lead-in ending in a colon ("I should clarify: …") frames the statement, it does not hedge it.
    return bool(_HYPOTHETICAL.search(sentence[sentence.rfind(":", 0, start) + 1:start])
                or _ZH_INTENT.search(sentence[max(_clause_start(sentence, start), sentence.rfind("，", 0, start) + 1):start]))


def _negated(sentence: str, start: int) -> bool:
    return bool(_NEGATION.search(sentence[_clause_start(sentence, start):start]))


# --- rules -------------------------------------------------------------------------------------

_EV = r"(?P<v>[^.,!?;:\n()]{1,80})"  # English value: up to the clause boundary
# A proper noun; in lower case too ("moved to lisbon"), which _place accepts only for a known city.
_PV = r"(?P<v>(?:(?-i:St|Mt|Dr|Ft)\.\s+)?[A-Za-z0-9\u00C0-\u024F](?:[^.,!?;:\n()]|\.(?=\w)){0,60})"  # a proper noun
# One character of a Chinese value (text is NFKC-normalised); emoji and symbols end a value.
_ZC = r"[^\s,.!?;:。、()\"|\u2600-\u27bf\U0001f000-\U0001faff]"
_ZV = rf"(?P<v>{_ZC}{{1,16}})"
_ZEND = r"(?=$|[,.!?;:\s。、]|了|啦|呀|啊)"
_ZADV = r"(?:很|最|非常|特别|真的|也|还|超|挺|蛮|一直|都|比较|更|好|超级|太)*"
_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
# Amounts in words: "eight grand", "fifteen hundred quid", "two thousand dollars".
_NUM_WORD = (r"(?:a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|"
             r"seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|couple)")
_WORD_AMOUNT = (rf"{_NUM_WORD}(?:[\s-]+{_NUM_WORD})*\s+(?:grand|thousand|hundred)(?:\s+(?:quid|bucks|dollars|euros|pounds))?|"
                rf"{_NUM_WORD}(?:[\s-]+{_NUM_WORD})*\s+(?:quid|bucks|dollars|euros|pounds)")
_MONEY = (rf"(?P<v>(?:{_WORD_AMOUNT}|[$€£¥]\s?{_NUM}(?:\s?(?:k|thousand|million)\b)?|{_NUM}(?:\s?(?:k|thousand|million)\b)?"
          r"(?:\s?(?:dollars|bucks|usd|eur|euros?|gbp|pounds|quid|yuan|rmb|cny|rupees|rs|inr|yen|francs|chf|kronor|krona|kr|"
          r"zloty|pesos|rand|ringgit|baht|won|dirhams?|aed|sgd|aud|cad)\b)?)"
          r"(?:\s*/\s*(?:month|mo|week|wk|year|yr|night|day)\b|\s+(?:per|a)\s+(?:month|week|year|night|day|person)\b)?)")
# An amount that is money by its own marks (a currency, "bucks", "k"): a bare number is not.
_MONEY_MARKED = (rf"(?P<v>(?:{_WORD_AMOUNT}|[$€£¥]\s?{_NUM}(?:\s?(?:k|thousand|million)\b)?|{_NUM}\s?(?:k\b|thousand\b|million\b)?"
                 r"\s?(?:dollars|bucks|usd|eur|euros?|gbp|pounds|quid|yuan|rmb|cny|rupees|rs|inr|yen|francs|chf|kronor|krona|kr|"
                 rf"zloty|pesos|rand|ringgit|baht|won|dirhams?|aed|sgd|aud|cad)\b|{_NUM}\s?k\b)"
                 r"(?:\s*/\s*(?:month|mo|week|wk|year|yr|night|day)\b|\s+(?:per|a)\s+(?:month|week|year|night|day|person)\b)?)")
_PURPOSE_WORDS = (r"laptop|notebook|computer|pc|phone|mobile|trip|travel|vacation|holiday|rent|apartment|flat|housing|"
                  r"groceries|grocery|food|renovation|wedding|car|bike|house")
_ZH_NUM = r"(?:\d+(?:\.\d+)?|[一二两三四五六七八九十百千万]+)"
_ZH_MONEY = rf"(?P<v>(?:[$¥]\s?)?{_ZH_NUM}\s?(?:万元|万块|万|千元|千|元|块钱|块|美元|欧元|人民币|刀|[kKwW](?![a-zA-Z]))?[一二三四五六七八九]?)"


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    namespace: str
    key: str  # a literal key, or a template using {slug} of the value
    clean: Callable[[str], str | None] = _clean
    confidence: float = 0.9
    temporary: bool = False
    make: Callable[[re.Match[str], str], list[tuple[str, str]] | None] | None = None  # custom [(key, value)]
    op: FactOperation = "assert"
    # What a negation or "no longer" does to this statement: end the fact, flip it (like ->
    # dislike), or nothing (the statement is dropped).
    on_negation: str = "end"
    subject: bool = True  # the user must be the subject (checked on the words before the match)
    # Overlap with earlier matches is judged from the value only: the words before it were
    # already read by another rule ("I'm a nurse" + "at St. Mary's"; "离开华为了，现在在小米").
    value_span: bool = False


def _r(pattern: str, namespace: str, key: str, **kw: object) -> _Rule:
    return _Rule(re.compile(pattern, re.I), namespace, key, **kw)  # type: ignore[arg-type]


def _const(key: str, value: str) -> Callable[[re.Match[str], str], list[tuple[str, str]]]:
    return lambda m, s: [(key, value)]


def _pet(m: re.Match[str], sentence: str) -> list[tuple[str, str]] | None:
    gd = m.groupdict()
    species = _species(gd["s"])
    names = [gd.get(k) for k in ("n", "n2", "n3") if gd.get(k)]
    out = []
    for name in names:
        assert name is not None
        cleaned = _clean(name, max_words=3)
        if cleaned and len(cleaned.split()) > 1 and re.fullmatch(r"[A-Z][a-z]+ing", cleaned.split()[0]):
            cleaned = cleaned.split(None, 1)[1]  # "Walking Biscuit, my beagle": the verb opens the sentence
        if cleaned and not re.search(r"^(?:my|our|the|a|an|he|she|it|him|her)$", cleaned, re.I):
            out.append((_slug(cleaned), species))
    # A pet without a name is keyed by its species until it is named ("I have a cat").
    return out or [(_slug(species), species)]


_EMOJI_SPECIES = {"🐶": "dog", "🐕": "dog", "🐱": "cat", "🐈": "cat", "🐰": "rabbit", "🐇": "rabbit", "🐹": "hamster",
                  "🐢": "turtle", "🐟": "fish", "🐠": "fish", "🦜": "parrot"}


def _species_in(text: str) -> str | None:
    """The species a stretch of text names, by word, breed or emoji."""
    if m := re.search(r"\b" + _EN_SPECIES + r"\b", text, re.I):
        return _species(m.group("s"))
    return next((sp for emoji, sp in _EMOJI_SPECIES.items() if emoji in text), None)


def _zh_species_in(text: str) -> str | None:
    m = re.search(_ZH_SPECIES, text)
    return _species(m.group("s")) if m else None


def _pet_zh(m: re.Match[str], sentence: str) -> list[tuple[str, str]] | None:
    if m.groupdict().get("n"):
        return _pet(m, sentence)
    species = _species(m.group("s"))
    names = re.findall(r"(?:取名叫|取名|起名叫|起名|叫做|名叫|叫)(" + _ZC + r"{1,4}?)(?=$|[,.!?;:\s。]|一|另|了|今年|已经)", sentence[m.end():])
    return [(_slug(n), species) for n in names] or [(_slug(species), species)]


def _pet_end(name: str) -> list[tuple[str, str]]:
    if re.fullmatch(_KIN, name, re.I) or name.lower() in _NOT_NAMES or (name.islower() and is_dictionary_word(name)):
        return []
    return [(_slug(name), "")]


def _budget(m: re.Match[str], sentence: str) -> list[tuple[str, str]]:
    gd = m.groupdict()
    topic = " ".join(t for t in (gd.get("t"), gd.get("t2")) if t)
    return [(_purpose(topic, sentence), m.group("v").strip())]


def _status(value: str) -> Callable[[re.Match[str], str], list[tuple[str, str]]]:
    return lambda m, s: [("status", value)]


def _status_word(m: re.Match[str], sentence: str) -> list[tuple[str, str]] | None:
    word = m.group("w").lower()
    status = _STATUS_WORDS.get(word) or _PARTNER.get(word)
    return [("status", status)] if status else None


_NOUN_USE = re.compile(r"(?:\b(?:the|your|my|our|his|her|their|of|with|and|much|so|such|a|lots\s+of)\s+|[-'])$", re.I)
_NOT_OBJECT = re.compile(r"^(?:the|this|that|those|these|your|his|her|their|how|what|when|where|seeing|hearing|"
                         r"it|and|or|to|you|all\s+the|every\s+bit|everything|everyone|everywhere|yourself|yourselves|ourselves|"
                         r"myself|them|us|for|is|are|sure|in|at)\b", re.I)


# Words that may stand right before "like" the verb (a subject, an adverb, an auxiliary).
_LIKE_SUBJECTS = frozenset("i we you they really also just do does did still actually kinda totally genuinely "
                           "would 'd now both always definitely truly don't didn't doesn't never not i'd we'd "
                           "seriously honestly absolutely so sorta to".split())


def _pref(polarity: str) -> Callable[[re.Match[str], str], list[tuple[str, str]] | None]:
    def make(m: re.Match[str], sentence: str) -> list[tuple[str, str]] | None:
        if polarity and _NOUN_USE.search(sentence[:m.start()]):
            return None  # "the love around you", "your love for your kids": a noun, not a taste
        verb = re.search(r"\b(?:like|likes)\s", m.group(0), re.I)
        if verb and polarity:
            before = re.findall(r"[\w']+", sentence[:m.start() + verb.start()])
            if before and before[-1].lower() not in _LIKE_SUBJECTS:
                return None  # "sleep like a baby", "like three a day": a preposition, not a verb
        if verb and polarity and not sentence[:m.start() + verb.start()].strip() \
                and re.match(r"(?:a|an|the|some|this|that)\b", m.group("v").strip(), re.I):
            return None  # "…, like a paw print thing": an example, not a taste
        if m.group("v").strip().lower() in {"it", "that", "them", "this", "those"}:
            return [("it", polarity)]  # resolved to the object the message names (_resolve_demonstratives)
        said_by_me = _EN_FIRST.search(sentence[_clause_start(sentence, m.start()):m.start()])
        if polarity and _NOT_OBJECT.match(m.group("v").strip()) and not (
                said_by_me and re.match(r"the\s+\w+\s*(?:$|[.,!?;:])", m.group("v").strip(), re.I)):
            return None  # "Love the necklace!", "love how you …": a compliment on something specific
        obj = _object(m.group("v"))
        return [(_slug(obj), polarity)] if obj else None
    return make


def _job_framed(m: re.Match[str], sentence: str) -> list[tuple[str, str]] | None:
    """A title in a job frame ("work as", "a job as", "promoted to"): any noun but a non-job one."""
    v = _clean(re.sub(r"\s+(?:(?:down|up|over|out|here|there|back)\s+)?(?:at|for|in|with|on|since|from)\b.*$", "",
                      m.group("v"), flags=re.I), max_words=4)
    if not v or v.split()[-1].lower() in _NOT_JOBS or re.match(r"[$€£¥\d]", v):
        return None
    return [("job", " ".join(w if w.isupper() and len(w) > 1 else w.lower() for w in v.split()))]


# Lines of work said as "做X的" (做外贸的, 做运营): a field, not a title, but what one does for a living.
_ZH_FIELDS = re.compile(r"(?:外贸|财务|行政|人事|市场|产品|技术|研发|开发|前端|后端|客服|会计|审计|法务|采购|物流|电商|自媒体|直播|"
                        r"教育|培训|咨询|金融|投行|保险|房产|中介|装修|餐饮|销售|运营|设计|测试|编辑|翻译|摄影|美工|后勤|调度|"
                        r"安保|保洁|护理|家政|医美|美容|美甲|美发|健身|教练|仓管|质检|品控|工程|施工|监理|造价)$")


def _bare_job(m: re.Match[str], sentence: str) -> list[tuple[str, str]] | None:
    """"做X" / "当X" read as a job only when X is a title or a line of work ("做运营", "当电工",
    "做HRBP的"), never "做个辣子鸡", "做梦", "做本相册"."""
    v = _clean(m.group("v"))
    if not v or re.match(r"[个本份顿道碗杯次件只条张些点]", v):
        return None
    if re.fullmatch(r"[A-Z][A-Za-z]{1,7}", v):
        return [("job", v)]  # "做HR", "做HRBP的": the title as written
    if re.search(_ZH_JOB_TAIL + "$", v) or _ZH_FIELDS.search(v):
        return _job(m, sentence)
    return None


def _job(m: re.Match[str], sentence: str) -> list[tuple[str, str]] | None:
    raw = m.group("v")
    if _has_cjk(raw):
        # The shortest title the pattern accepts may be the head of a longer one (测试 of 测试工程师).
        if more := re.match(r"(?:开发)?(?:工程师|经理|主管|专员|助理|设计师|分析师|架构师|顾问|总监)", sentence[m.end("v"):]):
            raw += more.group(0)
        v = _clean(raw)
        if v and (re.search(r"[我你他她]", v) or re.match(r"[下起出过完来]", v)):
            return None  # "我老板", "干下来手": a person or a verb, not a title
        return [("job", v)] if v else None
    v = _job_value(raw)
    return [("job", v)] if v else None


def _name(m: re.Match[str], sentence: str) -> list[tuple[str, str]] | None:
    return _name_of(m.group("v"))


def _name_of(raw: str) -> list[tuple[str, str]] | None:
    v = _clean(re.sub(r"(?:就行|就好|就可以|便可|即可|就成|就得|吧|好了|哦|啊|呀|哈|(?<=[\u3400-\u9fff])h+|~|～)+$", "", raw), max_words=3)
    if not v or v.lower() in _NOT_NAMES or re.match(r"(?:就|也|这么|那么|都|还|你|他|她)", v):
        return None
    return [("name", v)]


def _may_be_given_name(word: str) -> bool:
    """A capitalised word that can be someone's name: a common given name, or no dictionary word
    and no city ("I'm Thanh" yes; "I'm Canadian", "I'm Sorry" no)."""
    low = word.lower()
    return low not in _NOT_NAMES and (is_first_name(low) or not is_dictionary_word(low)) and not leading_city(low)


_NOT_NAMES = frozenset(
    "back here home fine good ok okay sorry tired done new sure busy the just same nothing everything thanks thank "
    "hello hi hey again great nice glad happy welcome congrats me you we they it this that there life work today "
    "yesterday love hugs cheers oh wow yeah yes no well so still always never anyway also mom dad everyone "
    "someone all both guess what finally sadly honestly seriously totally really only excited and but or look "
    "looky see come right then now".split())
_ZH_SURNAMES = ("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任"
                "沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴"
                "莫孔向汤欧阳司马上官诸葛")
_ZH_NAME = rf"(?P<v>(?:[{_ZH_SURNAMES}][{_CJK}]{{1,2}}|[阿小老][{_CJK}]))"


def _end_value(m: re.Match[str], sentence: str) -> list[tuple[str, str]]:
    return [("", "")]


_KIN = r"(?:grandma|grandpa|grandmother|grandfather|mom|mum|dad|mother|father|aunt|uncle|friend|neighbor|neighbour)"
_ZH_KIN = r"(?:奶奶|爷爷|外公|外婆|姥姥|姥爷|爸爸?|妈妈?|叔叔|舅舅|姑姑|阿姨|朋友|同事|老师|邻居|亲戚)"
_LEAVE_JOB = (r"(?:left|quit|leaving|quitting|resigned\s+from|got\s+laid\s+off\s+from|was\s+laid\s+off\s+from|"
              r"handed\s+(?:in\s+)?my\s+notice\s+(?:in\s+)?at|gave\s+(?:my\s+)?notice\s+at|walked\s+out\s+of)")
# Words that make a message about work, so "joined X" or "I'm at X now" names an employer.
_WORK_CONTEXT = re.compile(r"\b(?:job|jobs|work|working|role|position|team|office|boss|manager|colleagues?|coworkers?|hike|appraisal|"
                           r"salary|pay|paid|benefits|shifts?|commute|hired|offer|posting|contract|onboarding|"
                           r"intern(?:ship)?|promot\w+|quit|left|resigned|notice|switched|lab|clients?|startup|"
                           r"company|firm|employer|career)\b|工作|上班|入职|跳槽|公司|老板|同事|工资|薪水|岗位|不干|辞|离职|报到|转行|offer|"
                           r"前[^\s,]{1,6}人|(?:银行|集团|医院|学校|工厂|事务所|律所|研究院|大学)(?=$|[,.!。了])", re.I)

# Order is priority: a span taken by an earlier rule is not re-read by a later one, and
# specific forms (negative, "no longer", changes) come before generic ones.
_RULES: list[_Rule] = [
    # --- diet: spicy food is one key so "不吃辣" is superseded by "最近能吃辣了"
    _r(r"\bspicy\s+(?:food|stuff)?\s*(?:is|'s)\s+back\s+on\s+the\s+menu\b", "diet", "spicy",
       make=_const("spicy", "eats spicy food"), on_negation="drop"),
    _r(r"(?:^|[:;,(]\s*)no\s+spicy(?:\s+food)?\b", "diet", "spicy", make=_const("spicy", "no spicy food"), on_negation="keep",
       subject=False),
    _r(r"\bspicy\s+(?:food|stuff)\s+(?:wrecks|kills|destroys|upsets|hurts|messes\s+up)\s+my\s+(?:stomach|gut)|"
       r"\b(?:avoid|can't\s+do|cannot\s+do|steer\s+clear\s+of)\s+spicy(?:\s+food|\s+stuff)?", "diet", "spicy",
       make=_const("spicy", "no spicy food"), on_negation="drop"),
    _r(r"\b(?:don't|do\s+not|can't|cannot|never)\s+(?:eat|handle|do|like)\s+spicy(?:\s+food)?",
       "diet", "spicy", make=_const("spicy", "no spicy food"), on_negation="drop"),
    _r(r"(?:不|没法|没办法)(?:太|怎么|能|敢|喜欢|爱|会)*吃辣", "diet", "spicy", make=_const("spicy", "no spicy food"),
       on_negation="drop"),
    _r(r"\b(?:can\s+(?:now\s+)?|now\s+|(?:started|start|began)\s+(?:to\s+)?)?(?:eat|eating|handle|love)\s+spicy"
       r"(?:\s+food)?", "diet", "spicy", make=_const("spicy", "eats spicy food"), on_negation="drop"),
    _r(r"(?:能|可以|开始|敢|会|爱)吃辣|无辣不欢|嗜辣", "diet", "spicy", make=_const("spicy", "eats spicy food"),
       on_negation="drop"),
    # --- diet restriction: ending it first ("not strictly vegetarian anymore", "gave up veganism")
    _r(r"\b(?:gave\s+up|give\s+up|quit|stopped|stop)\s+(?:on\s+)?(?:being\s+)?(?:a\s+)?(?P<v>vegetarian|vegan|"
       r"pescatarian)(?:ism)?", "diet", "restriction", op="end", on_negation="drop"),
    _r(r"\b(?:gave\s+up|give\s+up|quit|stopped)\s+(?:on\s+)?(?P<v>vegan|vegetarian)ism", "diet", "restriction",
       op="end", on_negation="drop"),
    _r(r"\b(?:(?:eating|eat|ate)\s+(?:meat|fish|chicken|beef|pork|steak|seafood|burgers?|bacon)\s+again|back\s+to\s+"
       r"eating\s+(?:meat|fish|chicken|beef|pork|steak|seafood|burgers?|bacon))\b", "diet",
       "restriction", make=_end_value, op="end", on_negation="drop"),
    _r(r"(?:eating|eat|ate)\s+(?:eggs|cheese|dairy|milk)(?:\s+and\s+\w+)?\s+again\b", "diet", "restriction",
       make=_const("restriction", "vegan"), op="end", on_negation="drop"),
    # Fish or seafood only, meat still out: pescatarian ("开始吃海鲜了，不过猪牛羊还是不碰", "eat fish now, still no meat").
    _r(r"吃(?:鱼|海鲜)的(?:那种)?素食(?:主义)?者?|鱼素|海鲜素", "diet", "restriction", make=_const("restriction", "pescatarian"),
       on_negation="drop"),
    _r(r"(?:开始|又|现在|也)?吃(?:海鲜|鱼)(?=[^。]*(?:肉|猪牛羊|荤)[^。]*(?:不碰|不吃|没吃|不沾))|\b(?:started|starting|began|now)\s+"
       r"(?:eating|to\s+eat)\s+(?:fish|seafood)\b(?=[^.]*\b(?:no|not|never|still\s+no|without)\b[^.]*\b(?:meat|chicken|beef|pork)\b)",
       "diet", "restriction", make=_const("restriction", "pescatarian"), on_negation="drop"),
    _r(r"(?:不再|不|没再)(?:吃素|是素食者?)了?|开始吃肉|又吃肉|破戒|荤素都吃|啥都吃|什么都吃|吃素[^。]{0,6}告一段落", "diet", "restriction",
       make=_const("restriction", "vegetarian"), op="end", on_negation="drop"),
    _r(r"\b(?:can't|cannot|can\s+not|couldn't)\s+(?:handle|do|take|stomach|tolerate)\s+(?:any\s+)?(?:chil+i(?:es)?|spic(?:e|y\s+food|y\s+stuff)|"
       r"heat|hot\s+food|hot\s+stuff)\b", "diet", "spicy", make=_const("spicy", "no spicy food"), on_negation="drop", subject=False),
    _r(r"\bback\s+on\s+(?:the\s+)?(?:hot\s+sauce|chil+i(?:es)?|spic(?:e|y\s+food)|sriracha|hot\s+stuff)\b", "diet", "spicy",
       make=_const("spicy", "eats spicy food"), on_negation="drop"),
    _r(r"\b(?:chil+i(?:es)?|spic(?:e|y\s+food|y\s+stuff)|heat)\s+(?:doesn't|does\s+not|no\s+longer|don't)\s+(?:bother|hurt|upset)\s+me\b|"
       r"\bbuilt\s+up\s+(?:a|my)\s+(?:spice\s+|chil+i\s+)?tolerance\b(?=[^.]*\b(?:spic|chil+i|hot\s+sauce|sriracha|heat)\w*)",
       "diet", "spicy", make=_const("spicy", "eats spicy food"), on_negation="drop", subject=False),
    _r(r"(?:微辣|辣|吃辣)(?:已经|也|现在)?(?:没问题|没事|可以|OK|ok)了?", "diet", "spicy", make=_const("spicy", "eats spicy food"),
       on_negation="drop"),
    _r(r"戒辣|戒了辣|(?:一点)?辣(?:都|也)?不(?:碰|吃|能吃)了?|(?:一点)?辣(?:都|也)?(?:碰|吃)不了|不碰辣", "diet", "spicy", make=_const("spicy", "no spicy food"),
       on_negation="drop"),
    _r(r"(?:\b(?:I'm|I\s+am|we're|we\s+are|been|being|going|gone|went|became|become|turned|switched\s+to|am\s+now|"
       r"is|now|eat|keep|only\s+eat|strictly)\s+)(?:not\s+|no\s+longer\s+)?(?:a\s+|an\s+)?(?:strict\s+|strictly\s+|fully\s+|now\s+|mostly\s+|"
       r"full\s+|100%\s+)?(?P<v>vegetarian|vegan|pescatarian)\b", "diet", "restriction"),
    _r(r"\b(?:years?|months?|weeks?)\s+(?:of\s+being\s+)?(?P<v>vegetarian|vegan|pescatarian)\b(?!\s+(?:food|restaurant|place|option|dish|recipe|meal))",
       "diet", "restriction", subject=False),
    _r(r"(?:^|,)\s*(?:so\s+|then\s+|basically\s+|technically\s+|officially\s+)?(?:no\s+longer\s+|not\s+|still\s+)?(?:strictly\s+|fully\s+)?(?P<v>vegetarian|vegan|pescatarian)\b(?!\s+(?:food|restaurant|place|option|dish|recipe|meal))",
       "diet", "restriction"),
    _r(r"(?:改吃|吃|是|成了|当了)(?P<v>纯素|全素)", "diet", "restriction", make=_const("restriction", "vegan")),
    _r(r"(?:改吃|吃|是|成了|当了)?蛋奶素", "diet", "restriction", make=_const("restriction", "vegetarian")),
    _r(r"(?:只)?(?:是)?(?:吃素|素食者|素食主义者|吃斋)(?!那阵子|那时|的时候|那几年|那段)", "diet", "restriction",
       make=_const("restriction", "vegetarian")),
    _r(r"(?:I'm|I\s+am)\s+(?:severely\s+|very\s+|mildly\s+|also\s+)?allergic\s+to\s+" + _EV, "diet",
       "allergy_{slug}", clean=lambda v: _clean(v, pref=True)),
    _r(r"\b(?:I|we)\s+have\s+(?:a|an)\s+(?:severe\s+|mild\s+)?(?P<v>[a-z]+(?:\s[a-z]+)?)\s+allergy", "diet",
       "allergy_{slug}"),
    _r(r"对(?P<v>" + _ZC + r"{1,10}?)过敏", "diet", "allergy_{slug}"),
    _r(r"\b(?:don't|do\s+not|can't|cannot|never|won't)\s+eat\s+" + _EV, "diet", "avoid_{slug}",
       clean=lambda v: _clean(v, pref=True), on_negation="keep"),
    _r(r"(?:不|不能|从不|从来不)吃(?!素|肉)" + _ZV, "diet", "avoid_{slug}", on_negation="keep"),
    # --- preferences: stopping first, then dislikes, then likes (the most generic verbs)
    _r(r"\b(?:quit(?!\s+(?-i:[A-Z]))|gave\s+up|give\s+up|stopped|(?:gone|went)\s+(?:right\s+|totally\s+|completely\s+)?off|"
       r"(?:fallen|fell|falling)\s+out\s+of\s+love\s+with|lost\s+(?:all\s+)?(?:interest\s+in|my\s+love\s+for)|grown\s+out\s+of|"
       r"done\s+with|kicked|"
       r"cut\s+out|ditched)\s+(?:on\s+|the\s+)?(?!to\s)" + _EV,
       "preference", "{slug}", make=_pref(""), op="end", on_negation="drop", confidence=0.85),
    _r(r"\b(?:don't|do\s+not|no\s+longer|never)\s+(?:listen\s+to|watch|play|drink|do|go\s+to|read|eat)\s+"
       r"(?P<v>[^.,!?;:\n()]{1,60}?)\s+(?:anymore|any\s+more)\b", "preference", "{slug}", make=_pref(""), op="end",
       on_negation="keep"),
    _r(r"(?:戒(?:掉|了)?|不再)(?P<v>(?![了快一两二三四五六七八九十几半好\d])" + _ZC + r"{1,8}?)了?(?=$|[,.!?;:。]|\s)", "preference", "{slug}", make=_pref(""),
       op="end", on_negation="keep"),
    _r(r"(?:不|没)(?:再)?(?P<v>追剧|打游戏|玩游戏|喝咖啡|喝酒|抽烟|看剧|跑步|健身|看动漫|刷抖音)了", "preference",
       "{slug}", make=_pref(""), op="end", on_negation="keep"),
    _r(r"\b(?:not|no\s+longer)\s+(?:really\s+)?(?:into|a\s+fan\s+of|keen\s+on)\s+(?P<v>[^.,!?;:\n()]{1,60}?)\s+"
       r"(?:anymore|any\s+more)\b", "preference", "{slug}", make=_pref(""), op="end", on_negation="keep"),
    _r(r"\bno\s+longer\s+(?:into|like|enjoy|love|a\s+fan\s+of)\s+" + _EV, "preference", "{slug}", make=_pref(""),
       op="end", on_negation="keep"),
    _r(r"\b(?:really\s+|absolutely\s+|just\s+|also\s+|kind\s+of\s+|kinda\s+)*(?:hate|hates|dislike|detest|loathe|"
       r"never\s+(?:really\s+)?(?:cared|cared\s+much)\s+for|(?:don't|do\s+not)\s+(?:really\s+)?care\s+for|never\s+(?:really\s+)?liked|"
       r"never\s+been\s+(?:a|much\s+of\s+a)\s+fan\s+of|"
       r"can't\s+stand|cannot\s+stand|don't\s+like|do\s+not\s+like|don't\s+enjoy|not\s+(?:really\s+)?into|"
       r"not\s+a\s+(?:big\s+|huge\s+)?fan\s+of|(?:sick|tired)\s+of|fed\s+up\s+with|so\s+over|(?:'m|am|are)\s+(?:totally\s+|kinda\s+)?over|"
       r"bored\s+(?:of|with)|"
       r"turned\s+off\s+by|grossed\s+out\s+by)\s+" + _EV, "preference", "{slug}", make=_pref("dislike"),
       on_negation="keep"),
    _r(r"^\s*(?:honestly\s+|tbh\s+|ugh,?\s+)?" + _EV + r"\s+(?:grates?\s+on\s+me|drives?\s+me\s+(?:crazy|nuts|up\s+the\s+wall)|"
       r"makes?\s+me\s+sick|(?:is|are)\s+the\s+worst|bores?\s+me|(?:is|are)\s+(?:so\s+)?(?:boring|overrated|gross|"
       r"disgusting)|(?:has|have)\s+lost\s+(?:its|their)\s+(?:charm|appeal))",
       "preference", "{slug}", make=_pref("dislike"), on_negation="drop"),
    _r(_ZADV + r"(?:不喜欢|不爱|讨厌|受不了|烦|反感|厌倦了)(?P<v>" + _ZC + r"{1,16})", "preference", "{slug}",
       make=_pref("dislike"), on_negation="keep"),
    _r(r"^\s*" + _EV + r"\s+(?:is|are)\s+(?:now\s+)?my\s+(?:new\s+|absolute\s+|all-time\s+)?favou?rite"
       r"(?:\s+(?:thing|hobby|food|activity|sport|band|show))?", "preference", "{slug}", make=_pref("like"),
       on_negation="drop"),
    _r(r"\b(?:(?:started|starting|begun|began|come|grown|learned|learnt)\s+to\s+)?(?:really\s+|absolutely\s+|also\s+|"
       r"just\s+|do\s+|still\s+|totally\s+|actually\s+|kind\s+of\s+|kinda\s+)*(?:love|like|enjoy|prefer|adore)\s+"
       + _EV, "preference", "{slug}", make=_pref("like"), on_negation="flip"),
    _r(r"(?:一)?(?:闻到|看到|吃到|想到|听到)(?P<v>" + _ZC + r"{1,6}?)就(?:想吐|恶心|头疼|头大|烦|难受|反胃)", "preference", "{slug}",
       make=_pref("dislike"), on_negation="drop"),
    _r(r"(?:[听看吃喝玩追打])(?P<v>" + _ZC + r"{1,6}?)(?:[听看吃喝玩追打])?上瘾了?|迷上了?(?P<w>" + _ZC + r"{1,6}?)(?=$|[,.!。]|了)",
       "preference", "{slug}", make=lambda m, s: [(_slug(o), "like")] if (o := _object(m.group("v") or m.group("w"))) else None,
       on_negation="drop"),
    _r(r"离不开(?P<v>" + _ZC + r"{1,6}?)(?=$|[,，。!！]|\s)", "preference", "{slug}", make=_pref("like"), on_negation="keep"),
    _r(r"(?:^|(?<=[,，。!！\s]))(?P<v>" + _ZC + r"{1,6}?)\s*(?:yyds|YYDS|永远的神|绝绝子|真香|太香了|爱了爱了)", "preference", "{slug}",
       make=lambda m, s: [(_slug(o), "like")] if (o := _object(m.group("v"))) and _has_cjk(o) and not is_chinese_city(o) else None,
       on_negation="drop"),
    _r(r"(?P<v>" + _ZC + r"{1,8}?)(?:是|就是)我(?:最|很|超|特别)?(?:喜欢|爱)的", "preference", "{slug}", make=_pref("like"),
       on_negation="drop"),
    _r(r"(?P<v>(?![玩吃喝看听追打腻厌烦])" + _ZC + r"{1,6}?)(?:已经|早就)?(?:玩|吃|喝|看|听|追|打)?(?:腻了|腻歪了|厌了|烦了)", "preference",
       "{slug}", make=_pref("dislike"), on_negation="drop"),
    _r(r"(?P<v>" + _ZC + r"{1,6}?)(?:已经|早就)?(?:(?<![婚钻指])戒了|戒掉了|不碰了|不喝了|不吃了|不打了|不玩了|不看了|不追了|不听了|不跑了)", "preference",
       "{slug}", make=_pref(""),
       op="end", on_negation="keep"),
    _r(r"^\s*(?:honestly\s+|tbh\s+|ok\s+|okay\s+)?" + _EV + r"\s+(?:(?:is|are)\s+(?:really\s+|slowly\s+|kinda\s+)?growing\s+on\s+me|"
       r"(?:is|are)\s+(?:so\s+)?(?:underrated|amazing|the\s+best))", "preference", "{slug}", make=_pref("like"),
       on_negation="drop"),
    _r(r"\b(?:(?:come|came|coming)\s+(?:a)?round\s+(?:on|to)|warmed\s+up\s+to|obsessed\s+with|hooked\s+on|addicted\s+to|crazy\s+about|mad\s+about|(?:a\s+)?sucker\s+for|"
       r"can't\s+get\s+enough\s+of)\s+" + _EV + r"(?=\s*(?:$|[.,!;]))" , "preference", "{slug}",
       make=_pref("like"), on_negation="flip"),
    _r(r"\b(?:a\s+)?(?:huge|big|great)\s+fan\s+of\s+" + _EV, "preference", "{slug}", make=_pref("like"),
       on_negation="flip"),
    _r(r"(?:'m|\bam|'re|\bare|\bbeen|\breally|\bso|\btotally)\s+(?:really\s+|very\s+|so\s+)?into\s+" + _EV, "preference", "{slug}", make=_pref("like"), confidence=0.6,
       on_negation="flip"),
    _r(_ZADV + r"(?:喜欢|爱上了|爱上|爱(?!人|好|心|情|过|你|他|她))(?P<v>" + _ZC + r"{1,16})", "preference", "{slug}",
       make=_pref("like"), on_negation="flip"),
    # --- trips (temporary) before home city: they must never touch location/home_city
    _r(r"\bon\s+(?:a|my|an|our)\s+(?:\w+\s+)?trip\s+(?:to|in)\s+" + _PV, "travel", "trip_city", clean=_place,
       temporary=True, on_negation="drop"),
    _r(r"\b(?:sending|sent|send|flying|flown|flew|posting|posted|shipping|shipped|dispatching|taking|seconded|seconding|"
       r"deployed|stationed|loaned)\s+(?:me|us|out|the\s+team)?\s*(?:out\s+|off\s+|up\s+|down\s+|over\s+)?to\s+(?:our\s+|the\s+|their\s+)?" + _PV, "travel", "trip_city", clean=_place, temporary=True,
       on_negation="drop", subject=False),
    _r(r"\b(?:traveling|travelling|flying|flew|heading|headed|head|off)\s+(?:out\s+)?to\s+" + _PV
       + r"(?=[^.;]*\b(?:for\s+(?:a|an|one|two|three|four|five|six|seven|\d+|the|a\s+few|a\s+couple)\b|until|till|"
       r"through|back|trip|conference|training|work|business|vacation|holiday|meeting|project|launch))",
       "travel", "trip_city", clean=_place, temporary=True, on_negation="drop"),
    _r(r"\b(?:traveling|travelling|flying|fly|flew|jetting\s+off)\s+(?:out\s+)?to\s+" + _PV, "travel", "trip_city", clean=_place, temporary=True,
       on_negation="drop"),
    _r(r"\b(?:business|work|road)\s+trip\s+to\s+" + _PV, "travel", "trip_city", clean=_place, temporary=True,
       on_negation="drop"),
    # Where one is staying says a trip ("writing this from a hotel in Vancouver", "at my parents' in
    # Groningen for the long weekend").
    _r(r"\b(?:posted|stationed|deputed|deployed|seconded)\s+(?:in|at|to)\s+" + _PV + r"(?=[^.;]*\b(?:for|until|till|training|"
       r"project|day|days|week|weeks|month|months)\b)", "travel", "trip_city", clean=_place, temporary=True, on_negation="drop"),
    _r(r"\b(?:off|heading|going|flying|driving|popping)\s+(?:over\s+|down\s+|up\s+)?to\s+(?:my|our)\s+[\w-]+(?:'s|s')(?:\s+place)?\s+in\s+"
       + _PV + r"(?=[^.;]*\b(?:for|until|till|over)\b)", "travel", "trip_city", clean=_place, temporary=True, on_negation="drop"),
    _r(r"\bon\s+(?:a\s+)?(?:secondment|assignment|placement|rotation|tour|exchange|deployment|residency|fieldwork|sabbatical)\s+"
       r"(?:in|to|at)\s+" + _PV, "travel", "trip_city", clean=_place, temporary=True, on_negation="drop"),
    _r(r"\b(?:from|at|in|into)\s+(?:a|an|my|our|the)\s+(?:\w+\s+)?(?:hotel|hostel|airbnb|motel|guesthouse)\s+in\s+" + _PV,
       "travel", "trip_city", clean=_place, temporary=True, on_negation="drop"),
    _r(r"\bat\s+(?:my|our)\s+(?:\w+\s+)?(?:parents|parents'|folks'?|mom's|mum's|dad's|grandma's|grandparents'?|in-laws'?|"
       r"sister's|brother's|friend's)(?:\s+place)?\s+in\s+" + _PV + r"(?=[^.]*\b(?:for|until|till|weekend|week|days?|since|"
       r"flying\s+back|back\s+(?:on|by|home))\b)",
       "travel", "trip_city", clean=_place, temporary=True, on_negation="drop"),
    _r(r"\b(?:visiting|staying\s+in|stopping\s+in|(?:spent|spending)\s+(?:the\s+|last\s+|this\s+|a\s+|an\s+|"
       r"\w+\s+)?(?:few\s+|couple\s+(?:of\s+)?)?(?:days?|nights?|weeks?|weekend|holidays?|vacation)\s+in)\s+" + _PV
       + r"(?![^.;]*\b(?:since\s+(?:19|20)\d\d|for\s+(?:\w+\s+)?(?:years|decades)|(?:years|decades)\s+now)\b)",
       "travel", "trip_city", clean=_place, temporary=True, on_negation="drop"),
    # A stay named by its length ("a two-week rotation in Houston", "three weeks of fieldwork on Svalbard",
    # "greetings from a very snowy Davos!").
    _r(r"\b(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a\s+few|a\s+couple\s+of)[\s-]+(?:day|night|week)s?"
       r"(?:[\s-]+long)?\s+(?:of\s+)?(?:(?-i:[a-z]+)\s+){0,2}(?:in|on|at)\s+(?:the\s+)?" + _PV, "travel", "trip_city",
       make=lambda m, s: [("trip_city", v)] if (v := _place(m.group("v"))) and v[:1].isupper() else None,
       temporary=True, on_negation="drop"),
    _r(r"\bgreetings\s+from\s+(?:(?-i:[a-z]+)\s+){0,3}(?P<v>(?-i:[A-Z])[\w'-]+(?:\s+(?-i:[A-Z])[\w'-]+)?)", "travel",
       "trip_city", clean=_place, temporary=True, on_negation="drop", subject=False),
    _r(r"(?:^|\b(?:a|an|the|few|couple\s+of|\d+|one|two|three|four|five|six|seven|eight|nine|ten)\s+)(?:days?|nights?|"
       r"weeks?|weekend)\s+(?:away\s+)?in\s+" + _PV, "travel", "trip_city", clean=_place, temporary=True,
       on_negation="drop"),
    _r(r"\b(?:been|I'm|I\s+am|we're|we\s+are|I'll\s+be|I\s+will\s+be|we'll\s+be|will\s+be)\s+(?:up\s+|down\s+|out\s+|over\s+)?in\s+" + _PV
       + r"(?=[^.;]*\b(?:next\s+week|tomorrow|this\s+week|on\s+(?:monday|tuesday|wednesday|thursday|friday|saturday|"
       r"sunday)|since\s+(?:monday|tuesday|"
       r"wednesday|thursday|friday|saturday|sunday|yesterday|last\s+week|the\s+\d)|for\s+(?:a|an|the|work|"
       r"business|one|two|three|four|five|six|\d+)\s+(?:day|days|week|weeks|night|nights|client|work|conference|"
       r"project|meeting|business|wedding|trip)|until|till|back\s))", "travel", "trip_city", clean=_place, temporary=True, on_negation="drop"),
    _r(r"(?:外派|派驻|借调|常驻)(?:我们|我)?(?:去|到)(?P<v>" + _ZC + r"{2,8}?)(?=[一二两三四五六七八九十半几\d]|[,.!?。]|工作|常驻|$)",
       "travel", "trip_city", clean=_place, temporary=True, on_negation="drop", subject=False),
    _r(r"回(?:老家)?(?P<v>" + _ZC + r"{2,6}?)(?:过年|过节|探亲|休假|度假|看爸妈|看父母)", "travel", "trip_city", clean=_place,
       temporary=True, on_negation="drop"),
    # A stay somewhere for a while, said without a word for trip: 回娘家住两周（娘家在开封）, 被派去拉萨支援一个月,
    # 这几天在上海陪我妈看病…住十来天, 在绍兴待到初六.
    _r(r"回(?:娘家|婆家|老家)(?=[^。]*?(?:住|待|呆|过年|过节))[^。]*?(?:娘家|婆家|老家)(?:在|是)(?P<v>" + _ZC + r"{2,6}?)(?=$|[,.!?。]|的)",
       "travel", "trip_city", clean=_place, temporary=True, on_negation="drop"),
    _r(r"(?:被)?(?:派去|派到|调去|借调到|抽调到)(?P<v>" + _ZC + r"{2,6}?)(?:支援|援助|挂职|驻场|帮忙|出差|培训)", "travel", "trip_city",
       clean=_place, temporary=True, on_negation="drop", subject=False),
    _r(r"(?:这几天|这阵子|这两天|最近|目前)(?:人)?在(?P<v>" + _ZC + r"{2,6}?)(?=[^。]*(?:住|待|呆)(?:[一二两三四五六七八九十几半\d]+|十来)"
       r"(?:天|周|个星期|个礼拜|个月))", "travel", "trip_city",
       make=lambda m, s: [("trip_city", v)] if (v := _place(m.group("v"))) and is_chinese_city(v) else None,
       temporary=True, on_negation="drop"),
    _r(r"(?:去|到)(?P<v>" + _ZC + r"{2,6}?)(?:待|呆|住|玩|过)(?:[一二两三四五六七八九十几半\d]+|十来)(?:天|周|个星期|个礼拜|个月)",
       "travel", "trip_city", make=lambda m, s: [("trip_city", v)] if (v := _place(m.group("v"))) and is_chinese_city(v) else None,
       temporary=True, on_negation="drop", subject=False),
    _r(r"(?:这礼拜|这周|这星期|这几天|这两天|本周|这阵子|这[一两二三四五六七八九十几]+天)(?:都|一直|人)?在(?P<v>" + _ZC
       + r"{2,8}?)(?=[,，]|出差|开会|盯|跑|参加|培训|集训|学习|见客户)",
       "travel", "trip_city", make=lambda m, s: [("trip_city", v)] if (v := _place(m.group("v"))) and is_chinese_city(v) else None,
       temporary=True, on_negation="drop"),
    _r(r"(?:^|(?<=[,，。\s]))(?P<v>" + _ZC + r"{2,6}?)这边(?:待|呆|住)到", "travel", "trip_city",
       make=lambda m, s: [("trip_city", v)] if (v := _place(m.group("v"))) and is_chinese_city(v) else None,
       temporary=True, on_negation="drop"),
    _r(r"(?:今天|刚刚?|昨天|昨晚|已经)(?:到|抵达|落地)(?:了)?(?P<v>" + _ZC + r"{2,6}?)了?(?=[,，。!！]|$)(?=.*(?:出差|驻场|培训|开会|"
       r"酒店|宾馆|[一两二三四五六七八九十几半\d]+(?:天|周|个星期|个礼拜|个月)))", "travel", "trip_city",
       make=lambda m, s: [("trip_city", v)] if (v := _place(m.group("v"))) and is_chinese_city(v) else None,
       temporary=True, on_negation="drop"),
    _r(r"(?:来|去|到)(?:了|的)?(?P<v>" + _ZC + r"{2,6}?)了?[,，].{0,10}?(?:住|待|呆|玩)(?:了)?(?:[一两二三四五六七八九十几半\d]+|十来)"
       r"(?:天|周|个星期|个礼拜|个月)", "travel", "trip_city",
       make=lambda m, s: [("trip_city", v)] if (v := _place(m.group("v"))) and is_chinese_city(v) else None,
       temporary=True, on_negation="drop", subject=False),
    _r(r"在(?P<v>" + _ZC + r"{2,6}?)(?:待|呆|住)到", "travel", "trip_city",
       make=lambda m, s: [("trip_city", v)] if (v := _place(m.group("v"))) and is_chinese_city(v) else None,
       temporary=True, on_negation="drop"),
    _r(r"(?:人|现在|目前)在(?P<v>" + _ZC + r"{2,6}?)(?:呢|啦)?[,].{0,20}?(?:待|呆|住)(?:[一二两三四五六七八九十几半\d]+)(?:天|周|个星期|个礼拜|个月|年)",
       "travel", "trip_city", clean=_place, temporary=True, on_negation="drop"),
    _r(r"(?:(?:公司|单位|老板|领导)?派(?:我们|我)?)?(?:要|会|将|正在)?(?:去|到|来)(?P<v>" + _ZC
       + r"{1,10}?)(?:出差|旅游|旅行|度假|玩|培训|开会|学习|参会|访学|交流)", "travel", "trip_city", clean=_place,
       temporary=True, on_negation="drop", subject=False),
    _r(r"(?:正)?在(?P<v>" + _ZC + r"{1,10}?)(?:出差|旅游|旅行|度假|玩了|培训|开会)", "travel", "trip_city",
       clean=_place, temporary=True, on_negation="drop"),
    # A city's nickname + 漂 says where one lives and works ("北漂第五年", "蓉漂三年").
    _r(r"(?P<c>北|京|沪|深|杭|蓉|广|穗|苏|宁)漂(?!流|亮|白|浮|移)", "location", "home_city",
       make=lambda m, s: [("home_city", {"北": "北京", "京": "北京", "沪": "上海", "深": "深圳", "杭": "杭州", "蓉": "成都",
                                          "广": "广州", "穗": "广州", "苏": "苏州", "宁": "南京"}[m["c"]])],
       on_negation="drop"),
    # --- home city: ending first ("不住重庆了", "don't live in Austin")
    _r(r"(?:我)?(?:在)?(?P<v>" + _ZC + r"{2,6}?)的房子(?:已经|也)?(?:退租|卖掉?|退掉?|转租)了", "location", "home_city",
       make=lambda m, s: [("home_city", v)] if (v := _place(m.group("v"))) and is_chinese_city(v) else None, op="end",
       on_negation="keep"),
    _r(r"不(?:在)?(?:那儿|那里|那边|这儿|这里|这边)(?:住|生活)了|不住(?:那儿|那里|那边)了", "location", "home_city",
       make=lambda m, s: [("home_city", "")], op="end", on_negation="keep"),
    _r(r"(?:不|没)(?:再)?(?:住|住在|生活在)(?P<v>" + _ZC + r"{1,10}?)(?:住|生活)?了", "location", "home_city",
       clean=_place, op="end", on_negation="keep"),
    _r(r"\b(?:don't|do\s+not|no\s+longer)\s+live\s+in\s+" + _PV, "location", "home_city", clean=_place, op="end",
       on_negation="keep"),
    _r(r"\b(?:been|living|(?:'ve|have)\s+lived)\s+in\s+" + _PV + r"(?=\s+for\s+(?:about\s+|almost\s+|over\s+|nearly\s+|"
       r"the\s+(?:past|last)\s+)?(?:\w+\s+)?(?:years?|months?|decades?)\b)", "location", "home_city", clean=_place),
    _r(r"\b(?:'ve|have|has)\s+(?:always\s+|pretty\s+much\s+)?lived\s+in\s+" + _PV + r"(?!\s+(?:before|as\s+a|when|until|till)\b)",
       "location", "home_city", clean=_place),
    _r(r"^\s*(?:\w+|a\s+few|a\s+couple\s+of)\s+years?\s+(?:now\s+)?in\s+" + _PV, "location", "home_city", clean=_place),
    _r(r"\b(?:I'm|I\s+am|we're|we\s+are)\s+not\s+in\s+(?-i:[A-Z])[\w'-]*(?:\s+(?-i:[A-Z])[\w'-]*)?\s*,\s*(?:I'm|I\s+am|we're|we\s+are)"
       r"\s+in\s+" + _PV, "location", "home_city", clean=_place, value_span=True),
    _r(r"\bgot\s+the\s+keys\s+(?:to|for)\s+(?:the|our|my)\s+(?:new\s+)?(?:house|flat|place|home|apartment)\s+in\s+" + _PV,
       "location", "home_city", clean=_place),
    _r(r"\b(?:put\s+down\s+roots|putting\s+down\s+roots|set\s+up\s+home|made\s+(?:a\s+)?(?:our|my)\s+home)\s+in\s+" + _PV,
       "location", "home_city", clean=_place),
    _r(r"\b(?:I'm|I\s+am|we're|we\s+are)\s+(?:based\s+)?in\s+" + _PV + r"(?=\s*,?\s*(?:been\s+(?:here|there)|for\s+(?:years|"
       r"good|a\s+decade)|since\s+\d{4}|(?:I|we)\s+(?:live|moved)|home\b))", "location", "home_city", clean=_place),
    _r(r"\b(?:my|our)\s+(?!(?:holiday|vacation|summer|beach|old|parents'?|mum's|mom's|dad's|friend's)\b)(?:\w+\s+)?"
       r"(?:flat|apartment|house|condo|place|home)\s+in\s+" + _PV, "location", "home_city", clean=_place),
    _r(r"\b(?:based|living|located|settled(?:\s+down)?|settling(?:\s+down)?|staying|renting|rent\s+a\s+\w+)\s+(?:in|out\s+of)\s+" + _PV, "location",
       "home_city", clean=_place),
    _r(r"\b(?:live|lives|reside|resides)\s+in\s+" + _PV, "location", "home_city", clean=_place),
    _r(r"\b(?P<v>(?-i:[A-Z])[\w\u00C0-\u024F-]+(?:\s+(?-i:[A-Z])[\w-]+)?)(?:'s|\s+has)\s+been\s+(?:my\s+|our\s+)?home\b|"
       r"\b(?P<w>(?-i:[A-Z])[\w\u00C0-\u024F-]+(?:\s+(?-i:[A-Z])[\w-]+)?)\s+is\s+(?:my\s+|our\s+)?home\s+(?:now|these\s+days)\b",
       "location", "home_city", make=lambda m, s: [("home_city", v)] if (v := _place(m.group("v") or m.group("w"))) else None,
       subject=False),
    # "…then home to Melbourne", "flying home to Leeds on Sunday": where one goes home to is home.
    _r(r"\bhome\s+to\s+" + _PV, "location", "home_city", clean=_place, subject=False),
    _r(r"\b(?:I'm|I\s+am|we're|we\s+are)\s+(?:a|an)?\s*(?P<v>(?-i:[A-Z])[\w\u00C0-\u024F]+)-based\b|^\s*(?P<w>(?-i:[A-Z])[\w\u00C0-\u024F]+)"
       r"-based\s+(?:[\w-]+\s+){1,3}here\b", "location", "home_city",
       make=lambda m, s: [("home_city", v)] if (v := _place(m.group("v") or m.group("w"))) else None, subject=False),
    _r(r"\bhome(?:'s|\s+base)?(?:\s+(?:for\s+(?:me|us)|these\s+days|nowadays|now|right\s+now))?\s+(?:is\s+)?(?:now\s+)?(?:(?:a|an|my|our)\s+"
       r"(?:[\w-]+\s+){0,3}?(?:flat|apartment|house|place|room|studio|condo|cottage|bedsit|loft|houseboat|bungalow)\s+)?"
       r"(?:in\s+)?" + _PV, "location", "home_city", clean=_place),
    _r(r"\bcall\s+(?P<v>(?-i:[A-Z])[\w.-]*(?:\s+(?-i:[A-Z])[\w.-]*)?)\s+home\b", "location", "home_city",
       clean=_place),
    _r(r"\b(?:moved|relocated|moving\s+back|moved\s+back|went\s+back|came\s+back|returned|headed\s+back|heading\s+back|"
       r"going\s+back|relocating\s+back)\s+(?:home\s+)?to\s+" + _PV, "location", "home_city", clean=_place),
    # Verbs of moving as a class: a move verb with a direction ("relocated back to", "headed back east
    # to", "flew home to … for good"); a plain travel verb needs "back"/"home" or "for good".
    _r(r"\b(?:moved|moving|relocated|relocating|returned|returning)\s+(?:(?:back|home|over|up|down|out|back\s+home|back\s+\w+)\s+)?"
       r"to\s+" + _PV, "location", "home_city", clean=_place),
    _r(r"\b(?:went|came|headed|heading|flew|drove|got|going|gone|made\s+it)\s+(?:on\s+)?(?:back|home|back\s+home)(?:\s+(?:east|west|"
       r"north|south|up|down))?\s+to\s+" + _PV, "location", "home_city", clean=_place),
    _r(r"\b(?:went|came|headed|flew|drove|moved)\s+(?:\w+\s+)?to\s+" + _PV + r"(?=\s+(?:for\s+good|permanently|to\s+stay)\b)",
       "location", "home_city", clean=_place),
    _r(r"\bmoved\s+back\s+in\s+with\s+[^.;]{1,40}?\s+in\s+" + _PV, "location", "home_city", clean=_place),
    _r(r"\b(?:a|an)\s+(?P<v>(?-i:[A-Z])[\w\u00C0-\u024F'-]+(?:\s+(?-i:[A-Z])[\w'-]+)?)\s+(?:resident|local)\b", "location",
       "home_city", clean=_place),
    _r(r"\b(?:'ve|have)\s+been\s+(?:living\s+)?in\s+" + _PV + r"(?=\s+(?:for|going\s+on|since|nearly|almost|over|about|"
       r"most\s+of)\b)", "location", "home_city", clean=_place),
    _r(r"\b(?:I'm|I\s+am|we're|we\s+are)\s+(?:now\s+)?in\s+" + _PV + r"(?=\s+now\b)", "location", "home_city",
       make=lambda m, s: [("home_city", v)] if re.search(r"\b(?:moved|relocated|moving)\b", s, re.I)
       and (v := _place(m.group("v"))) else None),
    # Profile-style self descriptions ("Based in: Phoenix. Occupation: paramedic.", "new city (Mombasa)").
    _r(r"(?:^|[.;,:(]\s*|\b)(?:based\s+in|(?:new\s+|home\s+|current\s+)?city|location|lives\s+in|living\s+in)\s*[:(]\s*" + _PV,
       "location", "home_city", clean=_place, subject=False),
    _r(r"(?:^|[:,;]\s*)(?:update\s*:\s*|intro\s*:\s*)?city\s+(?:is\s+)?" + _PV, "location", "home_city", clean=_place,
       subject=False),
    _r(r"\b(?:back|home)\s+in\s+" + _PV + r"(?=\s*\(?\s*(?:for\s+good|permanently|to\s+stay|since\b|again\b|now\s+for\s+good))",
       "location", "home_city", clean=_place, subject=False),
    _r(r"\b(?:I'm|I\s+am|we're|we\s+are|been|living)\s+(?:now\s+)?(?:back\s+)?in\s+" + _PV
       + r"(?=\s+(?:these\s+days|nowadays|for\s+good|permanently)\b)", "location", "home_city", clean=_place),
    _r(r"\b(?:ended\s+up|wound\s+up|landed)\s+(?:living\s+)?in\s+" + _PV, "location", "home_city", clean=_place),
    # "Hot as anything here in Perth again", "been down here in Houston going on six years".
    _r(r"\b(?:out|down|up|over|back)?\s*here\s+in\s+" + _PV
       + r"(?![^.;!?]*\b(?:for\s+(?:a|an|the\s+(?:week|weekend|day|month)|\d|one|two|three|a\s+few|work|business)|until|till|"
       r"this\s+week|visiting|hotel|trip|conference|holiday|vacation|staying)\b)", "location", "home_city",
       make=lambda m, s: [("home_city", v)] if (v := _place(m.group("v"))) and leading_city(v.lower()) == v.lower() else None,
       subject=False),
    # "I'm in Regina": a known city with no word of a stay around it is where one lives.
    _r(r"\b(?:I'm|I\s+am|im|we're|we\s+are)\s+(?:based\s+|out\s+|over\s+|up\s+|down\s+)?in\s+" + _PV
       + r"(?![^.;!?]*\b(?:for\s+(?:a|an|the\s+(?:week|weekend|day|month|summer|holidays?|night)|\d|one|two|three|four|five|six|"
       r"a\s+few|a\s+couple|work|business|now)|until|till|this\s+week|today|tonight|tomorrow|right\s+now|at\s+the\s+moment|visiting|"
       r"hotel|airport|trip|conference|holiday|vacation|business|meeting|weekend|staying|return|flying|back\s+(?:on|by|home))\b)",
       "location", "home_city",
       make=lambda m, s: [("home_city", v)] if (v := _place(m.group("v"))) and leading_city(v.lower()) == v.lower() else None),
    _r(r"\b(?:moved|moving)\s+into\s+(?:a|an|our|my|the)\s+(?:new\s+|own\s+)?(?:place|house|home|apartment|flat|"
       r"condo)\s+in\s+" + _PV, "location", "home_city", clean=_place),
    _r(r"\b(?:bought|buying|rented|renting|rent|got|found|own|share|sharing)\s+(?:a|an|our|my|this|the)\s+(?:(?-i:[a-z]+)\s+){0,2}?(?:house|home|"
       r"apartment|flat|place|condo|room|studio|bedsit|loft|bungalow|cottage|townhouse|terrace|semi|maisonette|duplex|villa|cabin|"
       r"farmhouse|house\s*boat)\s+(?:back\s+)?in\s+" + _PV, "location",
       "home_city", clean=_place),
    # The move as a noun, and being somewhere "again" ("since the move back to Bristol", "I'm in Cardiff again",
    # "Calgary now!", "From December I am again in Munich").
    _r(r"\bthe\s+move\s+(?:back\s+)?to\s+" + _PV, "location", "home_city", clean=_place, subject=False),
    _r(r"\b(?:I'm|I\s+am|we're|we\s+are)\s+(?:again\s+|back\s+)?(?:on\s+[^.,]{1,30}?\s+)?in\s+" + _PV + r"(?=[^.!?]*\bagain\b)",
       "location", "home_city", clean=_place),
    _r(r"\b(?:I'm|I\s+am|we're|we\s+are)\s+again\s+in\s+" + _PV, "location", "home_city", clean=_place),
    _r(r"^\s*(?P<v>(?-i:[A-Z])[\w\u00C0-\u024F-]+)\s+(?:now|again)\b", "location", "home_city",
       make=lambda m, s: [("home_city", m.group("v"))] if leading_city(m.group("v")) else None, subject=False),
    _r(r"\b(?:my|our)\s+(?:apartment|flat|house|place|home)(?:'s|\s+is)\s+(?:in|now\s+in)\s+" + _PV, "location",
       "home_city", clean=_place),
    _r(r"\b(?:I'm|I\s+am|we're|we\s+are)\s+back\s+in\s+" + _PV, "location", "home_city", clean=_place),
    _r(r"(?:家(?:也|就|还|其实|现在)在|迁居(?:至|到)?|移居(?:至|到)?|迁至|迁到)(?P<v>" + _ZC + r"{2,6}?)(?=$|[,.!?;:。]|了|的|，)",
       "location", "home_city", clean=_place),
    _r(r"(?:住在|家在|定居在|生活在|定居于|常住在?|定居|落户|扎根在?|安家在|安家|(?<=我|们|人)住(?![了过着])|(?:^|(?<=[,，。\s]))住(?=[" + _CJK + r"]{2,4}(?:$|[,，。!！]|的|呢|啦)))" + _ZV,
       "location", "home_city", clean=_place),
    _r(r"(?<![去到现实存所正])在(?P<v>" + _ZC + r"{1,10}?)(?:生活|定居|居住|安家|落户|扎根|住)", "location", "home_city", clean=_place),
    _r(r"(?:住的(?:地方)?是|搬(?:去|到|过去)的(?:地方)?是|落脚(?:在)?|(?:调到|调回|调去)了?)(?P<v>" + _ZC + r"{2,6}?)(?=$|[,.!?;:。]|了|呢|啦)",
       "location", "home_city", make=lambda m, s: [("home_city", v)] if (v := _place(m.group("v")))
       and (is_chinese_city(v) or not m.group(0).startswith("调")) else None),
    _r(r"(?:人)?(?:已经|早就)?(?:不|没)(?:再)?在(?P<v>" + _ZC + r"{2,6}?)了", "location", "home_city",
       make=lambda m, s: [("home_city", v)] if (v := _place(m.group("v"))) and is_chinese_city(v) else None, op="end",
       on_negation="keep"),
    _r(r"(?:坐标|现居|常驻|📍)\s*(?P<v>" + _ZC + r"{2,8}?)(?=$|[,.!?;:。|\s]|的)|(?:现在|目前|如今)住(?:在)?(?P<w>" + _ZC
       + r"{2,6}?)(?=$|[,.!?;:。]|了|呢)", "location", "home_city",
       make=lambda m, s: [("home_city", v)] if (v := _place(m.group("v") or m.group("w"))) else None),
    _r(r"(?:(?:人|目前|现在|如今|常年|一直)(?:人)?在|base(?:在)?\s*|留在了?|扎根在?)(?P<v>" + _ZC + r"{2,6}?)(?=$|[,.!?;:。]|了|呢|啦)",
       "location", "home_city", make=lambda m, s: [("home_city", v)] if (v := _place(m.group("v"))) and is_chinese_city(v) else None),
    _r(r"(?:去|到|来)了?(?P<v>" + _ZC + r"{2,6}?)(?:住|生活|定居|安家|发展)了?(?=$|[,.!?;:。])|(?:去|到|来)了?(?P<w>" + _ZC
       + r"{2,6}?)了?[,].{0,12}?(?:租了?|买了?)(?:个|套|间|一套|一间)?(?:房|单间|公寓|房子|小区)", "location", "home_city",
       make=lambda m, s: [("home_city", v)] if (v := _place(m.group("v") or m.group("w"))) and is_chinese_city(v) else None),
    _r(r"(?:^|(?<=[,.!?;:\s。]))(?P<v>" + _ZC + r"{2,6}?)(?:待|呆|漂|住|生活)了?(?:快|差不多|将近|好几|有)?(?:[一二三四五六七八九十两\d]+)?"
       r"(?:多)?(?:年|个年头)", "location", "home_city",
       make=lambda m, s: [("home_city", v)] if (v := _place(m.group("v"))) and is_chinese_city(v) else None),
    _r(r"(?<![去到现实存所正])(?:在|搁)(?P<v>" + _ZC + r"{2,6}?)(?:买的房|买了房|买了套房|买房|买的房子|安的家|打拼|漂)(?:了)?(?:的)?(?:第[一二三四五六七八九十\d]+年)?",
       "location", "home_city",
       make=lambda m, s: [("home_city", v)] if (v := _place(m.group("v"))) and (is_chinese_city(v) or leading_city(v.lower())) else None),
    _r(r"住(?:在)?(?P<v>" + _ZC + r"{2,6}?)(?:这么|好|很)多年|(?:^|(?<=[,，。!！\s]))(?P<w>" + _ZC + r"{2,6}?)住着", "location", "home_city",
       make=lambda m, s: [("home_city", v)] if (v := _place(m.group("v") or m.group("w"))) and is_chinese_city(v) else None),
    _r(r"(?<![去到现实存所正])(?:在|搁)(?P<v>" + _ZC + r"{2,6}?)(?:待|呆|住|生活)了(?:小|大)?(?:半辈子|一辈子|大半辈子)", "location", "home_city",
       make=lambda m, s: [("home_city", v)] if (v := _place(m.group("v"))) and is_chinese_city(v) else None),
    _r(r"从(?P<a>" + _ZC + r"{2,8}?)(?:出来|离职|辞职|走)(?:了)?(?:以后|之后|后)?[,，]?(?:就)?(?:去了|到了|进了|跳到|跳去|去)(?P<v>" + _ZC
       + r"{2,8}?)(?=$|[,，。!！]|了)", "work", "employer",
       make=lambda m, s: [("employer", v)] if (v := _employer(m.group("v"))) and not is_chinese_city(v) else None),
    _r(r"(?:^|(?<=[,，。!！\s]))(?P<v>" + _ZC + r"{2,6}?)(?:这边|那边)(?=[^,，。]{0,8}(?:年终奖|工资|绩效|加班|同事|领导|裁员|涨薪|奖金|述职))",
       "work", "employer", make=lambda m, s: [("employer", v)] if (v := _employer(m.group("v"))) and not is_chinese_city(v)
       and not is_place_word(v) else None),
    # "在杭州待了五年" is a home; "在华为待了五年" an employer (a name that is no place and no common noun).
    _r(r"(?<![去到现实存所正])在(?P<v>" + _ZC + r"{1,10}?)(?:待|呆|漂|住)了(?:[一二三四五六七八九十两\d]+|好几|很多|快|差不多)(?:年|个月)", "location",
       "home_city", make=lambda m, s: None if not (v := _place(m.group("v"))) else [("home_city", v)]
       if is_chinese_city(v) or is_place_word(v) or "住" in m.group(0) else None),
    _r(r"(?<![去到现实存所正])在(?P<v>" + _ZC + r"{2,8}?)(?:待|呆|干|熬)了(?:[一二三四五六七八九十两\d]+|好几|很多|快|差不多)(?:年|个月)", "work",
       "employer", make=lambda m, s: [("employer", v)] if (v := _employer(m.group("v"))) and not is_chinese_city(v)
       and not is_place_word(v) and v not in _NOT_WORKPLACES else None),
    _r(r"(?:^|(?<=[,，。!！\s]))(?:执咗行李|收拾行李)?返(?:咗|嚟|到)?(?P<v>" + _ZC + r"{2,6}?)(?:啦|了|喇|咗)?(?=$|[,，。!！～~])", "location", "home_city",
       make=lambda m, s: [("home_city", v)] if (v := _place(m.group("v"))) and is_chinese_city(v) else None),
    _r(r"(?:搬到了|搬到|搬去了|搬去|搬家到|搬家去了|搬家去|搬回了|搬回|搬来|回到了?|(?<![上这那下几每一两头])回(?![家来去头]))(?P<home>老家)?" + _ZV
       + _ZEND, "location", "home_city",
       # After 老家 or a bare 回 only a city is a place ("回老家躺平了" is a way of life, "回老家成都" a move,
       # "头一回涨" no move at all).
       make=lambda m, s: [("home_city", v)] if (v := _place(m.group("v"))) and (
           not (m.group("home") or m.group(0).startswith("回")) or is_chinese_city(v) or leading_city(v.lower()))
       else None),
    # --- relationship status
    _r(r"分手了|离婚|离异|单身|领证|结婚(?:[一二三四五六七八九十两\d]+年)?了|已婚|订婚|嫁人了|脱单|恋爱了|在谈恋爱|恋爱中|"
       r"丧偶|母胎solo|求婚成功|被求婚|在约会|约会中|(?<!住)在一起(?=了|[一二三四五六七八九十两\d]+年|$|[,.!。])|复合了|证早就领了|证已经领了|证领了|"
       r"又是一个人了|又单身了|恢复单身|(?:(?<=^)|(?<=[,.!。]))(?:分了|离了)(?=$|[,.!。])", "relationship", "status",
       make=lambda m, s: [("status", _ZH_STATUS[m.group(0)[:2]])], on_negation="drop"),
    _r(r"老伴.{0,4}?(?:走了|去世|过世|没了)|(?:老公|老婆|丈夫|妻子|爱人).{0,4}?(?:去世|过世)", "relationship", "status",
       make=_status("widowed"), on_negation="drop"),
    _r(r"(?:现在|目前)(?:的|这个|这位)?(?:男朋友|女朋友|对象|男友|女友)", "relationship", "status",
       make=_status("in a relationship"), on_negation="drop"),
    _r(r"领(?:的|了)证|(?:和平|已经|刚|早就)分手了?|不(?:是|再是)情侣了", "relationship", "status",
       make=lambda m, s: [("status", "married" if "证" in m.group(0) else "single")], on_negation="drop"),
    _r(r"寡王|单身狗|母胎(?:solo|单身)|(?:还|一直|仍然|依然)单着|单着呢|(?:现在|如今|目前|又)?(?:一个人|单着)(?:过|生活|过日子)(?!.{0,4}(?:几天|一周|两周|周末))|没(?:能)?走到最后",
       "relationship", "status", make=_status("single"), on_negation="drop"),
    _r(r"(?:跟|和)(?:男朋友|女朋友|对象|另一半|他|她)?分(?:了|手了)", "relationship", "status", make=_status("single"),
       on_negation="drop"),
    _r(r"(?:(?:他|她)求婚了|求婚.{0,8}?(?:我)?答应了|答应了(?:他|她)的求婚|(?:她|他)答应了(?=.*(?:单膝|求婚|戒指|婚戒|钻戒))|单膝跪下)",
       "relationship", "status", make=_status("engaged"),
       on_negation="drop", subject=False),
    _r(r"(?:我(?:家)?|(?:^|(?<=[,，。!！\s])))(?P<w>老公|老婆(?!饼)|丈夫|媳妇|老伴|另一半)", "relationship", "status", make=_status_word,
       on_negation="drop",
       subject=False),
    _r(r"(?:有|交了)(?P<w>女朋友|男朋友|对象)", "relationship", "status", make=_status_word, on_negation="end_value"),
    _r(r"(?:那|他|她)?是我(?P<w>男朋友|女朋友|对象|老公|老婆|未婚夫|未婚妻)", "relationship", "status", make=_status_word,
       on_negation="end_value", subject=False),
    _r(r"(?:我|我们)?(?:和|跟|与|同)(?P<w>女朋友|男朋友|未婚夫|未婚妻|老公|老婆|对象|老伴|另一半)", "relationship", "status",
       make=_status_word, on_negation="drop"),
    # Events of a relationship, in the ways people say them ("tied the knot", "he proposed … I said yes",
    # "lost my husband"): a death of a spouse comes before "my husband" reads as married.
    _r(r"\b(?:lost|buried)\s+my\s+(?:husband|wife|spouse|partner)\b(?!'s)|\bmy\s+(?:late\s+)?(?:husband|wife|spouse)"
       r"\s+(?:passed\s+away|died|passed)\b|\bmy\s+late\s+(?:husband|wife|spouse)\b|\b(?:I'm|I\s+am|I've\s+been|I\s+have\s+been)\s+a\s+"
       r"widow(?:er)?\b|丧偶|老伴(?:走了|去世了?|过世了?)|(?:老公|老婆|丈夫|妻子)(?:走了|去世了?|过世了?)",
       "relationship", "status", make=_status("widowed"), on_negation="drop", subject=False),
    _r(r"\bcalled\s+(?:it|the\s+(?:wedding|engagement))\s+off\b|\bbroke\s+off\s+(?:the|our)\s+engagement\b", "relationship",
       "status", make=_status("engaged"), op="end", on_negation="drop"),
    _r(r"\b(?:tied\s+the\s+knot|got\s+hitched|walked\s+down\s+the\s+aisle|exchanged\s+vows|said\s+(?:our|my)\s+vows|"
       r"(?:we're|we\s+are)\s+newlyweds)\b", "relationship", "status", make=_status("married"), on_negation="drop"),
    _r(r"\b(?:(?:he|she|they)\s+(?:proposed|popped\s+the\s+question)|(?:I|we)\s+(?:got\s+)?proposed\b|"
       r"(?:she|he)\s+said\s+yes\b(?=[^.]*(?:!|ring|propos|fianc)))", "relationship", "status",
       make=_status("engaged"), on_negation="drop", subject=False),
    _r(r"\b(?:got|getting|just\s+got)\s+(?P<w>married|engaged|divorced)\b", "relationship", "status",
       make=_status_word, on_negation="drop"),
    _r(r"\bthe\s+divorce\s+(?:went\s+through|is\s+final|was\s+finali[sz]ed|came\s+through)", "relationship",
       "status", make=_status("divorced"), on_negation="drop", subject=False),
    _r(r"\b(?:broke|broken|split)\s+up\b", "relationship", "status", make=_status("single"), on_negation="drop"),
    _r(r"\b(?:since|after)\s+(?:the|my|our)\s+(?:break-?up|split)\b|\bsingle\s+(?:again|life)\b|\bback\s+on\s+the\s+(?:market|apps)\b|"
       r"\bthe\s+only\s+single\s+one\b|\bonly\s+one\s+(?:who's|who\s+is|that's)\s+(?:still\s+)?single\b",
       "relationship", "status", make=_status("single"), on_negation="drop"),
    _r(r"\b(?:got|have|has|found|met)\s+(?:a|an|myself\s+a)\s+(?:new\s+|lovely\s+|real\s+)?(?P<w>gf|bf|girlfriend|boyfriend|"
       r"fianc[ée]e?|partner)\b", "relationship", "status", make=_status_word, on_negation="end_value"),
    _r(r"\bbeen\s+(?:with|together\s+with)\s+(?-i:[A-Z])[a-z]+\s+(?:for\s+)?(?:(?:nearly|almost|about|over|around)\s+)?(?:\w+|\d+)\s+"
       r"(?:years?|months?)\b", "relationship", "status", make=_status("in a relationship"), on_negation="drop"),
    _r(r"\b(?:we're|we\s+are|we)\s+(?:not|no\s+longer)\s+together\b|\bwe\s+aren't\s+together\b", "relationship", "status",
       make=lambda m, s: [("status", "")], op="end", on_negation="keep"),
    _r(r"\b(?:been|I'm|I\s+am|started|we\s+started|I\s+started)\s+(?:seeing|dating)\s+(?-i:[A-Z])[a-z]+\b", "relationship", "status",
       make=_status("in a relationship"), on_negation="end_value"),
    _r(r"\b(?:\w+\s+)?years?\s+(?:happily\s+)?married\b|\bmarried\s+(?:for\s+)?(?:(?:almost|nearly|over|about)\s+)?"
       r"(?:\w+|\d+)\s+years\b|\b(?:our|my)\s+(?:\w+\s+)?(?:wedding\s+)?anniversary\b", "relationship", "status",
       make=_status("married"), on_negation="drop"),
    _r(r"\b(?:I'm|I\s+am|we're|we\s+are|been|still|now|happily|recently|newly)\s+(?:happily\s+|recently\s+|newly\s+|technically\s+|"
       r"legally\s+|basically\s+|practically\s+|"
       r"still\s+|now\s+|officially\s+|just\s+|only\s+|currently\s+|finally\s+|not\s+|no\s+longer\s+)*(?P<w>single|engaged|married|divorced|widowed|dating|in\s+a\s+relationship|"
       r"seeing\s+someone)\b", "relationship", "status",
       make=lambda m, s: [("status", _STATUS_WORDS[re.sub(r"\s+", " ", m.group("w").lower())])],
       on_negation="end_value"),
    _r(r"(?:^|(?<=,))\s*(?:sorry,?\s*|not\s+|still\s+|now\s+|officially\s+|happily\s+)?(?P<w>single|engaged|married|divorced|widowed)\b(?!\s+(?:people|couples?|friends?))",
       "relationship", "status", make=_status_word, on_negation="end_value"),
    _r(r"\b(?:(?:my|the)\s+ex-?(?:husband|wife|spouse)|(?:since|after)\s+(?:the|my|our)\s+divorce)\b", "relationship", "status",
       make=_status("divorced"), on_negation="drop", subject=False),
    _r(r"\b(?:my|our)\s+(?:lovely\s+|amazing\s+|wonderful\s+|new\s+|dear\s+)?(?P<w>girlfriend|boyfriend|fianc[ée]e?|"
       r"husband|wife|hubby|wifey|spouse|gf|bf|missus|other\s+half|better\s+half|partner)\b(?!'s\s+(?:friend|sister|brother|mom|dad))",
       "relationship", "status", make=_status_word, on_negation="drop", subject=False),
    _r(r"\b(?:with\s+)?the\s+(?P<w>wife|hubby|husband|missus)\b|^\s*(?P<x>hubby|wifey)\b", "relationship", "status",
       make=lambda m, s: [("status", "married")], on_negation="drop", subject=False),
    _r(r"\b(?:been\s+together|(?:years?|months?)\s+together|(?:(?-i:[A-Z])[a-z]+\s+and\s+I|me\s+and\s+(?-i:[A-Z])[a-z]+)\s+are\s+"
       r"(?:a\s+couple|dating|together))\b", "relationship", "status", make=_status("in a relationship"), on_negation="drop",
       subject=False),
    _r(r"\b(?:we\s+)?(?:eloped|got\s+back\s+together|are\s+common-law|common-law\s+(?:partners?|couple|wife|husband))\b",
       "relationship", "status", make=lambda m, s: [("status", "married" if "elope" in m.group(0).lower() else "in a relationship")],
       on_negation="drop"),
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
    # --- work: leaving first, then employer, then job titles
    _r(r"\b(?:lost|losing)\s+my\s+job(?:\s+(?:at|with)\s+" + _PV + r")?", "work", "employer",
       make=lambda m, s: [("employer", _place(m.group("v")) or "") if m.group("v") else ("employer", "")],
       op="end", on_negation="drop", subject=False),
    _r(r"\b(?:laid\s+off|(?:got|was|been|get|getting|being)\s+(?:fired|let\s+go))\b(?!\s+(?:up|of))"
       r"(?:\s+(?:from|at|by)\s+" + _PV + r")?", "work", "employer",
       make=lambda m, s: [("employer", (_place(m.group("v")) or "") if m.group("v") else "")], op="end",
       on_negation="drop"),
    _r(r"\b" + _LEAVE_JOB + r"\s+(?:my\s+job\s+at\s+)?" + _PV, "work", "employer", clean=_no_city, op="end",
       on_negation="drop"),
    _r(r"\bmy\s+job\s+(?:went|is\s+gone|has\s+gone|disappeared)\b|\b(?:went|gone|going)\s+(?:bust|under|into\s+administration)\b"
       r"(?=[^.]*\bmy\s+job\b)|\b(?:made|been\s+made)\s+redundant\b|\b(?:got|been)\s+(?:laid\s+off|let\s+go|sacked|fired)\b(?!\s+from)", "work", "employer",
       make=lambda m, s: [("employer", "")], op="end", on_negation="drop"),
    _r(r"\b(?:that's\s+me|I'm|I\s+am)\s+(?:all\s+)?done\s+with\s+" + _PV, "work", "employer", clean=_place, op="end",
       on_negation="drop", subject=False),
    _r(r"\b(?:handed|handing)\s+(?:in\s+)?my\s+notice(?:\s+in)?\b(?!\s+at)", "work", "employer", make=lambda m, s: [("employer", "")],
       op="end", on_negation="drop"),
    _r(r"\b(?:don't|do\s+not|no\s+longer)\s+work\s+there\b", "work", "employer", make=lambda m, s: [("employer", "")],
       op="end", on_negation="keep"),
    _r(r"\b(?:not|no\s+longer)\s+with\s+(?P<v>(?-i:[A-Z])[a-z]+)\s+(?:anymore|any\s+more|now)\b|\bwe\s+(?:parted|split)\b", "relationship", "status",
       make=lambda m, s: None if _WORK_CONTEXT.search(s) else [("status", "")], op="end", on_negation="keep"),
    _r(r"\b(?:not|no\s+longer)\s+(?:working\s+)?(?:at|with|for)\s+" + _PV, "work", "employer",
       make=lambda m, s: None if not (v := _place(m.group("v"))) or (len(v.split()) == 1 and is_first_name(v.lower())
                                                                     and re.search(r"\bwith\s+\S+$", m.group(0))) else [("employer", v)],
       op="end",
       on_negation="keep"),
    _r(r"(?:离开了?|辞职离开了?|裸辞了?|辞掉了?)(?P<v>" + _ZC + r"{1,10}?)(?=$|[,.!?;:\s。]|了)|从(?P<w>" + _ZC
       + r"{1,10}?)(?:离职|辞职|跳槽|出来)", "work", "employer",
       make=lambda m, s: [("employer", v)] if (v := _place(m.group("v") or m.group("w") or "")) else None,
       op="end", on_negation="drop"),
    _r(r"(?:那份|这份)?工作(?:上个月|上周|已经|早就)?辞(?:了|掉了)", "work", "employer", make=lambda m, s: [("employer", "")],
       op="end", on_negation="keep"),
    _r(r"不在那(?:儿|里|边|家)?(?:上班|工作|干)了", "work", "employer", make=lambda m, s: [("employer", "")], op="end",
       on_negation="keep"),
    _r(r"(?:不|没)(?:再)?在(?P<v>" + _ZC + r"{1,10}?)(?:工作|上班|干)?了", "work", "employer", clean=_place,
       op="end", on_negation="keep"),
    _r(r"\b(?:switched\s+jobs|changed\s+jobs|new\s+job|left\s+(?-i:[A-Z])\S*|quit)\b[^.;]*?\b(?:now|currently)\s+"
       r"(?:at|with|working\s+(?:at|for))\s+" + _PV, "work", "employer", clean=_place, value_span=True),
    _r(r"\b(?:left|quit)\s+(?-i:[A-Z])[^.;]*?\b(?:joined|joining|started\s+at|went\s+to|moved\s+to)\s+" + _PV,
       "work", "employer", clean=_place, value_span=True),
    _r(r"\b(?:landed|got|took|accepted|found|started|starting)\s+(?:a\s+|the\s+|my\s+)?(?:new\s+)?(?:job|position|role|"
       r"gig|offer)\s+(?:at|with)\s+" + _PV, "work", "employer", clean=_place),
    _r(r"(?:^|[.;,(]\s*|\b)(?:employer|company|workplace|new\s+(?:job|employer|company|gig|role))\s*[:(]\s*" + _PV, "work",
       "employer", clean=_place, subject=False),
    _r(r"\b(?:day\s+(?:1|one)|first\s+(?:day|week)|week\s+(?:1|one))\s+at\s+" + _PV, "work", "employer", clean=_place),
    _r(r"\b(?:(?:another|long|late|early|double|closing|opening|morning|evening|weekend|night)\s+(?:\w+[\s-]hour\s+)?|\w+[\s-]hour\s+)"
       r"(?:day|shift|night|week)\s+at\s+" + _PV, "work", "employer",
       make=lambda m, s: [("employer", v)] if (v := _employer(m.group("v"))) and not leading_city(v.lower()) else None),
    _r(r"\b(?:work|working|worked)\b[^.;]{0,30}?\bfor\s+(?P<v>(?-i:[A-Z])[\w&-]*)(?:'s)?\s+(?:[a-z]+\s+)?(?:team|department|office|"
       r"division|store|branch)\b", "work", "employer", make=lambda m, s: [("employer", v)] if (v := _employer(m.group("v"))) else None),
    _r(r"\bmy\s+(?:company|employer|firm|workplace|current\s+company|current\s+employer)\s*(?:is\s+|,\s*)?(?:now\s+)?" + _PV, "work",
       "employer", clean=_place),
    # "been at Canva since the start of the month", "working in Infosys since 2019": an organisation, not a place.
    _r(r"\b(?:been|working|I've\s+been|I\s+have\s+been)\s+(?:working\s+)?(?:at|in|with)\s+(?P<v>(?-i:[A-Z])[\w&'.-]*(?:\s+(?-i:[A-Z])"
       r"[\w&'.-]*)?)(?=\s*,?\s+(?:since\s+(?!\d{1,2}(?::\d\d)?\s*(?:am|pm)\b)|for\s+(?:\w+\s+)?(?:weeks|months|years)\b|"
       r"as\s+(?:a\s+|an\s+)?[a-z]+))",
       "work", "employer", make=lambda m, s: [("employer", v)] if (v := _place(m.group("v"))) and not leading_city(v.lower())
       and not (len(v.split()) == 1 and is_dictionary_word(v.lower())) else None),
    _r(r"(?:^|\binto\s+(?:the|my)\s+|\b(?:the|my)\s+)new\s+(?:job|role|position|gig)\s+(?:at|with)\s+" + _PV, "work",
       "employer", clean=_place, subject=False),
    _r(r"\bnew\s+(?:job|gig|role)\s*[.:,!—-]+\s*(?P<v>(?-i:[A-Z])[\w.&'-]*(?:\s+(?-i:[A-Z])[\w.&'-]*)?)", "work", "employer",
       clean=_place, subject=False),
    _r(r"\bjumped\s+(?:ship|over)\s+to\s+(?:the\s+)?" + _PV, "work", "employer", clean=_place),
    _r(r"(?:就是|成了|成为|正式成为)(?P<v>" + _ZC + r"{2,8}?)的(?:人|员工|一员|正式员工)了?", "work", "employer",
       make=lambda m, s: [("employer", v)] if (v := _employer(m.group("v"))) and not is_chinese_city(v) else None),
    _r(r"(?:被)?(?:猎头|人)?挖(?:去|到|走去|走到)了?(?P<v>" + _ZC + r"{2,8}?)(?=$|[,.!?;:。]|了|当|做)", "work", "employer",
       clean=_place, subject=False),
    _r(r"\b(?:been|I've\s+been|I'm)\s+(?:working\s+)?(?:at|with)\s+" + _PV + r"(?=\s+(?:since\s+(?:19|20)\d\d|for\s+(?:\w+\s+)?years)\b)",
       "work", "employer", clean=_place),
    # The employer as the actor ("got hired by Aldi", "got poached by Booking.com", "Canva offered me a role").
    _r(r"\b(?:hired|poached|headhunted|recruited|snapped\s+up|taken\s+on|employed|signed)\s+(?:by|with)\s+(?:the\s+)?"
       + _PV, "work", "employer", clean=_place),
    _r(r"(?P<v>(?-i:[A-Z])[\w.&'-]*(?:\s+(?-i:[A-Z])[\w.&'-]*){0,3})\s+(?:offered|gave|hired)\s+me\s+(?:a|an|the)\s+"
       r"(?:\w+\s+){0,2}(?:job|role|position|contract|place|spot|internship)\b", "work", "employer", clean=_place,
       subject=False),
    # A new place named after leaving the old one ("left Meta for a tiny startup called Loomly").
    _r(r"\b(?:left|quit)\s+(?-i:[A-Z])\S*(?:\s+(?-i:[A-Z])\S*)*\s+(?:for|to\s+join)\s+(?:a|an|the)?\s*(?:[\w-]+\s+){0,3}?"
       r"(?:startup|company|firm|agency|studio|shop|bakery|restaurant|hospital|clinic|school|nonprofit|charity|lab|"
       r"place)\s+(?:called|named)\s+" + _PV, "work", "employer", clean=_place, value_span=True),
    _r(r"\b(?:left|quit)\s+(?-i:[A-Z])\S*(?:\s+(?-i:[A-Z])\S*)*\s+(?:for|to\s+join)\s+" + _PV, "work", "employer",
       clean=_place, value_span=True),
    _r(r"\b(?:joined|joining)\s+(?:the\s+)?(?P<v>(?-i:[A-Z])[^.,!?;:\n()]{0,60})", "work", "employer",
       make=lambda m, s: [("employer", v)] if _WORK_CONTEXT.search(s) and (v := _place(m.group("v"))) else None),
    _r(r"\b(?:moved\s+over|switched|switching|transferred|went\s+over|jumped\s+ship)\s+to\s+(?:the\s+)?"
       r"(?P<v>(?-i:[A-Z])[^.,!?;:\n()]{0,60})", "work", "employer",
       make=lambda m, s: [("employer", v)] if _WORK_CONTEXT.search(s) and (v := _place(m.group("v"))) else None),
    _r(r"\b(?:I'm|I\s+am|I've\s+been|been|now)\s+(?:now\s+|working\s+)?(?:at|with)\s+(?P<v>(?-i:[A-Z])[^.,!?;:\n()]{0,60}?)"
       r"(?=\s+(?:now|since|these\s+days|for\s+(?:a|two|three|\d|about|almost|over|the))\b|\s*,?\s+(?:on|in)\s+the\s+"
       r"(?:\w+\s+){0,2}(?:team|department|desk|side|floor|ward)\b)", "work", "employer",
       make=lambda m, s: [("employer", v)] if _WORK_CONTEXT.search(s) and (v := _place(m.group("v"))) else None),
    _r(r"\b(?:work|works|working|worked|teach|teaching|intern|interning|volunteer)\s+(?:(?-i:[a-z]+)\s+){0,2}?(?:at|for)\s+" + _PV,
       "work", "employer", clean=_place),
    _r(r"\b(?:started|starting|start|began)\s+(?:(?:a\s+new\s+job|work|working|my\s+new\s+job|a\s+job)\s+)?"
       r"(?:at|with)\s+" + _PV, "work", "employer", clean=_place),
    _r(r"\b(?:joined|joining|join)\s+(?:the\s+team\s+at\s+)?" + _PV + r"(?=[^.;]*\b(?:job|team|role|company|"
       r"position|offer|hired|work|colleagues|boss)\b)", "work", "employer", clean=_place),
    _r(r"\b(?:hired|employed|recruited|signed|taken\s+on)\s+(?:by|with|at)\s+(?:the\s+)?" + _PV, "work",
       "employer", clean=_place),
    _r(r"\b(?:transferred|transfer|moved\s+over|switched|switching)\s+(?:jobs\s+)?to\s+(?:the\s+)?" + _PV
       + r"(?=[^.;]*\b(?:hours|shift|team|job|role|office|pay|boss|colleagues|company)\b)", "work", "employer",
       clean=_place),
    _r(r"\bplay\s+(?:\w+\s+){0,2}(?:for|with)\s+(?:the\s+)?" + _PV, "work", "employer", clean=_place),
    _r(r"\b(?:I'm|I\s+am)\s+(?:now\s+)?with\s+" + _PV + r"(?=\s+now\b)", "work", "employer", clean=_place),
    _r(r"(?:换了?(?:新)?工作|新工作|跳槽了?|入职了?)\s*\(\s*(?P<v>" + _ZC + r"{2,10}?)\s*\)", "work", "employer", clean=_org),
    _r(r"(?:入职了?|加入了?|跳槽到了?|跳槽去了?|换到了?|跳到了?|跳去了?)(?P<v>" + _ZC + r"{2,10}?)(?=$|[,.!?;:\s。]|工作|上班|了|(?!" + _ZC + r"))",
       "work", "employer", clean=_place),
    _r(r"(?:换工作|换了工作|跳槽|离职|辞职)了?.{0,6}?(?:去了|进了|到了)(?P<v>" + _ZC + r"{2,10}?)"
       r"(?=$|[,.!?;:\s。]|工作|上班|了)", "work", "employer", clean=_place),
    _r(r"(?<![不没现实存所正])在(?P<v>" + _ZC + r"{1,12}?)(?:工作|上班|任职|实习|做|当|干|搬砖|打工|苦熬|熬着|混日子)", "work", "employer",
       make=lambda m, s: [("employer", v)] if (v := _employer(m.group("v"))) and not re.search(r"[就完着把被]", v) else None),
    # "在顺丰送快递": an organisation's name (jieba: nz/nt) before a verb of work.
    _r(r"(?<![不没现实存所正])在(?P<v>" + _ZC + r"{2,6}?)(?=送|跑|开|卖|修|带|教|写|搞|管|剪|炒|端|拧)", "work", "employer",
       make=lambda m, s: [("employer", v)] if (v := _employer(m.group("v"))) and any(t in {"nz", "nt"} for _, t in tagged(v))
       and not is_chinese_city(v) else None),
    _r(r"(?:离开|离职|辞职|跳槽|换工作|换了工作|跳到).*?(?:现在|目前)在(?P<v>" + _ZC + r"{2,10}?)(?=$|[,.!?;:\s。]|了)",
       "work", "employer", clean=_place, subject=False, value_span=True),
    # Chinese verbs of joining and leaving as a class: 去X上班, 转去X, 叫X after an organisation noun,
    # X那边辞了, a bare 离职了 (whatever the employer was).
    _r(r"(?:去了?|到了?|进了?)(?P<v>" + _ZC + r"{2,8}?)(?:上班|工作|实习|任职|报到)", "work", "employer", clean=_place),
    _r(r"(?:转去|转到|跳到|跳去|换到|换去|去了|进了)(?![当做干])(?P<v>" + _ZC + r"{2,8}?)了?(?=$|[,.!?;:。])", "work", "employer",
       make=lambda m, s: [("employer", v)] if _WORK_CONTEXT.search(s) and (v := _place(m.group("v")))
       and not is_chinese_city(v) else None),
    _r(r"(?:医院|公司|学校|单位|店|律所|银行|机构|企业|工作室|事务所)[,]?\s*(?:名字)?叫(?P<v>" + _ZC + r"{2,8}?)(?=$|[,.!?;:。])",
       "work", "employer", clean=_org, subject=False),
    _r(r"(?<![不没])(?:我|俺)(?:现在|目前)?在(?P<v>" + _ZC + r"{2,8}?)(?=$|[,.!?;:。])", "work", "employer",
       make=lambda m, s: [("employer", v)] if re.search(r"[,]\s*(?:搞|做|干|负责|写|当|带)", s[m.end():m.end() + 3])
       and (v := _org(m.group("v"))) and not is_chinese_city(v) else None),
    _r(r"(?:现在|目前|如今)(?:人)?在(?P<v>" + _ZC + r"{2,8}?)(?=$|[,.!?;:。])", "work", "employer",
       make=lambda m, s: [("employer", v)] if _WORK_CONTEXT.search(s) and (v := _place(m.group("v")))
       and not is_chinese_city(v) else None),
    _r(r"(?P<v>" + _ZC + r"{2,8}?)(?:那边|这边|那里|这里)(?:已经)?(?:辞了|辞职了|不干了|离职了)|不干(?P<w>" + _ZC + r"{2,8}?)了",
       "work", "employer", make=lambda m, s: [("employer", v)] if (v := _place(m.group("v") or m.group("w"))) else None,
       op="end", on_negation="drop"),
    _r(r"(?:(?<=^)|(?<=[,.!。]))(?:已经|刚|也)?(?:离职|辞职|被裁|裸辞|被辞退|被开除)了", "work", "employer",
       make=lambda m, s: [("employer", "")], op="end", on_negation="drop"),
    _r(r"\b(?:joys?|perks?|life|downsides?|curse|reality|glamour)\s+of\s+being\s+(?:a|an|the)\s+" + _EV, "work", "job",
       make=_job_framed, subject=False),
    _r(r"\b(?:[\w-]+[\s-]hour\s+)?shifts?\s+as\s+(?:the\s+only\s+|the\s+|a\s+|an\s+)?" + _EV, "work", "job", make=_job_framed),
    # Retiring ends the job and the employer ("Retired as of Friday!!"); "a retired teacher" is a title.
    _r(r"(?:^|\b(?:I|I've|I\s+have|just|finally|officially|I'm|I\s+am|now|we)\s+)retired\b(?!\s+(?:[a-z]+(?:er|or|ist|ian)|nurse|"
       r"doctor|chef|coach|judge|vet|pilot)\b)", "work", "", make=lambda m, s: [("job", ""), ("employer", "")], op="end",
       on_negation="drop"),
    _r(r"\b(?:work|working|worked|employed|appointed|hired|trained|(?:do|doing|did)\s+(?:nights|days|shifts|nights\s+and\s+\w+|"
       r"(?:a\s+|the\s+|my\s+)?job|(?:a\s+|the\s+)?(?:day|night)\s+shift)|(?:a|my|the)\s+job)\s+as\s+(?:a\s+|an\s+|the\s+)?" + _EV,
       "work", "job", make=_job_framed),
    _r(r"\bguess\s+who\s+(?:they\s+|just\s+|got\s+)*(?:made|appointed|named|promoted(?:\s+to)?)\s+(?:the\s+|a\s+|an\s+)?" + _EV,
       "work", "job", make=_job_framed, subject=False),
    _r(r"\b(?:they|management|the\s+\w+)\s+(?:made|appointed|named)\s+me\s+(?:the\s+|a\s+|an\s+)?" + _EV, "work", "job",
       make=_job_framed, subject=False),
    _r(r"\b(?:I'm|I\s+am|im|been|I've\s+been|now|officially)\s+(?:now\s+|still\s+|currently\s+|also\s+|officially\s+)?(?:a|an|the)\s+(?!big\b|huge\b|only\b|one\b|best\b|worst\b)"
       r"(?P<v>(?:[A-Za-z-]+\s+){0,2}?[a-z-]+)(?=\s+(?:now|at|for|in|with|and|but|since|these|again|here|"
       r"already|by|so|as|on|in)\b|\s*$|[.,!?;:])", "work", "job", make=_job, on_negation="end_value"),
    _r(r"^\s*(?:(?:still|now|currently|not|no\s+longer)\s+)?(?:a|an)\s+(?P<v>(?:[A-Za-z-]+\s+){0,2}?[a-z-]+)"
       r"(?=\s*(?:now|again|these\s+days|anymore|any\s+more)?\s*(?:$|[.,!?;:]))", "work", "job", make=_job,
       on_negation="end_value"),
    _r(r"\b(?:I'm|I\s+am|work\s+as|working\s+as|hired\s+as|started\s+as|joined\s+as|promoted\s+to|starting\s+as)\s+(?:a|an|the)\s+(?:[\w-]+\s+){0,2}?[\w-]+\s+(?:at|for|with)\s+"
       + _PV, "work", "employer", clean=_place, value_span=True),
    _r(r"\b(?:(?:promoted\s+to|now\s+working\s+as|hired\s+as|started\s+as|trained\s+as|qualified\s+as)\s+"
       r"(?:a\s+|an\s+|the\s+)?|(?:became|become)\s+(?:a|an)\s+)(?P<v>(?:[A-Za-z-]+\s+){0,2}?[a-z-]+)(?=\s+(?:now|at|for|in|with|and|but|since|last|"
       r"this|after)\b|\s*$|[.,!?;:])", "work", "job", make=lambda m, s: (_job if re.match(r"becam|becom", m.group(0), re.I) else _job_framed)(m, s)),
    _r(r"\b(?:I'm|I\s+am|now|became|promoted\s+to)\s+(?:now\s+)?(?:the\s+)?(?P<v>(?:head|director|vp|chief|manager|lead)"
       r"\s+of\s+[a-z]+(?:\s+[a-z]+)?)", "work", "job", make=lambda m, s: [("job", m.group("v").lower())]),
    _r(r"\b(?:landed|got|took|accepted|found|started)\s+(?:a\s+|the\s+|my\s+)?(?:new\s+)?(?:job|position|role|gig)\s+"
       r"as\s+(?:a\s+|an\s+)?(?P<v>(?:[A-Za-z-]+\s+){0,2}?[a-z-]+)(?=\s+(?:at|for|in|with|and|but)\b|\s*$|[.,!?;:])",
       "work", "job", make=_job_framed),
    _r(r"\bmy\s+(?:job|occupation|profession|role|title)\s+is\s+(?:a|an)?\s*" + _EV, "work", "job", make=_job),
    _r(r"\b(?:make\s+(?:my|a)\s+living|earn\s+(?:my|a)\s+living|work\s+(?:nights|days|weekends|shifts|part-time|full-time)|"
       r"(?:bumped|moved|stepped)\s+up)\s+(?:as|to)\s+(?:a\s+|an\s+)?" + _EV, "work", "job", make=_job_framed),
    _r(r"\b(?:for\s+a\s+living|by\s+trade|by\s+profession)\s*,\s*(?:a\s+|an\s+)?(?P<v>[\w-]+(?:\s+[\w-]+){0,2}?)"
       r"(?=\s+(?:going\s+on|for|since|at)\b|\s*[.,!]|\s*$)", "work", "job", make=_job_framed),
    _r(r"^\s*(?P<v>(?-i:[A-Z])[a-z]+(?:\s+[a-z]+)?)\s+(?:as\s+of|since|starting|from)\s+(?:this|last|today|monday|tuesday|"
       r"wednesday|thursday|friday|the|yesterday|\d)", "work", "job", make=_job),
    _r(r"^\s*(?P<v>(?-i:[A-Z])[a-z-]+(?:\s+[a-z-]+){0,2}?)\s+(?:at|for|with)\s+(?:a|an|the)\s+(?:[\w'-]+\s+){0,3}?[\w'-]+\s+here\b",
       "work", "job", make=lambda m, s: _job(m, s) if _WORK_CONTEXT.search(s) or m.group("v").split()[-1].lower() in _JOB_NOUNS
       else None),
    _r(r"^\s*(?P<v>(?-i:[A-Z])[a-z-]+(?:\s+[a-z-]+){0,2}?)\s+(?:at|for|with)\s+(?:a|an|the)\s+(?:[\w-]+\s+){0,3}?(?:agency|firm|"
       r"company|startup|start-up|bank|school|hospital|clinic|practice|studio|restaurant|cafe|café|shop|store|charity|"
       r"council|university|college|lab|factory|warehouse|hotel|office|consultancy|publisher|newspaper|magazine)\b",
       "work", "job", make=_job),
    _r(r"(?:^|[,;]\s*)(?P<v>stay-at-home\s+(?:dad|mom|mum|parent)|full-time\s+(?:mom|mum|dad|parent|carer)|"
       r"(?-i:[a-z]+\s+)?(?:executive|manager|engineer|analyst|designer|developer|consultant|nurse|teacher|accountant))"
       r"(?=\s+(?:at|for|since|going\s+on)\b|\s*[.,!])", "work", "job", make=_job_framed),
    _r(r"(?:^|[.;,(]\s*)(?:occupation|job|profession|role|title|works\s+as)\s*[:(]?\s*(?:a\s+|an\s+)?(?P<v>[A-Za-z][\w -]{1,40}?)"
       r"(?=\s*(?:$|[.;,)]))", "work", "job", make=_job_framed, subject=False),
    _r(r"(?:转行做了?|转行当了?|当上了?|升为|升到|成了|升了|就是|本人(?:是)?|是|就|做了?|当了?|干了?|转(?:去|到)?(?:当|做)?了?)(?:[一二两三四五六七八九十几\d]+来?|好几|十来)?(?:年|个月)?"
       r"(?:一名|一位|一个|一枚|个|名|枚|一)?(?:普普通通的?|普通的?|一般的?|小小的?|平平无奇的?)?(?P<v>" + _ZC
       + r"{0,8}?" + _ZH_JOB_TAIL + r"(?:顾问|主管|经理|助理|总监|专员|代表|长|组长)?)(?![" + _CJK + r"]{0,2}(?:家|那|这|的时候))",
       "work", "job", make=_job, on_negation="end_value"),
    _r(r"不(?:再)?(?:做|当|干|跑)(?P<v>" + _ZC + r"{2,6}?)了", "work", "job", op="end", on_negation="keep"),
    _r(r"(?P<v>" + _ZC + r"{2,6}?)(?:也|已经)?不(?:干|做|当)了", "work", "job", op="end", on_negation="keep"),
    _r(r"升(?:职)?(?:为|到|成|了)?(?P<v>" + _ZC + r"{2,6}?)了", "work", "job"),
    _r(r"(?:担任|出任)(?P<v>" + _ZC + r"{2,8}?)(?=$|[,.!?;:\s。]|了|一职|已|快|有|多年|[一二两三四五六七八九十\d])", "work", "job"),
    _r(r"(?<=[里中内处院司校厂行局所部])(?:任|任职)(?P<v>" + _ZC + r"{0,6}?" + _ZH_JOB_TAIL
       + r"(?:顾问|主管|经理|助理|总监|专员|代表|长|组长)?)", "work", "job"),
    _r(r"(?:做|(?<![应相])当(?![面时天初场作成真心地年晚即中下然]))(?!伴娘|伴郎|司仪|评委|志愿者|家长|观众|好人|坏人|老大|电灯泡|和事佬|主持|东道主|裁判)(?P<v>" + _ZC
       + r"{2,6}?)(?:的工作|工作)?(?=$|[,.!?;:\s。]|了)", "work", "job", confidence=0.6, make=_bare_job,
       on_negation="end_value"),
    # --- pets (key: the name; value: the species); deaths end the pet
    _r(r"\b(?:had\s+to\s+say\s+goodbye\s+to|had\s+to\s+put\s+down|lost|buried|put\s+down)\s+"
       r"(?:our\s+|my\s+)?(?:(?:dog|cat|bunny|rabbit|hamster|pup|puppy|kitty)\s+)?(?P<v>(?-i:[A-Z])[a-z]+)\b"
       r"(?!\s+(?:Street|Road))|\b(?:had\s+to\s+)?put\s+(?P<w>[A-Za-z][a-z]+)\s+(?:down|to\s+sleep)\b",
       "pet", "{slug}", make=lambda m, s: _pet_end(m.group("v") or m.group("w")),
       op="end", on_negation="drop"),
    _r(r"(?:^|(?<=\s))(?!(?:My|Our|His|Her|The)\b)(?P<v>(?-i:[A-Z])[a-z]+)\s+(?:passed\s+away|died|was\s+put\s+down|"
       r"crossed\s+the\s+rainbow\s+bridge|didn't\s+make\s+it)", "pet", "{slug}",
       make=lambda m, s: ([] if re.fullmatch(_KIN, m.group("v"), re.I) else [(_slug(m.group("v")), "")]),
       op="end", on_negation="drop", subject=False),
    _r(r"(?:^|(?<=[,.!?;:\s]))(?P<v>(?!" + _ZH_KIN + r")" + _ZC + r"{1,4}?)(?:昨天|前天|今天|上周|早上|昨晚|前几天|前两天|上个月|这周|上礼拜|刚刚|刚)?"
       r"(?:去世了|去世|死了|走了|没了|病死了|被车撞了|送人了|送走了|送给[^,。]{1,6}?了|走丢了|丢了|回喵星了?|去喵星了?|回汪星了?|去汪星了?|"
       r"去了?天堂|当天使了)", "pet", "{slug}",
       make=lambda m, s: ([] if re.search(r"我|他|她|人|家|老伴", m.group("v")) or not could_be_a_name(m.group("v"))
                          else [(_slug(m.group("v")), "")]),
       op="end", on_negation="drop", subject=False),
    _r(r"\b(?:(?:don't|do\s+not|no\s+longer)\s+have|(?:gave|giving)\s+away|rehomed|rehoming)\s+(?:my\s+|our\s+)?"
       r"(?:(?:dog|cat|bunny|rabbit|hamster|parrot|bird|fish|turtle|tortoise)\s+)?(?P<v>(?-i:[A-Z])[a-z]+)\b", "pet", "{slug}",
       make=lambda m, s: _pet_end(m.group("v")), op="end", on_negation="keep"),
    _r(r"\b(?:my|our)\s+(?:old\s+|sweet\s+|beloved\s+|poor\s+)?" + _EN_SPECIES + r"\s+(?:passed\s+away|died|was\s+put\s+down|"
       r"didn't\s+make\s+it)", "pet", "", make=lambda m, s: [(_slug(_species(m.group("s"))), "")], op="end",
       on_negation="drop", subject=False),
    _r(r"(?:我的|我家的?|家里的)" + _ZH_SPECIES + r"(?:昨天|前天|今天|上周)?(?:去世了|死了|走了|没了)", "pet", "",
       make=lambda m, s: [(_slug(_species(m.group("s"))), "")], op="end", on_negation="drop", subject=False),
    _r(r"\b(?:my|our)\s+" + _EN_SPECIES + r"'s\s+name\s+is\s+(?P<n>(?-i:[A-Z])[\w'-]*)", "pet", "", make=_pet,
       subject=False, on_negation="drop"),
    _r(r"\b(?:have|own|got|adopted|rescued|bought|getting|just\s+got|have\s+got|brought\s+home)\s+(?:a|an|one|two|"
       r"three|\d)\s+(?!hot\s)(?:[a-z]+\s+){0,2}" + _EN_SPECIES + r"\b(?:\s*,?\s+(?:named|called)\s+"
       r"(?P<n>(?-i:[A-Z])[\w'-]*))?(?:(?:\s+(?:for|from)\s+[^,.!?;]{1,30}?)?\s*,\s*(?P<n2>(?-i:[A-Z])[\w'-]*)"
       r"(?:\s+and\s+(?P<n3>(?-i:[A-Z])[\w'-]*))?)?", "pet", "", make=_pet, on_negation="drop"),
    _r(r"\b(?:two|three|four|\d|the|my|our)\s+(?:[\w-]+\s+)?" + _EN_SPECIES + r"\s*[:,]\s*(?P<n>(?-i:[A-Z])[\w'-]*)\s*(?:,|and|&)\s*(?P<n2>(?-i:[A-Z])[\w'-]*)",
       "pet", "", make=_pet, on_negation="drop", subject=False),
    _r(r"\b(?:my|our)\s+" + _EN_SPECIES + r"\s+(?P<n>(?-i:[a-z])[a-z'-]+)\b(?=\s+(?:is|was|has|had|loves|hates|ate|keeps|just|"
       r"always|got|won't|can't|sleeps|likes))", "pet", "",
       make=lambda m, s: None if is_dictionary_word(m.group("n")) else _pet(m, s), subject=False, on_negation="drop"),
    _r(r"\bmeet\s+(?P<n>(?-i:[A-Z])[\w'-]*)[^\w.!?]*\s*(?:,\s*)?(?:my|our)\s+(?:new\s+|little\s+|baby\s+)?" + _EN_SPECIES + r"\b",
       "pet", "", make=_pet, subject=False, on_negation="drop"),
    _r(r"(?P<n>(?-i:[A-Z])[a-z]+)(?:'s|\s+is)\s+(?:a|an)\s+(?:(?-i:[a-z]+)\s+)?" + _EN_SPECIES + r"\b", "pet", "",
       make=lambda m, s: None if m.group("n").lower() in _NOT_NAMES | {"it", "she", "he", "this", "that", "there"} else _pet(m, s),
       subject=False, on_negation="drop"),
    _r(r"\b(?:the|my|our)\s+" + _EN_SPECIES + r"(?:'s|\s+is)\s+(?:called|named)\s+(?P<n>(?-i:[A-Z])[\w'-]*)", "pet", "",
       make=_pet, subject=False, on_negation="drop"),
    _r(r"\bnamed\s+(?:the|our|my)\s+(?:new\s+)?" + _EN_SPECIES + r"\s+(?:after\s+[^:.!?]{1,40}?[:,—-]\s*)?(?P<n>(?-i:[A-Z])[\w'-]*)",
       "pet", "", make=_pet, subject=False, on_negation="drop"),
    _r(r"(?P<n>(?-i:[A-Z])[\w'-]*|(?:^|(?<=[\s,]))(?-i:[a-z])[a-z'-]+)\s*\(\s*(?:(?:my|our|a|an)\s+)?(?:[\w-]+\s+)?" + _EN_SPECIES + r"\b[^()]{0,30}\)", "pet", "", make=_pet,
       subject=False, on_negation="drop"),
    _r(r"\b(?:this\s+is|meet|say\s+hi\s+to)\s+(?P<n>(?-i:[A-Z])[\w'-]*(?:\s+(?-i:[A-Z])[\w'-]*){0,2})\b(?=[^.!?]*(?:[🐶🐕🐱🐈🐰🐇🐹🐢🐟🐠🦜]|\b"
       + _EN_SPECIES + r"\b))", "pet", "",
       make=lambda m, s: [(_slug(m.group("n")), sp)] if (sp := _species_in(s[m.end():])) else None, subject=False,
       on_negation="drop"),
    _r(_EN_SPECIES + r"\b[^.!?]{0,40}?\b(?:we've|we\s+have|I've|I\s+have|we|I|we\s+have\s+just|we've\s+just)\s+(?:called|named)\s+"
       r"(?:him|her|it|them\s+)?(?P<n>(?-i:[A-Z])[\w'-]*)", "pet", "", make=_pet, subject=False, on_negation="drop"),
    _r(r"\bnew\s+" + _EN_SPECIES + r"\s*[:(]\s*(?P<n>(?-i:[A-Z])[\w'-]*)", "pet", "", make=_pet, subject=False,
       on_negation="drop"),
    _r(r"(?:^|[:,]\s*|\b(?:and|have|got|with)\s+)(?:a|an|my|our)\s+(?:(?-i:[a-z]+)\s+)?" + _EN_SPECIES
       + r"\s*,?\s+(?:called|named)\s+(?P<n>(?-i:[A-Z])[\w'-]*)", "pet", "", make=_pet, subject=False, on_negation="drop"),
    _r(r"(?P<n>(?-i:[A-Z])[\w'-]*(?:\s+(?-i:[A-Z])[\w'-]*)?)\s*,\s*(?:my|our)\s+(?:[a-z-]+\s+){0,3}" + _EN_SPECIES
       + r"\b", "pet", "", make=_pet, subject=False, on_negation="drop"),
    _r(r"\bthe\s+" + _EN_SPECIES + r"\s*,\s*(?P<n>(?-i:[A-Z])[a-z][\w'-]*)\s*,", "pet", "", make=_pet, subject=False,
       on_negation="drop"),
    _r(r"\b(?:my|our)\s+(?!hot\s)(?:[a-z]+\s+)?" + _EN_SPECIES + r"\s*,?\s+(?P<n>(?-i:[A-Z])[a-z][\w'-]*)", "pet", "",
       make=_pet, subject=False, on_negation="drop"),
    _r(r"(?:家里的|我家的?|我的|家里|我们家的?|(?:有|养了?|养着)(?:一|两|几)?(?:只|条|个|头|匹))?" + _ZH_SPECIES + r"(?:的名字)?(?:吧|呢|啊|呀)?[,]?\s*(?:它|他|她)?(?:取名叫|取名为|取名|起名叫|起名|叫做|名叫|叫)(?P<n>" + _ZC
       + r"{1,4}?)(?=$|[,.!?;:\s。]|了|,|三|两|一|已经|今年|很)", "pet", "", make=_pet, on_negation="drop"),
    _r(_ZH_SPECIES + r"\s*\(\s*(?:叫)?(?P<n>" + _ZC + r"{1,4}?)(?:(?:和|、)(?P<n2>" + _ZC + r"{1,4}?))?\s*\)", "pet", "",
       make=_pet, on_negation="drop", subject=False),
    _r(r"(?:我的|我家的?|家里的?)\s*" + _EN_SPECIES + r"\s*(?:叫|名叫|叫做)\s*(?P<n>[A-Za-z][\w'-]*|" + _ZC + r"{1,4})", "pet", "",
       make=_pet, on_negation="drop"),
    _r(r"(?:主子|毛孩子|宝贝|崽子?|猫主子|狗子)(?:叫|名叫|叫做)(?P<n>" + _ZC + r"{1,4}?)[,].{0,6}?" + _ZH_SPECIES, "pet", "",
       make=_pet, on_negation="drop"),
    _r(r"(?:我家|我们家|家里)(?:的)?(?P<n>" + _ZC + r"{1,4}?)是(?:只|一只|条|一条|个)?(?:[^,，。]{0,8}?的)?" + _ZH_SPECIES, "pet", "", make=_pet,
       on_negation="drop"),
    # "家里俩小祖宗：布丁是只垂耳兔，可乐是虎皮鹦鹉": named pets listed in a message about one's own animals.
    _r(r"(?:^|(?<=[：:,，;；\s]))(?P<n>" + _ZC + r"{1,4}?)是(?:只|一只|条|一条|个|一个)?" + _ZH_SPECIES + r"(?=$|[,，。;；!！]|\s)", "pet", "",
       make=lambda m, s: _pet(m, s) if re.search(r"我家|我们家|家里|养|主子|毛孩子|小祖宗|崽", s) and could_be_a_name(m.group("n"))
       else None, on_negation="drop", subject=False),
    _r(_ZH_SPECIES + r"(?:一只|一条|一个)[,]?\s*(?:名叫|叫做|叫|取名叫|取名)(?P<n>" + _ZC + r"{1,4}?)(?=$|[,.!?。]|刚|今年|已经)", "pet", "",
       make=_pet, on_negation="drop"),
    _r(r"(?P<n>" + _ZC + r"{1,4}?)是我(?:家|们家)?的" + _ZH_SPECIES, "pet", "", make=_pet, on_negation="drop"),
    _r(r"(?:我家|我们家|家里)(?:的)?(?:那只|这只|那条|这条|养的)?" + _ZH_SPECIES + r"(?P<n>" + _ZC + r"{2,3}?)(?=在|又|今天|昨天|天天|每天|特别|很|最近|总是|老是|今年|已经|都|也|还|[一二两三四五六七八九十\d])", "pet",
       "", make=_pet, on_negation="drop"),
    _r(r"(?:我家|我们家|家里)(?:的)?(?:那只|这只|那条|这条|养的)" + _ZH_SPECIES + r"(?=[^,，。]{0,8}(?:养|岁|年|月))", "pet", "",
       make=lambda m, s: [(_slug(_species(m.group("s"))), _species(m.group("s")))], on_negation="drop"),
    _r(r"(?:^|(?<=[,，。!！\s]))" + _ZH_SPECIES + r"(?P<n>" + _ZC + r"{2,3}?)(?=最近|又|今天|昨天|这几天|天天|每天|总是|老是|今年|已经)", "pet",
       "", make=lambda m, s: _pet(m, s) if could_be_a_name(m.group("n")) and not re.search(_ZH_KIN, m.group("n")) else None,
       on_negation="drop"),
    _r(r"(?:一|两)(?:只|条)" + _ZH_SPECIES + r"[,]\s*(?:它)?(?:名字叫|名叫|叫做|叫)(?P<n>" + _ZC + r"{1,4}?)(?=$|[,.!?。]|今年|已经|刚)",
       "pet", "", make=_pet, on_negation="drop"),
    # "养了一只叫豆豆的柯基": the name before the species.
    _r(r"(?:养了|养着|养)(?:一|两|二|三|几)?(?:只|条|个|头|匹)?(?:叫|名叫|叫做)(?P<n>" + _ZC + r"{1,4}?)的" + _ZH_SPECIES, "pet", "",
       make=_pet, on_negation="drop"),
    _r(r"(?:养了|养着|养|有)(?:一|两|二|三|几)?(?:只|条|个|头|匹)" + _ZH_SPECIES
       + r"(?:,?\s*(?:它|他|她)?(?:取名叫|取名|起名叫|起名|叫|名叫|名字叫|叫做)(?P<n>" + _ZC + r"{1,6}))?", "pet", "", make=_pet_zh,
       on_negation="drop"),
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

# One value per meaning across languages, so "我吃素" confirms "I'm vegetarian" rather than
# superseding it.
_CANONICAL_VALUES = {"吃素": "vegetarian", "素食": "vegetarian", "纯素": "vegan", "蛋奶素": "vegetarian", "全素": "vegan"}

# --- dates -------------------------------------------------------------------------------------

_WORD_NUMS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
              "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple of": 2, "a couple of": 2,
              "few": 3, "a few": 3, "several": 3}
_ZH_DIGITS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_MONTH_NAMES = frozenset("january february march april may june july august september october november december "
                         "jan feb mar apr jun jul aug sep sept oct nov dec".split())
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_UNIT_DAYS = {"年": 365, "day": 1, "night": 1, "week": 7, "month": 30, "天": 1, "晚": 1, "周": 7, "星期": 7, "礼拜": 7, "月": 30}
_EN_COUNT = r"(\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|(?:a\s+)?couple\s+of|(?:a\s+)?few)"
_DUR_EN = re.compile(r"\b(?:for|back\s+in)\s+(?:the\s+next\s+|another\s+)?" + _EN_COUNT + r"\s+(day|night|week|month)s?\b|"
                     r"\b" + _EN_COUNT + r"(?:\s+|-)(day|night|week|month)s?(?:\s+(?:in|at|there|away|of)\b|(?=-?\s*(?:long\s+)?"
                     r"(?:\w+\s+)?(?:trip|course|training|conference|stay|visit|holiday|vacation|workshop|retreat|assignment)))")
_DUR_ZH = re.compile(r"(\d+|[一二两三四五六七八九十半]+)\s*个?(天|晚|周|星期|礼拜|月|年)")
_MON = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_UNTIL_EN = re.compile(r"\b(?:until|till|til|through|thru|back\s+on|back\s+by|back)\s+(?:the\s+)?(?:(\d{4})-(\d{1,2})-"
                       r"(\d{1,2})|" + _MON + r"\s+(\d{1,2})(?:st|nd|rd|th)?|(\d{1,2})(?:st|nd|rd|th)?(?:\s+(?:of\s+)?"
                       + _MON + ")?|(" + "|".join(_WEEKDAYS) + r"))\b")
_UNTIL_ZH = re.compile(r"(?:到|至)(?:(\d{1,2}|[一二三四五六七八九十]+)月)?(\d{1,2}|[一二三四五六七八九十]+)[日号]|"
                       r"(?:周|星期|礼拜)([一二三四五六日天])(?:回|返回|回来|结束)")
_NEXT_WEEK = re.compile(r"\bnext\s+week\b|下周|下个星期|下星期|下礼拜")
_THIS_WEEK = re.compile(r"\bthis\s+week(?:end)?\b|\ball\s+week\b|这周|本周|这个星期|这星期|这礼拜|这个?周末")
_SINCE_WEEKDAY = re.compile(r"\bsince\s+(?:last\s+)?(" + "|".join(_WEEKDAYS) + r")\b", re.I)
_HELD_FOR = re.compile(r"\bfor\s+(?:the\s+(?:past|last)\s+)?(?:about\s+|almost\s+|nearly\s+|over\s+|around\s+|roughly\s+)?" + _EN_COUNT + r"\s+(year|month|week)s?\b|"
                       r"(\d+|[一二两三四五六七八九十]+)\s*(?:个)?(年|月)(?:多)?了?", re.I)
_SHORT_STAY = re.compile(r"\bfor\s+(?:a|an|the|one|two|three|four|five|six|\d+|a\s+few|a\s+couple\s+of)\s+"
                         r"(?:days?|nights?|weeks?|weekend)\b", re.I)


def _zh_num(text: str) -> int:
    if text.isdigit():
        return int(text)
    if "十" in text:
        tens, _, ones = text.partition("十")
        return _ZH_DIGITS.get(tens, 1) * 10 + _ZH_DIGITS.get(ones, 0)
    return _ZH_DIGITS.get(text, 0)


def _en_num(text: str) -> int:
    return int(text) if text.isdigit() else _WORD_NUMS.get(re.sub(r"\s+", " ", text.lower()), 1)


def _month_day(month: int, day: int, today: date) -> date | None:
    try:
        d = date(today.year, month, day)
        return d if d >= today else date(today.year + 1, month, day)
    except ValueError:
        return None


_IN_MONTH = re.compile(r"\b(?:in|since|back\s+in|last|early|late|mid|around)\s+(?:-\s*)?(january|february|march|april|may|"
                       r"june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept?|"
                       r"oct|nov|dec)\b(?!\s+\d)", re.I)


_ZH_MONTH = re.compile(r"(今年|去年)?([一二三四五六七八九十]{1,2}|\d{1,2})月份?(?![一二三四五六七八九十\d]+[日号])(?:初|中|底)?")


def _event_day(sentence: str, written: date, *, temporary: bool, held: bool = True) -> date | None:
    """The day the statement's change happened (or, for a stay, began)."""
    if m := re.search(r"大前天", sentence):
        return written - timedelta(days=3)
    if temporary and _NEXT_WEEK.search(sentence):
        return written + timedelta(days=7 - written.weekday())
    if temporary and re.search(r"\bthis\s+weekend\b|这个?周末", sentence, re.I):
        return written + timedelta(days=max(0, 5 - written.weekday()))
    if m := _SINCE_WEEKDAY.search(sentence):
        target = _WEEKDAYS.index(m[1].lower())
        return written - timedelta(days=(written.weekday() - target) % 7 or 7)
    if not temporary and (m := _ZH_MONTH.search(sentence)):
        month = _zh_num(m[2]) if not m[2].isdigit() else int(m[2])
        if 1 <= month <= 12:
            year = written.year - (1 if m[1] == "去年" or month > written.month else 0)
            return date(year, month, 1)
    sentence = re.sub(r"\b(years?|months?|weeks?|days?)\s+back\b", r"\1 ago", sentence, flags=re.I)
    if m := re.search(r"\b(early|mid|late|start\s+of|beginning\s+of|end\s+of)?\s*last\s+month\b", sentence, re.I):
        first = (written.replace(day=1) - timedelta(days=1)).replace(day=1)
        part = (m[1] or "").lower()
        if part.startswith(("late", "end")):
            return written.replace(day=1) - timedelta(days=1)
        return first + timedelta(days=14) if part == "mid" else first
    if re.search(r"\b(?:a|one)\s+week\s+ago\b", sentence, re.I):
        return written - timedelta(days=7)
    if m := re.search(r"\bthe\s+(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\s+before\s+last\b", sentence, re.I):
        target = _WEEKDAYS.index(m[1].lower())
        return written - timedelta(days=written.weekday() - target + 14)
    for mention in find_time_mentions(sentence, written):
        if mention.day < written or temporary:
            return mention.day
    if not temporary and (m := _IN_MONTH.search(sentence)):
        # "moved back to Cork in March", "been back since april": the last such month, its first day.
        month = _MONTHS.index(m[1][:3].lower()) + 1
        year = written.year if month <= written.month else written.year - 1
        return date(year, month, 1)
    if held and not temporary and (m := _HELD_FOR.search(sentence)):
        # "been living in Lyon for six years", "在深圳生活了五年了": the state has held that long.
        if m[1]:
            n, unit = _en_num(m[1]), m[2].lower()
        else:
            n, unit = _zh_num(m[3]), {"年": "year", "月": "month"}[m[4]]
        if unit == "year":
            try:
                return written.replace(year=written.year - n)
            except ValueError:
                return written - timedelta(days=365 * n)
        return written - timedelta(days=(30 if unit == "month" else 7) * n)
    return None


def _trip_until(sentence: str, created: datetime, start: date) -> datetime | None:
    """End of a stay: an n-day stay from S covers S … S+n−1."""
    text, today = sentence.lower(), created.date()
    next_week = bool(_NEXT_WEEK.search(text))
    if next_week:
        start = today + timedelta(days=7 - today.weekday())
    if m := re.search(r"\b(?:from|starting|leaving|flying\s+out)\s+(?:this\s+|next\s+|on\s+)?(" + "|".join(_WEEKDAYS) + r")\b", text):
        start = today + timedelta(days=(_WEEKDAYS.index(m[1]) - today.weekday()) % 7 or 7)  # "from Monday for four days"
    end: date | None = None
    if m := _DUR_EN.search(text):
        count, unit = (m[1], m[2]) if m[1] else (m[3], m[4])
        end = start + timedelta(days=_en_num(count) * _UNIT_DAYS[unit] - 1)
    elif m := _DUR_ZH.search(text):
        if re.search(r"(?:玩|待|住|呆)了", text) and re.search(r"回来|回家|结束", text):
            end = today - timedelta(days=1) if "昨天" in text else today  # a stay that is over
        else:
            count = 0.5 if m[1] == "半" else _zh_num(m[1])
            end = start + timedelta(days=max(int(count * _UNIT_DAYS[m[2]]), 1) - 1)
    elif m := _UNTIL_EN.search(text):
        if m[1]:
            try:
                end = date(int(m[1]), int(m[2]), int(m[3]))
            except ValueError:
                end = None
        elif m[4]:
            end = _month_day(_MONTHS.index(m[4]) + 1, int(m[5]), today)
        elif m[6]:
            month = _MONTHS.index(m[7]) + 1 if m[7] else today.month
            end = _month_day(month, int(m[6]), today)
            if end and not m[7] and end < today:
                end = None
        elif m[8]:
            end = today + timedelta(days=(_WEEKDAYS.index(m[8]) - today.weekday()) % 7)
    elif m := _UNTIL_ZH.search(text):
        if m[3]:
            end = today + timedelta(days=(_ZH_WEEKDAYS[m[3]] - today.weekday()) % 7)
        else:
            end = _month_day(_zh_num(m[1]) if m[1] else today.month, _zh_num(m[2]), today)
    elif next_week:
        end = start + timedelta(days=6)
    elif m := re.search(r"\bfor\s+the\s+(long\s+)?weekend\b|这个?周末", text):
        saturday = start + timedelta(days=(5 - start.weekday()) % 7)
        end = saturday + timedelta(days=2 if m[1] else 1)
    elif _THIS_WEEK.search(text):
        end = today + timedelta(days=6 - today.weekday())
    elif re.search(r"\blast\s+weekend\b|上(?:个)?周末", text):
        end = start + timedelta(days=1)
    elif re.search(r"\b(?:got|came|just)\s+back\b|回来了|刚回来", text):
        end = today
    elif m := re.search(r"\b(?:until|till|til|through|over)\s+(christmas|xmas|new\s+year)|(?:待到|住到|呆到)(?:过年|春节|元旦)", text):
        end = _month_day(12, 25, today) if m[1] and m[1].startswith(("christmas", "xmas")) else _month_day(1, 1, today)
    return datetime.combine(end, time(23, 59, 59), tzinfo=created.tzinfo) if end else None


def _time_scope(sentence: str, start: int, end: int) -> str:
    """The words that date a statement: its own clause, plus a fronted time clause before it
    ("Last month, I moved …"), so "back in San Diego, sold the old place in June" dates the
    move by its own clause, not by the sale."""
    begin = _clause_start(sentence, start)
    stops = [i for i in (sentence.find(ch, end) for ch in ",;、—") if i >= 0]
    scope = sentence[begin:min(stops) if stops else len(sentence)]
    if stops and re.match(r"\s*(?:已经)?(?:来了|住了|待了|呆了|在这(?:边|里)?(?:住|待)?了)", sentence[min(stops) + 1:]):
        scope += sentence[min(stops):]  # "人在广州，来了六年了": how long it has held, said after it
    if begin > 0:
        before = sentence[_clause_start(sentence, begin - 1):begin - 1]
        mentions = find_time_mentions(before, date(2000, 1, 1))
        rest = before
        for mention in mentions:
            rest = rest.replace(mention.text, " ")
        size = len(re.findall(r"[A-Za-z0-9']+", rest)) + len(re.findall("[" + _CJK + "]", rest)) / 2
        if mentions and size <= 1:
            scope = before + ", " + scope
    return scope


def _observed_at(sentence: str, written_at: datetime, *, temporary: bool, held: bool = True) -> datetime:
    """When the stated change happened: "I moved here last month" happened last month. Only
    past times count for lasting facts; a trip may start in the future ("next week")."""
    day = _event_day(sentence, written_at.date(), temporary=temporary, held=held)
    if day is None or (not temporary and day >= written_at.date()):
        return written_at
    return datetime.combine(day, time(0), tzinfo=written_at.tzinfo)


# --- dialogue: bare answers to the assistant's questions -----------------------------------------

_QA_SLOTS = [
    (re.compile(r"\bwhich\s+(?:team|company|firm|club|employer|hospital|school|studio|agency)\b|"
                r"\bwhere\s+(?:do|will|are)\s+you\s+(?:work|working)\b|哪家(?:公司|律所|医院|学校|单位|店|银行|企业|机构)?|哪个公司|什么公司", re.I),
     "work", "employer"),
    (re.compile(r"\bwhich\s+city\b|\bwhere\s+(?:do|did)\s+you\s+(?:live|move)\b|哪个城市|住哪|搬到哪", re.I),
     "location", "home_city"),
    (re.compile(r"\bwhat(?:'s|\s+is)\s+your\s+name\b|怎么称呼|叫什么名字", re.I), "profile", "name"),
]
_PET_NAMES_Q = re.compile(r"\bwhat\s+(?:are|is)\s+(?:their|his|her|its)\s+names?\b|\bnames?\?|\bcalled\?|叫什么|"
                          r"\bnamed\s+(?:them|him|her|it)\b", re.I)
_BARE_ANSWER = re.compile(r"^\s*(?:the\s+)?(?P<v>(?-i:[A-Z0-9])[\w&'.-]*(?:\s+(?-i:[A-Z0-9&])[\w&'.-]*){0,3})"
                          r"\s*[!.]*\s*$|^\s*(?P<z>[" + _CJK + r"]{2,8})\s*[!.。!]*\s*$", re.I)
_ONE_NAME = re.compile(r"^\s*(?:(?:his|her|its)\s+name\s+is\s+|it's\s+|we\s+(?:named|call)\s+(?:him|her|it)\s+)?"
                       r"(?P<a>(?-i:[A-Z])[a-z]+)\s*(?:[!.,]|\s+(?:lol|haha|lmao)\b|$)")
_NAME_LIST = re.compile(r"^\s*(?P<a>(?-i:[A-Z])[a-z]+)\s*(?:,|and|&)\s*(?P<b>(?-i:[A-Z])[a-z]+)\s*[!.]*\s*(?:[^\w\s]\s*)*$")


_CALL_YOU_Q = re.compile(r"怎么称呼|叫你什么|你叫什么|你的名字|\bwhat\s+(?:should|can|do)\s+I\s+call\s+you\b|"
                         r"\bwhat'?s\s+your\s+name\b|\bhow\s+should\s+I\s+address\s+you\b", re.I)
_CALLED_ANSWER = re.compile(r"^\s*(?:叫我|我叫|我是|call\s+me\s+|it's\s+|I'm\s+)?(?:(?P<v>(?-i:[A-Z])[a-z]+)|(?P<z>" + _ZC
                            + r"{1,4}?))\s*(?:就好|就行|就可以|即可|便可|吧|is\s+fine|works|please)?\s*(?=$|[,.!。，！]|\s)", re.I)
_ADDRESSED = re.compile(r"\b(?:hi|hey|hello|thanks|thank\s+you|welcome\s+back|again|morning|evening)\s*,?\s+"
                        r"(?P<n>(?-i:[A-Z])[a-z]+)\b|,\s*(?P<n2>(?-i:[A-Z])[a-z]+)\s*[!.?]", re.I)
_NAME_FIX = re.compile(r"^\s*(?:(?:it's|its|actually|no|nope|nah|um+|uh+|ah|oh|ha+|haha|lol)[\s,!.]*)*(?P<v>(?-i:[A-Z])[a-z]+)\s*[,.!]?\s*"
                       r"(?:please|actually|if\s+you\s+don't\s+mind|not\s+(?-i:[A-Z])[a-z]+|is\s+fine|works)\b", re.I)
_WHERE_NOW_Q = re.compile(r"你(?:现在)?(?:住|在)[^,?？]{1,6}(?:对吧|吗|是吧|吧)|\bwhere\s+(?:are|do)\s+you\s+(?:living|based|live|now|staying\s+these\s+days)|\bare\s+you\s+"
                          r"still\s+(?:in|living\s+in|based\s+in)\b|\bwhich\s+city\b|哪个城市|在哪(?:个城市|里|儿)?(?:住|生活|工作)?|"
                          r"住哪|现在在哪", re.I)
_SINGLE_Q = re.compile(r"(?:还是)?单身(?:吧|吗|嘛)|\bare\s+you\s+still\s+single\b|\bstill\s+single\?", re.I)
_PARTNER_Q = re.compile(r"有(?:对象|男朋友|女朋友|另一半)吗|\bare\s+you\s+(?:seeing|dating)\s+(?:anyone|someone)\b|"
                        r"\bdo\s+you\s+have\s+a\s+(?:partner|boyfriend|girlfriend)\b", re.I)
_WHAT_JOB_Q = re.compile(r"\bwhat\s+do\s+you\s+do(?:\s+for\s+(?:work|a\s+living))?\b|\bwhat's\s+your\s+(?:job|role|title)\b|"
                         r"做什么工作|干什么的|什么职业", re.I)
_WHERE_WORK_Q = re.compile(r"\bstill\s+(?:at|with|working\s+(?:at|for))\b|\bwhere\s+(?:do|are)\s+you\s+(?:work|working)\b|"
                           r"\bwho\s+do\s+you\s+work\s+for\b|\bwhich\s+(?:company|firm|employer)\b|还在.{1,6}(?:上班|工作|吗)|"
                           r"在哪(?:家公司|上班|工作)|哪家公司", re.I)
_PLACE_ANSWER = re.compile(r"^\s*(?:\b(?:nope|no|yes|yeah|yep|yup|still|not\s+anymore)\b[,.!]*\s*)?(?:(?:I'm|we're|I\s+live|we\s+live)\s+)?"
                           r"(?:in\s+|still\s+in\s+)?(?P<v>[A-Za-z\u00C0-\u024F][\w\u00C0-\u024F'-]*(?:\s+(?-i:[A-Z])[\w'-]*){0,2}|"
                           r"[" + _CJK + r"]{2,6}?)(?=\s*(?:$|[,.!。]|now\b|since\b|for\b|these\s+days\b|去年|今年|了|呢|啊))", re.I)


def _answer_facts(question: str, answer: str, earlier: list[str], message: Message) -> list[ExtractedFact]:
    answer = _prepare(answer).strip()

    def fact(namespace: str, key: str, value: str) -> ExtractedFact:
        return ExtractedFact(namespace=namespace, key=key, value=value, confidence=0.9,
                             evidence_message_ids=[message.message_id], observed_at=message.created_at)

    if (m := _ADDRESSED.search(question)) and (r := _NAME_FIX.match(answer)) \
            and r["v"] != (m["n"] or m["n2"]) and _may_be_given_name(r["v"]):
        return [fact("profile", "name", r["v"])]  # "Good to see you, Sam!" - "Samira, please"
    if _CALL_YOU_Q.search(question) and (m := _CALLED_ANSWER.match(answer)) and (
            (m["v"] and _may_be_given_name(m["v"])) or (m["z"] and could_be_a_name(m["z"]))):
        return [fact("profile", "name", m["v"] or m["z"])]  # "我该怎么称呼你？" - "Kevin 就好"
    if _CALL_YOU_Q.search(question) and (m := re.search(r"\b((?-i:[A-Z])[a-z]+)(?:'s|\s+is)\s+(?:fine|good|ok|okay|great)\b|"
                                                         r"\bcall\s+me\s+((?-i:[A-Z])[a-z]+)", answer)):
        return [fact("profile", "name", m[1] or m[2])]  # "…But Bo's fine for you"
    if _PET_NAMES_Q.search(question) and (m := _NAME_LIST.match(answer)):
        said = [_species(s) for text in earlier for s in re.findall(r"\b" + _EN_SPECIES + r"\b", text, re.I)]
        names = [m["a"], m["b"]]
        if len(said) == len(names):
            return [fact("pet", _slug(n), s) for n, s in zip(names, said, strict=True)]
        if len(set(said)) == 1:  # "two goldfish" … "Salt and Pepper"
            return [fact("pet", _slug(n), said[0]) for n in names]
        return []
    if "叫什么" in question and (m := re.match(r"^(?:它|他|她)?(?:叫|名字叫|就叫)?(?P<z>" + _ZC + r"{1,4}?)(?=$|[,.!。]|哈|呀|啦)",
                                                  answer)) and m["z"] not in _PRONOUNS:
        said = [_species(s) for text in earlier[-3:] for s in re.findall(_ZH_SPECIES, text)]
        if len(set(said)) == 1:
            return [fact("pet", _slug(m["z"]), said[0])]
    if _PET_NAMES_Q.search(question) and re.search(r"\b(?:his|her|its)\s+names?\b|\b(?:your|the)\s+\w+\s+called\?|叫什么",
                                                    question, re.I) \
            and (m := _ONE_NAME.match(answer)) and m["a"].lower() not in _NOT_NAMES:
        said = [_species(s) for text in [*earlier[-3:], question] for s in re.findall(r"\b" + _EN_SPECIES + r"\b", text, re.I)]
        if len(set(said)) == 1:
            return [fact("pet", _slug(m["a"]), said[0])]
        return []
    if _PARTNER_Q.search(question) and (m := re.match(r"^\s*(?:(?P<yes>有|有的|yes|yeah|yep|yup)|(?P<no>没有|没|no|nope))\b",
                                                        answer, re.I)):
        return [fact("relationship", "status", "in a relationship" if m["yes"] else "single")]
    if re.search(r"\bbudget\b|[$€£¥]\s?\d|预算", question, re.I) and \
            (m := re.search(_MONEY_MARKED + r"|^\s*(?:砍到|降到|涨到|加到|提到|改成|调到|变成|还是|缩到)?\s*(?P<z>"
                            + _ZH_MONEY.replace("?P<v>", "?:") + r")\s*(?:了|啦)?\s*[.!。]*\s*$", answer)) and \
            not _hypothetical(answer, m.start()):
        return [fact("budget", _purpose(question, answer), (m.group("v") or m.group("z") or "").strip())]
    if _has_cjk(answer):
        # "早不在了，现在在小米", "不是在北京，是在天津": the answer's last clause says where things are now.
        answer = re.sub(r"^.*?(?:不在了?|没在了?|不是)[^,]*,\s*(?:是|现在|目前|如今)?(?:在)?", "", answer)
        answer = re.sub(r"^(?:免贵)?姓.[,]\s*", "", answer)  # "免贵姓陈，陈建国": the name follows
    if _WHAT_JOB_Q.search(question) and (m := re.match(r"^\s*(?:I'm\s+|I\s+am\s+)?(?:a\s+|an\s+)?(?P<v>[A-Za-z][\w -]{1,40}?)"
                                                     r"(?=\s+(?:at|for|in|with)\b|\s*[.,!]|\s*$)", answer)):
        job = _job_framed(m, answer)
        if job:
            return [fact("work", "job", job[0][1])]
    if _WHERE_WORK_Q.search(question) and (m := _PLACE_ANSWER.match(answer)):
        employer = _place(m["v"]) or _lowercase_org(m["v"]) if not _has_cjk(m["v"]) else _org(m["v"])
        if employer and employer.lower() not in {"yes", "no", "yeah", "nope", "still"}:
            return [fact("work", "employer", employer)]
    if _WHERE_NOW_Q.search(question) and (m := _PLACE_ANSWER.match(answer)):
        place = _place(m["v"]) if not _has_cjk(m["v"]) else _clean(m["v"], place=True)
        if place:
            return [fact("location", "home_city", place)]
    if _WHAT_JOB_Q.search(question) and (m := re.match(r"^\s*(?:我是|我|做|当|在做)?(?:一名|一个)?(?P<z>[" + _CJK + r"]{2,8}?)"
                                                     r"(?=$|[,.!。]|呢|啊|哈)", answer)):
        return [fact("work", "job", m["z"])]
    if _SINGLE_Q.search(question) and (m := re.match(r"^\s*(?:(?P<no>不是了?|早就不是了?|not\s+anymore|nope|no)|(?P<yes>是的?|对|yes|yeah|yep))",
                                                     answer, re.I)):
        return [fact("relationship", "status", "single", ) if m["yes"] else
                ExtractedFact(namespace="relationship", key="status", value="single", operation="end", confidence=0.9,
                              evidence_message_ids=[message.message_id], observed_at=message.created_at)]
    for pattern, namespace, key in _QA_SLOTS:
        first_clause = re.split(r"[,，]", answer)[0]
        if pattern.search(question) and ((m := _BARE_ANSWER.match(answer)) or (_has_cjk(first_clause)
                                                                               and (m := _BARE_ANSWER.match(first_clause)))):
            value = m["v"] or m["z"]
            if value and value.lower() not in {"yes", "no", "ok", "okay", "sure", "thanks", "haha", "lol"}:
                return [fact(namespace, key, value)]
    return []


# --- extraction --------------------------------------------------------------------------------


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


# A change in the progressive with a future time is a plan ("moving to Oslo next year", "明年搬去上海").
_PLANNED = re.compile(r"\b(?:moving|relocating|starting|joining|heading|transferring|switching)\b|搬|去|入职|跳槽", re.I)
_FUTURE = re.compile(r"\bnext\s+(?:year|month|spring|summer|fall|autumn|winter|january|february|march|april|may|june|july|"
                     r"august|september|october|november|december)\b|\bin\s+(?:a\s+few|a\s+couple\s+of|two|three|\d+)\s+"
                     r"(?:weeks|months|years)\b|\blater\s+this\s+year\b|\bafter\s+the\s+summer\b|明年|下个月|下半年|年底前|过完年", re.I)


_SOMEONE_ELSES = re.compile(r"(?:^[^,。]{0,4}?)?的(?:人)?(?:是|其实是)(?:我)?(?:老公|老婆|爸|妈|爸爸|妈妈|男朋友|女朋友|朋友|同事|他|她|别人|孩子|儿子|女儿)")


def _sentence_facts(sentence: str, message: Message, *, correction: int | None,
                    confidence_cap: float) -> list[tuple[int, ExtractedFact]]:
    found: list[tuple[int, ExtractedFact]] = []
    taken: list[tuple[int, int]] = []
    no_longer = bool(_NO_LONGER.search(sentence))
    for rule in _RULES:
        pos = 0
        while m := rule.pattern.search(sentence, pos):
            pos = m.start() + 1
            reads = _read(rule, m, sentence)
            if not reads:
                continue
            span = (m.start("v") if rule.value_span else m.start(), max(r[2][1] for r in reads))
            # Overlap is judged on the span up to the cleaned value: "I love hiking and I live
            # in Denver" keeps "I love hiking" although its raw capture ran over "I live in".
            if any(span[0] < e and s < span[1] for s, e in taken):
                continue
            taken.append(span)  # blocked spans too: a looser rule must not re-read them
            pos = max(span[1], m.end()) if _has_cjk(m.group(0)) else span[1]  # nor the same rule inside its own match
            if _hypothetical(sentence, m.start()):
                continue
            if rule.subject and not _subject_ok(sentence, m.start()):
                continue
            if _REPORTED.match(sentence[_clause_start(sentence, m.start()):]):
                continue
            if _SOMEONE_ELSES.match(sentence[m.end():]) or _SOMEONE_ELSES.search(m.group(0)):
                continue  # "喜欢榴莲的是我老公": the one who likes it is somebody else
            before = sentence[_clause_start(sentence, m.start()):m.start()]
            if not rule.subject and _EN_THIRD.search(before) and not re.search(r"\b(?:he|she)(?:'s|\s+is)\s+$", before, re.I) \
                    and not re.search(r"\b(?:me|us)\b", m.group(0), re.I):  # "they've seconded me to Glasgow" is about me
                continue  # "my mom calls him my fiancé": somebody else's words ("she's my fiancée" is about us)
            op: FactOperation = rule.op
            if rule.namespace == "location" and op == "assert" and _SHORT_STAY.search(sentence):
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
                    fact = fact.model_copy(update={"valid_until": _trip_until(sentence, message.created_at, start)})
                found.append((m.start(), fact))
    return found


_PRONOUN_SPECIES = re.compile(r"\b(?:she|he)(?:'s|\s+is)\s+(?:a|an|my|our)\s+(?:[\w-]+\s+){0,3}?" + _EN_SPECIES
                              + r"\b(?!\s+(?:person|people|lover|owner|sitter|walker|mom|mum|dad|trainer|groomer|whisperer))", re.I)


_NAME_PAIR = re.compile(r"\b((?-i:[A-Z])[a-z]+)\s+(?:and|&)\s+((?-i:[A-Z])[a-z]+)\b")
_BOTH_SPECIES = re.compile(r"^\s*(?:they're\s+|they\s+are\s+)?both\s+(?:[\w-]+\s+)?" + _EN_SPECIES + r"s?\b", re.I)


def _possessed_names(text: str) -> list[str]:
    """Capitalised names in a possessive inside a sentence ("the vet charged me £400 for Juno's teeth")."""
    return [n for n in re.findall(r"(?<=\s)((?-i:[A-Z])[a-z]{2,})'s\b", text)
            if n.lower() not in _NOT_NAMES and not re.fullmatch(_KIN, n, re.I) and not leading_city(n.lower())
            and n.lower() not in _WEEKDAYS and n.lower() not in _MONTH_NAMES]


_ZH_PET_DOING = re.compile(r"(?:^|(?<=[,，。!！\s]))(?P<n>[\u4e00-\u9fff]{2,3}?)(?:最近|又|总是|老是|天天|今天)?(?:掉毛|拆家|乱叫|狂叫|"
                           r"叫个不停|乱尿|随地|挑食|打喷嚏|吐毛球|抓沙发)")
_PET_DOING = re.compile(r"(?:^|(?<=[\s,]))(?P<n>(?-i:[A-Z])[a-z]+)(?:'s|\s+has|\s+is|\s+keeps|\s+won't|\s+just)?\s+(?:been\s+|started\s+|keeps\s+)?"
                        r"(?:howl|bark|meow|miaow|purr|wag|hiss|whin|growl|fetch|yowl|nibbl|gnaw)\w*\b", re.I)
_QUOTED_SIGN_OFF = re.compile(r"\b(?:end|sign|finish|close)\s+(?:it\s+)?(?:off\s+)?(?:with|as)\s+['\"‘“](?:[^'\"’”]{0,20}?,\s*)?"
                              r"(?P<v>(?-i:[A-Z])[a-z]+)['\"’”]", re.I)
_CALLS_ME = re.compile(r"\b(?:calls?|call)\s+me\b|\bthat's\s+me\b|\bwhat\s+I\s+go\s+by\b|\bmy\s+name\b", re.I)
# A name signed under a message ("…thanks!\n\n— Hamish", "Cheers,\nPriya").
_SIGN_OFF = re.compile(r"(?:\n\s*|[.!?]\s+)(?:[-—–~]+\s*|(?:cheers|thanks|thank\s+you|best|regards|love|xx|ta|talk\s+soon)"
                       r"[\s,!.]*\n\s*[-—–~]*\s*)(?P<v>(?-i:[A-Z])[a-z]+)(?P<z>)\s*[.!]?\s*$", re.I)
# "…谢谢！——1502 陈一帆”": a Chinese signature after a dash, a room number allowed.
_ZH_SIGN_OFF = re.compile(r"(?:——|—|--)\s*(?:\d+\s*|[\u4e00-\u9fff]{1,6}\s+)?(?P<v>)(?P<z>[" + _ZH_SURNAMES + r"][" + _CJK + r"]{1,2})\s*[”\"」』]?\s*$")
_PRONOUN_NAME = re.compile(r"\b(?:(?:she|he|it)(?:'s|\s+is)\s+(?:called|named)|(?:named|call(?:ed)?)\s+(?:him|her|it)|"
                           r"(?:his|her|its)\s+name(?:'s|\s+is))\s+(?P<n>(?-i:[A-Z])[\w'-]*)|"
                           r"(?:它|他|她)叫(?P<z>" + _ZC + r"{1,4})", re.I)


def _bare_quip(text: str) -> bool:
    rest = _JOKE_SOFT.sub(" ", text)
    size = len(re.findall(r"[A-Za-z0-9']+", rest)) + len(re.findall("[" + _CJK + "]", rest)) / 2
    return size <= 5


# A fronted topic answered by a pronoun: "horror movies? hate them." -> "I hate horror movies."
_TOPIC_FRONT = re.compile(r"(?:^|(?<=[.!]\s))(?P<np>[A-Za-z][\w' -]{1,40}?)\?\s+(?P<verb>(?:I\s+)?(?:really\s+|absolutely\s+)?"
                          r"(?:hate|love|like|adore|detest|loathe|can't\s+stand|enjoy))\s+(?:them|it|those|that)\b", re.I)


def _message_facts(message: Message) -> list[ExtractedFact]:
    text = _TOPIC_FRONT.sub(lambda m: "I " + re.sub(r"^I\s+", "", m["verb"]) + " " + m["np"], _prepare(message.content))
    # A short quoted phrase is a mention, not a statement ("I wrote 'my wife' but we are not married").
    text = re.sub(r"(?<![\w])(['\"])(?:[^'\"]{1,25})\1(?![\w])", " ", text)
    if _JOKE_SKIP.search(text) or _SARCASM.search(text):
        return []  # a retracted or ironic statement is not evidence of anything
    # Laughter caps confidence only on a bare quip ("lol I'm a chef now"); in a message that
    # goes on about the thing it is tone, not a retraction ("got the keys!! I live in Bristol now lol").
    laugh = _JOKE_SOFT.search(text)
    confidence_cap = 0.4 if laugh and _bare_quip(text) else 1.0
    said = _CORRECTION.search(text)
    correction_from = said.start() if said else len(text) + 1
    found: list[tuple[int, int, ExtractedFact]] = []
    species: str | None = None
    mentioned: list[str] = []  # names said in a possessive so far ("Juno's teeth")
    couple: list[str] = []  # two names said together in the sentence before ("Bruno and Tess")
    offset = 0
    for sentence_index, raw_sentence in enumerate(_SENTENCE_SPLIT.split(text)):
        begin = text.find(raw_sentence or "", offset)
        offset = max(offset, begin + len(raw_sentence or ""))
        # A correction reaches the statements from its own sentence on ("I live in Graz. sorry, I
        # meant Linz!": Graz is what it corrects, not a correction).
        # The whole sentence that says it: a slip and its fix in one sentence ("住在无锡啊不对，口误，是常州")
        # both read as corrections, and the later one wins.
        correction: int | None = 0 if begin + len(raw_sentence or "") > correction_from else None
        sentence = _statement_part(raw_sentence or "")
        if not sentence:
            continue
        for start, fact in _sentence_facts(sentence, message, correction=correction, confidence_cap=confidence_cap):
            found.append((sentence_index, start, fact))
        if said := re.search(r"\b" + _EN_SPECIES + r"\b|" + _ZH_SPECIES.replace("?P<s>", ""), sentence, re.I):
            species = _species(said.group(0))
            if any(f.namespace == "pet" and f.key != _slug(f.value) for _, _, f in found if _ == sentence_index):
                species = None  # already named in this sentence
        if species and (m := _PRONOUN_NAME.search(sentence)) and not _hypothetical(sentence, m.start()):
            name = m["n"] or m["z"]
            found.append((sentence_index, m.start(), ExtractedFact(
                namespace="pet", key=_slug(name), value=species, confidence=min(0.9, confidence_cap),
                evidence_message_ids=[message.message_id],
                observed_at=_observed_at(text, message.created_at, temporary=False))))
            species = None
        # "…for Juno's teeth. She's a nine-year-old springer spaniel": the pronoun is the pet just named.
        if (m := _PRONOUN_SPECIES.search(sentence)) and not _hypothetical(sentence, m.start()) \
                and not any(f.namespace == "pet" for i, _, f in found if i == sentence_index) \
                and (names := mentioned + _possessed_names(sentence[:m.start()])) \
                and not any(f.namespace == "pet" and f.key == _slug(names[-1]) for _, _, f in found):
            found.append((sentence_index, m.start(), ExtractedFact(
                namespace="pet", key=_slug(names[-1]), value=_species(m["s"]), confidence=min(0.9, confidence_cap),
                operation="assert" if correction is None else "correct",
                evidence_message_ids=[message.message_id],
                observed_at=_observed_at(text, message.created_at, temporary=False))))
        # "walking Bruno and Tess twice a day … both labs": a pair named, then their species.
        if (m := _BOTH_SPECIES.search(sentence)) and couple and not _hypothetical(sentence, m.start()):
            found += [(sentence_index, m.start(), ExtractedFact(
                namespace="pet", key=_slug(name), value=_species(m["s"]), confidence=min(0.9, confidence_cap),
                operation="assert" if correction is None else "correct", evidence_message_ids=[message.message_id],
                observed_at=message.created_at)) for name in couple]
            couple = []
        if pair := _NAME_PAIR.search(sentence):
            couple = [n for n in pair.groups() if _may_be_given_name(n)]
            couple = couple if len(couple) == 2 else []
        mentioned += _possessed_names(sentence)
    # "平时就在宁波上班": an employer that is a place names where one lives and works, not who employs one.
    # With a home said beside it ("在厦门上班，人住泉州"), the city one works in is neither.
    placed = any(f.namespace == "location" for _, _, f in found)
    found = [(i, at, f.model_copy(update={"namespace": "location", "key": "home_city"})
              if f.namespace == "work" and f.key == "employer" and f.operation == "assert" and _has_cjk(f.value)
              and is_chinese_city(f.value) else f) for i, at, f in found
             if not (placed and f.namespace == "work" and f.key == "employer" and _has_cjk(f.value) and is_chinese_city(f.value))]
    # "Biscuit's been howling at the back door … How do you get a beagle to sleep in?"
    if not any(f.namespace == "pet" for _, _, f in found) and (act := _PET_DOING.search(text) or _ZH_PET_DOING.search(text)) \
            and (kind := _species_in(text) or _zh_species_in(text)) and act["n"].lower() not in _NOT_NAMES \
            and not re.search(_KIN + "|" + _ZH_KIN, act["n"], re.I) and not leading_city(act["n"].lower()) \
            and (not _has_cjk(act["n"]) or could_be_a_name(act["n"])):
        found.append((0, act.start(), ExtractedFact(
            namespace="pet", key=_slug(act["n"]), value=kind, confidence=min(0.9, confidence_cap),
            evidence_message_ids=[message.message_id], observed_at=message.created_at)))
    # A sign-off asked for in quotes, said to be what one is called ("end it with 'cheers, Deeps' cos that's
    # what the whole team calls me").
    if (quoted := _QUOTED_SIGN_OFF.search(message.content)) and not any(f.namespace == "profile" for _, _, f in found) \
            and (_may_be_given_name(quoted["v"]) or _CALLS_ME.search(message.content)):
        found.append((len(text), 0, ExtractedFact(
            namespace="profile", key="name", value=quoted["v"], confidence=min(0.9, confidence_cap),
            evidence_message_ids=[message.message_id], observed_at=message.created_at)))
    signed = _SIGN_OFF.search(message.content) or _ZH_SIGN_OFF.search(message.content)
    if signed and signed.start() > 0 and not any(f.namespace == "profile" for _, _, f in found) \
            and ((signed["v"] and _may_be_given_name(signed["v"])) or (signed["z"] and could_be_a_name(signed["z"]))):
        found.append((len(text), 0, ExtractedFact(
            namespace="profile", key="name", value=signed["v"] or signed["z"], confidence=min(0.9, confidence_cap),
            evidence_message_ids=[message.message_id], observed_at=message.created_at)))
    # Two homes in one message ("I'm in Dublin, renting a place in Phibsboro"): a known city beats a
    # district or a street nobody lists as a city.
    homes = {f.value for _, _, f in found if (f.namespace, f.key, f.operation) == ("location", "home_city", "assert")}
    if len(homes) > 1 and (cities := {v for v in homes if is_chinese_city(v) or leading_city(v.lower()) == v.lower()}):
        found = [(i, at, f) for i, at, f in found
                 if not ((f.namespace, f.key, f.operation) == ("location", "home_city", "assert") and f.value not in cities)]
    named = {f.value for _, _, f in found if f.namespace == "pet" and f.key != _slug(f.value)}
    corrected = {(f.namespace, f.key) for _, _, f in found if f.operation == "correct"}
    # One job per message: a framed title (0.9) beats a bare "做X" reading (0.6) of the same message.
    best_job = max((f.confidence for _, _, f in found if f.namespace == "work" and f.key == "job"
                    and f.operation != "end"), default=0.0)
    # "we're not engaged, we're just dating": the negation is the correction's, not an end of its own.
    return [f for _, _, f in sorted(found, key=lambda t: (t[0], t[1]))
            if not (f.namespace == "pet" and f.key == _slug(f.value) and f.value in named)
            and not (f.operation == "end" and (f.namespace, f.key) in corrected)
            and not (f.namespace == "work" and f.key == "job" and f.operation != "end" and f.confidence < best_job)]


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
                       r"(?:(?:是|叫|在)(?P<za>[" + _CJK + r"\w]{1,10}?)[,]?|(?P<zc>(?:(?![了说错岔误])[" + _CJK + r"\w]){1,6}?)[,])\s*不是(?P<zb>[" + _CJK
                       + r"\w]{1,10}?)(?=$|[,.!。]|啦|哈|了)|"
                       r"不是(?P<zb3>[" + _CJK + r"\w]{1,8}?)(?:啦|了|哈|呀|啊)?[,]\s*(?P<za3>[" + _CJK + r"\w]{1,6}?)(?=\s*(?:$|[!.。]))|"
                       r"不(?:是|在|叫)(?P<zb2>[" + _CJK + r"\w]{1,10}?)[,]\s*(?:而)?(?:是|在)(?:在|叫)?(?P<za2>[" + _CJK + r"\w]{1,10}?)(?=$|[,.!。]|啦|哈|了)",
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
    value = re.sub(r"(?:的|啦|了|哈|呀)+$", "", value) or value
    return value.rsplit("的", 1)[-1] if len(value.rsplit("的", 1)[-1]) >= 2 else value  # 检验科的检验师 -> 检验师


def _contrast_value(raw: str) -> str:
    v = raw.split(",")[-1].strip()
    v = _CONTRAST_LEAD.sub("", v)
    return re.sub(r"^(?:a|an|the|just|my|our)\s+", "", v, flags=re.I).strip(" ,.!")


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


_NO_MORE_PETS = re.compile(r"(?:没有|不养|不再养|没养)(?:了)?(?:" + _ZH_SPECIES.replace("?P<s>", "?P<z>") + r")了|"
                           r"\bnever\s+got\s+(?:that|the|our|a)\s+" + _EN_SPECIES.replace("?P<s>", "?P<s2>") + r"\b|"
                           r"\b(?:don't|do\s+not|no\s+longer)\s+(?:have|own|keep)\s+(?:a|an|any)\s+"
                           + _EN_SPECIES + r"\s+(?:anymore|any\s+more|now)\b", re.I)


def _species_gone(text: str, known: list[ExtractedFact | KnownFact], message: Message) -> list[ExtractedFact]:
    """"我现在没有猫了", "we don't have a dog anymore": every current pet of that species ends."""
    m = _NO_MORE_PETS.search(text)
    if not m or _hypothetical(text, m.start()):
        return []
    species = _species(m.group("z") or m.group("s") or m.group("s2"))
    names = dict.fromkeys(f.key for f in known if f.namespace == "pet" and f.value == species)
    return [ExtractedFact(namespace="pet", key=name, value="", operation="end", confidence=0.9,
                          evidence_message_ids=[message.message_id], observed_at=message.created_at)
            for name in names]


_DEMONSTRATIVE = re.compile(r"^(?:那|这|它|那个|这个|那种|这种|那玩意儿?|it|that|this|them|those)(?:_|$|[\u4e00-\u9fff]{0,3}$)")


def _resolve_demonstratives(facts: list[ExtractedFact], text: str,
                            known: list[ExtractedFact | KnownFact]) -> list[ExtractedFact]:
    """"上次吃完榴莲拉了两天肚子，现在闻到那味儿就想吐": a taste for "that" is a taste for the
    known object the message names; with none named, a demonstrative is no object at all."""
    out = []
    for fact in facts:
        if fact.namespace == "preference" and _DEMONSTRATIVE.match(fact.key):
            named = [f.key for f in known if f.namespace == "preference" and f.key.replace("_", " ") in text.lower()]
            if not named:
                continue
            fact = fact.model_copy(update={"key": named[-1]})
        out.append(fact)
    return out


_PET_GONE = re.compile(r"\b(?:let|letting)\s+(?P<a>[\w'-]+)\s+go\b|\bput\s+(?P<b>[\w'-]+)\s+(?:down|to\s+sleep)\b|"
                       r"\b(?P<c>[\w'-]+)\s+(?:passed\s+away|died|passed|crossed\s+the\s+rainbow\s+bridge|didn't\s+make\s+it)\b|"
                       r"(?P<z>[\u4e00-\u9fff]{1,4})(?:昨天|前天|今天|上周|前几天)?(?:去世了|死了|走了|没了|去喵星了|去汪星了|当天使了)", re.I)


def _known_pet_gone(text: str, facts: list[ExtractedFact], known: list[ExtractedFact | KnownFact],
                    message: Message) -> list[ExtractedFact]:
    """"we had to let smokey go": a death said of a pet already known, whatever its case."""
    pets = {f.key for f in known if f.namespace == "pet" and f.value}
    said = {f.key for f in facts if f.namespace == "pet"}
    out = []
    for m in _PET_GONE.finditer(text):
        name = _slug(m["a"] or m["b"] or m["c"] or m["z"] or "")
        if name in pets and name not in said and not _hypothetical(text, m.start()):
            out.append(ExtractedFact(namespace="pet", key=name, value="", operation="end", confidence=0.9,
                                     evidence_message_ids=[message.message_id], observed_at=message.created_at))
            said.add(name)
    return out


def _activity_ends_job(facts: list[ExtractedFact], known: list[ExtractedFact | KnownFact],
                       message: Message) -> list[ExtractedFact]:
    """Stopping the activity that is one's job ends the job ("quit bartending" while a bartender):
    the activity and the title share their stem."""
    jobs = [f.value for f in known if f.namespace == "work" and f.key == "job" and f.value]
    if not jobs:
        return []
    stem = re.sub(r"[^a-z]", "", jobs[-1].split()[-1].lower())[:5]
    for fact in facts:
        if fact.namespace == "preference" and fact.operation == "end" and len(stem) == 5 \
                and fact.key.replace("_", "").startswith(stem):
            return [ExtractedFact(namespace="work", key="job", value="", operation="end", confidence=fact.confidence,
                                  evidence_message_ids=[message.message_id], observed_at=fact.observed_at)]
    return []


def _extract_facts(messages: list[Message], subject_role: str,
                   known: list[KnownFact] | None = None) -> list[ExtractedFact]:
    merged: dict[tuple[str, str, bool], ExtractedFact] = {}  # (namespace, key, is_end)
    order: dict[tuple[str, str, bool], int] = {}
    previous: Message | None = None
    earlier: list[str] = []
    for n, message in enumerate(messages):
        if message.role != subject_role:
            previous = message
            continue
        facts = _message_facts(message)
        text = _prepare(message.content)
        if _CORRECTION.search(text) or _MEANT.search(text) or re.search(r"\bnot\b|不是", text) or _CONTRAST.search(text):
            facts += _contrast_corrections(text, message, [*(known or []), *merged.values()], facts)
        facts = _resolve_demonstratives(facts, text, [*(known or []), *merged.values()])
        facts += _activity_ends_job(facts, [*(known or []), *merged.values()], message)
        facts += _species_gone(text, [*(known or []), *merged.values()], message)
        facts += _known_pet_gone(text, facts, [*(known or []), *merged.values()], message)
        if not facts and previous is not None and previous.role != subject_role:
            facts = _answer_facts(_prepare(previous.content), message.content, earlier, message)
            for fact in facts:  # the pets are named now: drop their species-keyed placeholders
                if fact.namespace == "pet":
                    merged.pop(("pet", _slug(fact.value), False), None)
        earlier.append(_prepare(message.content))
        previous = message
        for fact in facts:
            is_end = fact.operation == "end"
            identity = (fact.namespace, fact.key, is_end)
            opposite = (fact.namespace, fact.key, not is_end)
            if opposite in merged:
                other = merged[opposite]
                # A later statement cancels the opposite one with the same value (or about whatever
                # is current); an end and a new value of the same key both stand ("left Ikea,
                # started at H&M").
                if not fact.value or not other.value or other.value == fact.value:
                    del merged[opposite]
            if identity in merged:
                # The last statement wins, but every message that said it stays as evidence.
                earlier_ids = merged.pop(identity).evidence_message_ids
                ids = earlier_ids + [i for i in fact.evidence_message_ids if i not in earlier_ids]
                fact = fact.model_copy(update={"evidence_message_ids": ids})
            merged[identity] = fact
            # Ends go before the new values of the same message, so the old fact closes first.
            order[identity] = n * 1000 + len(order) - (500 if is_end else 0)
    return sorted(merged.values(), key=lambda f: order[(f.namespace, f.key, f.operation == "end")])


class RuleFactExtractor:
    """The rule extractor under the FactExtractor protocol. It reads the current facts only to find
    the slot of a correction that names the wrong value ("it's Globex, not Initech") and to end every
    pet of a species said to be gone; everything else is read from the statements."""

    name = "rule-extractor"
    runs_in_worker = True  # computed in this process: its steps run as local activities
    # 3: clause-level subject analysis, verb classes, operations (end/correct), PHRASING vocabulary
    # 4: verb classes for moves/jobs/relationships, generic money limits, dropped subjects,
    #    contrast corrections against the current facts
    # 5: given names, signatures, respellings, a key corrected (void + the right key), breeds, pronouns,
    #    stays by length, intent hedging its own clause in Chinese
    version = "6"

    async def extract(self, messages: list[Message], *, subject_role: str = "user",
                      current_facts: list[KnownFact] | None = None) -> ExtractionResult:
        return ExtractionResult(provider=self.name, extractor=self.name, extractor_version=self.version,
                                facts=_extract_facts(messages, subject_role, current_facts))
