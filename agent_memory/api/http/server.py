"""What uvicorn serves: the REST app and `/mcp` behind the body limit (`serve_app`), with the
edge protocol's read timeouts (`uvicorn_config`), on a free port (`free_port`), or in this event
loop while a block runs (`serving`)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from agent_memory.api.client import MemoryClient
from agent_memory.api.http.app import create_app
from agent_memory.api.http.auth import checked_key
from agent_memory.api.http.edge import BodyLimit, edge_protocol
from agent_memory.api.http.problems import problem, too_many_failures, unavailable
from agent_memory.api.mcp_server import bearer_token, build_mcp_server
from agent_memory.api.outages import dependency_down
from agent_memory.core.errors import ServiceUnavailable
from agent_memory.security.api_keys import ApiKeyError, TooManyFailuresError
from agent_memory.security.failure_limits import SharedFailureLimiter

MCP_PATH = "/mcp"


class WithMcp:
    """`/mcp`: the MCP server over streamable HTTP (agent_memory.api.mcp_server), behind the same API
    keys: a request without a valid key gets 401 here, before it reaches an MCP session, and every
    tool call checks its key's scope again. Every other path goes to the REST app. Lifespan events
    go to the MCP app, whose lifespan runs its session manager (serve with lifespan on)."""

    def __init__(self, rest: ASGIApp, client: MemoryClient, host: str, limiter: SharedFailureLimiter):
        self.rest, self.pool, self.limiter = rest, client.services.pool, limiter
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


def uvicorn_config(client: MemoryClient, host: str, port: int) -> Any:
    """The uvicorn configuration `serve` and `up` run the API with: lifespan on, the h11
    protocol with header and body timeouts (settings), uvicorn's 5 s keep-alive timeout.
    `X-Forwarded-For` and `X-Forwarded-Proto` are read only from the trusted proxies
    (`AGENT_MEMORY_TRUSTED_PROXIES`); with none, never: the client's address is the connection's,
    which the failure limit counts under."""
    import uvicorn

    settings = client.services.settings
    proxies = [entry.strip() for entry in (settings.trusted_proxies or "").split(",") if entry.strip()]
    return uvicorn.Config(serve_app(client, host), host=host, port=port, log_level="warning", lifespan="on",
                          http=edge_protocol(settings.http_header_timeout_seconds,
                                             settings.http_body_timeout_seconds),
                          timeout_keep_alive=5, proxy_headers=bool(proxies), forwarded_allow_ips=proxies or None)


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
