"""Relative time expressions ("yesterday", "last Friday", "上个月") resolved against the time a
message was written, so memory says "7 May 2023" where the conversation said "yesterday"."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
_NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                 "eight": 8, "nine": 9, "ten": 10, "a few": 3, "a couple of": 2, "couple of": 2, "several": 3}
_ZH_DIGITS = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}
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
    word = word.lower()
    return int(word) if word.isdigit() else _NUMBER_WORDS.get(word, 1)


def _zh_count(word: str) -> int:
    if word.isdigit():
        return int(word)
    if word.startswith("十"):
        return 10 + _ZH_DIGITS.get(word[1:], 0)
    if "十" in word:
        tens, _, ones = word.partition("十")
        return _ZH_DIGITS.get(tens, 1) * 10 + _ZH_DIGITS.get(ones, 0)
    return _ZH_DIGITS.get(word, 1)


_N = r"(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple of|couple of|several)"
_ZN = r"([0-9一二两三四五六七八九十]+)"


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
        (r"\blast (monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", weekday_before),
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
        (rf"\b{_N} (days?|weeks?|months?|years?) ago\b", ago),
    ]


def _chinese(anchor: date):
    def ago(m):
        n, unit = _zh_count(m.group(1)), m.group(2)
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
        (rf"{_ZN}(天|周|个星期|星期|个礼拜|礼拜|个月|年)前", ago),
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
