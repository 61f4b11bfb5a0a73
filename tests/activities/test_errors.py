"""How activity errors become Temporal failures: domain errors by their own types, bugs retried."""

from __future__ import annotations

import pytest
from temporalio import activity
from temporalio.exceptions import ApplicationError
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
