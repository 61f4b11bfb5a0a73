"""Webhook signatures (agent_memory/security/webhook_signing.py), no server: a delivery is signed as
the Standard Webhooks specification says, so the `standardwebhooks` library verifies it; secrets
are whsec_ + base64 of 32 random bytes; during a rotation's overlap both secrets' signatures
verify; a legacy secret signs the legacy scheme alone and the standard one, over its own key
bytes, next to a new secret; a modified body, another secret, a stale or future timestamp, a
missing header or a body that is no JSON object is refused."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time

import pytest
import standardwebhooks

from agent_memory.security.webhook_signing import (
    WebhookVerificationError,
    is_legacy_secret,
    new_secret,
    secret_key,
    signature,
    signed_headers,
    standard_secret,
    verify_webhook,
)

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # the specification's example secret
BODY = json.dumps({"id": "e1", "type": "memory.created", "data": {"memory_id": "m1"}}).encode()
NOW = 1_750_000_000.0


def test_the_specifications_example_signature():
    # The Standard Webhooks specification's worked example (spec.md, "Signature scheme").
    body = b'{"test": 2432232314}'
    assert signature(SECRET, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body) == \
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_a_delivery_verifies_with_the_standard_webhooks_library():
    secret = new_secret()
    now = time.time()
    headers = signed_headers([secret], "d-1", BODY, now=now)
    assert set(headers) == {"content-type", "webhook-id", "webhook-timestamp", "webhook-signature"}
    assert headers["webhook-id"] == "d-1" and headers["webhook-timestamp"] == str(int(now))
    # Computed independently: base64 HMAC-SHA256 keyed by the decoded secret over "{id}.{ts}.{body}".
    key = base64.b64decode(secret.removeprefix("whsec_"))
    expected = hmac.new(key, f"d-1.{int(now)}.".encode() + BODY, hashlib.sha256).digest()
    assert headers["webhook-signature"] == "v1," + base64.b64encode(expected).decode()
    assert standardwebhooks.Webhook(secret).verify(BODY, headers) == json.loads(BODY)
    assert verify_webhook(secret, headers, BODY)["data"] == {"memory_id": "m1"}
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(new_secret()).verify(BODY, headers)


def test_secrets_are_whsec_and_the_base64_of_32_random_bytes():
    made = {new_secret() for _ in range(20)}
    assert len(made) == 20
    for secret in made:
        assert secret.startswith("whsec_") and len(base64.b64decode(secret[6:], validate=True)) == 32
        assert not is_legacy_secret(secret) and standard_secret(secret) == secret


def test_during_a_rotation_both_secrets_signatures_verify():
    old, new = new_secret(), new_secret()
    headers = signed_headers([new, old], "d-2", BODY, now=time.time())
    listed = headers["webhook-signature"].split(" ")
    assert len(listed) == 2 and all(entry.startswith("v1,") for entry in listed)
    for secret in (old, new):
        assert standardwebhooks.Webhook(secret).verify(BODY, headers)["id"] == "e1"
    assert verify_webhook([old, new], headers, BODY)["id"] == "e1"


def test_a_legacy_secret_signs_the_legacy_scheme_and_the_standard_one_next_to_a_new_secret():
    legacy = f"whsec_{secrets.token_urlsafe(32)}"
    assert is_legacy_secret(legacy) and secret_key(legacy) == base64.urlsafe_b64decode(legacy[6:] + "=")
    alone = signed_headers([legacy], "d-3", BODY, now=NOW)
    mac = hmac.new(legacy.encode(), f"{int(NOW)}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert alone["webhook-signature"] == f"v1={mac}"  # what its receivers verify today
    assert verify_webhook(legacy, alone, BODY, now=NOW)["id"] == "e1"

    # Rotated: the standard scheme under the new secret and under the legacy key bytes, which
    # the standard spelling of the legacy secret gives a Standard Webhooks verifier.
    new = new_secret()
    overlap = signed_headers([new, legacy], "d-3", BODY, now=time.time())
    assert standardwebhooks.Webhook(new).verify(BODY, overlap)["id"] == "e1"
    assert standardwebhooks.Webhook(standard_secret(legacy)).verify(BODY, overlap)["id"] == "e1"
    assert verify_webhook(legacy, overlap, BODY)["id"] == "e1"


def test_a_tampered_body_a_wrong_secret_and_a_stale_timestamp_are_refused():
    headers = signed_headers([SECRET], "d-1", BODY, now=NOW)
    with pytest.raises(WebhookVerificationError, match="does not match the body"):
        verify_webhook(SECRET, headers, BODY.replace(b"m1", b"m2"), now=NOW)
    with pytest.raises(WebhookVerificationError, match="does not match the body"):
        verify_webhook(new_secret(), headers, BODY, now=NOW)
    with pytest.raises(WebhookVerificationError, match="beyond the tolerance of 300 s"):
        verify_webhook(SECRET, headers, BODY, now=NOW + 301)
    with pytest.raises(WebhookVerificationError, match="beyond the tolerance"):
        verify_webhook(SECRET, headers, BODY, now=NOW - 600)  # dated in the future
    assert verify_webhook(SECRET, headers, BODY, now=NOW + 3000, tolerance_seconds=3600)
    # The timestamp and the id are signed: changing either breaks the signature.
    for changed in ({"webhook-timestamp": str(int(NOW) + 1000)}, {"webhook-id": "d-2"}):
        with pytest.raises(WebhookVerificationError, match="does not match"):
            verify_webhook(SECRET, {**headers, **changed}, BODY, now=NOW + 1000 * ("webhook-timestamp" in changed))


def test_missing_headers_and_bodies_that_are_no_json_object_are_refused():
    headers = signed_headers([SECRET], "d-1", BODY, now=NOW)
    for name in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        with pytest.raises(WebhookVerificationError, match=f"no {name} header"):
            verify_webhook(SECRET, {k: v for k, v in headers.items() if k != name}, BODY, now=NOW)
    with pytest.raises(WebhookVerificationError, match="not whole seconds"):
        verify_webhook(SECRET, {**headers, "webhook-timestamp": "soon"}, BODY, now=NOW)
    for body in (b"[1, 2]", b"not json"):
        signed = {**headers, "webhook-signature": signature(SECRET, "d-1", int(NOW), body)}
        with pytest.raises(WebhookVerificationError, match="JSON"):
            verify_webhook(SECRET, signed, body, now=NOW)
