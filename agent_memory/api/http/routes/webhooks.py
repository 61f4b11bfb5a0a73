"""The tenant's webhooks: register, list and remove endpoints, rotate an endpoint's signing
secret, list deliveries, re-deliver one.
Every route needs the `erase` scope, the tenant's administrative one: an endpoint receives the
tenant's stream of memory changes, and an agent's `write` key must not redirect it. See
agent_memory/memory/webhooks.py."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from agent_memory.api.http.auth import EraseKey
from agent_memory.api.http.deps import ClientDep
from agent_memory.api.http.openapi import BODY_LIMIT, keyed
from agent_memory.memory.webhooks import (
    EVENT_TYPES,
    URL_MAX_CHARS,
    CreatedWebhookEndpoint,
    EventType,
    WebhookDelivery,
    WebhookEndpoint,
)

router = APIRouter(tags=["webhooks"])

EndpointId = Annotated[str, Path(description="the endpoint's id, as registering or listing it answers",
                                 json_schema_extra={"format": "uuid"})]
DeliveryId = Annotated[str, Path(description="the delivery's id, as listing deliveries answers it (also the "
                                             "`webhook-id` header the receiver got)",
                                 json_schema_extra={"format": "uuid"})]


# An absolute https URL with a host, an optional port (1-65535), no credentials, no spaces or
# control characters: what check_webhook_url accepts.
_PORT = r"(6553[0-5]|655[0-2]\d|65[0-4]\d{2}|6[0-4]\d{3}|[1-5]\d{4}|[1-9]\d{0,3})"
WEBHOOK_URL_SCHEMA_PATTERN = (r"^https://[^\s/?#@:\[\]\x00-\x1f\x7f-\x9f]+(:" + _PORT + r")?"
                              r"([/?#][^\s\x00-\x1f\x7f-\x9f]*)?$")


class WebhookRegistration(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=URL_MAX_CHARS,
                     description="the receiver's https:// URL (http:// only where the deployment allows it), "
                                 "without credentials, on a public internet address (private, loopback and "
                                 "link-local ones only where the deployment allows them)",
                     json_schema_extra={"format": "uri", "pattern": WEBHOOK_URL_SCHEMA_PATTERN})
    events: list[EventType] = Field(min_length=1, max_length=len(EVENT_TYPES),
                                    description=f"the event types to deliver: {', '.join(EVENT_TYPES)}")


@router.post("/v1/webhooks", summary="Register a webhook endpoint",
             description="Register a receiver for the tenant's events (`erase`). The answer carries the "
                         "endpoint's signing `secret` (Standard Webhooks: `whsec_` + base64), shown this once: "
                         "keep it to verify each delivery's `webhook-signature`. 422 naming the field for a URL "
                         "that is not https://, carries credentials or is (or resolves to) a non-public address, "
                         f"or an unknown event type; 409 when the tenant has 20 endpoints. {BODY_LIMIT}",
             responses=keyed(409, body=True))
async def add_webhook(body: WebhookRegistration, api_key: EraseKey, client: ClientDep) -> CreatedWebhookEndpoint:
    return await client.admin.add_webhook(api_key.tenant_id, body.url, list(body.events))


@router.get("/v1/webhooks", summary="The tenant's webhook endpoints", responses=keyed(422))
async def webhooks(api_key: EraseKey, client: ClientDep,
                   include_removed: Annotated[bool, Query(description="also list removed endpoints")] = False
                   ) -> list[WebhookEndpoint]:
    """The tenant's endpoints with their URLs and event types, never their secrets (`erase`)."""
    return await client.admin.webhooks(api_key.tenant_id, include_removed=include_removed)


@router.delete("/v1/webhooks/{endpoint_id}", summary="Remove a webhook endpoint", responses=keyed(404, 422))
async def remove_webhook(endpoint_id: EndpointId, api_key: EraseKey, client: ClientDep) -> WebhookEndpoint:
    """Disable the endpoint (`erase`): nothing more is delivered to it, and its pending deliveries
    are dead-lettered at their next attempt. 404 when the tenant has no such endpoint."""
    return await client.admin.remove_webhook(api_key.tenant_id, endpoint_id)


@router.post("/v1/webhooks/{endpoint_id}/rotate-secret", summary="Rotate a webhook endpoint's signing secret",
             description="Give the endpoint a new signing secret (`erase`), shown this once in the answer's "
                         "`secret`. For `overlap_hours` the replaced secret keeps signing each delivery next to "
                         "the new one (`webhook-signature` lists both), so the receiver switches at a time of its "
                         "choosing. An endpoint with a legacy secret (`secret_format` `legacy`) moves to the "
                         "Standard Webhooks scheme here. 404 when the tenant has no such endpoint.",
             responses=keyed(404, 422))
async def rotate_webhook_secret(
        endpoint_id: EndpointId, api_key: EraseKey, client: ClientDep,
        overlap_hours: Annotated[float, Query(ge=0, le=168, description="hours the replaced secret keeps "
                                                                         "signing deliveries (0: none)")] = 24,
) -> CreatedWebhookEndpoint:
    return await client.admin.rotate_webhook_secret(api_key.tenant_id, endpoint_id, overlap_hours=overlap_hours)


@router.get("/v1/webhooks/deliveries", summary="The tenant's webhook deliveries", responses=keyed(422))
async def webhook_deliveries(
        api_key: EraseKey, client: ClientDep,
        status: Annotated[Literal["pending", "delivered", "dead"] | None,
                          Query(description="only deliveries in this state (`dead`: the dead letters)")] = None,
        limit: Annotated[int, Query(ge=1, le=1000, description="at most this many, newest first")] = 100,
) -> list[WebhookDelivery]:
    """Deliveries newest first (`erase`): event type and id, status, attempts, the last answer's
    status code and error, and the payload (ids and counts only)."""
    return await client.admin.webhook_deliveries(api_key.tenant_id, status=status, limit=limit)


@router.post("/v1/webhooks/deliveries/{delivery_id}/redeliver", summary="Re-deliver a webhook delivery",
             description="Send a dead (or delivered) delivery again (`erase`): it is pending again, in a new "
                         "run with a fresh set of attempts; the attempts made so far stay counted. 404 when the "
                         "tenant has no such delivery; 409 while it is pending, or when its endpoint was removed.",
             responses=keyed(404, 409, 422))
async def redeliver_webhook(delivery_id: DeliveryId, api_key: EraseKey, client: ClientDep) -> WebhookDelivery:
    return await client.admin.redeliver_webhook(api_key.tenant_id, delivery_id)
