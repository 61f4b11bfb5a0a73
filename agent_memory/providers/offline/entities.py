"""The people, pets, places, organisations, events and things a session mentions, read by rules
from every message (whoever said it), English and Chinese.

Precision over recall: each entity becomes stored memory, so a mention counts only when its form
says what it is.

- **People.** A common given name written with a capital (the census lists in the gazetteer),
  a full name (a given name and a capitalised surname), a kinship or role phrase ("my sister",
  "my boss"; "my sister Anna" gives the person "sister" with the alias "Anna"), a named friend or
  colleague ("my friend Raj"), and the speakers themselves. Chinese: 我妈/妈妈/我姐/老公/同事…
  and a name after them (我姐李娜, 同事小王).
- **Pets.** "my dog Max", "our cat", "a puppy named Biscuit"; 我家的狗叫豆豆. A pet with a name is
  named by it, its species word an alias.
- **Places.** Known cities and countries (GeoNames), and a capitalised word after in/to/from that
  is no dictionary word and no given name; Chinese cities and 省/国 names.
- **Organisations.** Capitalised names ending in Inc, University, School, Club, Group…, and the
  capitalised name after "work at"/"job at"; Chinese names ending in 公司/大学/学校/医院/银行….
- **Events.** A closed list of event nouns after an article or a possessive ("the wedding",
  "my birthday", "a concert"), and capitalised event names after "the" ("the Pride Parade").
- **Things.** A closed list of possessions after "my"/"our" ("my car", "my guitar").

A possessive phrase is relative to whoever says it: when the session has several speakers in the
subject's role, or the phrase is another party's, its name carries the speaker's ("Caroline's
sister"); an unnamed other party's possessions are left out.

Mentions of one entity merge within the session: by name or alias, per type (a bare given name
joins whatever entity already carries it, so "Max" after "my dog Max" is the dog). Every message
that mentions an entity is its evidence, in message order; the list is ordered by first mention.
Pure and deterministic, like the rest of the offline extractor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agent_memory.core.models import ENTITY_ALIASES_MAX, ENTITY_NAME_MAX, EntityType, ExtractedEntity, Message
from agent_memory.providers.offline.gazetteer import (
    first_name_share,
    fold,
    is_chinese_city,
    is_country,
    is_dictionary_word,
    is_first_name,
    is_known_city,
    is_surname,
)
from agent_memory.providers.offline.lexicon import _EN_SPECIES, _NOT_NAMES, _ZH_BREEDS, _ZH_NAME, _may_be_given_name
from agent_memory.providers.offline.values import _CJK
from agent_memory.providers.offline.zh_segment import NOUN_TAGS, PERSON_TAGS, could_be_a_name, tagged

# --- English ----------------------------------------------------------------------------------

_CAP = r"[A-ZÀ-Þ][a-zß-ÿ]+(?:-[A-ZÀ-Þ][a-zß-ÿ]+)?"
# Relations one has one of at a time, or that a session names as one person ("my sister").
_EN_UNIQUE = (r"mom|mum|mother|mommy|mama|dad|father|daddy|papa|sister|brother|wife|husband|partner|girlfriend|"
              r"boyfriend|fianc[eé]e?|grandma|grandpa|grandmother|grandfather|granny|son|daughter|boss|manager|"
              r"therapist|mentor|best\s+friend|stepmom|stepdad|stepmother|stepfather|twin")
# Relations one has many of: a person only with a name ("my friend Raj").
_EN_MANY = (r"friend|colleague|coworker|co-worker|neighbou?r|cousin|aunt|uncle|niece|nephew|roommate|classmate|"
            r"teammate|buddy|pal|teacher|coach|doctor")
_GIVEN = rf"(?P<given>{_CAP})"
_EN_KIN = re.compile(rf"\b(?P<own>[Mm]y|[Oo]ur)\s+(?:(?:little|big|older|younger|elder|baby|new|late)\s+)?"
                     rf"(?:(?P<unique>{_EN_UNIQUE})|(?P<many>{_EN_MANY}))\b"
                     rf"(?:,?\s+(?:(?:named|called)\s+)?{_GIVEN}\b)?")
_EN_PET = re.compile(rf"\b(?:(?P<own>[Mm]y|[Oo]ur)\s+(?:(?:new|little|old|sweet|baby)\s+)?{_EN_SPECIES}"
                     rf"(?:,?\s+(?:(?:named|called)\s+)?{_GIVEN}\b)?"
                     rf"|\b(?:an?|the)\s+(?:new\s+|little\s+)?(?P<s2>dog|puppy|cat|kitten|rabbit|bunny|parrot|hamster)"
                     rf"\s+(?:named|called)\s+(?P<given2>{_CAP})\b)")
# A pet without a name only by a plain species word ("my lab" is more often a laboratory).
_PET_WORDS = frozenset([*"dog puppy pup cat kitten kitty rabbit bunny hamster parrot budgie horse turtle tortoise "
                         "gecko ferret chinchilla hedgehog cockatiel iguana axolotl gerbil".split(), "guinea pig"])
_EVENT_NOUNS = (r"wedding|birthday|birthday\s+party|party|concert|festival|graduation|funeral|conference|parade|"
                r"marathon|recital|reunion|baby\s+shower|bridal\s+shower|anniversary|fundraiser|ceremony|"
                r"tournament|competition|gala|retreat|workshop|hackathon|exhibition|musical|road\s+trip|"
                r"camping\s+trip|vacation|holiday|picnic|barbecue|bbq")
_EN_EVENT = re.compile(rf"\b(?P<det>[Tt]he|[Mm]y|[Oo]ur|[Aa]n?|[Tt]his|[Tt]hat)\s+(?P<noun>{_EVENT_NOUNS})s?\b")
_EVENT_HEADS = (r"Parade|Festival|Fest|Marathon|Conference|Concert|Fair|Games|Cup|Championship|Gala|Summit|Expo|"
                r"Carnival|Olympics|Run|Walk|Awards|Week|Day|Show|Tour|Con")
_EN_NAMED_EVENT = re.compile(rf"\b[Tt]he\s+(?P<name>(?:(?:{_CAP}|[A-Z0-9+]{{2,}}|\d{{4}})\s+){{1,3}}(?:{_EVENT_HEADS}))\b")
_THINGS = (r"car|bike|bicycle|motorcycle|motorbike|truck|van|boat|guitar|piano|violin|cello|ukulele|drum\s+kit|"
           r"camera|laptop|telescope|kayak|canoe|surfboard|skateboard|sewing\s+machine")
_EN_THING = re.compile(rf"\b(?P<own>[Mm]y|[Oo]ur)\s+(?:(?:new|old|first|little|beloved|trusty)\s+)?(?P<noun>{_THINGS})\b"
                       rf"(?!\s+(?:budget|fund|savings|shopping|hunt|search|wishlist)\b)"
                       rf"(?:,?\s+(?:named|called)\s+{_GIVEN}\b)?")
_ORG_HEADS = (r"Inc|Corp|Corporation|University|College|School|Academy|Institute|Company|Co|Club|Group|Ltd|LLC|"
              r"Hospital|Bank|Foundation|Association|Society|Agency|Council|Labs?|Studios?|Press|Partners|Museum|"
              r"Library|Church|Center|Centre")
_EN_ORG = re.compile(rf"\b(?P<name>(?:(?:{_CAP}|[A-Z]{{2,}}|&)\s+){{1,4}}(?:{_ORG_HEADS})\b\.?"
                     rf"|(?:University|College|Bank|Museum)\s+of\s+(?:the\s+)?{_CAP}(?:\s+{_CAP})?)")
_EN_WORK_AT = re.compile(rf"\b(?:work(?:s|ed|ing)?|job|intern(?:ship)?|employed)\s+(?:at|for)\s+"
                         rf"(?P<name>(?:{_CAP}|[A-Z]{{2,}})(?:\s+(?:{_CAP}|[A-Z]{{2,}}|&)){{0,3}})")
_EN_PLACE_AFTER = re.compile(rf"\b(?P<prep>in|to|from|near|visit(?:ed|ing|s)?|around)\s+(?P<name>{_CAP}(?:\s+{_CAP}){{0,2}})")
# "to" names a destination after a verb or noun of going ("moved to Paris"), else maybe a person ("said to Paris").
_GOING_TO = re.compile(r"(?:mov\w*|went|go|goes|going|gone|flew|fly\w*|trip|travel\w*|drove|driv\w*|head\w*|"
                       r"relocat\w*|back|came|com\w*|way|got|get|return\w*|flight|ticket|train|bus|move)\s+to\s*$", re.I)
_EN_CAPS = re.compile(rf"(?<![\w'’-])(?P<name>{_CAP}(?:\s+{_CAP}){{0,2}})(?:'s|’s)?(?![\w'’-])")
_CALENDAR = frozenset("january february march april may june july august september october november december monday "
                      "tuesday wednesday thursday friday saturday sunday christmas easter halloween thanksgiving "
                      "god lord jesus mr mrs ms dr".split())
_FUNCTION_WORDS = frozenset("in on at to for of from with by is was are who what when where why how said says has had "
                            "does did can could will would should lives works".split())
# Words that end the name of a place or a team, not a surname ("Lincoln High", "Marine Drive", "Man United").
_NOT_SURNAMES = frozenset("high drive street road avenue lane park city united square hill bridge station hall "
                          "house court beach bay river lake valley county state mall market center centre".split())
# A given name that is also a word counts alone only when many people bear it ("Grace", "Max";
# not "Meta", "Marvel", "King": 0.004% each in the census lists).
_COMMON_NAME_SHARE = 0.02
_NATIONALITY = re.compile(r"(?:ish|ese|ian|ean|ic)$")

# --- Chinese ----------------------------------------------------------------------------------

# Kinship words, each with the name its mentions share (我妈, 妈妈 and 老妈 are one person).
_ZH_UNIQUE = {"妈妈": "妈妈", "我妈": "妈妈", "老妈": "妈妈", "母亲": "妈妈", "爸爸": "爸爸", "我爸": "爸爸", "老爸": "爸爸",
              "父亲": "爸爸", "姐姐": "姐姐", "我姐": "姐姐", "哥哥": "哥哥", "我哥": "哥哥", "弟弟": "弟弟", "我弟": "弟弟",
              "妹妹": "妹妹", "我妹": "妹妹", "老公": "老公", "老婆": "老婆", "丈夫": "老公", "妻子": "老婆", "媳妇": "老婆",
              "男朋友": "男朋友", "女朋友": "女朋友", "男友": "男朋友", "女友": "女朋友", "儿子": "儿子", "女儿": "女儿",
              "爷爷": "爷爷", "奶奶": "奶奶", "外公": "外公", "外婆": "外婆", "姥姥": "姥姥", "姥爷": "姥爷",
              "老板": "老板", "领导": "领导", "闺蜜": "闺蜜"}
_ZH_UNIQUE |= {"我" + full: name for full, name in _ZH_UNIQUE.items() if len(full) == 2 and full[0] == full[1]}
_ZH_MANY = ("同事", "朋友", "同学", "室友", "邻居", "表哥", "表姐", "表弟", "表妹", "堂哥", "堂姐", "舅舅", "叔叔", "阿姨", "姑姑")
# Not someone else's (他妈妈, 你姐姐).
_ZH_KIN = re.compile("(?<![他她你它])(?P<kin>" + "|".join(sorted([*_ZH_UNIQUE, *_ZH_MANY], key=len, reverse=True)) + ")")
_ZH_PET_SPECIES = "|".join(sorted({*_ZH_BREEDS, "狗狗", "小狗", "狗", "猫咪", "小猫", "猫", "兔子", "仓鼠", "鹦鹉",
                                   "乌龟", "金鱼"}, key=lambda w: (-len(w), w)))
_ZH_PET = re.compile(rf"(?:我家|我们家|家里|我的|我养的)的?(?P<s>{_ZH_PET_SPECIES})"
                     rf"(?:[，,]?(?:叫做|名叫|叫)(?P<given>[{_CJK}]{{1,3}}|[A-Z][a-z]+))?")
_ZH_ORG_TAILS = ("公司", "大学", "学院", "学校", "中学", "小学", "医院", "银行", "集团", "研究所", "研究院")
_ZH_WORK_AT = re.compile(rf"在(?P<v>[{_CJK}A-Za-z]{{2,8}}?)(?:上班|工作|实习)")
_ZH_PROPER = frozenset({"nt", "nz", "ns", "nr", "nrt", "nrfg", "j", "eng", "x"})
_ZH_STOP = frozenset("我 你 他 她 我们 的 在 和 跟 去 到 从 一家 一个 这家 那家".split())


@dataclass
class _Mention:
    start: int
    entity_type: EntityType
    name: str
    aliases: list[str] = field(default_factory=list)
    given: str | None = None  # the proper name it carries, if any
    bare: bool = False  # a bare given name: joins whatever entity carries it


@dataclass
class _Entity:
    entity_type: EntityType
    name: str
    aliases: list[str]
    given: set[str]
    evidence: set[int]
    order: int


def _sentence_initial(text: str, start: int) -> bool:
    return not text[:start].strip() or bool(re.search(r"[.!?:;\"“(]\s*$|\n\s*$", text[:start]))


def _is_name(word: str) -> bool:
    low = word.lower()
    return is_first_name(low) and low not in _NOT_NAMES | _CALENDAR | _FUNCTION_WORDS


def _possessor(message: Message, shared: bool, subject_role: str) -> str | None:
    """Whose "my" a message's possessive phrase is: "" for the subject's own (and a lone speaker's),
    the speaker's name when several speakers share the role or it is another party's, None when
    that party has no name."""
    if message.role == subject_role and not shared:
        return ""
    return _speaker_name(message)


def _speaker_name(message: Message) -> str | None:
    speaker = (message.speaker or "").strip()
    if not speaker or fold(speaker) in {"user", "assistant", "system", "tool", "bot", "ai", "me", "you", "用户", "助手"}:
        return None
    if re.fullmatch(rf"{_CAP}(?:\s+{_CAP}){{0,2}}|[{_CJK}]{{2,4}}", speaker):
        return speaker
    return None


def _owned(owner: str, phrase: str) -> str:
    """A possessive phrase named for its owner ("Caroline's sister", "林伟的妈妈"), or as said for the subject's own."""
    if not owner:
        return phrase
    return f"{owner}的{phrase}" if re.search(f"[{_CJK}]", phrase) else f"{owner}'s {phrase}"


def _en_mentions(text: str, owner: str | None, known: frozenset[str] = frozenset()) -> list[_Mention]:
    """English mentions; `known` holds the folded names of the session's speakers (and their short forms)."""
    found: list[_Mention] = []
    spans: list[tuple[int, int]] = []

    def add(m: re.Match[str], mention: _Mention) -> None:
        found.append(mention)
        spans.append(m.span())

    for m in _EN_PET.finditer(text):
        given = m.group("given") or m.group("given2")
        species = re.sub(r"\s+", " ", (m.group("s") or m.group("s2")).lower())
        if given and not _after_relation(given):
            given = None
        if given:
            add(m, _Mention(m.start(), "pet", given, [species], given=given))
        elif owner is not None and m.group("own") and species in _PET_WORDS:
            add(m, _Mention(m.start(), "pet", _owned(owner, species)))
    for m in _EN_KIN.finditer(text):
        given = m.group("given")
        if given and not _after_relation(given):
            given = None
        if m.group("unique"):
            if owner is None:
                continue
            phrase = _owned(owner, re.sub(r"\s+", " ", m.group("unique").lower()))
            add(m, _Mention(m.start(), "person", phrase, [given] if given else [], given=given))
        elif given:
            add(m, _Mention(m.start(), "person", given, given=given))
    for m in _EN_THING.finditer(text):
        if owner is None:
            continue
        given = m.group("given")
        add(m, _Mention(m.start(), "thing", _owned(owner, re.sub(r"\s+", " ", m.group("noun").lower())),
                        [given] if given else [], given=given))
    for m in _EN_NAMED_EVENT.finditer(text):
        add(m, _Mention(m.start(), "event", m.group("name")))
    for m in _EN_EVENT.finditer(text):
        if any(s <= m.start() < e for s, e in spans):
            continue
        noun = re.sub(r"\s+", " ", m.group("noun").lower())
        if m.group("det").lower() in {"my", "our"}:
            if owner is None:
                continue
            noun = _owned(owner, noun)
        add(m, _Mention(m.start(), "event", noun))
    for m in _EN_ORG.finditer(text):
        if re.search(rf"{_CAP}\s+$", text[:m.start()]):
            continue  # a longer name than the pattern holds: not cut to its tail
        name = m.group("name").rstrip(".")
        words = name.split()
        while len(words) > 2 and (words[0] in {"The", "A", "An", "My", "Our", "At", "In", "For"}
                                  or (_sentence_initial(text, m.start()) and is_dictionary_word(words[0].lower())
                                      and words[0] == name.split()[0])):
            words = words[1:]
        name = " ".join(words)
        if len(words) >= 2:
            add(m, _Mention(m.start(), "organisation", name))
    for m in _EN_WORK_AT.finditer(text):
        name = m.group("name")
        if any(s <= m.start("name") < e for s, e in spans) or is_known_city(name) or is_country(name):
            continue
        if len(name.split()) == 1 and (_is_name(name) or is_dictionary_word(name.lower())):
            continue  # "work for Anna", "work at Home"
        add(m, _Mention(m.start("name"), "organisation", name))
    for m in _EN_PLACE_AFTER.finditer(text):
        name = m.group("name")
        if any(s <= m.start("name") < e for s, e in spans):
            continue
        prep = m.group("prep")
        going = prep != "to" or bool(_GOING_TO.search(text[:m.end("prep")]))
        if _is_place(name, after_preposition=True, going=going, unknown=prep in {"in", "near", "around"}):
            add(m, _Mention(m.start("name"), "place", name))
    for m in _EN_CAPS.finditer(text):
        name = m.group("name")
        if any(s <= m.start() < e for s, e in spans):
            continue
        if _is_place(name, after_preposition=False) and not _sentence_initial(text, m.start()):
            add(m, _Mention(m.start(), "place", name))
            continue
        found.extend(_people(text, m.start(), name, known))
    return found


def _after_relation(word: str) -> bool:
    """Whether a capitalised word right after "my sister", "my friend" is their name: any word but a
    common one of chat, a month or a place ("my friend Raj", not "my friend And", "my sister Paris")."""
    low = word.lower()
    return low not in _NOT_NAMES | _CALENDAR | _FUNCTION_WORDS and (_is_name(word) or _may_be_given_name(word)
                                                              or not _is_place(word, after_preposition=False))


def _is_place(name: str, *, after_preposition: bool, going: bool = False, unknown: bool = False) -> bool:
    """A known country; a known city after a preposition of place ("in Boston", "moved to Paris"),
    or on its own when it is neither a word nor a given name ("Tokyo"; not "Nice to meet you",
    "Jordan said", "March"); with `unknown`, a capitalised name that is neither after "in" ("in Guindy";
    after "to" or "from" it is as often an employer)."""
    words = name.split()
    if any(w.lower() in _CALENDAR for w in words):
        return False
    if is_country(name) and not (len(words) == 1 and _is_name(name) and not going):
        return True
    single_name = len(words) == 1 and _is_name(name)
    if is_known_city(name):
        if after_preposition:
            return going or not single_name
        return not single_name and not (len(words) == 1 and is_dictionary_word(name.lower()))
    return (unknown and not any(is_dictionary_word(w.lower()) or _is_name(w) for w in words)
            and not _NATIONALITY.search(words[-1].lower()) and not any(re.search("[A-Z]", w[1:]) for w in words))


def _people(text: str, start: int, span: str, known: frozenset[str]) -> list[_Mention]:
    """People in a run of capitalised words: a given name, with the capitalised surname after it."""
    words = span.split()
    out: list[_Mention] = []
    i = 0
    while i < len(words):
        word = words[i]
        initial = i == 0 and _sentence_initial(text, start)
        after_the = i == 0 and bool(re.search(r"\b[Tt]he\s+$", text[:start]))  # "the King", "the Queen"
        place = is_known_city(word) or is_country(word)  # "Austin", "Sydney": a place as often as a person
        if (_is_name(word) or fold(word) in known) and not after_the and not place \
                and not (initial and len(words) == 1 and is_dictionary_word(word.lower())):
            surname = words[i + 1].lower() if i + 1 < len(words) else ""
            if surname and surname not in _CALENDAR | _NOT_NAMES | _NOT_SURNAMES \
                    and (is_surname(surname) or not is_dictionary_word(surname)) \
                    and not _is_place(words[i + 1], after_preposition=False):
                out.append(_Mention(start, "person", f"{word} {words[i + 1]}", [word], given=word, bare=True))
                i += 2
                continue
            if not is_dictionary_word(word.lower()) or first_name_share(word) >= _COMMON_NAME_SHARE \
                    or fold(word) in known:
                out.append(_Mention(start, "person", word, given=word, bare=True))
        i += 1
    return out


def _zh_given(rest: str) -> str | None:
    """The person's name a text starts with, as the segmenter cuts it (李娜下周来 -> 李娜): a word it
    tags as a name, or a surname (阿/小/老) and one or two characters it does not rule out."""
    rest = re.sub(r"^(?:叫做|名叫|叫)", "", rest)
    words = tagged(rest[:8])
    if not words:
        return None
    word, tag = words[0]
    if tag in PERSON_TAGS and 2 <= len(word) <= 3 and re.fullmatch(f"[{_CJK}]+", word):
        return word
    if re.fullmatch(_ZH_NAME, word) and could_be_a_name(word):
        return word
    # jieba cuts a familiar name into its prefix and a surname (老陈 -> 老 + 陈), and reads a doubled
    # name (朵朵) as a measure word; after a kinship word both are the person's name.
    if word in ("老", "小", "阿") and len(words) > 1 and len(words[1][0]) == 1 and words[1][1] in PERSON_TAGS:
        return word + words[1][0]
    if len(word) == 2 and word[0] == word[1] and tag not in {"d", "m", "p", "c", "r"} and could_be_a_name(word):
        return word
    return None


def _zh_mentions(text: str, owner: str | None) -> list[_Mention]:
    found: list[_Mention] = []
    pet_spans: list[tuple[int, int]] = []
    for m in _ZH_PET.finditer(text):
        species = m.group("s")
        given = m.group("given")
        if given and re.fullmatch(f"[{_CJK}]+", given):
            # After 叫 a short word is the name whatever the segmenter makes of it (可颂 is a verb to it).
            given = next((given[:size] for size in range(len(given), 0, -1) if could_be_a_name(given[:size])),
                         given[:2] if len(given) >= 2 else None)
        pet_spans.append(m.span())
        if given:
            found.append(_Mention(m.start(), "pet", given, [species], given=given))
        elif owner is not None:
            found.append(_Mention(m.start(), "pet", _owned(owner, species)))
    for m in _ZH_KIN.finditer(text):
        if any(s <= m.start() < e for s, e in pet_spans):
            continue
        kin = m.group("kin")
        said = kin.removeprefix("我") if len(kin) == 3 else kin  # 我妈妈: 妈妈
        given = _zh_given(text[m.end():])
        if kin in _ZH_UNIQUE:
            if owner is None:
                continue
            name = _owned(owner, _ZH_UNIQUE[kin])
            # 我妈 said by the subject is an alias of 妈妈; said by 林伟, "林伟的妈妈" says it all.
            said_alias = None if owner and said.startswith("我") else _owned(owner, said)
            aliases = [a for a in (said_alias, given) if a and a != name]
            found.append(_Mention(m.start(), "person", name, aliases, given=given))
        elif given:
            found.append(_Mention(m.start(), "person", given, given=given))
    words = tagged(text)
    position = 0
    for n, (word, tag) in enumerate(words):
        start = position
        position += len(word)
        if len(word) < 2 or tag not in NOUN_TAGS - {"an", "vn"}:
            continue
        if tag == "ns" and (is_chinese_city(word) or word.endswith(("省", "国"))):
            found.append(_Mention(start, "place", word))
        elif word.endswith(_ZH_ORG_TAILS):
            name = word
            k = n
            while k > 0 and words[k - 1][1] in NOUN_TAGS | {"nt"} and words[k - 1][0] not in _ZH_STOP \
                    and len(words[k - 1][0] + name) <= 12:
                k -= 1
                name = words[k][0] + name
            if tag != "nt" and not any(t in _ZH_PROPER for _, t in words[k:n]):
                continue  # a kind of company (互联网公司, 设计公司), not one
            found.append(_Mention(start - (len(name) - len(word)), "organisation", name))
    for m in _ZH_WORK_AT.finditer(text):
        name = m.group("v")
        if is_chinese_city(name) or name.endswith(_ZH_ORG_TAILS) or len(tagged(name)) != 1 \
                or tagged(name)[0][1] not in {"nt", "nz", "j", "eng", "x"}:
            continue
        found.append(_Mention(m.start("v"), "organisation", name))
    return found


def extract_entities(messages: list[Message], subject_role: str = "user") -> list[ExtractedEntity]:
    """Every entity the session's messages mention, merged by name and alias, ordered by first mention."""
    shared = len({_speaker_name(m) for m in messages if m.role == subject_role} - {None}) > 1
    merged = _Merged()
    speakers: set[str] = set()
    # A speaker's short name ("Mel" for the speaker Melanie), wherever it comes in the session.
    everyone = sorted({name for m in messages if (name := _speaker_name(m))})
    short = {fold(name.split()[0][:n]): name for name in everyone for n in range(3, len(name.split()[0]))}
    short = {k: v for k, v in short.items() if sum(fold(s).startswith(k) for s in everyone) == 1
             and not any(fold(s.split()[0]) == k for s in everyone)}
    known = frozenset([*short, *(fold(name.split()[0]) for name in everyone)])
    for position, message in enumerate(messages):
        mentions: list[_Mention] = []
        speaker = _speaker_name(message)
        if speaker and speaker not in speakers:  # a speaker's first message introduces them
            speakers.add(speaker)
            mentions.append(_Mention(-1, "person", speaker, given=speaker.split()[0], bare=True))
        owner = _possessor(message, shared, subject_role)
        if re.search(f"[{_CJK}]", message.content):
            mentions += _zh_mentions(message.content, owner)
        mentions += _en_mentions(message.content, owner, known)
        for mention in sorted(mentions, key=lambda m: m.start):
            full = short.get(fold(mention.name)) if mention.bare else None
            if full:
                mention = _Mention(mention.start, "person", full, [mention.name], given=full.split()[0], bare=True)
            merged.add(mention, position)
    # A given name said on its own later ("Anna said …", "豆豆很乖") is a mention too.
    for entity in merged.entities:
        for given in sorted(entity.given):
            entity.evidence.update(n for n, message in enumerate(messages) if _names(message.content, given))
    ordered = sorted(merged.entities, key=lambda e: (min(e.evidence), e.order))
    return [ExtractedEntity(name=e.name, entity_type=e.entity_type, aliases=e.aliases,
                            evidence_message_ids=list(dict.fromkeys(messages[i].message_id for i in sorted(e.evidence))))
            for e in ordered]


class _Merged:
    """The session's entities so far, found by (type, name or alias) and by given name across types."""

    def __init__(self) -> None:
        self.entities: list[_Entity] = []
        self.index: dict[tuple[str, str], int] = {}
        self.by_given: dict[str, int] = {}

    def add(self, mention: _Mention, position: int) -> None:
        if len(mention.name) > ENTITY_NAME_MAX:
            return
        mention.aliases = [a for a in dict.fromkeys(mention.aliases) if len(a) <= ENTITY_NAME_MAX]
        given = fold(mention.given) if mention.given else None
        if mention.bare and given in self.by_given:
            self._join(self.by_given[given], mention, position)
            return
        n = next((self.index[(mention.entity_type, fold(key))] for key in (mention.name, *mention.aliases)
                  if (mention.entity_type, fold(key)) in self.index), None)
        if n is not None and given is not None and self.entities[n].given and given not in self.entities[n].given:
            # A second sister, a second dog: its own entity, named by its name.
            n = None
            assert mention.given is not None
            mention = _Mention(mention.start, mention.entity_type, mention.given,
                               [a for a in (mention.name, *mention.aliases) if a != mention.given], given=mention.given)
        if n is None:
            self.entities.append(_Entity(mention.entity_type, mention.name, [], set(), set(), len(self.entities)))
            n = len(self.entities) - 1
        self._join(n, mention, position)

    def _join(self, n: int, mention: _Mention, position: int) -> None:
        entity = self.entities[n]
        entity.evidence.add(position)
        if (mention.given and mention.name == mention.given and not entity.given and not mention.bare) \
                or (mention.bare and mention.name.startswith(entity.name + " ")):
            # "my dog" and then "my dog Max": the pet is Max; "Lin" and then "Lin Wei": the fullest name.
            entity.aliases.insert(0, entity.name)
            entity.name = mention.name
        for alias in (mention.name, *mention.aliases):
            known = {fold(entity.name), *(fold(a) for a in entity.aliases)}
            if fold(alias) not in known:
                entity.aliases.append(alias)
        entity.aliases = [a for a in entity.aliases if fold(a) != fold(entity.name)][:ENTITY_ALIASES_MAX]
        for key in (mention.name, *mention.aliases):
            self.index.setdefault((mention.entity_type, fold(key)), n)
        if mention.given:
            entity.given.add(fold(mention.given))
            self.by_given.setdefault(fold(mention.given), n)


def _names(text: str, given: str) -> bool:
    if re.fullmatch(f"[{_CJK}]+", given):
        return len(given) >= 2 and given in text
    return bool(re.search(rf"(?<![\w'’-]){re.escape(given)}(?![\w-])", fold(text)))
