"""A tenant's webhooks over HTTP with an erase key: an endpoint registered (its secret shown
once, never listed), a live write delivered to a local receiver, verified by the Standard
Webhooks library, and listed with its status, a delivery re-delivered, the secret rotated (both
secrets sign during the overlap), the endpoint removed; a write key is refused (403), no key is
401, an unknown delivery or endpoint 404, a bad URL (a metadata address among them), overlap or
event type 422 naming the field, each as problem+json; another tenant's key sees nothing of them."""

from __future__ import annotations

import uuid
from collections import Counter

from standardwebhooks import Webhook

from agent_memory.security.api_keys import create_key
from agent_memory.security.webhook_signing import verify_webhook
from tests.api.test_http_api import api, bearer
from tests.workflows.test_webhooks import Receiver, all_in, live_write, told, wait_for, webhook_stack

PROBLEM = "application/problem+json"


async def test_webhooks_are_managed_and_redelivered_over_http(services, tenant, task_queue):
    eraser = bearer((await create_key(services.pool, tenant, "erase")).token)
    writer = bearer((await create_key(services.pool, tenant, "write")).token)
    stranger = bearer((await create_key(services.pool, f"{tenant}-other", "erase")).token)
    receiver = Receiver()
    receiver.start()
    try:
        async with webhook_stack(services, task_queue) as client, api(client) as http:
            registered = await http.post("/v1/webhooks", json={"url": receiver.url, "events": ["memory.created"]},
                                         headers=eraser)
            assert registered.status_code == 200, registered.text
            endpoint = registered.json()
            assert endpoint["secret"].startswith("whsec_") and endpoint["events"] == ["memory.created"]
            listed = (await http.get("/v1/webhooks", headers=eraser)).json()
            assert [e["endpoint_id"] for e in listed] == [endpoint["endpoint_id"]] and "secret" not in listed[0]

            await told(client, tenant)
            await live_write(client, tenant, "gate_code", "4711")
            [delivery] = await wait_for(client, tenant, all_in("delivered", 1))
            shown = (await http.get("/v1/webhooks/deliveries?status=delivered", headers=eraser)).json()
            assert [(d["delivery_id"], d["attempts"], d["last_status_code"]) for d in shown] == [
                (delivery.delivery_id, 1, 200)]
            assert (await http.get("/v1/webhooks/deliveries?status=dead", headers=eraser)).json() == []

            again = await http.post(f"/v1/webhooks/deliveries/{delivery.delivery_id}/redeliver", headers=eraser)
            assert again.status_code == 200 and again.json()["status"] == "pending", again.text
            await wait_for(client, tenant, lambda f: f[0].status == "delivered" and f[0].redeliveries == 1)
            assert receiver.accepted() == Counter({delivery.delivery_id: 2})  # sent again, the same id
            for request in receiver.requests:
                verify_webhook(endpoint["secret"], request.headers, request.body)
                assert Webhook(endpoint["secret"]).verify(request.body, request.headers)["type"] == "memory.created"

            rotation = f"/v1/webhooks/{endpoint['endpoint_id']}/rotate-secret"
            assert (await http.post(rotation, headers=writer)).status_code == 403
            too_long = await http.post(f"{rotation}?overlap_hours=169", headers=eraser)
            assert too_long.status_code == 422 and "overlap_hours" in too_long.json()["detail"]
            rotated = await http.post(f"{rotation}?overlap_hours=2", headers=eraser)
            assert rotated.status_code == 200, rotated.text
            new = rotated.json()
            assert new["secret"] != endpoint["secret"] and new["previous_secret_expires_at"] is not None
            await live_write(client, tenant, "wifi", "orchid")
            await wait_for(client, tenant, lambda f: len(f) == 2 and all(d.status == "delivered" for d in f))
            overlap = receiver.requests[-1]
            for secret in (endpoint["secret"], new["secret"]):
                assert Webhook(secret).verify(overlap.body, overlap.headers)["type"] == "memory.created"

            # Refusals, each as problem+json naming the fix.
            assert (await http.post("/v1/webhooks", json={"url": receiver.url, "events": ["memory.created"]},
                                    headers=writer)).status_code == 403
            assert (await http.get("/v1/webhooks")).status_code == 401
            bad_url = await http.post("/v1/webhooks", json={"url": "https://u:p@example.org/x",
                                                            "events": ["memory.created"]}, headers=eraser)
            assert bad_url.status_code == 422 and bad_url.headers["content-type"] == PROBLEM
            assert "url must not carry credentials" in bad_url.json()["detail"]
            metadata = await http.post("/v1/webhooks", json={"url": "https://169.254.169.254/latest",
                                                             "events": ["memory.created"]}, headers=eraser)
            assert metadata.status_code == 422 and metadata.headers["content-type"] == PROBLEM
            assert metadata.json()["detail"].startswith("url is refused: its host is 169.254.169.254, a metadata")
            bad_event = await http.post("/v1/webhooks", json={"url": receiver.url, "events": ["memory.deleted"]},
                                        headers=eraser)
            assert bad_event.status_code == 422 and bad_event.json()["detail"].startswith("events.0")
            unknown = await http.post(f"/v1/webhooks/deliveries/{uuid.uuid4()}/redeliver", headers=eraser)
            assert unknown.status_code == 404 and unknown.headers["content-type"] == PROBLEM
            malformed = await http.delete("/v1/webhooks/not-a-uuid", headers=eraser)
            assert malformed.status_code == 422 and "endpoint_id" in malformed.json()["detail"]

            # Another tenant's key: none of it.
            assert (await http.get("/v1/webhooks", headers=stranger)).json() == []
            assert (await http.get("/v1/webhooks/deliveries", headers=stranger)).json() == []
            assert (await http.post(f"/v1/webhooks/deliveries/{delivery.delivery_id}/redeliver",
                                    headers=stranger)).status_code == 404
            assert (await http.delete(f"/v1/webhooks/{endpoint['endpoint_id']}", headers=stranger)).status_code == 404
            assert (await http.post(rotation, headers=stranger)).status_code == 404

            removed = await http.delete(f"/v1/webhooks/{endpoint['endpoint_id']}", headers=eraser)
            assert removed.status_code == 200 and removed.json()["enabled"] is False
            assert (await http.get("/v1/webhooks", headers=eraser)).json() == []
            gone = await http.post(f"/v1/webhooks/deliveries/{delivery.delivery_id}/redeliver", headers=eraser)
            assert gone.status_code == 409 and "was removed" in gone.json()["detail"]
    finally:
        receiver.stop()
