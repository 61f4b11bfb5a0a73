"""Webhook activities: one POST of a delivery, its dead letter, the retry bounds a run uses, and
the sweep of deliveries whose run was never started. Ids in, small figures out: the URL, the
secret and the payload are read from PostgreSQL by the attempt.

An attempt resolves the endpoint's host once, checks every address (webhook_targets), and dials
the checked address. The delivery records a class of failure for the tenant (`timeout`,
`connection failed`, `tls error`, `http 503`, `refused: private address`, ...); the detail (the
address, the exception) goes to the worker's log only, so an endpoint cannot be used to tell an
open port from a closed one inside the deployment's network."""

from __future__ import annotations

import email.utils
import ssl
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal, NoReturn

import httpx
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, ConfigDict, Field
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from activities.errors import temporal_failures
from agent_memory.core import contract
from agent_memory.core.contract import ErrorType
from agent_memory.core.run_inputs import RunInput
from agent_memory.core.settings import Settings
from agent_memory.memory.webhooks import (
    WebhookDeliveryInput,
    WebhookSweepResult,
    delivery_target,
    dispatch_deliveries,
    mark_dead,
    record_attempt,
    sweep_undispatched,
)
from agent_memory.security.keyring import KeyRing
from agent_memory.security.webhook_signing import signed_headers
from agent_memory.security.webhook_targets import (
    RefusedAddress,
    Resolver,
    UnresolvedName,
    checked_addresses,
    is_tls_failure,
    post_pinned,
    url_host,
)
from agent_memory.telemetry.metrics import WEBHOOK_DELIVERIES
from agent_memory.telemetry.record import attempt_bucket, count_for_tenant

# A receiver's Retry-After is honoured up to this long (the retry bound still counts the attempt).
MAX_RETRY_AFTER = timedelta(hours=1)
RETRYABLE_STATUSES = frozenset({408, 429})
# What a tenant is told of an attempt that got no answer.
REFUSED_PRIVATE = "refused: private address"
NAME_NOT_RESOLVED = "name not resolved"
TIMEOUT = "timeout"
TLS_ERROR = "tls error"
CONNECTION_FAILED = "connection failed"
DeliveryOutcome = Literal["delivered", "failed", "refused"]


class WebhookRetryBounds(BaseModel):
    """The deployment's retry bounds, recorded in the run's history by the activity that read them."""

    model_config = ConfigDict(extra="forbid")

    max_attempts: int = Field(ge=1)
    initial_retry_seconds: float = Field(gt=0)
    max_retry_seconds: float = Field(gt=0)

    @classmethod
    def from_settings(cls, settings: Settings) -> WebhookRetryBounds:
        initial = max(settings.webhook_initial_retry_seconds, 0.001)
        return cls(max_attempts=settings.webhook_max_attempts, initial_retry_seconds=initial,
                   max_retry_seconds=max(settings.webhook_max_retry_seconds, initial))


class WebhookAttemptOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # delivered: a 2xx (now or by an earlier attempt); gone: the delivery was erased or swept;
    # dead: dead-lettered already (nothing sent).
    status: Literal["delivered", "gone", "dead"]
    status_code: int | None = None


class WebhookDeadInput(RunInput):
    tenant_id: str
    delivery_id: str
    # Why, when the attempts recorded none (a timeout of the activity itself).
    error: str | None = None


class WebhookDeadOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid")

    attempts: int | None = None  # None: the delivery was not pending (delivered, gone)


class WebhookSweepInput(RunInput):
    kind: Literal["webhook-sweep"] = "webhook-sweep"
    limit_per_tenant: int = Field(default=500, ge=1)


async def start_webhook_deliveries(pool: AsyncConnectionPool, temporal: Client, task_queue: str,
                                   tenant_id: str) -> None:
    """After a commit: start the runs of the tenant's new webhook deliveries. A failure is logged
    and left to the sweep (the deliveries stay pending, committed with their effect)."""
    try:
        await dispatch_deliveries(pool, temporal, task_queue, tenant_id)
    except Exception as exc:
        activity.logger.warning("webhook deliveries of tenant %s left to the sweep: %s", tenant_id, exc)


def retry_after(value: str | None, now: datetime | None = None) -> timedelta | None:
    """A Retry-After header (seconds, or an HTTP date) as a delay, capped; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        delay = timedelta(seconds=int(value))
    else:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        delay = when - (now or datetime.now(UTC))
    return min(max(delay, timedelta(seconds=1)), MAX_RETRY_AFTER)


class WebhookActivities:
    def __init__(self, pool: AsyncConnectionPool, keyring: KeyRing, temporal: Client, *,
                 bounds: WebhookRetryBounds, timeout_seconds: float = 10.0, allow_private: bool = False,
                 nameserver: str | None = None, ca_file: Path | None = None):
        self.pool = pool
        self.keyring = keyring
        self.temporal = temporal
        self.bounds = bounds  # the deployment's (AGENT_MEMORY_WEBHOOK_*)
        self.allow_private = allow_private
        # Within the activity's start-to-close bound (contract.WEBHOOK_DELIVERY), with time to record the answer.
        timeout = min(timeout_seconds, contract.WEBHOOK_DELIVERY.start_to_close.total_seconds() - 5)
        self.resolver = Resolver(nameserver, timeout=min(timeout, 5.0))
        # No retries in the client: the workflow's retry policy owns them. No redirects followed, no
        # proxy or CA settings from the environment, no connection kept alive (each is made to an
        # address checked for its own request). Certificates are verified against the public CAs
        # (certifi), or the deployment's (AGENT_MEMORY_WEBHOOK_CA_FILE).
        verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=str(ca_file)) if ca_file else True
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(timeout), follow_redirects=False, trust_env=False,
                                      verify=verify, transport=httpx.AsyncHTTPTransport(
                                          retries=0, trust_env=False, verify=verify,
                                          limits=httpx.Limits(max_keepalive_connections=0)))

    async def aclose(self) -> None:
        await self.http.aclose()

    @activity.defn(name=contract.WEBHOOK_RETRY_POLICY)
    @temporal_failures
    async def webhook_retry_policy(self, request: WebhookDeliveryInput) -> WebhookRetryBounds:
        return self.bounds

    @activity.defn(name=contract.DELIVER_WEBHOOK)
    @temporal_failures
    async def deliver_webhook(self, request: WebhookDeliveryInput) -> WebhookAttemptOutcome:
        """POST the delivery once, to an address of its host checked now. 2xx: delivered. No
        answer, a timeout, a name that resolves to nothing, 408, 429 or 5xx: a retryable failure
        (after the receiver's Retry-After, if any). Any other answer, a host resolving to a
        refused address, or a removed endpoint: a permanent failure (the workflow dead-letters
        the delivery)."""
        tenant_id, delivery_id = request.tenant_id, request.delivery_id
        target = await delivery_target(self.pool, self.keyring, tenant_id, delivery_id)
        if target is None:
            activity.logger.info("webhook delivery %s is gone (erased or swept): nothing to send", delivery_id)
            return WebhookAttemptOutcome(status="gone")
        if target.status != "pending":
            return WebhookAttemptOutcome(status=target.status)
        if not target.enabled:
            await self._attempted(tenant_id, delivery_id, "refused", status_code=None,
                                  error="the endpoint was removed")
            raise ApplicationError("the webhook endpoint was removed", type=ErrorType.WEBHOOK_REJECTED,
                                   non_retryable=True)
        attempt = activity.info().attempt
        host = url_host(target.url)
        try:
            addresses = await checked_addresses(self.resolver, host, allow_private=self.allow_private)
        except RefusedAddress as refused:
            activity.logger.warning("webhook delivery %s of tenant %s refused: %s", delivery_id, tenant_id, refused)
            await self._attempted(tenant_id, delivery_id, "refused", status_code=None, error=REFUSED_PRIVATE)
            raise ApplicationError(f"the webhook delivery was {REFUSED_PRIVATE}", type=ErrorType.WEBHOOK_REJECTED,
                                   non_retryable=True) from None
        except UnresolvedName:
            activity.logger.info("webhook delivery %s attempt %d: %s resolves to no address", delivery_id, attempt,
                                 host)
            await self._no_answer(tenant_id, delivery_id, NAME_NOT_RESOLVED)
        headers = signed_headers(target.secrets, delivery_id, target.body, now=time.time())
        response: httpx.Response | None = None
        for address in addresses:
            try:
                response = await post_pinned(self.http, target.url, address, content=target.body, headers=headers)
                break
            except httpx.ConnectError as exc:
                # Nothing was sent: the next address of the name, if any, is tried.
                activity.logger.info("webhook delivery %s attempt %d: %s at %s: %r", delivery_id, attempt, host,
                                     address, exc)
                if address == addresses[-1]:
                    await self._no_answer(tenant_id, delivery_id, TLS_ERROR if is_tls_failure(exc) else
                                          CONNECTION_FAILED)
            except httpx.HTTPError as exc:
                activity.logger.info("webhook delivery %s attempt %d: %s at %s: %r", delivery_id, attempt, host,
                                     address, exc)
                await self._no_answer(tenant_id, delivery_id, TIMEOUT if isinstance(exc, httpx.TimeoutException)
                                      else TLS_ERROR if is_tls_failure(exc) else CONNECTION_FAILED)
        assert response is not None  # every address either answered or raised above
        code = response.status_code
        if 200 <= code < 300:
            await self._attempted(tenant_id, delivery_id, "delivered", status_code=code, error=None)
            return WebhookAttemptOutcome(status="delivered", status_code=code)
        error = f"http {code}"
        retryable = code in RETRYABLE_STATUSES or code >= 500
        await self._attempted(tenant_id, delivery_id, "failed" if retryable else "refused", status_code=code,
                              error=error)
        activity.logger.info("webhook delivery %s attempt %d: %s %s", delivery_id, attempt, error,
                             response.reason_phrase)
        if retryable:
            raise ApplicationError(f"the webhook receiver answered {error}", type=ErrorType.WEBHOOK_RETRYABLE,
                                   next_retry_delay=retry_after(response.headers.get("Retry-After")))
        raise ApplicationError(f"the webhook receiver refused the delivery: {error}", type=ErrorType.WEBHOOK_REJECTED,
                               non_retryable=True)

    async def _no_answer(self, tenant_id: str, delivery_id: str, error: str) -> NoReturn:
        """Record an attempt that got no answer, by its class, and fail it for a retry."""
        await self._attempted(tenant_id, delivery_id, "failed", status_code=None, error=error)
        raise ApplicationError(f"the webhook receiver gave no answer: {error}", type=ErrorType.WEBHOOK_RETRYABLE)

    async def _attempted(self, tenant_id: str, delivery_id: str, outcome: DeliveryOutcome, *,
                         status_code: int | None, error: str | None) -> None:
        """Record an attempt and count it (agent_memory_webhook_deliveries_total) by its outcome:
        delivered (2xx), failed (retried: no answer, 408, 429, 5xx) or refused (given up on),
        and by its number among the delivery's attempts, bucketed."""
        attempts = await record_attempt(self.pool, tenant_id, delivery_id, status_code=status_code, error=error,
                                        delivered=outcome == "delivered")
        count_for_tenant(WEBHOOK_DELIVERIES, tenant_id, outcome=outcome,
                         attempt=attempt_bucket(attempts if attempts is not None else activity.info().attempt))

    @activity.defn(name=contract.MARK_WEBHOOK_DEAD)
    @temporal_failures
    async def mark_webhook_dead(self, request: WebhookDeadInput) -> WebhookDeadOutcome:
        attempts = await mark_dead(self.pool, request.tenant_id, request.delivery_id, request.error)
        if attempts is not None:
            activity.logger.warning("webhook delivery %s of tenant %s is dead after %d attempts", request.delivery_id,
                                    request.tenant_id, attempts)
        return WebhookDeadOutcome(attempts=attempts)

    @activity.defn(name=contract.SWEEP_WEBHOOK_DELIVERIES)
    @temporal_failures
    async def sweep_webhook_deliveries(self, request: WebhookSweepInput) -> WebhookSweepResult:
        """Start the run of every pending delivery never started (a crash between its commit and
        the start), in every tenant, on this worker's task queue."""
        return await sweep_undispatched(self.pool, self.temporal, activity.info().task_queue,
                                        limit_per_tenant=request.limit_per_tenant)
