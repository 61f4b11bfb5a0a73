"""The FastAPI app of `/v1`: every error as problem+json (a user error's status, a dependency that
is down as 503, a bug as 500 with an error id), the routers of each resource, the memory console
(`/console`), the Temporal UI's codec endpoint (`/codec`) and the metrics (`/metrics`)."""

from __future__ import annotations

import logging

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from psycopg_pool import PoolTimeout
from pydantic import ValidationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.exceptions import HTTPException
from starlette.routing import Match
from starlette.types import Scope
from temporalio.service import RPCError

from agent_memory.api.client import MemoryClient
from agent_memory.api.codec_server import build_codec_router
from agent_memory.api.console import build_console_router
from agent_memory.api.http.auth import checked_operator_key
from agent_memory.api.http.deadline import DependencyDeadline
from agent_memory.api.http.openapi import API_DESCRIPTION, document_problems
from agent_memory.api.http.problems import (
    PROBLEMS_PATH,
    internal_error,
    problem,
    problem_types_page,
    too_many_failures,
    unavailable,
)
from agent_memory.api.http.routes import categories, erasure, health, memory, review, sessions, tool_calls, webhooks
from agent_memory.api.http.routes.metrics import router as metrics_router
from agent_memory.api.outages import dependency_down
from agent_memory.core.errors import AgentMemoryError, InvalidInput, TooManyRequests, UserError, first_line
from agent_memory.security.api_keys import TooManyFailuresError
from agent_memory.security.failure_limits import SharedFailureLimiter
from agent_memory.telemetry.tracing import instrument_app

log = logging.getLogger(__name__)


def create_app(client: MemoryClient) -> FastAPI:
    # An operation's id is its function's name (`facts`, `claim_tool_call`) and its tag its router's
    # resource: a client generated from the document gets `api.memory.facts`, not a path-derived name.
    app = FastAPI(title="agent-memory", version="1", description=API_DESCRIPTION, openapi_url="/v1/openapi.json",
                  docs_url="/v1/docs", redoc_url=None, generate_unique_id_function=lambda route: route.name)
    app.openapi = document_problems(app)  # type: ignore[method-assign]
    app.state.client = client
    settings = client.services.settings
    # Failed authentications, counted in Redis by every API process of the deployment (its task queue).
    app.state.auth_failures = SharedFailureLimiter(client.services.redis, client.task_queue,
                                                   settings.auth_failure_burst, settings.auth_failure_window_seconds)
    add_problem_handlers(app)
    # A stalled dependency is answered 503 naming it within its deadline (agent_memory/api/http/deadline.py).
    app.add_middleware(DependencyDeadline, deadline=settings.dependency_deadline_seconds)
    app.include_router(build_console_router(checked_operator_key, dependency_down))  # /console: the memory console
    for resource in (health, sessions, memory, review, categories, tool_calls, erasure, webhooks):
        app.include_router(resource.router)
    app.include_router(build_codec_router(checked_operator_key))  # /codec: the Temporal UI's codec (agent_memory.api.codec_server)
    app.include_router(metrics_router)  # /metrics: Prometheus' scrape target, an operator key (routes/metrics.py)
    # What each problem's `type` points at: a page of the problem types, one anchor each.
    app.add_api_route(PROBLEMS_PATH, problem_types_page, methods=["GET"], include_in_schema=False)
    instrument_app(app)  # with tracing on, a span per request named by its route template
    return app


def add_problem_handlers(app: FastAPI) -> None:
    """Every failure of a route as problem+json; no traceback reaches the caller."""

    @app.exception_handler(TooManyFailuresError)
    async def throttled(_: Request, exc: TooManyFailuresError) -> JSONResponse:
        return too_many_failures(exc)

    async def service_error(request: Request, exc: Exception) -> JSONResponse:
        dependency = dependency_down(exc)
        if dependency is None:
            return internal_error(request, exc)
        log.warning("%s %s: %s is unavailable: %s", request.method, request.url.path, dependency, exc)
        return unavailable(dependency)

    # The dependencies' own errors (no traceback logged for an outage), and any other failure
    # as a 500 problem+json with an error id (Starlette also re-raises it to the server).
    for error_type in (psycopg.Error, PoolTimeout, RedisConnectionError, RedisTimeoutError, RPCError, Exception):
        app.add_exception_handler(error_type, service_error)

    @app.exception_handler(AgentMemoryError)
    async def product_error(request: Request, exc: AgentMemoryError) -> JSONResponse:
        if isinstance(exc, UserError):
            wait = {"Retry-After": str(exc.retry_after)} if isinstance(exc, TooManyRequests) else None
            return problem(exc.status, exc.title, first_line(exc, exc.title), headers=wait)
        return await service_error(request, exc)

    @app.exception_handler(ValidationError)
    async def invalid_content(_: Request, exc: ValidationError) -> JSONResponse:  # a model built in a handler
        return problem(InvalidInput.status, InvalidInput.title, first_line(exc, InvalidInput.title))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 400 and isinstance(exc.__cause__, UnicodeDecodeError):
            # FastAPI's 400 for a JSON body it cannot decode: a malformed body like any other (422, field 'body').
            message = f"the body is not valid JSON: {unreadable(exc.__cause__)}"
            return problem(422, "Invalid input", f"body: {message}", errors=[{"field": "body", "message": message}])
        titles = {401: "Unauthorized", 404: "Not found", 405: "Method not allowed", 413: "Request body too large"}
        headers = dict(exc.headers) if exc.headers else {}
        if exc.status_code == 405:  # every method of the path, whichever of its routes has it (RFC 9110 15.5.6)
            headers["Allow"] = ", ".join(allowed_methods(app, request.scope))
        return problem(exc.status_code, titles.get(exc.status_code, "HTTP error"), str(exc.detail),
                       headers=headers or None)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = field_errors(exc)
        first = errors[0] if errors else {"field": "body", "message": "invalid"}
        return problem(422, "Invalid input", f"{first['field']}: {first['message']}", errors=errors)


HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(app: FastAPI, scope: Scope) -> list[str]:
    """The methods some route of the app serves on the request's path, asked of the routes
    themselves (a router's included routes answer through it)."""
    path = {"type": "http", "path": scope["path"], "root_path": scope.get("root_path", "")}
    return [method for method in HTTP_METHODS
            if any(route.matches({**path, "method": method})[0] is Match.FULL for route in app.router.routes)]


def unreadable(error: UnicodeDecodeError) -> str:
    """Where a body that is no UTF-8 text goes wrong: the byte and its position."""
    return (f"it is not UTF-8 text: byte 0x{error.object[error.start]:02x} at position {error.start} "
            "(send the JSON encoded as UTF-8)")


def field_errors(exc: RequestValidationError) -> list[dict[str, str]]:
    """Each error of a request as the field it names and its message. The body as a whole is the
    field `body`: a body that is missing, that is not JSON (the line and column of the fault), or
    that is no JSON object."""
    errors = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        if error["type"] == "json_invalid":
            position = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else 0
            document = exc.body if isinstance(exc.body, str) else ""
            line = document.count("\n", 0, position) + 1
            column = position - document.rfind("\n", 0, position)
            reason = (error.get("ctx") or {}).get("error", error["msg"])
            errors.append({"field": "body",
                           "message": f"the body is not valid JSON: {reason}, at line {line} column {column}"})
        elif loc == ("body",) and error["type"] == "missing":
            errors.append({"field": "body", "message": "the request needs a JSON body: send a JSON object with "
                                                       "`Content-Type: application/json`"})
        elif loc == ("body",):
            errors.append({"field": "body", "message": "the body must be a JSON object (`Content-Type: "
                                                       f"application/json`): {error['msg']}"})
        else:
            field = loc[1:] if loc[:1] == ("body",) else loc
            errors.append({"field": ".".join(str(part) for part in field), "message": error["msg"]})
    return errors
