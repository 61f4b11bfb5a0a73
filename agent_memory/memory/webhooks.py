"""Webhooks: a tenant's endpoints hear about its memory as it changes.

An endpoint subscribes to event types (`EVENT_TYPES`). Each event is written as one delivery row
per subscribed endpoint in the transaction of the effect it reports — a consolidation's commit, a
live write, a forget or restore, an erasure's completion — so a crash after the commit loses no
event and a rolled-back transaction sends none (an outbox). Event ids are derived from what the
event reports (the memory event's id, the commit's operation id, the erasure request), and a
delivery's id from its endpoint and event: a retried transaction writes nothing twice.

After the commit, the writer starts one WebhookDeliveryWorkflow per new delivery (workflow id
`webhook-delivery-<delivery id>`, so a second start is a no-op); the idle-timer sweep starts any
that a crash between the commit and the start left behind. The workflow POSTs the signed body
(agent_memory/security/webhook_signing.py, the Standard Webhooks scheme) to a checked public
address (agent_memory/security/webhook_targets.py), retries with exponential backoff up to the
deployment's attempt bound, and dead-letters the delivery after it; an operator re-delivers a
dead (or delivered) one, which starts a new run.

A payload carries ids, counts, event types and times only: never memory text or message content.
A subject's deliveries are deleted by its erasure; the memory sweep deletes delivered and dead
ones after the tenant's `webhook_delivery_days`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import psycopg
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from psycopg.rows import class_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, ConfigDict
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from agent_memory.core import contract
from agent_memory.core.errors import Conflict, InvalidInput, NotFound
from agent_memory.core.models import CommitOutcome, check_identifier
from agent_memory.core.run_inputs import RunInput
from agent_memory.memory.events import MemoryEvent, MemoryForgotten, MemoryMarkedStale, StaleMarkResolved
from agent_memory.security.keyring import KeyRing
from agent_memory.security.webhook_signing import new_secret
from agent_memory.security.webhook_targets import (
    RefusedAddress,
    Resolver,
    UnresolvedName,
    checked_addresses,
    literal_address,
    url_host,
)
from agent_memory.store.db import registered_tenants, tenant_transaction

CONSOLIDATION_COMPLETED: Final = "consolidation.completed"
MEMORY_CREATED: Final = "memory.created"
MEMORY_UPDATED: Final = "memory.updated"
MEMORY_FORGOTTEN: Final = "memory.forgotten"
MEMORY_STALE: Final = "memory.stale"
ERASURE_COMPLETED: Final = "erasure.completed"
EVENT_TYPES: Final = (CONSOLIDATION_COMPLETED, MEMORY_CREATED, MEMORY_UPDATED, MEMORY_FORGOTTEN, MEMORY_STALE,
                      ERASURE_COMPLETED)
EventType = Literal["consolidation.completed", "memory.created", "memory.updated", "memory.forgotten",
                    "memory.stale", "erasure.completed"]
DeliveryStatus = Literal["pending", "delivered", "dead"]
SecretFormat = Literal["standard", "legacy"]

URL_MAX_CHARS = 2048
MAX_ENDPOINTS_PER_TENANT = 20
# How long delivered and dead deliveries are kept unless the tenant's retention says otherwise.
WEBHOOK_DELIVERY_DAYS_DEFAULT = 30
# Error texts kept on a delivery (a receiver's answer is not ours to store at length).
ERROR_MAX_CHARS = 500
# How long a rotated-out secret keeps signing deliveries next to the new one, by default and at most.
ROTATION_OVERLAP_DEFAULT = timedelta(hours=24)
ROTATION_OVERLAP_MAX = timedelta(days=7)
_EVENT_NAMESPACE = uuid.UUID("5b7c2f0e-3f0a-4d5e-9a55-1c0f7e6a9d21")


class WebhookEndpoint(BaseModel):
    """An endpoint as listed: never its secret."""

    model_config = ConfigDict(extra="forbid")

    endpoint_id: str
    url: str
    events: list[str]
    enabled: bool
    created_at: datetime
    disabled_at: datetime | None = None
    # standard: whsec_ + base64, signed as Standard Webhooks specifies; legacy: signed with the
    # legacy scheme until the secret is rotated (docs/security.md).
    secret_format: SecretFormat = "standard"
    secret_rotated_at: datetime | None = None
    # Until then deliveries carry a signature under the replaced secret too.
    previous_secret_expires_at: datetime | None = None


class CreatedWebhookEndpoint(WebhookEndpoint):
    """A new endpoint (or a rotated one) with its signing secret: shown this once, stored encrypted."""

    secret: str


class WebhookDelivery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    delivery_id: str
    endpoint_id: str
    event_type: str
    event_id: str
    subject_id: str | None = None
    status: DeliveryStatus
    attempts: int  # every POST made, across re-deliveries
    redeliveries: int
    last_status_code: int | None = None
    last_error: str | None = None
    created_at: datetime
    delivered_at: datetime | None = None
    dead_at: datetime | None = None
    payload: dict[str, Any]


class WebhookDeliveryInput(RunInput):
    """WebhookDeliveryWorkflow's input and its delivery activity's: ids only (the history
    carries no URL, secret or payload)."""

    kind: Literal["webhook-delivery"] = "webhook-delivery"
    tenant_id: str
    delivery_id: str


class DeliveryTarget(BaseModel):
    """What one attempt needs, read from PostgreSQL when it runs."""

    status: DeliveryStatus
    url: str
    secrets: list[str]  # the current secret first, then one whose rotation overlap lasts
    enabled: bool
    body: bytes


# --- input checks ---------------------------------------------------------------------------------


def check_webhook_url(url: str, *, allow_http: bool) -> str:
    """An endpoint URL: https (http only where the deployment allows it), a host, no credentials."""
    if not isinstance(url, str) or not 1 <= len(url) <= URL_MAX_CHARS or not url.isprintable() or " " in url:
        raise InvalidInput(f"url is invalid: give the receiver's absolute https:// URL, at most {URL_MAX_CHARS} "
                           "printable characters without spaces")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise InvalidInput("url is invalid: give the receiver's absolute https:// URL with a valid host and port") \
            from None
    scheme = parts.scheme.lower()
    if scheme == "http" and not allow_http:
        raise InvalidInput("url must use https://: plain http:// is refused unless the deployment sets "
                           "AGENT_MEMORY_WEBHOOK_ALLOW_HTTP=1 (a development stack)")
    if scheme not in ("https", "http"):
        raise InvalidInput("url must be an https:// URL (e.g. https://example.org/hooks/memory)")
    if parts.username is not None or parts.password is not None:
        raise InvalidInput("url must not carry credentials (user:password@): deliveries are authenticated by "
                           "their signature; remove them")
    if not parts.hostname:
        raise InvalidInput("url has no host: give an absolute URL such as https://example.org/hooks/memory")
    if port == 0:
        raise InvalidInput("url has port 0: give the receiver's port")
    return url


async def check_webhook_target(url: str, resolver: Resolver, *, allow_private: bool) -> None:
    """The URL's host must be a public address, or a name resolving only to public addresses
    (any address, but metadata, multicast and unspecified ones, where the deployment allows
    private targets). A name that does not resolve now is accepted: every attempt checks again."""
    try:
        host = url_host(url)
    except ValueError:
        raise InvalidInput("url is invalid: give the receiver's absolute https:// URL with a valid host") from None
    literal = literal_address(host)
    try:
        await checked_addresses(resolver, host, allow_private=allow_private)
    except UnresolvedName:
        return
    except RefusedAddress as refused:
        where = f"is {refused.address}" if literal is not None else f"resolves to {refused.address}"
        fix = ("give a public receiver" if refused.kind in ("metadata", "multicast", "unspecified") else
               "give a receiver on the public internet, or, for a deployment whose receivers are on its own network, "
               "set AGENT_MEMORY_WEBHOOK_ALLOW_PRIVATE=1")
        raise InvalidInput(f"url is refused: its host {where}, a {refused.kind} address; webhooks reach only public "
                           f"internet addresses: {fix}") from None


def check_event_types(events: Sequence[str]) -> list[str]:
    """The subscribed event types, each known, in the order of EVENT_TYPES."""
    if isinstance(events, str) or not events:
        raise InvalidInput(f"events is empty: subscribe to at least one of {', '.join(EVENT_TYPES)}")
    for event in events:
        if event not in EVENT_TYPES:
            raise InvalidInput(f"events: unknown event type {str(event)[:60]!r}: use one of {', '.join(EVENT_TYPES)}")
    return [e for e in EVENT_TYPES if e in set(events)]


def check_uuid(field: str, value: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise InvalidInput(f"{field} {str(value)[:40]!r} is not a UUID: give the id as listed") from None


# --- the signing secret, encrypted at rest ----------------------------------------------------------


def _secret_key(keyring: KeyRing) -> bytes:
    # Derived from the identifier key (never rotated: digests depend on it), which lives with the
    # keys, never in the database: a copy of the database alone does not sign deliveries.
    return hmac.new(keyring.identifier_key(), b"agent-memory webhook secrets v1", hashlib.sha256).digest()


def _secret_aad(tenant_id: str, endpoint_id: uuid.UUID) -> bytes:
    return f"webhook-secret\x1f{tenant_id}\x1f{endpoint_id}".encode()


def seal_secret(keyring: KeyRing, tenant_id: str, endpoint_id: uuid.UUID, secret: str) -> tuple[bytes, bytes]:
    nonce = os.urandom(12)
    return AESGCM(_secret_key(keyring)).encrypt(nonce, secret.encode(), _secret_aad(tenant_id, endpoint_id)), nonce


def open_secret(keyring: KeyRing, tenant_id: str, endpoint_id: uuid.UUID, ciphertext: bytes, nonce: bytes) -> str:
    return AESGCM(_secret_key(keyring)).decrypt(nonce, ciphertext, _secret_aad(tenant_id, endpoint_id)).decode()


# --- endpoints --------------------------------------------------------------------------------------

_ENDPOINT_COLUMNS = ("endpoint_id::text, url, events, enabled, created_at, disabled_at, secret_format, "
                     "secret_rotated_at, CASE WHEN previous_secret_expires_at > now() THEN previous_secret_expires_at "
                     "END AS previous_secret_expires_at")


async def add_endpoint(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, url: str, events: Sequence[str],
                       *, allow_http: bool, allow_private: bool, resolver: Resolver) -> CreatedWebhookEndpoint:
    """Register an endpoint; its signing secret is generated here and returned this once."""
    check_identifier("tenant", tenant_id)
    check_webhook_url(url, allow_http=allow_http)
    subscribed = check_event_types(events)
    await check_webhook_target(url, resolver, allow_private=allow_private)
    endpoint_id = uuid.uuid4()
    secret = new_secret()
    ciphertext, nonce = seal_secret(keyring, tenant_id, endpoint_id, secret)
    async with tenant_transaction(pool, tenant_id) as conn:
        # One tenant's registrations at a time, so the bound below holds under concurrent calls.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('webhook_endpoints/' || %s, 0))",
                           (tenant_id,))
        cur = await conn.execute("SELECT count(*) FROM webhook_endpoints WHERE tenant_id = %s AND enabled",
                                 (tenant_id,))
        row = await cur.fetchone()
        if row is not None and row[0] >= MAX_ENDPOINTS_PER_TENANT:
            raise Conflict(f"tenant {tenant_id!r} has {MAX_ENDPOINTS_PER_TENANT} webhook endpoints, the most it may "
                           "have: remove one first")
        inserted = conn.cursor(row_factory=class_row(WebhookEndpoint))
        await inserted.execute(
            "INSERT INTO webhook_endpoints (tenant_id, endpoint_id, url, events, secret_ciphertext, secret_nonce, "
            f"secret_format) VALUES (%s, %s, %s, %s, %s, %s, 'standard') RETURNING {_ENDPOINT_COLUMNS}",
            (tenant_id, endpoint_id, url, subscribed, ciphertext, nonce))
        created = await inserted.fetchone()
    assert created is not None  # the row just inserted
    return CreatedWebhookEndpoint(**created.model_dump(), secret=secret)


async def list_endpoints(pool: AsyncConnectionPool, tenant_id: str, *, include_removed: bool = False
                         ) -> list[WebhookEndpoint]:
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = conn.cursor(row_factory=class_row(WebhookEndpoint))
        await cur.execute(f"SELECT {_ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE tenant_id = %s "
                          "AND (enabled OR %s) ORDER BY created_at, endpoint_id", (tenant_id, include_removed))
        return await cur.fetchall()


async def remove_endpoint(pool: AsyncConnectionPool, tenant_id: str, endpoint_id: str) -> WebhookEndpoint:
    """Disable an endpoint: no new delivery is written for it, and its pending ones are
    dead-lettered when their next attempt finds it removed. Its deliveries stay listed."""
    endpoint = check_uuid("endpoint_id", endpoint_id)
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = conn.cursor(row_factory=class_row(WebhookEndpoint))
        await cur.execute(
            "UPDATE webhook_endpoints SET enabled = false, disabled_at = coalesce(disabled_at, now()) "
            f"WHERE tenant_id = %s AND endpoint_id = %s RETURNING {_ENDPOINT_COLUMNS}", (tenant_id, endpoint))
        removed = await cur.fetchone()
    if removed is None:
        raise NotFound(f"no webhook endpoint {endpoint_id!r} in tenant {tenant_id!r}: list them with "
                       "`agent-memory webhooks list`")
    return removed


async def rotate_secret(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, endpoint_id: str, *,
                        overlap: timedelta = ROTATION_OVERLAP_DEFAULT) -> CreatedWebhookEndpoint:
    """Give the endpoint a new signing secret (standard form), returned this once. The replaced
    secret keeps signing deliveries next to the new one for `overlap` (0: not at all), so the
    receiver moves to the new secret within that time; a legacy secret's deliveries switch to
    the standard scheme here (docs/security.md, "Migrating a legacy secret")."""
    endpoint = check_uuid("endpoint_id", endpoint_id)
    if not isinstance(overlap, timedelta) or not timedelta(0) <= overlap <= ROTATION_OVERLAP_MAX:
        raise InvalidInput(f"overlap_hours is invalid: give 0 to {int(ROTATION_OVERLAP_MAX.total_seconds()) // 3600} "
                           "hours for the replaced secret to keep signing deliveries")
    secret = new_secret()
    ciphertext, nonce = seal_secret(keyring, tenant_id, endpoint, secret)
    keep = overlap > timedelta(0)
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = conn.cursor(row_factory=class_row(WebhookEndpoint))
        # The replaced secret's ciphertext moves as it is: it is bound to the same tenant and endpoint.
        await cur.execute(
            "UPDATE webhook_endpoints SET "
            "previous_secret_ciphertext = CASE WHEN %(keep)s THEN secret_ciphertext END, "
            "previous_secret_nonce = CASE WHEN %(keep)s THEN secret_nonce END, "
            "previous_secret_expires_at = CASE WHEN %(keep)s THEN now() + %(overlap)s END, "
            "secret_ciphertext = %(c)s, secret_nonce = %(n)s, secret_format = 'standard', secret_rotated_at = now() "
            f"WHERE tenant_id = %(t)s AND endpoint_id = %(e)s AND enabled RETURNING {_ENDPOINT_COLUMNS}",
            {"keep": keep, "overlap": overlap, "c": ciphertext, "n": nonce, "t": tenant_id, "e": endpoint})
        rotated = await cur.fetchone()
    if rotated is None:
        raise NotFound(f"no webhook endpoint {endpoint_id!r} in tenant {tenant_id!r} (or it was removed): list them "
                       "with `agent-memory webhooks list`")
    return CreatedWebhookEndpoint(**rotated.model_dump(), secret=secret)


# --- enqueueing, in the effect's transaction -----------------------------------------------------


def event_id(kind: str, *parts: str) -> uuid.UUID:
    """A deterministic event id: the same effect, retried, names the same event."""
    return uuid.uuid5(_EVENT_NAMESPACE, "\x1f".join((kind, *parts)))


async def enqueue(conn: psycopg.AsyncConnection, tenant_id: str, event_type: EventType, event: uuid.UUID,
                  subject_id: str | None, payload: dict[str, Any]) -> int:
    """A delivery of the event to each enabled endpoint of the tenant subscribed to its type, in
    the caller's transaction; an event already enqueued is not enqueued again. Returns the rows written."""
    cur = await conn.execute(
        "INSERT INTO webhook_deliveries (tenant_id, delivery_id, endpoint_id, event_type, event_id, subject_id, "
        "payload) SELECT tenant_id, md5(endpoint_id::text || '/' || %(e)s::text)::uuid, endpoint_id, %(type)s, "
        "%(e)s, %(s)s, %(p)s FROM webhook_endpoints WHERE tenant_id = %(t)s AND enabled AND %(type)s = ANY(events) "
        "ON CONFLICT DO NOTHING",
        {"t": tenant_id, "e": event, "type": event_type, "s": subject_id, "p": Jsonb(payload)})
    return cur.rowcount


def memory_event_type(event: MemoryEvent) -> EventType | None:
    """The webhook event a memory event is reported as; None for a resolved stale mark (the
    resolution's own effect, a confirmation, a correction or a forget, is reported)."""
    if isinstance(event.payload, MemoryForgotten):
        return MEMORY_FORGOTTEN
    if isinstance(event.payload, MemoryMarkedStale):
        return MEMORY_STALE
    if isinstance(event.payload, StaleMarkResolved):
        return None
    return MEMORY_CREATED if event.version == 1 else MEMORY_UPDATED


async def enqueue_memory_event(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                               event: MemoryEvent) -> int:
    """memory.created (a memory's first event), memory.forgotten, memory.stale (the review marked
    a memory: the marked memory's id, the reason and the related memories' ids), or
    memory.updated (any other: a new value, a correction, a confirmation, an end, a restore),
    keyed on the memory event."""
    event_type = memory_event_type(event)
    if event_type is None:
        return 0
    session_id = getattr(event.payload, "session_id", None)
    payload: dict[str, Any] = {
        "subject_id": subject_id, "memory_id": str(event.memory_id), "version": event.version,
        "change": event.payload.type, "namespace": event.namespace, "occurred_at": event.occurred_at.isoformat(),
        "actor": event.actor, **({"session_id": session_id} if session_id else {})}
    if isinstance(event.payload, MemoryMarkedStale):
        payload.update({"mark_id": str(event.memory_id), "memory_id": str(event.payload.marked_memory_id),
                        "memory_kind": event.payload.marked_kind, "reason": event.payload.reason,
                        "related_memory_ids": [str(m) for m in event.payload.related_memory_ids]})
    return await enqueue(conn, tenant_id, event_type, event_id("memory", str(event.event_id)), subject_id, payload)


async def enqueue_consolidation_completed(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                                          outcome: CommitOutcome, events: Sequence[MemoryEvent]) -> int:
    """consolidation.completed, keyed on the commit's operation id: the session, the counts and
    the ids of the memories the commit created and updated."""
    created = list(dict.fromkeys(str(e.memory_id) for e in events if e.version == 1))
    updated = list(dict.fromkeys(str(e.memory_id) for e in events if e.version > 1 and str(e.memory_id) not in created))
    payload = {"subject_id": subject_id, "session_id": outcome.session_id, "operation_id": outcome.operation_id,
               "events_appended": outcome.events_appended, "facts_written": outcome.facts_written,
               "episode_written": outcome.episode_written, "observations_written": outcome.observations_written,
               "entities_noted": outcome.entities_noted, "relations_noted": outcome.relations_noted,
               "withheld": outcome.withheld, "memory_ids_created": created, "memory_ids_updated": updated}
    return await enqueue(conn, tenant_id, CONSOLIDATION_COMPLETED, event_id("consolidation", outcome.operation_id),
                         subject_id, payload)


async def enqueue_erasure_completed(conn: psycopg.AsyncConnection, tenant_id: str, request_id: str,
                                    payload: dict[str, Any]) -> int:
    """erasure.completed, keyed on the request. It names no subject: the delivery outlives the
    subject's, and the request id is what the caller holds."""
    return await enqueue(conn, tenant_id, ERASURE_COMPLETED, event_id("erasure", request_id), None, payload)


# --- starting the deliveries' runs ----------------------------------------------------------------


async def start_delivery(temporal: Client, task_queue: str, tenant_id: str, delivery_id: str,
                         redeliveries: int) -> bool:
    """Start the delivery's run; False when a run under its id exists already (running or closed)."""
    try:
        await temporal.start_workflow(
            contract.WEBHOOK_DELIVERY_WORKFLOW, WebhookDeliveryInput(tenant_id=tenant_id, delivery_id=delivery_id),
            id=contract.webhook_delivery_workflow_id(delivery_id, redeliveries), task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            search_attributes=TypedSearchAttributes([SearchAttributePair(contract.TENANT_ID, tenant_id)]))
    except WorkflowAlreadyStartedError:
        return False
    return True


async def dispatch_deliveries(pool: AsyncConnectionPool, temporal: Client, task_queue: str, tenant_id: str, *,
                              limit: int = 500) -> int:
    """Start the run of every pending delivery of the tenant not started yet (after the commit
    that wrote them, or by the sweep); returns how many were started."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            "SELECT delivery_id::text, redeliveries FROM webhook_deliveries WHERE tenant_id = %s AND status = 'pending' "
            "AND dispatched_at IS NULL ORDER BY created_at LIMIT %s", (tenant_id, limit))
        due = await cur.fetchall()
    if not due:
        return 0
    started = 0
    for delivery_id, redeliveries in due:
        started += await start_delivery(temporal, task_queue, tenant_id, delivery_id, redeliveries)
    async with tenant_transaction(pool, tenant_id) as conn:
        for delivery_id, redeliveries in due:
            await conn.execute(
                "UPDATE webhook_deliveries SET dispatched_at = now() WHERE tenant_id = %s AND delivery_id = %s "
                "AND redeliveries = %s AND dispatched_at IS NULL", (tenant_id, delivery_id, redeliveries))
    return started


class WebhookSweepResult(BaseModel):
    tenants: int = 0
    deliveries_started: int = 0


async def sweep_undispatched(pool: AsyncConnectionPool, temporal: Client, task_queue: str, *,
                             limit_per_tenant: int = 500) -> WebhookSweepResult:
    """Start the runs a crash between a commit and its starts left behind, in every tenant."""
    result = WebhookSweepResult()
    for tenant_id in await registered_tenants(pool):
        result.tenants += 1
        result.deliveries_started += await dispatch_deliveries(pool, temporal, task_queue, tenant_id,
                                                               limit=limit_per_tenant)
    return result


# --- the delivery's attempts ----------------------------------------------------------------------


def delivery_body(tenant_id: str, event_type: str, event: str, created_at: datetime, payload: dict[str, Any]) -> bytes:
    """The POSTed JSON, the same on every attempt."""
    return json.dumps({"id": event, "type": event_type, "tenant_id": tenant_id, "created_at": created_at.isoformat(),
                       "data": payload}, sort_keys=True, separators=(",", ":")).encode()


async def delivery_target(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str,
                          delivery_id: str) -> DeliveryTarget | None:
    """The delivery and its endpoint as one attempt needs them; None when the delivery is gone
    (its subject was erased, or retention deleted it)."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            "SELECT d.status, d.event_type, d.event_id::text, d.created_at, d.payload, e.url, e.enabled, e.endpoint_id, "
            "e.secret_ciphertext, e.secret_nonce, e.previous_secret_ciphertext, e.previous_secret_nonce, "
            # The replaced secret signs only while its rotation overlap lasts.
            "e.previous_secret_expires_at > now() "
            "FROM webhook_deliveries d JOIN webhook_endpoints e "
            "ON e.tenant_id = d.tenant_id AND e.endpoint_id = d.endpoint_id "
            "WHERE d.tenant_id = %s AND d.delivery_id = %s", (tenant_id, check_uuid("delivery_id", delivery_id)))
        row = await cur.fetchone()
    if row is None:
        return None
    (status, event_type, event, created_at, payload, url, enabled, endpoint_id, ciphertext, nonce,
     previous_ciphertext, previous_nonce, overlapping) = row
    secrets = [open_secret(keyring, tenant_id, endpoint_id, bytes(ciphertext), bytes(nonce))]
    if overlapping:
        secrets.append(open_secret(keyring, tenant_id, endpoint_id, bytes(previous_ciphertext), bytes(previous_nonce)))
    return DeliveryTarget(status=status, url=url, enabled=enabled, secrets=secrets,
                          body=delivery_body(tenant_id, event_type, event, created_at, payload))


async def record_attempt(pool: AsyncConnectionPool, tenant_id: str, delivery_id: str, *, status_code: int | None,
                         error: str | None, delivered: bool) -> int | None:
    """One POST made: its answer (or why there was none); a 2xx marks the delivery delivered.
    Returns the delivery's attempts with this one (None: it was no longer pending)."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            "UPDATE webhook_deliveries SET attempts = attempts + 1, last_status_code = %(code)s, "
            "last_error = %(error)s, status = CASE WHEN %(ok)s THEN 'delivered' ELSE status END, "
            "delivered_at = CASE WHEN %(ok)s THEN now() ELSE delivered_at END "
            "WHERE tenant_id = %(t)s AND delivery_id = %(d)s AND status = 'pending' RETURNING attempts",
            {"code": status_code, "error": error[:ERROR_MAX_CHARS] if error else None, "ok": delivered,
             "t": tenant_id, "d": check_uuid("delivery_id", delivery_id)})
        row = await cur.fetchone()
    return None if row is None else int(row[0])


async def mark_dead(pool: AsyncConnectionPool, tenant_id: str, delivery_id: str, error: str | None) -> int | None:
    """Dead-letter a pending delivery (its attempts are exhausted, or the receiver refused it);
    `error` replaces the last attempt's only when given. Returns its attempts (None: not pending)."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            "UPDATE webhook_deliveries SET status = 'dead', dead_at = now(), "
            "last_error = coalesce(%s, last_error) WHERE tenant_id = %s AND delivery_id = %s AND status = 'pending' "
            "RETURNING attempts", (error[:ERROR_MAX_CHARS] if error else None, tenant_id,
                                   check_uuid("delivery_id", delivery_id)))
        row = await cur.fetchone()
    return None if row is None else int(row[0])


# --- operators: listing and re-delivery -------------------------------------------------------------

_DELIVERY_COLUMNS = ("delivery_id::text, endpoint_id::text, event_type, event_id::text, subject_id, status, attempts, "
                     "redeliveries, last_status_code, last_error, created_at, delivered_at, dead_at, payload")


async def list_deliveries(pool: AsyncConnectionPool, tenant_id: str, *, status: DeliveryStatus | None = None,
                          limit: int = 100) -> list[WebhookDelivery]:
    """The tenant's deliveries, newest first (of one status, when given)."""
    if status is not None and status not in ("pending", "delivered", "dead"):
        raise InvalidInput(f"status {str(status)[:20]!r} is invalid: use pending, delivered or dead")
    if not isinstance(limit, int) or not 1 <= limit <= 1000:
        raise InvalidInput(f"limit {limit!r} is invalid: use 1 to 1000")
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = conn.cursor(row_factory=class_row(WebhookDelivery))
        await cur.execute(f"SELECT {_DELIVERY_COLUMNS} FROM webhook_deliveries WHERE tenant_id = %s "
                          "AND (%s::text IS NULL OR status = %s) ORDER BY created_at DESC, delivery_id LIMIT %s",
                          (tenant_id, status, status, limit))
        return await cur.fetchall()


async def dead_delivery_count(pool: AsyncConnectionPool, tenant_id: str) -> int:
    """The tenant's deliveries given up on (`webhooks deliveries --status dead` lists them)."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute("SELECT count(*) FROM webhook_deliveries WHERE tenant_id = %s AND status = 'dead'",
                                 (tenant_id,))
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def read_delivery(pool: AsyncConnectionPool, tenant_id: str, delivery_id: str) -> WebhookDelivery:
    delivery = check_uuid("delivery_id", delivery_id)
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = conn.cursor(row_factory=class_row(WebhookDelivery))
        await cur.execute(f"SELECT {_DELIVERY_COLUMNS} FROM webhook_deliveries WHERE tenant_id = %s "
                          "AND delivery_id = %s", (tenant_id, delivery))
        found = await cur.fetchone()
    if found is None:
        raise NotFound(f"no webhook delivery {delivery_id!r} in tenant {tenant_id!r}: list them with "
                       "`agent-memory webhooks deliveries`")
    return found


async def redeliver(pool: AsyncConnectionPool, tenant_id: str, delivery_id: str) -> WebhookDelivery:
    """Set a dead (or delivered) delivery pending again, for a new run (its id suffixed with the
    re-delivery count); its attempts so far stay counted."""
    delivery = check_uuid("delivery_id", delivery_id)
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            "SELECT d.status, e.enabled FROM webhook_deliveries d JOIN webhook_endpoints e "
            "ON e.tenant_id = d.tenant_id AND e.endpoint_id = d.endpoint_id "
            "WHERE d.tenant_id = %s AND d.delivery_id = %s FOR UPDATE OF d", (tenant_id, delivery))
        row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no webhook delivery {delivery_id!r} in tenant {tenant_id!r}: list them with "
                           "`agent-memory webhooks deliveries`")
        if row[0] == "pending":
            raise Conflict(f"webhook delivery {delivery_id} is pending: its run is still trying; re-deliver it once "
                           "it is dead or delivered")
        if not row[1]:
            raise Conflict(f"the endpoint of webhook delivery {delivery_id} was removed: register the receiver again")
        await conn.execute(
            "UPDATE webhook_deliveries SET status = 'pending', redeliveries = redeliveries + 1, dispatched_at = NULL, "
            "delivered_at = NULL, dead_at = NULL WHERE tenant_id = %s AND delivery_id = %s", (tenant_id, delivery))
    return await read_delivery(pool, tenant_id, delivery_id)


# --- retention ------------------------------------------------------------------------------------


async def sweep_old_deliveries(conn: psycopg.AsyncConnection, tenant_id: str, days: int, limit: int) -> int:
    """Delete delivered and dead deliveries older than `days` (at most `limit`)."""
    cur = await conn.execute(
        "DELETE FROM webhook_deliveries WHERE tenant_id = %(t)s AND delivery_id IN ("
        "SELECT delivery_id FROM webhook_deliveries WHERE tenant_id = %(t)s AND status IN ('delivered', 'dead') "
        "AND coalesce(delivered_at, dead_at, created_at) < now() - make_interval(days => %(d)s) LIMIT %(n)s)",
        {"t": tenant_id, "d": days, "n": limit})
    return cur.rowcount

