"""Rules: the home city: ending first ("不住重庆了", "don't live in Austin"), then moves and
statements of where one lives."""

from __future__ import annotations

import re

from agent_memory.providers.offline.gazetteer import is_chinese_city, leading_city
from agent_memory.providers.offline.rules.base import _PV, _ZC, _ZEND, _ZV, _r, _Rule
from agent_memory.providers.offline.values import _CJK, _NOT_WORKPLACES, _employer, _place
from agent_memory.providers.offline.zh_segment import is_place_word

RULES: list[_Rule] = [
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
    # "我在北京": where one is, said as all of a clause, is where one lives when it is a city.
    _r(r"(?:^|(?<=[,，。!！\s]))(?:我|我们)(?:现在|目前|如今|人)?在(?P<v>" + _ZC + r"{2,6}?)(?=$|[,，。!！;；])", "location", "home_city",
       make=lambda m, s: [("home_city", v)] if (v := _place(m.group("v"))) and is_chinese_city(v) else None),
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
]
