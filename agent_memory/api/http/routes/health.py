"""Liveness and readiness. `GET /v1/health`: the process answers (no key, no dependency checked).
`GET /v1/ready`: each dependency (PostgreSQL, Redis, Temporal) answers within the readiness
timeout, checked at once; an operator key learns which one does not and why, anyone else only
whether the server is ready (the status code). To an operator, a server whose dependencies answer
but whose Schedules that carry the lifecycle's guarantees (key rotation, compaction, the erasure
re-drive, the sweeps) are paused, altered or missing is `degraded`, naming them: it serves, but
e.g. a shredded key's KEK is not destroyed, or erased residue stays on disk, until they are
restored (agent-memory schedules ensure; every worker restores them hourly)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from agent_memory.api.client import MemoryClient
from agent_memory.api.http.auth import checked_operator_key
from agent_memory.api.http.openapi import problems
from agent_memory.api.http.problems import DEPENDENCY_RETRY_AFTER_SECONDS, problem
from agent_memory.core.errors import first_line

router = APIRouter(tags=["health"])

DEPENDENCIES = ("postgres", "redis", "temporal")
# An operator key verified by /v1/ready is trusted there for this long without asking PostgreSQL
# again, so an operator still learns which dependency is down while PostgreSQL is the one.
OPERATOR_KEY_KEPT_SECONDS = 600.0


class ScheduleDrift(BaseModel):
    """The Schedules not as designed, by kind."""

    paused: list[str]
    altered: list[str]
    missing: list[str]


class Readiness(BaseModel):
    """Whether the server can serve: every dependency answered in time."""

    status: Literal["ready", "degraded"] = Field(
        description="`ready`; `degraded` (to an operator key only) when a Schedule is not as designed; a server "
                    "whose dependencies do not answer answers 503")
    dependencies: dict[str, str] | None = Field(
        default=None, description="with an operator key: each dependency's state, `ok` or why it is degraded")
    schedules: ScheduleDrift | None = Field(
        default=None, description="with an operator key, when Temporal answers: the Schedules not as designed")


class Liveness(BaseModel):
    """The server answers."""

    status: Literal["ok"]


@router.get("/v1/health", summary="The server answers (liveness)", responses=problems())
async def health() -> Liveness:
    """`{"status": "ok"}` while the server answers; it needs no key and checks no dependency."""
    return Liveness(status="ok")


@router.get("/v1/ready", summary="The server's dependencies answer (readiness)", response_model=Readiness,
            response_model_exclude_none=True, responses=problems(503))
async def ready(request: Request) -> Any:
    """200 when PostgreSQL, Redis and Temporal each answer within `AGENT_MEMORY_READINESS_TIMEOUT_SECONDS`
    (checked at once), else 503. Without a key the answer says only that; with an operator key
    (`Authorization: Bearer amo:...`, agent-memory keys create-operator) it names each
    dependency's state (`dependencies`)."""
    client: MemoryClient = request.app.state.client
    services = client.services
    timeout = services.settings.readiness_timeout_seconds
    checks: dict[str, Callable[[], Awaitable[Any]]] = {
        "postgres": lambda: _postgres(services.pool),
        "redis": lambda: services.redis.ping(),
        "temporal": lambda: services.temporal.service_client.check_health(timeout=timedelta(seconds=timeout)),
    }
    states, operator = await asyncio.gather(_states(checks, timeout), _is_operator(request, timeout))
    degraded = [name for name, state in states.items() if state != "ok"]
    detail: dict[str, Any] = {"dependencies": states} if operator else {}
    if not degraded:
        if not operator:
            return JSONResponse({"status": "ready"})
        drift = await _schedule_drift(client, timeout)
        if drift is not None:
            detail["schedules"] = drift.model_dump()
        status = "degraded" if drift is not None and (drift.paused or drift.altered or drift.missing) else "ready"
        return JSONResponse({"status": status, **detail})
    return problem(503, "Not ready", f"{', '.join(degraded)} unavailable" if operator else "a dependency is unavailable",
                   headers={"Retry-After": str(DEPENDENCY_RETRY_AFTER_SECONDS)}, **detail)


async def _schedule_drift(client: MemoryClient, timeout: float) -> ScheduleDrift | None:
    """The Schedules not as designed; None when Temporal does not tell within the timeout."""
    try:
        health = await asyncio.wait_for(client.admin.schedules_health(), timeout)
    except Exception:
        return None
    return ScheduleDrift(paused=health.paused, altered=health.drifted, missing=health.missing)


async def _postgres(pool: Any) -> None:
    async with pool.connection() as conn:
        await conn.execute("SELECT 1")
        await conn.rollback()


async def _states(checks: dict[str, Callable[[], Awaitable[Any]]], timeout: float) -> dict[str, str]:
    """Each check's state: `ok`, or why not. A check still running at the timeout is left to
    wind down on its own (a PostgreSQL driver cancelling its query against a stalled server
    takes longer than a probe may)."""
    tasks = {name: asyncio.ensure_future(check()) for name, check in checks.items()}
    await asyncio.wait(tasks.values(), timeout=timeout)
    states = {}
    for name, task in tasks.items():
        if not task.done():
            task.cancel()
            task.add_done_callback(_retrieved)
            states[name] = f"degraded: no answer within {timeout:g} s"
        elif (error := task.exception()) is not None:
            states[name] = f"degraded: {first_line(error, type(error).__name__)}"
        elif task.result() is False:  # Temporal's health check: it answers, but does not serve
            states[name] = "degraded: not serving"
        else:
            states[name] = "ok"
    return states


_verified_operator_keys: dict[str, float] = {}


async def _is_operator(request: Request, timeout: float) -> bool:
    """Whether the request carries a valid operator key; one verified here within
    OPERATOR_KEY_KEPT_SECONDS is not asked of PostgreSQL again. A key that cannot be checked in
    time counts as none (the answer is then only the status)."""
    authorization = request.headers.get("authorization", "")
    if not authorization.startswith("Bearer amo:"):
        return False
    token = authorization.removeprefix("Bearer ").strip()
    digest = hashlib.sha256(token.encode()).hexdigest()
    if _verified_operator_keys.get(digest, 0.0) > time.monotonic():
        return True
    client: MemoryClient = request.app.state.client
    task = asyncio.ensure_future(checked_operator_key(request.app.state.auth_failures, client.services.pool,
                                                      request.client.host if request.client else None, token))
    await asyncio.wait({task}, timeout=timeout)
    if not task.done():
        task.cancel()
        task.add_done_callback(_retrieved)
        return False
    if task.exception() is not None:
        return False
    _verified_operator_keys[digest] = time.monotonic() + OPERATOR_KEY_KEPT_SECONDS
    return True


def _retrieved(task: asyncio.Future[Any]) -> None:
    with contextlib.suppress(asyncio.CancelledError, Exception):
        task.result()
