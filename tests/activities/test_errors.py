"""How activity errors become Temporal failures: domain errors by their own types, bugs retried,
a dependency's outage retried with one line in the log."""

from __future__ import annotations

import logging

import psycopg
import pytest
from redis.exceptions import TimeoutError as RedisTimeoutError
from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.testing import ActivityEnvironment

from activities.errors import temporal_failures
from agent_memory.memory.operations import RecordNotFoundError


@activity.defn
@temporal_failures
async def fail_with(exc: Exception) -> None:
    raise exc


@pytest.mark.parametrize("bug", [KeyError("k"), IndexError("i"), LookupError("l")])
async def test_a_bug_stays_retryable_and_is_not_reported_as_a_missing_record(bug):
    # A LookupError (KeyError, IndexError) is a bug, not a missing record: never a permanent "NotFound".
    with pytest.raises(type(bug)):
        await ActivityEnvironment().run(fail_with, bug)


async def test_a_missing_record_is_a_permanent_not_found():
    with pytest.raises(ApplicationError) as failure:
        await ActivityEnvironment().run(fail_with, RecordNotFoundError("session 's1' has no messages"))
    assert failure.value.type == "NotFound" and failure.value.non_retryable


@pytest.mark.parametrize(("outage", "dependency"), [
    (psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly"), "postgres"),
    (RedisTimeoutError("Timeout reading from 127.0.0.1:6379"), "redis"),
])
async def test_an_outage_is_one_retryable_line_without_a_traceback(caplog, outage, dependency):
    with caplog.at_level(logging.DEBUG), pytest.raises(ApplicationError) as failure:
        await ActivityEnvironment().run(fail_with, outage)
    assert failure.value.type == "DependencyUnavailable" and not failure.value.non_retryable
    assert failure.value.category == ApplicationErrorCategory.BENIGN  # the SDK logs it at debug, no warning
    assert failure.value.__cause__ is None and failure.value.__suppress_context__
    [line] = [r for r in caplog.records if r.name == "temporalio.activity" and r.levelno == logging.WARNING]
    assert f"{dependency} is unavailable" in line.getMessage() and "retried" in line.getMessage()
    assert line.exc_info is None and "\n" not in line.getMessage()
