"""Rules: work: leaving an employer first, then the employer, then job titles."""

from __future__ import annotations

import re

from agent_memory.providers.offline.gazetteer import is_chinese_city, is_dictionary_word, is_first_name, leading_city
from agent_memory.providers.offline.lexicon import _JOB_NOUNS, _NOT_JOBS, _ZH_JOB_TAIL, _job_value
from agent_memory.providers.offline.rules.base import _EV, _PV, _ZC, _r, _Rule
from agent_memory.providers.offline.values import _CJK, _clean, _employer, _has_cjk, _no_city, _org, _place
from agent_memory.providers.offline.zh_segment import tagged

# A frame followed by a verb phrase, not a title ("the shelter made me feel great to help").
_NOT_A_TITLE = re.compile(r"^(?:feel|want|think|realize|realise|laugh|cry|smile|wonder|see|believe|happy|sad|proud|"
                          r"nervous|sick|tired|stronger|better|worse)\b|\bto\s+[a-z]+$", re.I)


def _job_framed(m: re.Match[str], sentence: str) -> list[tuple[str, str]] | None:
    """A title in a job frame ("work as", "a job as", "promoted to"): any noun but a non-job one."""
    v = _clean(re.sub(r"\s+(?:(?:down|up|over|out|here|there|back)\s+)?(?:at|for|in|with|on|since|from)\b.*$", "",
                      m.group("v"), flags=re.I), max_words=4)
    if not v or v.split()[-1].lower() in _NOT_JOBS or re.match(r"[$€£¥\d]", v) or _NOT_A_TITLE.search(v):
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

_LEAVE_JOB = (r"(?:left|quit|leaving|quitting|resigned\s+from|got\s+laid\s+off\s+from|was\s+laid\s+off\s+from|"
              r"handed\s+(?:in\s+)?my\s+notice\s+(?:in\s+)?at|gave\s+(?:my\s+)?notice\s+at|walked\s+out\s+of)")
# Words that make a message about work, so "joined X" or "I'm at X now" names an employer.
_WORK_CONTEXT = re.compile(r"\b(?:job|jobs|work|working|role|position|team|office|boss|manager|colleagues?|coworkers?|hike|appraisal|"
                           r"salary|pay|paid|benefits|shifts?|commute|hired|offer|posting|contract|onboarding|"
                           r"intern(?:ship)?|promot\w+|quit|left|resigned|notice|switched|lab|clients?|startup|"
                           r"company|firm|employer|career)\b|工作|上班|入职|跳槽|公司|老板|同事|工资|薪水|岗位|不干|辞|离职|报到|转行|offer|"
                           r"前[^\s,]{1,6}人|(?:银行|集团|医院|学校|工厂|事务所|律所|研究院|大学)(?=$|[,.!。了])", re.I)

# Order is priority: a span taken by an earlier rule is not re-read by a later one, and


RULES: list[_Rule] = [
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
    # "As a physician I see …": a title framing the speaker's own statement.
    _r(r"^\s*as\s+(?:a|an)\s+(?P<v>(?:[A-Za-z-]+\s+){0,2}?[A-Za-z-]+)(?=\s*,?\s+(?:I|I'm|I've|we)\b)", "work", "job", make=_job),
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
]
