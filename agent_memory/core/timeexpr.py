"""Time expressions, read against the time a message was written.

- Relative expressions ("yesterday", "last Friday", "上个月") are resolved so memory says
  "7 May 2023" where the conversation said "yesterday" (`find_time_mentions`, `annotate`).
- The day a stated change happened ("moved here last month", "since Saturday", "in March",
  "for six years", 大前天), or a stay began (`change_day`).
- The end of a stay: an n-day stay from S covers S … S+n−1 ("for two weeks", "until the 14th",
  "back on Friday", 到5号, 这周末) (`stay_end`).

One set of tables (weekdays, months, number words, Chinese numerals) serves all of them. Pure
stdlib and deterministic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
_MONTH_ABBREVIATIONS = [m[:3].lower() for m in MONTHS]  # jan … dec
# Every word that names a month, as written in lower case.
MONTH_WORDS = frozenset([m.lower() for m in MONTHS] + _MONTH_ABBREVIATIONS + ["sept"])
# Counts said in words: "two weeks ago", "for a couple of days", "several months".
_NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                 "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "few": 3, "a few": 3,
                 "couple of": 2, "a couple of": 2, "several": 3}
_COUNT_WORDS = (r"\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|several|"
                r"(?:a\s+)?couple\s+of|(?:a\s+)?few")
_COUNT = f"({_COUNT_WORDS})"
_ZH_DIGITS = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}
_ZH_COUNT = r"(\d+|[一二两三四五六七八九十]+)"
_ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}


@dataclass(frozen=True)
class TimeMention:
    start: int
    end: int
    text: str
    day: date  # the first day of the period meant
    granularity: str  # day, week, weekend, month, year
    label: str  # how memory writes it: "7 May 2023", "the week before 8 May 2023", "April 2023"


def format_day(d: date) -> str:
    return f"{d.day} {MONTHS[d.month - 1]} {d.year}"


def format_month(d: date) -> str:
    return f"{MONTHS[d.month - 1]} {d.year}"


def format_day_zh(d: date) -> str:
    return f"{d.year}年{d.month}月{d.day}日"


def format_month_zh(d: date) -> str:
    return f"{d.year}年{d.month}月"


def _shift_month(d: date, months: int) -> date:
    index = d.year * 12 + d.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def _count(word: str) -> int:
    """A count said in digits or words ("3", "two", "a couple of"); 1 when it is none of them."""
    return int(word) if word.isdigit() else _NUMBER_WORDS.get(re.sub(r"\s+", " ", word.lower()), 1)


def _zh_count(word: str) -> int | None:
    """A count in Chinese or Arabic numerals up to 99 ("五", "十二", "两", "12"); None when it is none."""
    if word.isdigit():
        return int(word)
    if "十" in word:
        tens, _, ones = word.partition("十")
        return _ZH_DIGITS.get(tens, 1) * 10 + _ZH_DIGITS.get(ones, 0)
    return _ZH_DIGITS.get(word)


def _english(anchor: date):
    """(pattern, resolver(match) -> (day, granularity, label)) for English expressions."""
    def weekday_before(m):
        target = WEEKDAYS.index(m.group(1).lower())
        back = (anchor.weekday() - target) % 7 or 7
        d = anchor - timedelta(days=back)
        return d, "day", f"the {m.group(1).capitalize()} before {format_day(anchor)}, {format_day(d)}"

    def ago(m):
        n, unit = _count(m.group(1)), m.group(2).lower().rstrip("s")
        if unit == "day":
            d = anchor - timedelta(days=n)
            return d, "day", format_day(d)
        if unit == "week":
            d = anchor - timedelta(weeks=n)
            return d, "week", f"{n} week{'s' * (n > 1)} before {format_day(anchor)}"
        if unit == "month":
            d = _shift_month(anchor, -n)
            return d, "month", format_month(d)
        return date(anchor.year - n, 1, 1), "year", str(anchor.year - n)

    return [
        (r"\bthe day before yesterday\b", lambda m: (anchor - timedelta(2), "day", format_day(anchor - timedelta(2)))),
        (r"\b(?:yesterday|last night)\b", lambda m: (anchor - timedelta(1), "day", format_day(anchor - timedelta(1)))),
        (r"\b(?:today|tonight|this morning|this afternoon|this evening)\b",
         lambda m: (anchor, "day", format_day(anchor))),
        (r"\btomorrow\b", lambda m: (anchor + timedelta(1), "day", format_day(anchor + timedelta(1)))),
        (r"\blast (" + "|".join(WEEKDAYS) + r")\b", weekday_before),
        (r"\blast weekend\b", lambda m: (anchor - timedelta(days=anchor.weekday() + 2), "weekend",
                                         f"the weekend before {format_day(anchor)}")),
        (r"\blast week\b", lambda m: (anchor - timedelta(days=7), "week", f"the week before {format_day(anchor)}")),
        (r"\bthis week\b", lambda m: (anchor - timedelta(days=anchor.weekday()), "week",
                                      f"the week of {format_day(anchor)}")),
        (r"\bnext week\b", lambda m: (anchor + timedelta(days=7), "week", f"the week after {format_day(anchor)}")),
        (r"\bnext month\b", lambda m: (_shift_month(anchor, 1), "month", format_month(_shift_month(anchor, 1)))),
        (r"\blast month\b", lambda m: (_shift_month(anchor, -1), "month", format_month(_shift_month(anchor, -1)))),
        (r"\bthis month\b", lambda m: (_shift_month(anchor, 0), "month", format_month(anchor))),
        (r"\blast year\b", lambda m: (date(anchor.year - 1, 1, 1), "year", str(anchor.year - 1))),
        (r"\bthis year\b", lambda m: (date(anchor.year, 1, 1), "year", str(anchor.year))),
        (r"\bnext year\b", lambda m: (date(anchor.year + 1, 1, 1), "year", str(anchor.year + 1))),
        (rf"\b{_COUNT} (days?|weeks?|months?|years?) ago\b", ago),
    ]


def _chinese(anchor: date):
    def ago(m):
        n, unit = _zh_count(m.group(1)), m.group(2)
        n = 1 if n is None else n
        if unit == "天":
            d = anchor - timedelta(days=n)
            return d, "day", format_day_zh(d)
        if unit in ("周", "个星期", "星期", "个礼拜", "礼拜"):
            return anchor - timedelta(weeks=n), "week", f"{format_day_zh(anchor)}之前{n}周"
        if unit in ("个月", "月"):
            d = _shift_month(anchor, -n)
            return d, "month", format_month_zh(d)
        return date(anchor.year - n, 1, 1), "year", f"{anchor.year - n}年"

    def last_weekday(m):
        target = _ZH_WEEKDAYS[m.group(1)]
        monday_last_week = anchor - timedelta(days=anchor.weekday() + 7)
        d = monday_last_week + timedelta(days=target)
        return d, "day", format_day_zh(d)

    return [
        (r"大前天", lambda m: (anchor - timedelta(3), "day", format_day_zh(anchor - timedelta(3)))),
        (r"前天", lambda m: (anchor - timedelta(2), "day", format_day_zh(anchor - timedelta(2)))),
        (r"昨天|昨晚", lambda m: (anchor - timedelta(1), "day", format_day_zh(anchor - timedelta(1)))),
        (r"今天|今晚", lambda m: (anchor, "day", format_day_zh(anchor))),
        (r"明天", lambda m: (anchor + timedelta(1), "day", format_day_zh(anchor + timedelta(1)))),
        (r"上(?:周|个?星期|个?礼拜)([一二三四五六日天])", last_weekday),
        (r"上(?:周末|个周末)", lambda m: (anchor - timedelta(days=anchor.weekday() + 2), "weekend",
                                         f"{format_day_zh(anchor)}之前的周末")),
        (r"上(?:周|个?星期|个?礼拜)", lambda m: (anchor - timedelta(days=7), "week", f"{format_day_zh(anchor)}之前的一周")),
        (r"下(?:周|个?星期|个?礼拜)", lambda m: (anchor + timedelta(days=7), "week", f"{format_day_zh(anchor)}之后的一周")),
        (r"上个月", lambda m: (_shift_month(anchor, -1), "month", format_month_zh(_shift_month(anchor, -1)))),
        (r"下个月", lambda m: (_shift_month(anchor, 1), "month", format_month_zh(_shift_month(anchor, 1)))),
        (r"这个月|本月", lambda m: (_shift_month(anchor, 0), "month", format_month_zh(anchor))),
        (r"去年", lambda m: (date(anchor.year - 1, 1, 1), "year", f"{anchor.year - 1}年")),
        (r"今年", lambda m: (date(anchor.year, 1, 1), "year", f"{anchor.year}年")),
        (rf"{_ZH_COUNT}(天|周|个星期|星期|个礼拜|礼拜|个月|年)前", ago),
    ]


def find_time_mentions(text: str, written_at: datetime | date) -> list[TimeMention]:
    """Relative time expressions in `text`, resolved against when it was written."""
    anchor = written_at.date() if isinstance(written_at, datetime) else written_at
    found: list[TimeMention] = []
    taken: list[tuple[int, int]] = []
    for pattern, resolve in [*_english(anchor), *_chinese(anchor)]:
        for m in re.finditer(pattern, text, flags=re.IGNORECASE):
            if any(m.start() < end and start < m.end() for start, end in taken):
                continue  # a longer expression already covers this span
            day, granularity, label = resolve(m)
            found.append(TimeMention(m.start(), m.end(), m.group(0), day, granularity, label))
            taken.append((m.start(), m.end()))
    return sorted(found, key=lambda t: t.start)


def annotate(text: str, written_at: datetime | date) -> str:
    """The text with each relative expression followed by its resolution in parentheses."""
    out, last = [], 0
    for mention in find_time_mentions(text, written_at):
        out.append(text[last:mention.end])
        cjk = any("\u3400" <= ch <= "\u9fff" for ch in mention.text)
        out.append(f"（{mention.label}）" if cjk else f" ({mention.label})")
        last = mention.end
    out.append(text[last:])
    return "".join(out)


# --- the day a change happened, the end of a stay -----------------------------------------------

_UNIT_DAYS = {"年": 365, "day": 1, "night": 1, "week": 7, "month": 30, "天": 1, "晚": 1, "周": 7, "星期": 7, "礼拜": 7, "月": 30}
_DUR_EN = re.compile(r"\b(?:for|back\s+in)\s+(?:the\s+next\s+|another\s+)?" + _COUNT + r"\s+(day|night|week|month)s?\b|"
                     r"\b" + _COUNT + r"(?:\s+|-)(day|night|week|month)s?(?:\s+(?:in|at|there|away|of)\b|(?=-?\s*(?:long\s+)?"
                     r"(?:\w+\s+)?(?:trip|course|training|conference|stay|visit|holiday|vacation|workshop|retreat|assignment)))")
_DUR_ZH = re.compile(r"(\d+|[一二两三四五六七八九十半]+)\s*个?(天|晚|周|星期|礼拜|月|年)")
_MON = "(" + "|".join(_MONTH_ABBREVIATIONS) + r")[a-z]*\.?"
_UNTIL_EN = re.compile(r"\b(?:until|till|til|through|thru|back\s+on|back\s+by|back)\s+(?:the\s+)?(?:(\d{4})-(\d{1,2})-"
                       r"(\d{1,2})|" + _MON + r"\s+(\d{1,2})(?:st|nd|rd|th)?|(\d{1,2})(?:st|nd|rd|th)?(?:\s+(?:of\s+)?"
                       + _MON + ")?|(" + "|".join(WEEKDAYS) + r"))\b")
_UNTIL_ZH = re.compile(r"(?:到|至)(?:(\d{1,2}|[一二三四五六七八九十]+)月)?(\d{1,2}|[一二三四五六七八九十]+)[日号]|"
                       r"(?:周|星期|礼拜)([一二三四五六日天])(?:回|返回|回来|结束)")
_NEXT_WEEK = re.compile(r"\bnext\s+week\b|下周|下个星期|下星期|下礼拜")
_THIS_WEEK = re.compile(r"\bthis\s+week(?:end)?\b|\ball\s+week\b|这周|本周|这个星期|这星期|这礼拜|这个?周末")
_SINCE_WEEKDAY = re.compile(r"\bsince\s+(?:last\s+)?(" + "|".join(WEEKDAYS) + r")\b", re.I)
_HELD_FOR = re.compile(r"\bfor\s+(?:the\s+(?:past|last)\s+)?(?:about\s+|almost\s+|nearly\s+|over\s+|around\s+|roughly\s+)?" + _COUNT + r"\s+(year|month|week)s?\b|"
                       rf"{_ZH_COUNT}\s*(?:个)?(年|月)(?:多)?了?", re.I)
_SHORT_STAY = re.compile(rf"\bfor\s+(?:the|{_COUNT_WORDS})\s+(?:days?|nights?|weeks?|weekend)\b", re.I)


def is_short_stay(text: str) -> bool:
    """Whether the text says a stay of days or weeks ("going back to Paris for a week", "for the weekend")."""
    return _SHORT_STAY.search(text) is not None


def _month_day(month: int, day: int, today: date) -> date | None:
    try:
        d = date(today.year, month, day)
        return d if d >= today else date(today.year + 1, month, day)
    except ValueError:
        return None


_IN_MONTH = re.compile(r"\b(?:in|since|back\s+in|last|early|late|mid|around)\s+(?:-\s*)?("
                       + "|".join(sorted(MONTH_WORDS, key=len, reverse=True)) + r")\b(?!\s+\d)", re.I)
_ZH_MONTH = re.compile(r"(今年|去年)?([一二三四五六七八九十]{1,2}|\d{1,2})月份?(?![一二三四五六七八九十\d]+[日号])(?:初|中|底)?")


def change_day(sentence: str, written: date, *, temporary: bool, held: bool = True) -> date | None:
    """The day the change a sentence states happened (or, for a stay, began): "moved here last month",
    "since Saturday", "in March", 大前天; for a state (`held`), how long it has held ("for six years").
    None when the sentence names no time."""
    if m := re.search(r"大前天", sentence):
        return written - timedelta(days=3)
    if temporary and _NEXT_WEEK.search(sentence):
        return written + timedelta(days=7 - written.weekday())
    if temporary and re.search(r"\bthis\s+weekend\b|这个?周末", sentence, re.I):
        return written + timedelta(days=max(0, 5 - written.weekday()))
    if m := _SINCE_WEEKDAY.search(sentence):
        target = WEEKDAYS.index(m[1].lower())
        return written - timedelta(days=(written.weekday() - target) % 7 or 7)
    if not temporary and (m := _ZH_MONTH.search(sentence)):
        month = _zh_count(m[2]) or 0
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
    if m := re.search(r"\bthe\s+(" + "|".join(WEEKDAYS) + r")\s+before\s+last\b", sentence, re.I):
        target = WEEKDAYS.index(m[1].lower())
        return written - timedelta(days=written.weekday() - target + 14)
    for mention in find_time_mentions(sentence, written):
        if mention.day < written or temporary:
            return mention.day
    if not temporary and (m := _IN_MONTH.search(sentence)):
        # "moved back to Cork in March", "been back since april": the last such month, its first day.
        month = _MONTH_ABBREVIATIONS.index(m[1][:3].lower()) + 1
        year = written.year if month <= written.month else written.year - 1
        return date(year, month, 1)
    if held and not temporary and (m := _HELD_FOR.search(sentence)):
        # "been living in Lyon for six years", "在深圳生活了五年了": the state has held that long.
        if m[1]:
            n, unit = _count(m[1]), m[2].lower()
        else:
            n, unit = (_zh_count(m[3]) or 0), {"年": "year", "月": "month"}[m[4]]
        if unit == "year":
            try:
                return written.replace(year=written.year - n)
            except ValueError:
                return written - timedelta(days=365 * n)
        return written - timedelta(days=(30 if unit == "month" else 7) * n)
    return None


def stay_end(sentence: str, created: datetime, start: date) -> datetime | None:
    """The last moment of a stay that began on `start`: an n-day stay from S covers S … S+n−1; None
    when the sentence says no length or end."""
    text, today = sentence.lower(), created.date()
    next_week = bool(_NEXT_WEEK.search(text))
    if next_week:
        start = today + timedelta(days=7 - today.weekday())
    if m := re.search(r"\b(?:from|starting|leaving|flying\s+out)\s+(?:this\s+|next\s+|on\s+)?(" + "|".join(WEEKDAYS) + r")\b", text):
        start = today + timedelta(days=(WEEKDAYS.index(m[1]) - today.weekday()) % 7 or 7)  # "from Monday for four days"
    end: date | None = None
    if m := _DUR_EN.search(text):
        count, unit = (m[1], m[2]) if m[1] else (m[3], m[4])
        end = start + timedelta(days=_count(count) * _UNIT_DAYS[unit] - 1)
    elif m := _DUR_ZH.search(text):
        if re.search(r"(?:玩|待|住|呆)了", text) and re.search(r"回来|回家|结束", text):
            end = today - timedelta(days=1) if "昨天" in text else today  # a stay that is over
        else:
            count = 0.5 if m[1] == "半" else (_zh_count(m[1]) or 0)
            end = start + timedelta(days=max(int(count * _UNIT_DAYS[m[2]]), 1) - 1)
    elif m := _UNTIL_EN.search(text):
        if m[1]:
            try:
                end = date(int(m[1]), int(m[2]), int(m[3]))
            except ValueError:
                end = None
        elif m[4]:
            end = _month_day(_MONTH_ABBREVIATIONS.index(m[4]) + 1, int(m[5]), today)
        elif m[6]:
            month = _MONTH_ABBREVIATIONS.index(m[7]) + 1 if m[7] else today.month
            end = _month_day(month, int(m[6]), today)
            if end and not m[7] and end < today:
                end = None
        elif m[8]:
            end = today + timedelta(days=(WEEKDAYS.index(m[8]) - today.weekday()) % 7)
    elif m := _UNTIL_ZH.search(text):
        if m[3]:
            end = today + timedelta(days=(_ZH_WEEKDAYS[m[3]] - today.weekday()) % 7)
        else:
            end = _month_day((_zh_count(m[1]) or 0) if m[1] else today.month, _zh_count(m[2]) or 0, today)
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
