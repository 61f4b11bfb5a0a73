"""The limits at the edge, before a request reaches a route: a body over 1 MB is refused with 413
before it is read (`BodyLimit`), and a connection must send its headers, and keep a body it
sends flowing, within read timeouts (`EdgeH11Protocol`)."""

from __future__ import annotations

import asyncio

import h11
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from agent_memory.api.http.problems import problem

MAX_BODY_BYTES = 1_000_000


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
