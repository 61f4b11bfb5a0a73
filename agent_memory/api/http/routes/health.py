"""`GET /v1/health`: the server answers (no key, no dependency checked)."""

from __future__ import annotations

from fastapi import APIRouter

from agent_memory.api.http.openapi import problems

router = APIRouter(tags=["health"])


@router.get("/v1/health", summary="The server answers", responses=problems())
async def health() -> dict[str, str]:
    """`{"status": "ok"}` while the server answers; it needs no key and checks no dependency."""
    return {"status": "ok"}
