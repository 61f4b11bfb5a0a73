"""Webhook signatures: what agent-memory sends with every delivery, and what a receiver checks.

A delivery is a POST of a JSON body with three headers:

- `Webhook-Id`: the delivery's id, the same on every attempt (a receiver deduplicates by it);
- `Webhook-Timestamp`: the attempt's time, in whole seconds since 1970 (UTC);
- `Webhook-Signature`: `v1=<hex HMAC-SHA256 under the endpoint's secret of "{timestamp}.{body}">`.

`verify_webhook` checks the signature in constant time and refuses a timestamp outside the
tolerance: a captured request replayed later fails, and one replayed within the tolerance carries a
`Webhook-Id` the receiver has seen. A receiver needs this module and the standard library only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

from agent_memory.core.errors import Unauthorized

ID_HEADER = "Webhook-Id"
TIMESTAMP_HEADER = "Webhook-Timestamp"
SIGNATURE_HEADER = "Webhook-Signature"
SIGNATURE_VERSION = "v1"
DEFAULT_TOLERANCE_SECONDS = 300


class WebhookVerificationError(Unauthorized):
    """A request that is not a delivery signed with this secret, or not a fresh one."""


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The `Webhook-Signature` value of `body` sent at `timestamp` (seconds)."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"{SIGNATURE_VERSION}={mac.hexdigest()}"


def signed_headers(secret: str, delivery_id: str, body: bytes, *, now: float | None = None) -> dict[str, str]:
    """The headers of one delivery attempt."""
    timestamp = int(time.time() if now is None else now)
    return {"Content-Type": "application/json", ID_HEADER: delivery_id, TIMESTAMP_HEADER: str(timestamp),
            SIGNATURE_HEADER: signature(secret, timestamp, body)}


def _header(headers: Mapping[str, str], name: str) -> str:
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    raise WebhookVerificationError(f"the request has no {name} header: it is not a webhook delivery")


def verify_webhook(secret: str, headers: Mapping[str, str], body: bytes, *,
                   tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS, now: float | None = None) -> dict[str, Any]:
    """Check a delivery and return its JSON body. `headers` is any mapping (names in any case),
    `body` the raw bytes as received (before any JSON parsing). Raises WebhookVerificationError
    when a header is missing, the timestamp is more than `tolerance_seconds` away from `now`
    (default: the clock), or the signature is not the secret's over this timestamp and body.

    Replay safety needs the receiver's part too: remember the `Webhook-Id`s handled within the
    tolerance and ignore one seen again (every retry of a delivery carries the same id)."""
    _header(headers, ID_HEADER)
    stamp = _header(headers, TIMESTAMP_HEADER).strip()
    if not stamp.isdigit():
        raise WebhookVerificationError(f"{TIMESTAMP_HEADER} {stamp[:20]!r} is not whole seconds since 1970")
    timestamp = int(stamp)
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_seconds:
        raise WebhookVerificationError(f"{TIMESTAMP_HEADER} is {int(current - timestamp)} s away from now, beyond "
                                       f"the tolerance of {tolerance_seconds:g} s: a replayed or delayed request")
    expected = signature(secret, timestamp, body)
    offered = [part.strip() for part in _header(headers, SIGNATURE_HEADER).split(",")]
    # Every offered signature is compared (in constant time), whichever matches.
    if not any([hmac.compare_digest(expected.encode(), part.encode()) for part in offered]):
        raise WebhookVerificationError(f"{SIGNATURE_HEADER} does not match the body: a wrong secret or a "
                                       "modified body")
    try:
        parsed = json.loads(body)
    except ValueError:
        raise WebhookVerificationError("the signed body is not JSON") from None
    if not isinstance(parsed, dict):
        raise WebhookVerificationError("the signed body is not a JSON object")
    return parsed
