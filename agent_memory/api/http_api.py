"""The HTTP API (`agent-memory serve`): the hooks and reads an agent runtime in any language calls.

FastAPI, because the OpenAPI document (`/v1/openapi.json`) and request validation come from the
same pydantic models the library already uses. The server is uvicorn. Every route is versioned
under `/v1`.

- **Authentication:** `Authorization: Bearer amk:...`, an API key from `agent-memory keys create`.
  The tenant comes from the key, never from the URL or the body. Row-level security still
  applies underneath, because every call runs in the key's tenant. Scopes nest: `read`, then
  `write` (append, end a session), then `erase` (forget, restore, erasure).
- **Errors:** RFC 9457 problem+json, `{type, title, status, detail, errors?}`. The detail names
  the field and the fix; no traceback ever reaches a caller.
- **Limits:** request bodies over 1 MB are refused with 413 before they are read. Failed
  authentications are limited per client address and per key id (429 with `Retry-After`,
  `FailureLimiter`). A connection must send a request's headers within the header timeout and
  may not stall a body longer than the body timeout (`EdgeH11Protocol`); an idle keep-alive
  connection is closed after uvicorn's keep-alive timeout.
- **Degraded mode:** a dependency that is down (Postgres, Redis, Temporal) is answered 503
  problem+json naming it, with `Retry-After`; any other failure is a 500 problem+json with an
  `error_id`, under which the server's log holds the traceback (agent_memory.core.errors).
- **MCP:** `/mcp` serves the MCP tools over streamable HTTP behind the same keys (`WithMcp`).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any

import h11
import psycopg
from fastapi import Depends, FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from psycopg_pool import PoolTimeout
from pydantic import BaseModel, Field, ValidationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode
from uvicorn.protocols.http.h11_impl import H11Protocol

from agent_memory.api.client import MemoryClient
from agent_memory.api.codec_server import build_codec_router
from agent_memory.api.console import build_console_router
from agent_memory.api.mcp_server import bearer_token, build_mcp_server
from agent_memory.api.outages import dependency_down
from agent_memory.core import contract
from agent_memory.core.errors import (
    AgentMemoryError,
    Forbidden,
    InvalidInput,
    NotFound,
    ServiceUnavailable,
    TooManyRequests,
    UserError,
    first_line,
    new_error_id,
)
from agent_memory.core.models import Message as ChatMessage
from agent_memory.core.models import Session, check_identifier
from agent_memory.security.api_keys import (
    ApiKey,
    ApiKeyError,
    FailureLimiter,
    KeyScope,
    TooManyFailuresError,
    allows,
    limited_names,
    verify_key,
)
from agent_memory.security.operator_keys import OperatorKey, verify_operator_key

MAX_BODY_BYTES = 1_000_000
MCP_PATH = "/mcp"
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


async def checked_key(limiter: FailureLimiter, pool: Any, address: str | None, token: str | None,
                      needed: KeyScope) -> ApiKey:
    """The key of a bearer token, behind the failure limiter: a client address or key id with
    too many recent failures is refused (429) before anything is verified, and every failure
    (no key, a malformed, unknown or revoked one, a wrong secret) is counted against both."""
    names = limited_names(address, token)
    limiter.check(names)
    try:
        if token is None:
            raise ApiKeyError("no API key: send `Authorization: Bearer amk:...` (agent-memory keys create)")
        return await verify_key(pool, token, needed)
    except ApiKeyError:
        limiter.failed(names)
        raise


async def checked_operator_key(limiter: FailureLimiter, pool: Any, address: str | None,
                               token: str | None) -> OperatorKey:
    """An operator key, behind the same failure limiter as tenant keys."""
    names = limited_names(address, token)
    limiter.check(names)
    try:
        if token is None:
            raise ApiKeyError("no operator key: send `Authorization: Bearer amo:...` "
                              "(agent-memory keys create-operator)")
        return await verify_operator_key(pool, token)
    except ApiKeyError:
        limiter.failed(names)
        raise


class BodyLimit:
    """Refuse a body over the limit before the app reads it: by Content-Length, or by counting a
    chunked body's bytes as they arrive."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES):
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        too_big = problem(413, "Request body too large",
                          f"the body is over {self.limit:,} bytes: send fewer messages per request")
        if length is not None and length.isdigit() and int(length) > self.limit:
            await too_big(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooLarge(self.limit)
            return message

        await self.app(scope, counted, send)


class _TooLarge(HTTPException):
    """Raised while the app reads a chunked body past the limit. An HTTPException, so FastAPI's
    body parsing lets it through (it turns any other error into a 400)."""

    def __init__(self, limit: int):
        super().__init__(413, f"the body is over {limit:,} bytes: send fewer messages per request")


class AppendRequest(BaseModel):
    started_at: datetime | None = None
    messages: list[ChatMessage] = Field(min_length=1, max_length=1000)
    expected_parent: str | None = Field(default=None, description="the last message id you saw ('' for none)")


class EndedSession(BaseModel):
    workflow_id: str
    ui_url: str


class RunStatus(BaseModel):
    workflow_id: str
    status: str
    result: dict[str, Any] | None = None


class QueryRequest(BaseModel):
    query: str = Field(min_length=1, max_length=4000)
    limit: int = Field(default=5, ge=1, le=50)
    budget: int | None = Field(default=None, ge=50, le=32000)
    as_of: datetime | None = None


class PromptRequest(BaseModel):
    session_id: str
    input: str = Field(min_length=1, max_length=20000)
    system: str | None = Field(default=None, max_length=20000)
    budget: int | None = Field(default=None, ge=50, le=32000)


class ForgetRequest(BaseModel):
    reason: str | None = Field(default=None, max_length=1000)


class ErasureRequest(BaseModel):
    reason: str = Field(min_length=1, max_length=1000)
    request_id: str | None = None
    block_future_writes: bool = False


class ErasureStarted(BaseModel):
    workflow_id: str
    ui_url: str




def _key(needed: KeyScope) -> Callable[..., Awaitable[ApiKey]]:
    async def dependency(request: Request, authorization: Annotated[str | None, Header()] = None) -> ApiKey:
        token = (authorization.removeprefix("Bearer ").strip()
                 if authorization and authorization.startswith("Bearer ") else None)
        client: MemoryClient = request.app.state.client
        return await checked_key(request.app.state.auth_failures, client.services.pool,
                                 request.client.host if request.client else None, token, needed)
    return dependency


async def _operator_key(request: Request, authorization: Annotated[str | None, Header()] = None) -> OperatorKey:
    token = (authorization.removeprefix("Bearer ").strip()
             if authorization and authorization.startswith("Bearer ") else None)
    client: MemoryClient = request.app.state.client
    return await checked_operator_key(request.app.state.auth_failures, client.services.pool,
                                      request.client.host if request.client else None, token)


ReadKey = Annotated[ApiKey, Depends(_key("read"))]
WriteKey = Annotated[ApiKey, Depends(_key("write"))]
EraseKey = Annotated[ApiKey, Depends(_key("erase"))]
# The operator-facing surfaces (codec endpoint, console): an operator key, not a tenant's.
OperatorAccess = Annotated[OperatorKey, Depends(_operator_key)]


def create_app(client: MemoryClient) -> FastAPI:
    app = FastAPI(title="agent-memory", version="1", openapi_url="/v1/openapi.json", docs_url="/v1/docs",
                  redoc_url=None)
    app.state.client = client
    settings = client.services.settings
    app.state.auth_failures = FailureLimiter(settings.auth_failure_burst, settings.auth_failure_window_seconds)

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
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        titles = {401: "Unauthorized", 404: "Not found", 405: "Method not allowed", 413: "Request body too large"}
        return problem(exc.status_code, titles.get(exc.status_code, "HTTP error"), str(exc.detail),
                       headers=dict(exc.headers) if exc.headers else None)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"field": ".".join(str(p) for p in e["loc"] if p != "body"), "message": e["msg"]}
                  for e in exc.errors()]
        first = errors[0] if errors else {"field": "body", "message": "invalid"}
        return problem(422, "Invalid input", f"{first['field']}: {first['message']}", errors=errors)

    def subject(subject_id: str) -> str:
        return check_identifier("subject", subject_id)

    app.include_router(build_console_router(checked_operator_key, dependency_down))  # /console: the memory console

    @app.get("/v1/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/subjects/{subject_id}/sessions/{session_id}/messages")
    async def append(subject_id: str, session_id: str, body: AppendRequest,
                     api_key: WriteKey) -> dict[str, Any]:
        check_identifier("session", session_id)
        session = Session(session_id=session_id, started_at=body.started_at, messages=body.messages)
        result = await client.append_messages(api_key.tenant_id, subject(subject_id), session,
                                              expected_parent=body.expected_parent)
        return result.model_dump(mode="json")

    @app.post("/v1/subjects/{subject_id}/sessions/{session_id}/end")
    async def end(subject_id: str, session_id: str, api_key: WriteKey) -> EndedSession:
        handle = await client.end_session(api_key.tenant_id, subject(subject_id), session_id)
        return EndedSession(workflow_id=handle.id, ui_url=settings.workflow_url(handle.id))

    @app.get("/v1/runs/{workflow_id:path}")
    async def run(workflow_id: str, api_key: ReadKey) -> RunStatus:
        if contract.workflow_id_tenant(workflow_id) != api_key.tenant_id:
            raise NotFound(f"no run {workflow_id!r} of this key's tenant")
        if workflow_id.startswith("erase/") and not allows(api_key.scope, "erase"):
            raise Forbidden(f"this key's scope is {api_key.scope!r}; an erasure's run needs 'erase'")
        handle = client.services.temporal.get_workflow_handle(workflow_id)
        try:
            status = (await handle.describe()).status
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                raise NotFound(f"no run {workflow_id!r} of this key's tenant") from None
            raise
        result = await handle.result() if status == WorkflowExecutionStatus.COMPLETED else None
        return RunStatus(workflow_id=workflow_id, status=status.name.lower() if status else "unknown",
                         result=result if isinstance(result, dict) else None)

    @app.get("/v1/subjects/{subject_id}/facts")
    async def facts(subject_id: str, api_key: ReadKey, as_of: datetime | None = None, history: bool = False,
                    candidates: bool = False) -> list[dict[str, Any]]:
        rows = await client.facts(api_key.tenant_id, subject(subject_id), as_of=as_of, history=history,
                                  candidates=candidates)
        return [r.model_dump(mode="json") for r in rows]

    @app.post("/v1/subjects/{subject_id}/recall")
    async def recall(subject_id: str, body: QueryRequest, api_key: ReadKey) -> dict[str, Any]:
        found = await client.recall(api_key.tenant_id, subject(subject_id), body.query, limit=body.limit,
                                    as_of=body.as_of)
        return found.model_dump(mode="json")

    @app.post("/v1/subjects/{subject_id}/context")
    async def context(subject_id: str, body: QueryRequest, api_key: ReadKey) -> dict[str, Any]:
        assembled = await client.context(api_key.tenant_id, subject(subject_id), body.query, as_of=body.as_of,
                                         token_budget=body.budget)
        return {**assembled.model_dump(mode="json"), "text": assembled.text}

    @app.post("/v1/subjects/{subject_id}/prompt")
    async def prompt(subject_id: str, body: PromptRequest, api_key: ReadKey) -> dict[str, Any]:
        check_identifier("session", body.session_id)
        kwargs: dict[str, Any] = {"token_budget": body.budget}
        if body.system is not None:
            kwargs["system"] = body.system
        built = await client.build_prompt(api_key.tenant_id, subject(subject_id), body.session_id, body.input,
                                          **kwargs)
        return {**built.model_dump(mode="json"), "messages": built.chat_messages()}

    @app.post("/v1/subjects/{subject_id}/memories/{memory_id}/forget")
    async def forget(subject_id: str, memory_id: str, body: ForgetRequest,
                     api_key: EraseKey) -> dict[str, Any]:
        done = await client.forget(api_key.tenant_id, subject(subject_id), memory_id, reason=body.reason,
                                   actor_id=f"api-key:{api_key.key_id}")
        return done.model_dump(mode="json")

    @app.post("/v1/subjects/{subject_id}/memories/{memory_id}/restore")
    async def restore(subject_id: str, memory_id: str, body: ForgetRequest,
                      api_key: EraseKey) -> dict[str, Any]:
        done = await client.restore(api_key.tenant_id, subject(subject_id), memory_id, reason=body.reason,
                                    actor_id=f"api-key:{api_key.key_id}")
        return done.model_dump(mode="json")

    @app.get("/v1/subjects/{subject_id}/export")
    async def export(subject_id: str, api_key: ReadKey) -> dict[str, Any]:
        return (await client.export(api_key.tenant_id, subject(subject_id))).model_dump(mode="json")

    @app.post("/v1/subjects/{subject_id}/erasure")
    async def erase(subject_id: str, body: ErasureRequest, api_key: EraseKey) -> ErasureStarted:
        handle = await client.erase(api_key.tenant_id, subject(subject_id), body.reason, body.request_id,
                                    block_future_writes=body.block_future_writes)
        return ErasureStarted(workflow_id=handle.id, ui_url=settings.workflow_url(handle.id))

    @app.get("/v1/erasures/{request_id}")
    async def erasure(request_id: str, api_key: EraseKey) -> dict[str, Any]:
        return (await client.erasure_status(api_key.tenant_id, request_id)).model_dump(mode="json")

    app.include_router(build_codec_router(checked_operator_key))  # /codec: the Temporal UI's codec (agent_memory.api.codec_server)
    return app


class WithMcp:
    """`/mcp`: the MCP server over streamable HTTP (agent_memory.api.mcp_server), behind the same API
    keys: a request without a valid key gets 401 here, before it reaches an MCP session, and every
    tool call checks its key's scope again. Every other path goes to the REST app. Lifespan events
    go to the MCP app, whose lifespan runs its session manager (serve with lifespan on)."""

    def __init__(self, rest: ASGIApp, client: MemoryClient, host: str, limiter: FailureLimiter | None = None):
        self.rest, self.pool = rest, client.services.pool
        settings = client.services.settings
        self.limiter = (limiter if limiter is not None
                        else FailureLimiter(settings.auth_failure_burst, settings.auth_failure_window_seconds))
        self.mcp = build_mcp_server(client).streamable_http_app(streamable_http_path=MCP_PATH, host=host)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.mcp(scope, receive, send)
            return
        path = scope.get("path", "")
        if path != MCP_PATH and not path.startswith(MCP_PATH + "/"):
            await self.rest(scope, receive, send)
            return
        if scope["type"] == "websocket":  # the MCP transport here is HTTP only
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] == "http":
            token = bearer_token(Headers(scope=scope))
            client = scope.get("client")
            try:
                await checked_key(self.limiter, self.pool, client[0] if client else None, token, "read")
            except ApiKeyError as exc:
                response = problem(401, "Unauthorized", str(exc))
                response.headers["WWW-Authenticate"] = "Bearer"
                await response(scope, receive, send)
                return
            except TooManyFailuresError as exc:
                await too_many_failures(exc)(scope, receive, send)
                return
            except Exception as exc:
                if (dependency := dependency_down(exc)) is None:
                    raise
                await unavailable(dependency)(scope, receive, send)
                return
        await self.mcp(scope, receive, send)


def serve_app(client: MemoryClient, host: str = "127.0.0.1") -> ASGIApp:
    """What uvicorn serves (with lifespan on): the REST routes and `/mcp`, behind the body limit.
    `host` is the address served on: the MCP transport refuses other Host headers on loopback
    (DNS rebinding)."""
    rest = create_app(client)
    return BodyLimit(WithMcp(rest, client, host, rest.state.auth_failures))


class EdgeH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the read timeouts it lacks (it has only the keep-alive one,
    which a client cancels by sending a single byte): a connection must send a request's
    headers within `header_timeout` seconds of opening or of its first byte, and may not stall
    longer than `body_timeout` seconds between chunks of a body the app waits for; either
    closes the connection. A slow client therefore holds a connection for a bounded time."""

    header_timeout = 10.0
    body_timeout = 30.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._read_timer: asyncio.TimerHandle | None = None
        self._read_phase: str | None = None
        super().connection_made(transport)
        self._arm("headers")

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.is_closing():
            self._disarm()
        elif self.conn.their_state is h11.IDLE:  # (part of) the next request's headers, or nothing yet
            if self._read_phase != "headers":
                self._arm("headers")
        elif self.conn.their_state is h11.SEND_BODY:
            self._arm("body")  # a chunk arrived: the stall clock starts again
        else:
            self._disarm()

    def on_response_complete(self) -> None:
        self._disarm()  # the keep-alive timeout takes over until the next request's first byte
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self, phase: str) -> None:
        self._disarm()
        self._read_phase = phase
        delay = self.header_timeout if phase == "headers" else self.body_timeout
        self._read_timer = self.loop.call_later(delay, self._read_timed_out)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
        self._read_timer, self._read_phase = None, None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        if not self.transport.is_closing():
            if self.cycle is not None and not self.cycle.response_complete:
                self.cycle.disconnected = True  # the app's receive() sees the client gone
                self.cycle.message_event.set()
            self.transport.close()


def edge_protocol(header_timeout: float, body_timeout: float) -> type[EdgeH11Protocol]:
    return type("EdgeH11Protocol", (EdgeH11Protocol,), {"header_timeout": header_timeout,
                                                        "body_timeout": body_timeout})


def uvicorn_config(client: MemoryClient, host: str, port: int) -> Any:
    """The uvicorn configuration `serve` and `up` run the API with: lifespan on, the h11
    protocol with header and body timeouts (settings), uvicorn's 5 s keep-alive timeout."""
    import uvicorn

    settings = client.services.settings
    return uvicorn.Config(serve_app(client, host), host=host, port=port, log_level="warning", lifespan="on",
                          http=edge_protocol(settings.http_header_timeout_seconds,
                                             settings.http_body_timeout_seconds),
                          timeout_keep_alive=5)


def free_port(host: str = "127.0.0.1", wanted: int = 0) -> int:
    """`wanted` when it can be bound on `host`, else a free port. The probe binds as uvicorn does,
    with SO_REUSEADDR: a port whose last connections linger in TIME_WAIT (after a crash) is free
    for a server, and a plain bind would wrongly move the API to another port."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, wanted))
        except OSError:
            probe.bind((host, 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def serving(client: MemoryClient, *, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[int]:
    """The API served by uvicorn in this event loop while the block runs; yields the port
    (`port`, or a free one when it is 0 or taken). `up`, the benchmark and the tests use it."""
    import uvicorn

    port = free_port(host, port)
    server = uvicorn.Server(uvicorn_config(client, host, port))
    task = asyncio.create_task(server.serve())
    for _ in range(400):  # up to 20 s
        if server.started or task.done():
            break
        await asyncio.sleep(0.05)
    if not server.started:
        await task  # its error, if it failed to start
        raise ServiceUnavailable(f"the HTTP API did not start on {host}:{port}")
    try:
        yield port
    finally:
        server.should_exit = True
        await task
