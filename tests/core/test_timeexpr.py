"""Tests of agent_memory.core.timeexpr: relative expressions resolved against the time a message was
written, the day a stated change happened, and the end of a stay, all read with one set of tables."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from agent_memory.core.timeexpr import annotate, change_day, find_time_mentions, is_short_stay, stay_end

WEDNESDAY = date(2024, 5, 8)
WRITTEN = datetime(2024, 5, 8, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize("text, day, granularity", [
    ("We moved yesterday", date(2024, 5, 7), "day"),
    ("前天搬的家", date(2024, 5, 6), "day"),
    ("大前天搬的家", date(2024, 5, 5), "day"),  # three days before, not 前天 inside it
    ("eleven days ago", date(2024, 4, 27), "day"),
    ("a few weeks ago", date(2024, 4, 17), "week"),
    ("several months ago", date(2024, 2, 1), "month"),
    ("三个月前", date(2024, 2, 1), "month"),
    ("十二天前", date(2024, 4, 26), "day"),
])
def test_relative_expressions_resolve_against_the_time_written(text, day, granularity):
    [mention] = find_time_mentions(text, WEDNESDAY)
    assert (mention.day, mention.granularity) == (day, granularity)


def test_annotate_writes_the_resolved_day_after_the_expression():
    assert annotate("大前天刚搬到南京", WEDNESDAY) == "大前天（2024年5月5日）刚搬到南京"
    assert annotate("I moved last week.", WEDNESDAY) == "I moved last week (the week before 8 May 2024)."


@pytest.mark.parametrize("text, day", [
    ("I moved here last month", date(2024, 4, 1)),
    ("I moved here late last month", date(2024, 4, 30)),
    ("been here since Saturday", date(2024, 5, 4)),
    ("moved back to Cork in March", date(2024, 3, 1)),
    ("moved back to Cork in June", date(2023, 6, 1)),  # the last June before the message
    ("去年十月搬到了杭州", date(2023, 10, 1)),
    ("been living in Lyon for six years", date(2018, 5, 8)),
    ("been living in Lyon for several years", date(2021, 5, 8)),
    ("在深圳生活了五年了", date(2019, 5, 8)),
    ("大前天搬到南京", date(2024, 5, 5)),
    ("I live in Oslo", None),
])
def test_the_day_a_stated_change_happened(text, day):
    assert change_day(text, WEDNESDAY, temporary=False) == day


def test_a_state_said_to_have_ended_is_not_dated_by_how_long_it_held():
    assert change_day("lived in Lyon for six years", WEDNESDAY, temporary=False, held=False) is None


def test_a_stay_may_start_in_the_future_a_lasting_change_may_not():
    assert change_day("in Rome next week", WEDNESDAY, temporary=True) == date(2024, 5, 13)  # the Monday
    assert change_day("moving to Rome next week", WEDNESDAY, temporary=False) is None


@pytest.mark.parametrize("text, start, last_day", [
    ("in lisbon for two weeks", WEDNESDAY, date(2024, 5, 21)),
    ("in lisbon for several days", WEDNESDAY, date(2024, 5, 10)),
    ("a three-day conference in oslo", date(2024, 5, 9), date(2024, 5, 11)),
    ("staying until the 14th", WEDNESDAY, date(2024, 5, 14)),
    ("back on friday", WEDNESDAY, date(2024, 5, 10)),
    ("出差到20号", WEDNESDAY, date(2024, 5, 20)),
    ("去大理出差，要待五天", WEDNESDAY, date(2024, 5, 12)),
])
def test_the_end_of_a_stay(text, start, last_day):
    assert stay_end(text, WRITTEN, start) == datetime(last_day.year, last_day.month, last_day.day, 23, 59, 59, tzinfo=UTC)


def test_a_stay_without_a_length_or_an_end_has_no_end():
    assert stay_end("I'm in Paris", WRITTEN, WEDNESDAY) is None


@pytest.mark.parametrize("text, short", [
    ("going back to Paris for a week", True),
    ("in Paris for seven nights", True),
    ("in Paris for the weekend", True),
    ("moved to Paris for good", False),
])
def test_a_short_stay_is_days_or_weeks(text, short):
    assert is_short_stay(text) is short
