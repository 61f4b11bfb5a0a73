"""Rules: likes and dislikes: stopping first, then dislikes, then likes (the most generic verbs)."""

from __future__ import annotations

import re
from collections.abc import Callable

from agent_memory.providers.offline.gazetteer import is_chinese_city
from agent_memory.providers.offline.rules.base import _EV, _ZADV, _ZC, _r, _Rule
from agent_memory.providers.offline.subject import _EN_FIRST, _clause_start
from agent_memory.providers.offline.values import _has_cjk, _object, _slug

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


RULES: list[_Rule] = [
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
]
