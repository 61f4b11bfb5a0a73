"""RFC 9457 problem+json answers: a user error's status and detail, a dependency that is down
(503 naming it, with `Retry-After`), and a bug (500 with an error id; the traceback only in the
server's log)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from agent_memory.core.errors import ServiceUnavailable, new_error_id
from agent_memory.security.api_keys import TooManyFailuresError

PROBLEM_TYPE = "https://github.com/agent-memory/agent-memory/blob/main/docs/api.md#errors"
# Retry-After of a 503: a restarting server is usually back within seconds.
DEPENDENCY_RETRY_AFTER_SECONDS = 5

log = logging.getLogger(__name__)


def problem(status: int, title: str, detail: str, *, headers: dict[str, str] | None = None,
            **extra: Any) -> JSONResponse:
    return JSONResponse({"type": PROBLEM_TYPE, "title": title, "status": status, "detail": detail, **extra},
                        status_code=status, media_type="application/problem+json", headers=headers)


def unavailable(dependency: str) -> JSONResponse:
    return problem(503, "Dependency unavailable",
                   f"{dependency} is unavailable (down or restarting): retry after {DEPENDENCY_RETRY_AFTER_SECONDS} s",
                   dependency=dependency, headers={"Retry-After": str(DEPENDENCY_RETRY_AFTER_SECONDS)})


def internal_error(request: Request, exc: BaseException) -> JSONResponse:
    """A 500 for a failure the caller cannot fix: a bug, or a deliberate AgentMemoryError that is
    no user error. ServiceUnavailable is a 503. The traceback goes to the server's log under a
    random error id, which the answer carries; the answer never carries the traceback."""
    if isinstance(exc, ServiceUnavailable):
        log.warning("%s %s: a service is unavailable: %s", request.method, request.url.path, exc)
        return problem(503, "Service unavailable", "a service this server needs is unavailable: retry after "
                       f"{DEPENDENCY_RETRY_AFTER_SECONDS} s", headers={"Retry-After": str(DEPENDENCY_RETRY_AFTER_SECONDS)})
    error_id = new_error_id()
    log.error("%s %s failed: internal error %s", request.method, request.url.path, error_id, exc_info=exc)
    return problem(500, "Internal error", f"the request failed on the server: internal error {error_id}, "
                   "logged there", error_id=error_id)


def too_many_failures(exc: TooManyFailuresError) -> JSONResponse:
    return problem(429, "Too many failed authentications", str(exc), headers={"Retry-After": str(exc.retry_after)})
