"""Webhook signatures, as the Standard Webhooks specification defines them
(https://www.standardwebhooks.com): what agent-memory sends with every delivery, and what a
receiver checks. Any Standard Webhooks verifier (e.g. the `standardwebhooks` package:
`Webhook(secret).verify(body, headers)`) accepts a delivery.

A delivery is a POST of a JSON body with three headers:

- `webhook-id`: the delivery's id, the same on every attempt (a receiver deduplicates by it);
- `webhook-timestamp`: the attempt's time, in whole seconds since 1970 (UTC);
- `webhook-signature`: `v1,<base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}">`, keyed
  by the base64-decoded part of the endpoint's secret after `whsec_`. While a rotated secret's
  overlap lasts, the header lists one signature per secret, separated by spaces.

A secret is `whsec_` followed by the base64 of 32 random bytes.

Legacy secrets (`whsec_` followed by an unpadded URL-safe base64 token) sign with the legacy
scheme until the endpoint's secret is rotated: `webhook-signature: v1=<hex HMAC-SHA256 of
"{timestamp}.{body}" keyed by the whole secret string>`. Their key material in the standard form
is `standard_secret(legacy)`, which signs the standard scheme during a rotation's overlap
(docs/security.md, "Migrating a legacy secret").

`verify_webhook` checks either scheme in constant time and refuses a timestamp outside the
tolerance: a captured request replayed later fails, and one replayed within the tolerance carries
a `webhook-id` the receiver has seen. A receiver needs this module and the standard library only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from agent_memory.core.errors import Unauthorized

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
SIGNATURE_VERSION = "v1"
SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32  # the specification allows 24 to 64
MIN_SECRET_BYTES, MAX_SECRET_BYTES = 24, 64
DEFAULT_TOLERANCE_SECONDS = 300
_LEGACY_TOKEN = re.compile(r"[A-Za-z0-9_-]{32,}")


class WebhookVerificationError(Unauthorized):
    """A request that is not a delivery signed with this secret, or not a fresh one."""


def new_secret() -> str:
    """A fresh signing secret: `whsec_` + the base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(os.urandom(SECRET_BYTES)).decode()


def _standard_key(secret: str) -> bytes | None:
    if not secret.startswith(SECRET_PREFIX):
        return None
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX):], validate=True)
    except (binascii.Error, ValueError):
        return None
    return key if MIN_SECRET_BYTES <= len(key) <= MAX_SECRET_BYTES else None


def is_legacy_secret(secret: str) -> bool:
    """A legacy secret: `whsec_` + an unpadded URL-safe token, not the standard base64 form."""
    return _standard_key(secret) is None and secret.startswith(SECRET_PREFIX) \
        and _LEGACY_TOKEN.fullmatch(secret[len(SECRET_PREFIX):]) is not None


def secret_key(secret: str) -> bytes:
    """The HMAC key of the standard scheme: the base64-decoded part after `whsec_`; for a legacy
    secret, its URL-safe token decoded (the same random bytes)."""
    key = _standard_key(secret)
    if key is not None:
        return key
    if is_legacy_secret(secret):
        token = secret[len(SECRET_PREFIX):]
        return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    raise ValueError("a webhook secret is whsec_ followed by the base64 of 24 to 64 bytes")


def standard_secret(secret: str) -> str:
    """The secret in the standard form (`whsec_` + base64), for a Standard Webhooks verifier; a
    standard secret is returned as it is, a legacy one re-spelt over the same key bytes."""
    return secret if _standard_key(secret) is not None else \
        SECRET_PREFIX + base64.b64encode(secret_key(secret)).decode()


def signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One `webhook-signature` entry: `v1,<base64>` of `body` with this id, sent at `timestamp` (seconds)."""
    mac = hmac.new(secret_key(secret), f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return f"{SIGNATURE_VERSION},{base64.b64encode(mac.digest()).decode()}"


def legacy_signature(secret: str, timestamp: int, body: bytes) -> str:
    """The legacy scheme's `webhook-signature`: `v1=<hex HMAC-SHA256 of "{timestamp}.{body}">`."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"{SIGNATURE_VERSION}={mac.hexdigest()}"


def signed_headers(secrets: Sequence[str], msg_id: str, body: bytes, *, now: float | None = None) -> dict[str, str]:
    """The headers of one delivery attempt, signed with each of `secrets` (the current one first,
    then one whose rotation overlap lasts). An endpoint whose only secret is legacy gets the
    legacy signature; any other, one standard signature per secret."""
    if not secrets:
        raise ValueError("a delivery is signed with at least one secret")
    timestamp = int(time.time() if now is None else now)
    if len(secrets) == 1 and is_legacy_secret(secrets[0]):
        signed = legacy_signature(secrets[0], timestamp, body)
    else:
        signed = " ".join(signature(secret, msg_id, timestamp, body) for secret in secrets)
    return {"content-type": "application/json", ID_HEADER: msg_id, TIMESTAMP_HEADER: str(timestamp),
            SIGNATURE_HEADER: signed}


def _header(headers: Mapping[str, str], name: str) -> str:
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    raise WebhookVerificationError(f"the request has no {name} header: it is not a webhook delivery")


def verify_webhook(secret: str | Sequence[str], headers: Mapping[str, str], body: bytes, *,
                   tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS, now: float | None = None) -> dict[str, Any]:
    """Check a delivery and return its JSON body. `secret` is the endpoint's secret, or several
    (a receiver that knows the old and the new one during a rotation); `headers` is any mapping
    (names in any case), `body` the raw bytes as received (before any JSON parsing). Raises
    WebhookVerificationError when a header is missing, the timestamp is more than
    `tolerance_seconds` away from `now` (default: the clock), or no signature is one of the
    secrets' over this id, timestamp and body. A legacy secret also verifies the legacy scheme.

    Replay safety needs the receiver's part too: remember the `webhook-id`s handled within the
    tolerance and ignore one seen again (every retry of a delivery carries the same id)."""
    secrets = [secret] if isinstance(secret, str) else list(secret)
    msg_id = _header(headers, ID_HEADER)
    stamp = _header(headers, TIMESTAMP_HEADER).strip()
    if not stamp.isdigit():
        raise WebhookVerificationError(f"{TIMESTAMP_HEADER} {stamp[:20]!r} is not whole seconds since 1970")
    timestamp = int(stamp)
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_seconds:
        raise WebhookVerificationError(f"{TIMESTAMP_HEADER} is {int(current - timestamp)} s away from now, beyond "
                                       f"the tolerance of {tolerance_seconds:g} s: a replayed or delayed request")
    expected = [signature(s, msg_id, timestamp, body) for s in secrets]
    expected += [legacy_signature(s, timestamp, body) for s in secrets if is_legacy_secret(s)]
    offered = _header(headers, SIGNATURE_HEADER).split()
    # Every pair is compared (in constant time), whichever matches.
    if not any([hmac.compare_digest(e.encode(), o.encode()) for e in expected for o in offered]):
        raise WebhookVerificationError(f"{SIGNATURE_HEADER} does not match the body: a wrong secret or a "
                                       "modified body")
    try:
        parsed = json.loads(body)
    except ValueError:
        raise WebhookVerificationError("the signed body is not JSON") from None
    if not isinstance(parsed, dict):
        raise WebhookVerificationError("the signed body is not a JSON object")
    return parsed
