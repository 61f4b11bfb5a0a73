"""Rules: the languages one speaks ("I speak Spanish and French", "fluent in Korean", 会说粤语和英语):
`language/<language>` = the language's English name, one fact per language."""

from __future__ import annotations

import re

from agent_memory.providers.offline.rules.base import _ZC, _r, _Rule
from agent_memory.providers.offline.values import _slug

_EN_LANGUAGES = frozenset(
    "english spanish french german italian portuguese japanese korean chinese mandarin cantonese russian arabic hindi "
    "dutch swedish norwegian danish finnish polish greek turkish hebrew vietnamese thai indonesian malay tagalog "
    "filipino swahili urdu bengali punjabi tamil telugu marathi gujarati persian farsi czech slovak hungarian "
    "romanian ukrainian bulgarian serbian croatian catalan basque galician irish welsh icelandic latin yiddish "
    "amharic yoruba zulu afrikaans nepali sinhala khmer lao burmese mongolian kazakh uzbek georgian armenian "
    "estonian latvian lithuanian slovenian albanian maltese hokkien shanghainese taiwanese".split())
_ZH_LANGUAGES = {
    "英语": "English", "英文": "English", "西班牙语": "Spanish", "西语": "Spanish", "法语": "French", "法文": "French",
    "德语": "German", "德文": "German", "意大利语": "Italian", "意语": "Italian", "葡萄牙语": "Portuguese", "葡语": "Portuguese",
    "日语": "Japanese", "日文": "Japanese", "韩语": "Korean", "韩文": "Korean", "朝鲜语": "Korean", "中文": "Chinese",
    "汉语": "Chinese", "普通话": "Mandarin", "国语": "Mandarin", "粤语": "Cantonese", "广东话": "Cantonese", "白话": "Cantonese",
    "俄语": "Russian", "俄文": "Russian", "阿拉伯语": "Arabic", "印地语": "Hindi", "荷兰语": "Dutch", "瑞典语": "Swedish",
    "挪威语": "Norwegian", "丹麦语": "Danish", "芬兰语": "Finnish", "波兰语": "Polish", "希腊语": "Greek", "土耳其语": "Turkish",
    "希伯来语": "Hebrew", "越南语": "Vietnamese", "泰语": "Thai", "印尼语": "Indonesian", "马来语": "Malay", "波斯语": "Persian",
    "乌克兰语": "Ukrainian", "捷克语": "Czech", "匈牙利语": "Hungarian", "拉丁语": "Latin", "闽南语": "Hokkien",
    "闽南话": "Hokkien", "上海话": "Shanghainese", "客家话": "Hakka", "四川话": "Sichuanese", "东北话": "Northeastern Mandarin",
}
_ZH_QUALIFIER = re.compile(r"^(?:一点|一些|一点点|点|流利的|一口流利的|一口|几句|简单的|基础的)")
_EN_QUALIFIER = (r"(?:(?:fluent|some|basic|conversational|decent|good|broken|passable|native|pretty\s+good|"
                 r"a\s+(?:little|bit)(?:\s+of)?|a\s+fair\s+bit\s+of)\s+)?")


def _english(m: re.Match[str], sentence: str) -> list[tuple[str, str]] | None:
    word = m.group("v").split()[0]
    if word.lower() not in _EN_LANGUAGES:
        return None
    return [(_slug(word), word.capitalize())]


def _chinese(m: re.Match[str], sentence: str) -> list[tuple[str, str]] | None:
    value = _ZH_QUALIFIER.sub("", m.group("v"))
    name = next((english for word, english in sorted(_ZH_LANGUAGES.items(), key=lambda kv: -len(kv[0]))
                 if value.startswith(word)), None)
    return [(_slug(name), name)] if name else None


RULES: list[_Rule] = [
    _r(r"\b(?:speak|speaks|(?:'m|am|are)\s+(?:also\s+)?(?:fluent|conversational|native)\s+in|fluent\s+in|bilingual\s+in|"
       r"(?:my\s+)?(?:native|first|mother)\s+(?:language|tongue)\s+is|grew\s+up\s+speaking|get\s+by\s+in)\s+" + _EN_QUALIFIER
       + r"(?P<v>(?-i:[A-Z])[a-z]+)\b", "language", "{slug}", make=_english),
    _r(r"\b(?:I'm|I\s+am|we're|we\s+are)\s+(?:a\s+)?(?:native|fluent)\s+(?P<v>(?-i:[A-Z])[a-z]+)\s+speaker\b", "language",
       "{slug}", make=_english),
    _r(r"(?:会说|会讲|能说|能讲|说得来|讲得来|精通|母语是|会|懂)(?P<v>" + _ZC + r"{2,16})", "language", "{slug}", make=_chinese),
]
