"""When a statement happened: the words that date it (its clause, and a fronted time clause), read
by agent_memory.core.timeexpr against the time the message was written."""

from __future__ import annotations

import re
from datetime import date, datetime, time

from agent_memory.core.timeexpr import change_day, find_time_mentions
from agent_memory.providers.offline.subject import _clause_start
from agent_memory.providers.offline.values import _CJK


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
    day = change_day(sentence, written_at.date(), temporary=temporary, held=held)
    if day is None or (not temporary and day >= written_at.date()):
        return written_at
    return datetime.combine(day, time(0), tzinfo=written_at.tzinfo)
