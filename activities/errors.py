"""Translation of domain errors into Temporal failures, in one place for every activity."""

from __future__ import annotations

import functools
from typing import Awaitable, Callable, TypeVar

from temporalio.exceptions import ApplicationError

from agent_memory.memory_store import VersionConflictError
from agent_memory.operations import OperationMismatchError, SubjectErasedError

T = TypeVar("T")

# Permanent: retrying cannot help. The workflow decides what to do with each type.
PERMANENT = {
    SubjectErasedError: "SubjectErased",
    VersionConflictError: "VersionConflict",
    OperationMismatchError: "OperationMismatch",
    LookupError: "NotFound",
}


def permanent_errors(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    @functools.wraps(fn)
    async def wrapper(*args, **kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except tuple(PERMANENT) as exc:
            kind = next(name for cls, name in PERMANENT.items() if isinstance(exc, cls))
            raise ApplicationError(str(exc), type=kind, non_retryable=True) from exc

    return wrapper
