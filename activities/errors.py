"""Translation of domain errors into Temporal failures, in one place for every activity."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import psycopg
from temporalio import activity
from temporalio.exceptions import ApplicationError

from agent_memory.crypto import KeyUnavailableError, RotationUnsupportedError
from agent_memory.erasure import ErasureRequestConflictError
from agent_memory.memory_store import VersionConflictError
from agent_memory.operations import OperationMismatchError, RecordNotFoundError, SubjectErasedError
from agent_memory.providers.errors import ProviderOutputInvalid, ProviderPermanentError, ProviderRetryableError

T = TypeVar("T")

# Permanent: retrying cannot help. The workflow decides what to do with each type.
PERMANENT: dict[type[Exception], str] = {
    SubjectErasedError: "SubjectErased",
    ErasureRequestConflictError: "ErasureRequestConflict",
    KeyUnavailableError: "KeyUnavailable",
    RotationUnsupportedError: "RotationUnsupported",
    VersionConflictError: "VersionConflict",
    OperationMismatchError: "OperationMismatch",
    # Only the domain's own "not found"; a KeyError or IndexError is a bug: retried, so a fixed
    # deployment heals the run, and never reported as a missing record.
    RecordNotFoundError: "NotFound",
    ProviderPermanentError: "ProviderPermanent",
    # The raw text is in the failed operation's record; another sample is not our call to make.
    ProviderOutputInvalid: "ProviderOutputInvalid",
}


# Activities heartbeat this often while they run, so a worker that dies is noticed after the
# workflows' heartbeat timeout instead of the (longer) start-to-close timeout.
HEARTBEAT_INTERVAL_SECONDS = 5.0


async def _heartbeat_until_cancelled() -> None:
    while True:
        activity.heartbeat()
        await asyncio.sleep(HEARTBEAT_INTERVAL_SECONDS)


def temporal_failures(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Heartbeats while the activity runs, and maps domain errors to Temporal failures."""

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> T:
        beat = asyncio.create_task(_heartbeat_until_cancelled()) if activity.in_activity() else None
        try:
            return await fn(*args, **kwargs)
        except tuple(PERMANENT) as exc:
            kind = next(name for cls, name in PERMANENT.items() if isinstance(exc, cls))
            raise ApplicationError(str(exc), type=kind, non_retryable=True) from exc
        except psycopg.DataError as exc:
            # Its message quotes the offending value (possibly a transcript): keep it out of history.
            raise ApplicationError(f"a value could not be stored (SQLSTATE {exc.sqlstate})", type="UnstorableValue",
                                   non_retryable=True) from None
        except ProviderRetryableError as exc:  # the retry policy retries, after the server's hint if any
            delay = timedelta(seconds=min(exc.retry_after, 300)) if exc.retry_after else None
            raise ApplicationError(str(exc), type="ProviderRetryable", next_retry_delay=delay) from exc
        finally:
            if beat is not None:
                beat.cancel()

    return wrapper
