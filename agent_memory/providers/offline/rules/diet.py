"""Rules: diet (spicy food, vegetarian and vegan diets and their ends, allergies, foods avoided)."""

from __future__ import annotations

from agent_memory.providers.offline.rules.base import _EV, _ZC, _ZV, _const, _end_value, _r, _Rule
from agent_memory.providers.offline.values import _clean

RULES: list[_Rule] = [
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
    _r(r"(?:改吃|吃|是|成了|当了|算是|算)(?P<v>纯素|全素)", "diet", "restriction", make=_const("restriction", "vegan")),
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
]
