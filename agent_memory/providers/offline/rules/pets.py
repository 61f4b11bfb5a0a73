"""Rules: pets (key: the name; value: the species); a death ends the pet."""

from __future__ import annotations

import re

from agent_memory.providers.offline.gazetteer import is_dictionary_word
from agent_memory.providers.offline.lexicon import _EN_SPECIES, _KIN, _NOT_NAMES, _ZH_KIN, _ZH_SPECIES, _species
from agent_memory.providers.offline.rules.base import _ZC, _r, _Rule
from agent_memory.providers.offline.values import _clean, _slug
from agent_memory.providers.offline.zh_segment import could_be_a_name


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


RULES: list[_Rule] = [
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
]
