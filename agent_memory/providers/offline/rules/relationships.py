"""Rules: relationship status (single, dating, engaged, married, divorced, widowed)."""

from __future__ import annotations

import re
from collections.abc import Callable

from agent_memory.providers.offline.lexicon import _PARTNER, _STATUS_WORDS, _ZH_STATUS
from agent_memory.providers.offline.rules.base import _r, _Rule


def _status(value: str) -> Callable[[re.Match[str], str], list[tuple[str, str]]]:
    return lambda m, s: [("status", value)]


def _status_word(m: re.Match[str], sentence: str) -> list[tuple[str, str]] | None:
    word = m.group("w").lower()
    status = _STATUS_WORDS.get(word) or _PARTNER.get(word)
    return [("status", status)] if status else None


RULES: list[_Rule] = [
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
]
