"""Rules: trips and stays (temporary facts), read before the home city so a stay never touches
location/home_city."""

from __future__ import annotations

from agent_memory.providers.offline.gazetteer import is_chinese_city
from agent_memory.providers.offline.rules.base import _PV, _ZC, _r, _Rule
from agent_memory.providers.offline.values import _place

RULES: list[_Rule] = [
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
]
