"""The errors agent-memory raises on purpose, in one hierarchy.

- `AgentMemoryError`: the base of every error the product raises deliberately. Used directly
  (or through a subclass that is neither of the two below) it is a failure the caller cannot fix,
  such as a tampered ledger: HTTP 500, CLI exit 1, its message logged.
- `UserError`: the caller can fix it. Each kind carries its HTTP status, the problem's title and
  the CLI's exit code (2); the message names the field and the fix.
- `ServiceUnavailable`: a dependency is down, missing or not set up (HTTP 503, CLI exit 1).

A built-in exception (KeyError, IndexError, ValueError, PermissionError, ...) escaping to a
caller is a bug: HTTP 500 with an error id, the CLI's one line with that id, the traceback
logged under the id.

`InvalidInput` is also a ValueError and `NotFound` a LookupError: pydantic validators turn a
ValueError into a validation error, and callers (retention's sweep, the stdlib's conventions)
catch those. `ServiceUnavailable` is also a RuntimeError, which the connection retries catch.
"""

from __future__ import annotations

import secrets
from typing import ClassVar


class AgentMemoryError(Exception):
    """Base of every error agent-memory raises on purpose."""

    status: ClassVar[int] = 500
    title: ClassVar[str] = "Internal error"
    exit_code: ClassVar[int] = 1


class UserError(AgentMemoryError):
    """The caller can fix it: the message says what is wrong and how to fix it."""

    status: ClassVar[int] = 400
    title: ClassVar[str] = "Bad request"
    exit_code: ClassVar[int] = 2


class InvalidInput(UserError, ValueError):
    """A value the caller gave is malformed or out of range (an id, a flag, a setting, a body)."""

    status = 422
    title = "Invalid input"


class NotFound(UserError, LookupError):
    """What the caller named (a tenant, subject, session, memory, key, run) does not exist for it."""

    status = 404
    title = "Not found"


class Conflict(UserError):
    """The request contradicts the state it meets (a version, an id already used, an erased subject)."""

    status = 409
    title = "Conflict"


class Unauthorized(UserError):
    """No valid credential: the key is missing, malformed, unknown or revoked."""

    status = 401
    title = "Unauthorized"


class Forbidden(UserError):
    """A valid credential that may not do this (its scope, the tenant's policy)."""

    status = 403
    title = "Forbidden"


class TooManyRequests(UserError):
    """The caller must wait `retry_after` seconds before trying again."""

    status = 429
    title = "Too many requests"

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class ServiceUnavailable(AgentMemoryError, RuntimeError):
    """A dependency (Temporal, PostgreSQL, Redis, a key provider, the embedded stack) is down,
    missing or not set up; the message names it and what to start or set."""

    status = 503
    title = "Service unavailable"
    exit_code = 1


def new_error_id() -> str:
    """A random id tying an internal error's answer to its traceback in the log."""
    return secrets.token_hex(6)


def first_line(exc: BaseException, default: str = "") -> str:
    """The first line of the message (a caller sees one line, never a traceback)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else (default or type(exc).__name__)
