"""Webhook signatures (agent_memory/security/webhook_signing.py), no server: a delivery signed with
the endpoint's secret verifies and gives back its body; a modified body, another secret, a stale or
future timestamp, a missing header or a body that is no JSON object is refused."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from agent_memory.security.webhook_signing import (
    WebhookVerificationError,
    signature,
    signed_headers,
    verify_webhook,
)

SECRET = "whsec_test-secret"
BODY = json.dumps({"id": "e1", "type": "memory.created", "data": {"memory_id": "m1"}}).encode()
NOW = 1_750_000_000.0


def test_a_signed_delivery_verifies_and_its_body_is_returned():
    headers = signed_headers(SECRET, "d-1", BODY, now=NOW)
    assert headers["Webhook-Id"] == "d-1" and headers["Webhook-Timestamp"] == str(int(NOW))
    # The documented scheme, computed independently: HMAC-SHA256 of "{timestamp}.{body}".
    expected = hmac.new(SECRET.encode(), f"{int(NOW)}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert headers["Webhook-Signature"] == f"v1={expected}"
    assert verify_webhook(SECRET, headers, BODY, now=NOW + 299)["data"] == {"memory_id": "m1"}
    # Header names in any case; several signatures offered (one of them good).
    lower = {k.lower(): v for k, v in headers.items()}
    lower["webhook-signature"] = f"v1={'0' * 64}, {headers['Webhook-Signature']}"
    assert verify_webhook(SECRET, lower, BODY, now=NOW)["id"] == "e1"


def test_a_tampered_body_a_wrong_secret_and_a_stale_timestamp_are_refused():
    headers = signed_headers(SECRET, "d-1", BODY, now=NOW)
    with pytest.raises(WebhookVerificationError, match="does not match the body"):
        verify_webhook(SECRET, headers, BODY.replace(b"m1", b"m2"), now=NOW)
    with pytest.raises(WebhookVerificationError, match="does not match the body"):
        verify_webhook("whsec_another", headers, BODY, now=NOW)
    with pytest.raises(WebhookVerificationError, match="beyond the tolerance of 300 s"):
        verify_webhook(SECRET, headers, BODY, now=NOW + 301)
    with pytest.raises(WebhookVerificationError, match="beyond the tolerance"):
        verify_webhook(SECRET, headers, BODY, now=NOW - 600)  # dated in the future
    assert verify_webhook(SECRET, headers, BODY, now=NOW + 3000, tolerance_seconds=3600)
    # The timestamp is signed: moving it to look fresh breaks the signature.
    moved = {**headers, "Webhook-Timestamp": str(int(NOW) + 1000)}
    with pytest.raises(WebhookVerificationError, match="does not match"):
        verify_webhook(SECRET, moved, BODY, now=NOW + 1000)


def test_missing_headers_and_bodies_that_are_no_json_object_are_refused():
    headers = signed_headers(SECRET, "d-1", BODY, now=NOW)
    for name in ("Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"):
        with pytest.raises(WebhookVerificationError, match=f"no {name} header"):
            verify_webhook(SECRET, {k: v for k, v in headers.items() if k != name}, BODY, now=NOW)
    with pytest.raises(WebhookVerificationError, match="not whole seconds"):
        verify_webhook(SECRET, {**headers, "Webhook-Timestamp": "soon"}, BODY, now=NOW)
    for body in (b"[1, 2]", b"not json"):
        signed = {**headers, "Webhook-Signature": signature(SECRET, int(NOW), body)}
        with pytest.raises(WebhookVerificationError, match="JSON"):
            verify_webhook(SECRET, signed, body, now=NOW)
