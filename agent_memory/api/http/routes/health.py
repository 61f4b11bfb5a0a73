"""`GET /v1/health`: the server answers (no key, no dependency checked)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()


@router.get("/v1/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}
