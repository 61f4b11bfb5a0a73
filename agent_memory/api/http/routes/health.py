"""`GET /v1/health`: the server answers (no key, no dependency checked). `GET /v1/ready`: the
server and what it guarantees — the dependencies answer, and the Schedules that carry the
lifecycle's guarantees (key rotation, compaction, the erasure re-drive, the sweeps) run as
designed; a paused, altered or missing one makes the server `degraded`."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel

from agent_memory.api.http.deps import ClientDep
from agent_memory.api.http.openapi import problems

router = APIRouter(tags=["health"])


@router.get("/v1/health", summary="The server answers", responses=problems())
async def health() -> dict[str, str]:
    """`{"status": "ok"}` while the server answers; it needs no key and checks no dependency."""
    return {"status": "ok"}


class Readiness(BaseModel):
    status: Literal["ready", "degraded"]
    # The Schedules not as designed (agent-memory schedules ensure restores them), by kind.
    schedules_not_as_designed: list[str]
    paused: list[str]
    altered: list[str]
    missing: list[str]


@router.get("/v1/ready", summary="The server and its guarantees are ready", responses=problems(503))
async def ready(client: ClientDep) -> Readiness:
    """`ready` when PostgreSQL, Redis and Temporal answer and every Schedule runs as designed;
    `degraded`, naming them, when a Schedule is paused, altered or missing (the server serves, but
    e.g. a shredded key's KEK is not destroyed, or erased residue stays on disk, until it is
    restored); 503 when a dependency does not answer. No key: it names Schedules, nothing of a tenant."""
    async with client.services.pool.connection() as conn:
        await conn.execute("SELECT 1")
    await client.services.redis.ping()
    health = await client.schedules_health()
    return Readiness(status="degraded" if health.count else "ready", schedules_not_as_designed=health.degraded,
                     paused=health.paused, altered=health.drifted, missing=health.missing)
