"""RFC 9457 problem+json answers: a user error's status and detail, a dependency that is down
(503 naming it, with `Retry-After`), and a bug (500 with an error id; the traceback only in the
server's log).

Each problem's `type` names its kind: a relative reference to the server's own page of problem
types, `/v1/problems#<kind>` (`PROBLEM_TYPES`; the same anchors as docs/problems.md), which a
client resolves against the request's URL. A title no kind has is typed `about:blank`."""

from __future__ import annotations

import html
import logging
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, JSONResponse

from agent_memory.api.outages import SERVICE, count_unavailable
from agent_memory.core.errors import ServiceUnavailable, new_error_id
from agent_memory.security.api_keys import TooManyFailuresError

PROBLEMS_PATH = "/v1/problems"


@dataclass(frozen=True)
class ProblemType:
    anchor: str
    status: int
    title: str
    meaning: str  # what happened and what to do


PROBLEM_TYPES: tuple[ProblemType, ...] = (
    ProblemType("bad-request", 400, "Bad request", "The request cannot be served as sent; the detail says why."),
    ProblemType("unauthorized", 401, "Unauthorized",
                "No valid key: none was sent, or it is malformed, unknown or revoked. Send `Authorization: "
                "Bearer amk:...` as `agent-memory keys create` printed it (an operator surface: `amo:...`)."),
    ProblemType("forbidden", 403, "Forbidden",
                "A valid key that may not do this: its scope is too narrow, its agent or app differs, the "
                "tenant's write policy refuses the fact, or a tenant key meets an operator surface."),
    ProblemType("not-found", 404, "Not found",
                "What the request names does not exist for the key: a session, memory, run, erasure request, "
                "a tool call of another agent, or a path with no route."),
    ProblemType("method-not-allowed", 405, "Method not allowed",
                "The path exists, not with this method: the `Allow` header lists the ones it has."),
    ProblemType("conflict", 409, "Conflict",
                "The request contradicts the state it meets: a version that moved on, an id used for "
                "something else, an erased subject, another agent's tool-call key."),
    ProblemType("request-body-too-large", 413, "Request body too large",
                "The body is over 1 MB and was refused before it was read: send it in several calls."),
    ProblemType("invalid-input", 422, "Invalid input",
                "A value is malformed or out of range. The detail names the field and the fix; `errors` "
                "lists every field of an invalid body."),
    ProblemType("too-many-failed-authentications", 429, "Too many failed authentications",
                "Too many failed authentications from this client address or for this key id: a failing "
                "attempt is refused until `Retry-After` seconds have passed. A valid key is served all along."),
    ProblemType("too-many-requests", 429, "Too many requests",
                "Wait `Retry-After` seconds before trying again."),
    ProblemType("internal-error", 500, "Internal error",
                "A bug: the server's log holds the traceback under the answer's `error_id`."),
    ProblemType("dependency-unavailable", 503, "Dependency unavailable",
                "PostgreSQL, Redis or Temporal (`dependency`) is down or restarting: retry after `Retry-After` "
                "seconds."),
    ProblemType("service-unavailable", 503, "Service unavailable",
                "A service the server needs (a key provider, the embedded stack) is unavailable: retry after "
                "`Retry-After` seconds."),
    ProblemType("not-ready", 503, "Not ready",
                "Readiness (`GET /v1/ready`): a dependency does not answer in time; an operator key learns "
                "which (`dependencies`)."),
    ProblemType("http-error", 0, "HTTP error", "Another HTTP status, as its detail says."),
)
_TYPE_OF_TITLE = {kind.title: f"{PROBLEMS_PATH}#{kind.anchor}" for kind in PROBLEM_TYPES}


def problem_type(title: str) -> str:
    """The `type` of a problem of this title."""
    return _TYPE_OF_TITLE.get(title, "about:blank")


def problem_types_page() -> HTMLResponse:
    """`/v1/problems`: each problem type, under its anchor."""
    sections = "".join(
        f'<section id="{kind.anchor}"><h2>{html.escape(kind.title)}</h2>'
        f"<p>Status {kind.status if kind.status else 'any other'}.</p><p>{html.escape(kind.meaning)}</p></section>"
        for kind in PROBLEM_TYPES)
    return HTMLResponse('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>agent-memory problem types'
                        f"</title></head><body><h1>Problem types</h1>{sections}</body></html>",
                        headers={"Content-Security-Policy": "default-src 'none'", "X-Content-Type-Options": "nosniff"})
# Retry-After of a 503: a restarting server is usually back within seconds.
DEPENDENCY_RETRY_AFTER_SECONDS = 5

log = logging.getLogger(__name__)


def problem(status: int, title: str, detail: str, *, headers: dict[str, str] | None = None,
            **extra: Any) -> JSONResponse:
    return JSONResponse({"type": problem_type(title), "title": title, "status": status, "detail": detail, **extra},
                        status_code=status, media_type="application/problem+json", headers=headers)


def unavailable(dependency: str) -> JSONResponse:
    count_unavailable(dependency)
    return problem(503, "Dependency unavailable",
                   f"{dependency} is unavailable (down or restarting): retry after {DEPENDENCY_RETRY_AFTER_SECONDS} s",
                   dependency=dependency, headers={"Retry-After": str(DEPENDENCY_RETRY_AFTER_SECONDS)})


def internal_error(request: Request, exc: BaseException) -> JSONResponse:
    """A 500 for a failure the caller cannot fix: a bug, or a deliberate AgentMemoryError that is
    no user error. ServiceUnavailable is a 503. The traceback goes to the server's log under a
    random error id, which the answer carries; the answer never carries the traceback."""
    if isinstance(exc, ServiceUnavailable):
        log.warning("%s %s: a service is unavailable: %s", request.method, request.url.path, exc)
        count_unavailable(SERVICE)
        return problem(503, "Service unavailable", "a service this server needs is unavailable: retry after "
                       f"{DEPENDENCY_RETRY_AFTER_SECONDS} s", headers={"Retry-After": str(DEPENDENCY_RETRY_AFTER_SECONDS)})
    error_id = new_error_id()
    log.error("%s %s failed: internal error %s", request.method, request.url.path, error_id, exc_info=exc)
    return problem(500, "Internal error", f"the request failed on the server: internal error {error_id}, "
                   "logged there", error_id=error_id)


def too_many_failures(exc: TooManyFailuresError) -> JSONResponse:
    return problem(429, "Too many failed authentications", str(exc), headers={"Retry-After": str(exc.retry_after)})
