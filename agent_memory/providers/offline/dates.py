"""TEMP"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta

from agent_memory.providers.offline.subject import _clause_start
from agent_memory.providers.offline.values import _CJK
from agent_memory.timeexpr import find_time_mentions

# --- dates -------------------------------------------------------------------------------------

_WORD_NUMS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
              "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple of": 2, "a couple of": 2,
              "few": 3, "a few": 3, "several": 3}
_ZH_DIGITS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_MONTH_NAMES = frozenset("january february march april may june july august september october november december "
                         "jan feb mar apr jun jul aug sep sept oct nov dec".split())
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_UNIT_DAYS = {"年": 365, "day": 1, "night": 1, "week": 7, "month": 30, "天": 1, "晚": 1, "周": 7, "星期": 7, "礼拜": 7, "月": 30}
_EN_COUNT = r"(\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|(?:a\s+)?couple\s+of|(?:a\s+)?few)"
_DUR_EN = re.compile(r"\b(?:for|back\s+in)\s+(?:the\s+next\s+|another\s+)?" + _EN_COUNT + r"\s+(day|night|week|month)s?\b|"
                     r"\b" + _EN_COUNT + r"(?:\s+|-)(day|night|week|month)s?(?:\s+(?:in|at|there|away|of)\b|(?=-?\s*(?:long\s+)?"
                     r"(?:\w+\s+)?(?:trip|course|training|conference|stay|visit|holiday|vacation|workshop|retreat|assignment)))")
_DUR_ZH = re.compile(r"(\d+|[一二两三四五六七八九十半]+)\s*个?(天|晚|周|星期|礼拜|月|年)")
_MON = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_UNTIL_EN = re.compile(r"\b(?:until|till|til|through|thru|back\s+on|back\s+by|back)\s+(?:the\s+)?(?:(\d{4})-(\d{1,2})-"
                       r"(\d{1,2})|" + _MON + r"\s+(\d{1,2})(?:st|nd|rd|th)?|(\d{1,2})(?:st|nd|rd|th)?(?:\s+(?:of\s+)?"
                       + _MON + ")?|(" + "|".join(_WEEKDAYS) + r"))\b")
_UNTIL_ZH = re.compile(r"(?:到|至)(?:(\d{1,2}|[一二三四五六七八九十]+)月)?(\d{1,2}|[一二三四五六七八九十]+)[日号]|"
                       r"(?:周|星期|礼拜)([一二三四五六日天])(?:回|返回|回来|结束)")
_NEXT_WEEK = re.compile(r"\bnext\s+week\b|下周|下个星期|下星期|下礼拜")
_THIS_WEEK = re.compile(r"\bthis\s+week(?:end)?\b|\ball\s+week\b|这周|本周|这个星期|这星期|这礼拜|这个?周末")
_SINCE_WEEKDAY = re.compile(r"\bsince\s+(?:last\s+)?(" + "|".join(_WEEKDAYS) + r")\b", re.I)
_HELD_FOR = re.compile(r"\bfor\s+(?:the\s+(?:past|last)\s+)?(?:about\s+|almost\s+|nearly\s+|over\s+|around\s+|roughly\s+)?" + _EN_COUNT + r"\s+(year|month|week)s?\b|"
                       r"(\d+|[一二两三四五六七八九十]+)\s*(?:个)?(年|月)(?:多)?了?", re.I)
_SHORT_STAY = re.compile(r"\bfor\s+(?:a|an|the|one|two|three|four|five|six|\d+|a\s+few|a\s+couple\s+of)\s+"
                         r"(?:days?|nights?|weeks?|weekend)\b", re.I)


def _zh_num(text: str) -> int:
    if text.isdigit():
        return int(text)
    if "十" in text:
        tens, _, ones = text.partition("十")
        return _ZH_DIGITS.get(tens, 1) * 10 + _ZH_DIGITS.get(ones, 0)
    return _ZH_DIGITS.get(text, 0)


def _en_num(text: str) -> int:
    return int(text) if text.isdigit() else _WORD_NUMS.get(re.sub(r"\s+", " ", text.lower()), 1)


def _month_day(month: int, day: int, today: date) -> date | None:
    try:
        d = date(today.year, month, day)
        return d if d >= today else date(today.year + 1, month, day)
    except ValueError:
        return None


_IN_MONTH = re.compile(r"\b(?:in|since|back\s+in|last|early|late|mid|around)\s+(?:-\s*)?(january|february|march|april|may|"
                       r"june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept?|"
                       r"oct|nov|dec)\b(?!\s+\d)", re.I)


_ZH_MONTH = re.compile(r"(今年|去年)?([一二三四五六七八九十]{1,2}|\d{1,2})月份?(?![一二三四五六七八九十\d]+[日号])(?:初|中|底)?")


def _event_day(sentence: str, written: date, *, temporary: bool, held: bool = True) -> date | None:
    """The day the statement's change happened (or, for a stay, began)."""
    if m := re.search(r"大前天", sentence):
        return written - timedelta(days=3)
    if temporary and _NEXT_WEEK.search(sentence):
        return written + timedelta(days=7 - written.weekday())
    if temporary and re.search(r"\bthis\s+weekend\b|这个?周末", sentence, re.I):
        return written + timedelta(days=max(0, 5 - written.weekday()))
    if m := _SINCE_WEEKDAY.search(sentence):
        target = _WEEKDAYS.index(m[1].lower())
        return written - timedelta(days=(written.weekday() - target) % 7 or 7)
    if not temporary and (m := _ZH_MONTH.search(sentence)):
        month = _zh_num(m[2]) if not m[2].isdigit() else int(m[2])
        if 1 <= month <= 12:
            year = written.year - (1 if m[1] == "去年" or month > written.month else 0)
            return date(year, month, 1)
    sentence = re.sub(r"\b(years?|months?|weeks?|days?)\s+back\b", r"\1 ago", sentence, flags=re.I)
    if m := re.search(r"\b(early|mid|late|start\s+of|beginning\s+of|end\s+of)?\s*last\s+month\b", sentence, re.I):
        first = (written.replace(day=1) - timedelta(days=1)).replace(day=1)
        part = (m[1] or "").lower()
        if part.startswith(("late", "end")):
            return written.replace(day=1) - timedelta(days=1)
        return first + timedelta(days=14) if part == "mid" else first
    if re.search(r"\b(?:a|one)\s+week\s+ago\b", sentence, re.I):
        return written - timedelta(days=7)
    if m := re.search(r"\bthe\s+(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\s+before\s+last\b", sentence, re.I):
        target = _WEEKDAYS.index(m[1].lower())
        return written - timedelta(days=written.weekday() - target + 14)
    for mention in find_time_mentions(sentence, written):
        if mention.day < written or temporary:
            return mention.day
    if not temporary and (m := _IN_MONTH.search(sentence)):
        # "moved back to Cork in March", "been back since april": the last such month, its first day.
        month = _MONTHS.index(m[1][:3].lower()) + 1
        year = written.year if month <= written.month else written.year - 1
        return date(year, month, 1)
    if held and not temporary and (m := _HELD_FOR.search(sentence)):
        # "been living in Lyon for six years", "在深圳生活了五年了": the state has held that long.
        if m[1]:
            n, unit = _en_num(m[1]), m[2].lower()
        else:
            n, unit = _zh_num(m[3]), {"年": "year", "月": "month"}[m[4]]
        if unit == "year":
            try:
                return written.replace(year=written.year - n)
            except ValueError:
                return written - timedelta(days=365 * n)
        return written - timedelta(days=(30 if unit == "month" else 7) * n)
    return None


def _trip_until(sentence: str, created: datetime, start: date) -> datetime | None:
    """End of a stay: an n-day stay from S covers S … S+n−1."""
    text, today = sentence.lower(), created.date()
    next_week = bool(_NEXT_WEEK.search(text))
    if next_week:
        start = today + timedelta(days=7 - today.weekday())
    if m := re.search(r"\b(?:from|starting|leaving|flying\s+out)\s+(?:this\s+|next\s+|on\s+)?(" + "|".join(_WEEKDAYS) + r")\b", text):
        start = today + timedelta(days=(_WEEKDAYS.index(m[1]) - today.weekday()) % 7 or 7)  # "from Monday for four days"
    end: date | None = None
    if m := _DUR_EN.search(text):
        count, unit = (m[1], m[2]) if m[1] else (m[3], m[4])
        end = start + timedelta(days=_en_num(count) * _UNIT_DAYS[unit] - 1)
    elif m := _DUR_ZH.search(text):
        if re.search(r"(?:玩|待|住|呆)了", text) and re.search(r"回来|回家|结束", text):
            end = today - timedelta(days=1) if "昨天" in text else today  # a stay that is over
        else:
            count = 0.5 if m[1] == "半" else _zh_num(m[1])
            end = start + timedelta(days=max(int(count * _UNIT_DAYS[m[2]]), 1) - 1)
    elif m := _UNTIL_EN.search(text):
        if m[1]:
            try:
                end = date(int(m[1]), int(m[2]), int(m[3]))
            except ValueError:
                end = None
        elif m[4]:
            end = _month_day(_MONTHS.index(m[4]) + 1, int(m[5]), today)
        elif m[6]:
            month = _MONTHS.index(m[7]) + 1 if m[7] else today.month
            end = _month_day(month, int(m[6]), today)
            if end and not m[7] and end < today:
                end = None
        elif m[8]:
            end = today + timedelta(days=(_WEEKDAYS.index(m[8]) - today.weekday()) % 7)
    elif m := _UNTIL_ZH.search(text):
        if m[3]:
            end = today + timedelta(days=(_ZH_WEEKDAYS[m[3]] - today.weekday()) % 7)
        else:
            end = _month_day(_zh_num(m[1]) if m[1] else today.month, _zh_num(m[2]), today)
    elif next_week:
        end = start + timedelta(days=6)
    elif m := re.search(r"\bfor\s+the\s+(long\s+)?weekend\b|这个?周末", text):
        saturday = start + timedelta(days=(5 - start.weekday()) % 7)
        end = saturday + timedelta(days=2 if m[1] else 1)
    elif _THIS_WEEK.search(text):
        end = today + timedelta(days=6 - today.weekday())
    elif re.search(r"\blast\s+weekend\b|上(?:个)?周末", text):
        end = start + timedelta(days=1)
    elif re.search(r"\b(?:got|came|just)\s+back\b|回来了|刚回来", text):
        end = today
    elif m := re.search(r"\b(?:until|till|til|through|over)\s+(christmas|xmas|new\s+year)|(?:待到|住到|呆到)(?:过年|春节|元旦)", text):
        end = _month_day(12, 25, today) if m[1] and m[1].startswith(("christmas", "xmas")) else _month_day(1, 1, today)
    return datetime.combine(end, time(23, 59, 59), tzinfo=created.tzinfo) if end else None


def _time_scope(sentence: str, start: int, end: int) -> str:
    """The words that date a statement: its own clause, plus a fronted time clause before it
    ("Last month, I moved …"), so "back in San Diego, sold the old place in June" dates the
    move by its own clause, not by the sale."""
    begin = _clause_start(sentence, start)
    stops = [i for i in (sentence.find(ch, end) for ch in ",;、—") if i >= 0]
    scope = sentence[begin:min(stops) if stops else len(sentence)]
    if stops and re.match(r"\s*(?:已经)?(?:来了|住了|待了|呆了|在这(?:边|里)?(?:住|待)?了)", sentence[min(stops) + 1:]):
        scope += sentence[min(stops):]  # "人在广州，来了六年了": how long it has held, said after it
    if begin > 0:
        before = sentence[_clause_start(sentence, begin - 1):begin - 1]
        mentions = find_time_mentions(before, date(2000, 1, 1))
        rest = before
        for mention in mentions:
            rest = rest.replace(mention.text, " ")
        size = len(re.findall(r"[A-Za-z0-9']+", rest)) + len(re.findall("[" + _CJK + "]", rest)) / 2
        if mentions and size <= 1:
            scope = before + ", " + scope
    return scope


def _observed_at(sentence: str, written_at: datetime, *, temporary: bool, held: bool = True) -> datetime:
    """When the stated change happened: "I moved here last month" happened last month. Only
    past times count for lasting facts; a trip may start in the future ("next week")."""
    day = _event_day(sentence, written_at.date(), temporary=temporary, held=held)
    if day is None or (not temporary and day >= written_at.date()):
        return written_at
    return datetime.combine(day, time(0), tzinfo=written_at.tzinfo)
