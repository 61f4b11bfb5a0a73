"""Dialogue: a user's bare answer to the assistant's question ("Which team?" -> "The Minnesota
Wolves!") fills the slot the question asked for."""

from __future__ import annotations

import re

from agent_memory.core.models import ExtractedFact, Message
from agent_memory.providers.offline.lexicon import (
    _EN_SPECIES,
    _NOT_NAMES,
    _ZH_SPECIES,
    _may_be_given_name,
    _purpose,
    _species,
)
from agent_memory.providers.offline.rules.base import _MONEY_MARKED, _ZC, _ZH_MONEY
from agent_memory.providers.offline.rules.work import _job_framed
from agent_memory.providers.offline.sentence import _hypothetical, _prepare
from agent_memory.providers.offline.values import _CJK, _PRONOUNS, _clean, _has_cjk, _lowercase_org, _org, _place, _slug
from agent_memory.providers.offline.zh_segment import could_be_a_name

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
