"""A request that waits on a dependency past its deadline is answered 503 naming it: a server
that stalls (accepts connections, answers nothing) would otherwise hold the request until the
caller gives up. The request runs as a task of its own; while one of its calls to PostgreSQL,
Redis or Temporal has been pending longer than the deadline (agent_memory.core.deadlines), the
caller gets the 503 at once and the task is cancelled and winds down in the background (a
PostgreSQL driver cancels its query, which takes a while against a stalled server)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_memory.api.http.problems import unavailable
from agent_memory.core.deadlines import tracking_waits

log = logging.getLogger(__name__)

# How often a running request's pending calls are looked at.
CHECK_SECONDS = 0.25


class DependencyDeadline:
    """ASGI middleware answering 503 for a request whose call to a dependency outlived `deadline`."""

    def __init__(self, app: ASGIApp, *, deadline: float) -> None:
        self.app, self.deadline = app, deadline

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.deadline:
            await self.app(scope, receive, send)
            return
        answered = started = False

        async def guarded(message: Message) -> None:
            nonlocal started
            if answered:  # the caller has its 503: what the cancelled request still sends is dropped
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        with tracking_waits() as waits:
            task = asyncio.ensure_future(self.app(scope, receive, guarded))
        while True:
            done, _ = await asyncio.wait({task}, timeout=CHECK_SECONDS)
            if done:
                task.result()  # the request's own error, for the error handlers outside
                return
            dependency = waits.overdue(self.deadline)
            if dependency is not None and not started:
                break
        answered = True
        task.cancel()
        task.add_done_callback(_retrieved)
        log.warning("%s %s: %s did not answer within %.0f s: answered 503", scope.get("method"), scope.get("path"),
                    dependency, self.deadline)
        await unavailable(dependency)(scope, receive, send)


def _retrieved(task: asyncio.Future[None]) -> None:
    """The cancelled request's end, retrieved so asyncio does not report it as never retrieved."""
    with contextlib.suppress(asyncio.CancelledError, Exception):
        task.result()
