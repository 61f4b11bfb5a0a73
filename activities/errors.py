"""Translation of domain errors into Temporal failures, in one place for every activity."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import psycopg
from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from activities.heartbeat import heartbeating
from agent_memory.api.outages import dependency_down
from agent_memory.core.contract import ErrorType
from agent_memory.core.errors import first_line
from agent_memory.lifecycle.erasure import ErasureRequestConflictError
from agent_memory.memory.events import VersionConflictError
from agent_memory.memory.operations import OperationMismatchError, RecordNotFoundError, SubjectErasedError
from agent_memory.projection.reembedding import ModelMismatchError
from agent_memory.providers.errors import ProviderOutputInvalid, ProviderPermanentError, ProviderRetryableError
from agent_memory.security.crypto import KeyUnavailableError, RotationUnsupportedError
from agent_memory.security.operator_requests import UnauthorizedRequestError

T = TypeVar("T")

# Permanent: retrying cannot help. The workflow decides what to do with each type.
PERMANENT: dict[type[Exception], ErrorType] = {
    SubjectErasedError: ErrorType.SUBJECT_ERASED,
    ErasureRequestConflictError: ErrorType.ERASURE_REQUEST_CONFLICT,
    # A destructive run nobody registered (a start through a bare Temporal client).
    UnauthorizedRequestError: ErrorType.UNAUTHORIZED_REQUEST,
    KeyUnavailableError: ErrorType.KEY_UNAVAILABLE,
    RotationUnsupportedError: ErrorType.ROTATION_UNSUPPORTED,
    VersionConflictError: ErrorType.VERSION_CONFLICT,
    OperationMismatchError: ErrorType.OPERATION_MISMATCH,
    # Only the domain's own "not found"; a KeyError or IndexError is a bug: retried, so a fixed
    # deployment heals the run, and never reported as a missing record.
    RecordNotFoundError: ErrorType.NOT_FOUND,
    ProviderPermanentError: ErrorType.PROVIDER_PERMANENT,
    # The raw text is in the failed operation's record; another sample is not our call to make.
    ProviderOutputInvalid: ErrorType.PROVIDER_OUTPUT_INVALID,
    # A re-embedding on a worker whose embedder is another model: another worker must run it.
    ModelMismatchError: ErrorType.MODEL_MISMATCH,
}


def temporal_failures(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Heartbeats while the activity runs (activities/heartbeat.py: at a third of the heartbeat
    timeout, with the progress the activity records), and maps domain errors to Temporal failures."""

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            async with heartbeating():
                return await fn(*args, **kwargs)
        except tuple(PERMANENT) as exc:
            kind = next(name for cls, name in PERMANENT.items() if isinstance(exc, cls))
            raise ApplicationError(str(exc), type=kind, non_retryable=True) from exc
        except psycopg.DataError as exc:
            # Its message quotes the offending value (possibly a transcript): keep it out of history.
            raise ApplicationError(f"a value could not be stored (SQLSTATE {exc.sqlstate})",
                                   type=ErrorType.UNSTORABLE_VALUE, non_retryable=True) from None
        except ProviderRetryableError as exc:  # the retry policy retries, after the server's hint if any
            delay = timedelta(seconds=min(exc.retry_after, 300)) if exc.retry_after else None
            raise ApplicationError(str(exc), type=ErrorType.PROVIDER_RETRYABLE, next_retry_delay=delay) from exc
        except Exception as exc:
            dependency = dependency_down(exc)
            if dependency is None:
                raise
            # An outage (a restarted PostgreSQL's dead connections, a Redis that stalls): one line
            # in the worker's log, no traceback; the retry policy runs the step again.
            reason = f"{dependency} is unavailable: {first_line(exc, type(exc).__name__)}"
            # activity.logger adds the step, its attempt and its run.
            activity.logger.warning("%s; retried", reason)
            raise ApplicationError(reason, type=ErrorType.DEPENDENCY_UNAVAILABLE,
                                   category=ApplicationErrorCategory.BENIGN) from None

    return wrapper
