"""`GET /metrics`: the process's Prometheus metrics (agent_memory.telemetry.exposition), the
product's families and the Temporal SDK's, in Prometheus' text format. An operator key only
(`Authorization: Bearer amo:...`, Prometheus' `authorization: {credentials: ...}`); a tenant key
is refused 403. Not in the OpenAPI document: it is an operator's scrape target, like /console."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Response

from agent_memory.api.http.auth import OperatorAccess
from agent_memory.api.services import runtime_metrics_address
from agent_memory.telemetry.exposition import CONTENT_TYPE, exposition

METRICS_PATH = "/metrics"

router = APIRouter(include_in_schema=False)


@router.get(METRICS_PATH)
async def metrics(_: OperatorAccess) -> Response:
    # Off the event loop: the SDK's page is read over loopback while the registry is rendered.
    body = await asyncio.to_thread(exposition, runtime_metrics_address())
    return Response(body, media_type=CONTENT_TYPE)
