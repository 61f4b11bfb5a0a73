"""Webhooks on the real stack, delivered to a real local HTTP receiver: a consolidation's events
arrive signed, carrying ids and no message text; a receiver that is down for a while gets each
event once after it comes back (retried with backoff); one down past the attempt bound leaves the
delivery dead until an operator re-delivers it; a refusal is dead at once; Retry-After is
honoured; the sweep starts a delivery whose run was never started; deliveries are tenant-isolated,
erased with their subject and swept by retention."""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import socket
import ssl
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from standardwebhooks import Webhook, WebhookVerificationError

from agent_memory.api.client import MemoryClient
from agent_memory.core import contract
from agent_memory.core.errors import Conflict, InvalidInput, NotFound
from agent_memory.lifecycle.idle_timers import IdleTimerSweepInput, IdleTimerSweepResult
from agent_memory.lifecycle.retention import RetentionPolicy, apply_retention
from agent_memory.memory.webhooks import WebhookDelivery, enqueue, event_id, seal_secret
from agent_memory.providers.offline import offline_providers
from agent_memory.security.webhook_signing import standard_secret, verify_webhook
from agent_memory.store.db import tenant_transaction
from agent_memory.telemetry.metrics import REGISTRY, tenant_label
from tests.security.test_webhook_targets import DnsServer
from tests.sessions import session
from workers.worker import build_worker

SUBJECT = "lin"
SAID = ("I live in Kyoto and I play the cello.", "My sister Mei works at Sony.")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Received:
    at: float
    headers: dict[str, str]
    body: bytes
    status: int


@dataclass
class Receiver:
    """A real HTTP server on a local port, recording every request it answers. `answer` gives the
    status and headers of the next answer; until `start()` (and after `stop()`) the port is closed."""

    port: int = field(default_factory=free_port)
    host: str = "127.0.0.1"
    tls: ssl.SSLContext | None = None  # serve https with this server context
    answer: Callable[[], tuple[int, dict[str, str]]] = lambda: (200, {})
    requests: list[Received] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/hooks/memory"

    def start(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status, headers = owner.answer()
                owner.requests.append(Received(time.monotonic(), {k.lower(): v for k, v in self.headers.items()},
                                               body, status))
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((self.host, self.port), Handler)
        if self.tls is not None:
            self.server.socket = self.tls.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def accepted(self) -> Counter[str]:
        """webhook-id → how many times it was answered 2xx (a receiver that deduplicates by it)."""
        return Counter(r.headers["webhook-id"] for r in self.requests if 200 <= r.status < 300)

    def of(self, delivery_id: str) -> list[Received]:
        return [r for r in self.requests if r.headers.get("webhook-id") == delivery_id]


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.stop()


@asynccontextmanager
async def webhook_stack(services, task_queue: str, **changes) -> AsyncIterator[MemoryClient]:
    """A client and a worker on `task_queue`, under settings that allow the local receiver (its
    http:// and its loopback address) and retry fast (`changes`: other settings)."""
    settings = services.settings.with_services(**{
        "webhook_allow_http": True, "webhook_allow_private": True, "webhook_max_attempts": 12,
        "webhook_initial_retry_seconds": 0.2,
        "webhook_max_retry_seconds": 1.0, **changes})
    ours = replace(services, settings=settings)
    async with build_worker(ours, task_queue=task_queue):
        yield MemoryClient(ours, offline_providers().embedder, task_queue=task_queue)


@pytest.fixture
def hooks(services, task_queue):
    """`async with hooks(**settings) as client:` webhook_stack on this test's task queue."""
    return lambda **changes: webhook_stack(services, task_queue, **changes)


async def wait_for(client: MemoryClient, tenant: str, done: Callable[[list[WebhookDelivery]], bool], *,
                   timeout: float = 45.0) -> list[WebhookDelivery]:
    deadline = time.monotonic() + timeout
    while True:
        found = await client.admin.webhook_deliveries(tenant)
        if done(found):
            return found
        assert time.monotonic() < deadline, [d.model_dump() for d in found]
        await asyncio.sleep(0.1)


def all_in(status: str, count: int) -> Callable[[list[WebhookDelivery]], bool]:
    return lambda found: len(found) == count and all(d.status == status for d in found)


async def told(client: MemoryClient, tenant: str, session_id: str = "s1") -> None:
    await client.append_messages(tenant, SUBJECT, session(session_id, "2024-03-01T09:00:00Z", *SAID))


async def live_write(client: MemoryClient, tenant: str, key: str, value: str) -> None:
    await client.write_fact(tenant, SUBJECT, "home", key, value, expected_version=0, evidence_message_ids=["s1:1"])


async def test_a_consolidation_is_delivered_signed_with_ids_and_no_message_text(hooks, receiver, tenant):
    receiver.start()
    async with hooks() as client:
        endpoint = await client.admin.add_webhook(tenant, receiver.url, ["consolidation.completed", "memory.created"])
        await told(client, tenant)
        result = await client.consolidation_result(await client.end_session(tenant, SUBJECT, "s1"))
        assert result.facts_written > 0
        found = await wait_for(client, tenant, lambda f: len(f) > 1 and all(d.status == "delivered" for d in f))

    by_id = {d.delivery_id: d for d in found}
    assert receiver.accepted() == Counter({d: 1 for d in by_id})
    bodies = {}
    for request in receiver.requests:
        body = verify_webhook(endpoint.secret, request.headers, request.body)
        # Any Standard Webhooks verifier accepts the delivery.
        assert Webhook(endpoint.secret).verify(request.body, request.headers) == body
        assert request.headers["content-type"] == "application/json"
        bodies[request.headers["webhook-id"]] = body
        for text in (*SAID, "Kyoto", "cello", "Sony"):
            assert text not in request.body.decode(), text  # ids and counts only
    types = Counter(b["type"] for b in bodies.values())
    assert types["consolidation.completed"] == 1 and types["memory.created"] >= 1 and set(types) == {
        "consolidation.completed", "memory.created"}  # memory.updated: not subscribed
    [completed] = [b for b in bodies.values() if b["type"] == "consolidation.completed"]
    data = completed["data"]
    assert (data["session_id"], data["subject_id"], data["facts_written"]) == ("s1", SUBJECT, result.facts_written)
    created = {b["data"]["memory_id"] for b in bodies.values() if b["type"] == "memory.created"}
    assert created == set(data["memory_ids_created"])
    assert all(b["tenant_id"] == tenant and by_id[i].event_id == b["id"] for i, b in bodies.items())


async def test_a_receiver_outage_is_retried_with_backoff_and_each_event_is_delivered_once(hooks, receiver, tenant):
    async with hooks() as client:
        await client.admin.add_webhook(tenant, receiver.url, ["memory.created"])
        await told(client, tenant)
        await live_write(client, tenant, "gate_code", "4711")
        await live_write(client, tenant, "wifi", "orchid")
        # Down: the port is closed. Each delivery is tried again and again.
        down = await wait_for(client, tenant, lambda f: len(f) == 2 and all(d.attempts >= 2 for d in f))
        # The tenant is told the class of failure, not the socket's detail.
        assert all(d.status == "pending" and d.last_status_code is None and d.last_error == "connection failed"
                   for d in down)
        # Up, but overloaded for its first three answers; then well.
        answers = iter([(503, {}), (503, {}), (503, {})])
        receiver.answer = lambda: next(answers, (200, {}))
        receiver.start()
        found = await wait_for(client, tenant, all_in("delivered", 2))

    assert receiver.accepted() == Counter({d.delivery_id: 1 for d in found})
    for d in found:
        assert d.last_status_code == 200 and d.attempts >= 3
        times = [r.at for r in receiver.of(d.delivery_id)]
        # Backoff: never two attempts closer than the first retry interval (0.2 s).
        assert all(later - earlier >= 0.15 for earlier, later in itertools.pairwise(times)), times
    assert [r.status for r in receiver.requests].count(503) == 3


async def test_a_receiver_down_past_the_bound_is_dead_until_an_operator_redelivers(hooks, receiver, tenant):
    async with hooks(webhook_max_attempts=3) as client:
        await client.admin.add_webhook(tenant, receiver.url, ["memory.created"])
        await told(client, tenant)
        await live_write(client, tenant, "gate_code", "4711")
        [dead] = await wait_for(client, tenant, all_in("dead", 1))
        assert dead.attempts == 3 and dead.dead_at is not None and dead.last_error == "connection failed"
        assert [d.delivery_id for d in await client.admin.webhook_deliveries(tenant, status="dead")] == [dead.delivery_id]
        assert receiver.requests == []

        receiver.start()
        again = await client.admin.redeliver_webhook(tenant, dead.delivery_id)
        assert (again.status, again.redeliveries, again.attempts) == ("pending", 1, 3)
        with pytest.raises(Conflict, match="is pending"):
            await client.admin.redeliver_webhook(tenant, dead.delivery_id)
        [delivered] = await wait_for(client, tenant, all_in("delivered", 1))
        # The redelivery's run completes on the worker, which stops when `hooks` closes.
        run = client.services.temporal.get_workflow_handle(contract.webhook_delivery_workflow_id(dead.delivery_id, 1))
        assert (await asyncio.wait_for(run.result(), timeout=60))["status"] == "delivered"
    assert (delivered.attempts, delivered.last_status_code, delivered.dead_at) == (4, 200, None)
    assert receiver.accepted() == Counter({dead.delivery_id: 1})
    with pytest.raises(NotFound, match="no webhook delivery"):
        await client.admin.redeliver_webhook(tenant, str(uuid.uuid4()))


async def test_a_refusal_is_dead_at_once_and_a_retry_after_is_honoured(hooks, receiver, tenant):
    def attempts(outcome: str, attempt: str) -> float:
        return REGISTRY.get_sample_value("agent_memory_webhook_deliveries_total", {
            "tenant": tenant_label(tenant), "outcome": outcome, "attempt": attempt}) or 0.0

    counted = [("refused", "1"), ("failed", "1"), ("delivered", "2")]
    before = [attempts(*c) for c in counted]
    receiver.answer = lambda: (400, {})
    receiver.start()
    async with hooks() as client:
        await client.admin.add_webhook(tenant, receiver.url, ["memory.created"])
        await told(client, tenant)
        await live_write(client, tenant, "gate_code", "4711")
        [refused] = await wait_for(client, tenant, all_in("dead", 1))
        assert (refused.attempts, refused.last_status_code) == (1, 400)
        assert refused.last_error == "http 400" and len(receiver.requests) == 1

        answers = iter([(429, {"Retry-After": "1"})])
        receiver.answer = lambda: next(answers, (200, {}))
        await live_write(client, tenant, "wifi", "orchid")
        found = await wait_for(client, tenant, lambda f: len(f) == 2 and f[0].status == "delivered")
    throttled = found[0]
    assert (throttled.attempts, throttled.last_status_code) == (2, 200)
    first, second = receiver.of(throttled.delivery_id)
    assert first.status == 429 and second.at - first.at >= 0.9  # the receiver's 1 s, not the 0.2 s backoff
    # The operator's counter: the refusal, the 429 (a failed first attempt), the delivery at the second.
    assert [attempts(*c) - n for c, n in zip(counted, before, strict=True)] == [1, 1, 1]


async def test_the_sweep_starts_a_delivery_whose_run_never_started(hooks, receiver, services, tenant, task_queue):
    receiver.start()
    async with hooks() as client:
        await client.admin.add_webhook(tenant, receiver.url, ["memory.forgotten"])
        # A commit whose process died before it started the run: the row is there, no run.
        async with tenant_transaction(services.pool, tenant) as conn:
            assert await enqueue(conn, tenant, "memory.forgotten", event_id("test", tenant), SUBJECT,
                                 {"memory_id": str(uuid.uuid4())}) == 1
            # Enqueued again (a retried transaction): nothing more.
            assert await enqueue(conn, tenant, "memory.forgotten", event_id("test", tenant), SUBJECT, {}) == 0
            # Not subscribed: nothing.
            assert await enqueue(conn, tenant, "memory.created", event_id("other", tenant), SUBJECT, {}) == 0
        await asyncio.sleep(0.5)
        assert [d.status for d in await client.admin.webhook_deliveries(tenant)] == ["pending"]
        result = await services.temporal.execute_workflow(
            contract.IDLE_TIMER_SWEEP_WORKFLOW, IdleTimerSweepInput(), id=f"sweep-{uuid.uuid4()}",
            task_queue=task_queue, result_type=IdleTimerSweepResult)
        assert result.webhook_deliveries_started >= 1
        [delivered] = await wait_for(client, tenant, all_in("delivered", 1))
    assert receiver.accepted() == Counter({delivered.delivery_id: 1})


async def test_bad_endpoints_are_refused_naming_the_field(client, hooks, tenant):
    # The session's settings: https only.
    with pytest.raises(InvalidInput, match="url must use https://"):
        await client.admin.add_webhook(tenant, "http://127.0.0.1:9/hooks", ["memory.created"])
    with pytest.raises(InvalidInput, match="url must not carry credentials"):
        await client.admin.add_webhook(tenant, "https://user:pw@example.org/hooks", ["memory.created"])
    for url in ("ftp://example.org/x", "example.org/hooks", "https:///nohost", "https://exa mple.org", ""):
        with pytest.raises(InvalidInput, match="url"):
            await client.admin.add_webhook(tenant, url, ["memory.created"])
    with pytest.raises(InvalidInput, match=r"events: unknown event type 'memory\.deleted'"):
        await client.admin.add_webhook(tenant, "https://example.org/hooks", ["memory.deleted"])
    with pytest.raises(InvalidInput, match="events is empty"):
        await client.admin.add_webhook(tenant, "https://example.org/hooks", [])
    with pytest.raises(InvalidInput, match="endpoint_id"):
        await client.admin.remove_webhook(tenant, "not-a-uuid")
    with pytest.raises(NotFound, match="no webhook endpoint"):
        await client.admin.remove_webhook(tenant, str(uuid.uuid4()))
    created = await client.admin.add_webhook(tenant, "https://example.org/hooks", ["memory.updated", "memory.created"])
    assert created.events == ["memory.created", "memory.updated"] and created.secret.startswith("whsec_")
    async with hooks() as allowed:  # a deployment that allows http (a development stack)
        assert (await allowed.admin.add_webhook(tenant, "http://127.0.0.1:9/hooks", ["memory.created"])).enabled


async def test_endpoints_and_deliveries_are_tenant_isolated_and_secrets_encrypted(hooks, receiver, services, tenant):
    other = f"{tenant}-b"
    receiver.start()
    async with hooks() as client:
        mine = await client.admin.add_webhook(tenant, receiver.url, ["memory.created"])
        await told(client, tenant)
        await live_write(client, tenant, "gate_code", "4711")
        [delivery] = await wait_for(client, tenant, all_in("delivered", 1))
        assert await client.admin.webhooks(other) == [] and await client.admin.webhook_deliveries(other) == []
        with pytest.raises(NotFound):
            await client.admin.redeliver_webhook(other, delivery.delivery_id)
        with pytest.raises(NotFound):
            await client.admin.remove_webhook(other, mine.endpoint_id)
        # The other tenant's writes reach only its own endpoints (it has none).
        await told(client, other)
        await live_write(client, other, "gate_code", "1234")
    async with tenant_transaction(services.pool, other) as conn:  # no tenant filter on purpose
        cur = await conn.execute("SELECT (SELECT count(*) FROM webhook_endpoints), (SELECT count(*) FROM "
                                 "webhook_deliveries)")
        assert await cur.fetchone() == (0, 0)
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT t::text FROM webhook_endpoints t")
        (stored,), = await cur.fetchall()
    assert mine.secret not in stored and mine.secret.encode().hex() not in stored
    assert len(receiver.requests) == 1


async def test_erasure_deletes_the_subjects_deliveries_and_reports_its_completion(hooks, receiver, services, tenant):
    receiver.start()
    async with hooks() as client:
        await client.admin.add_webhook(tenant, receiver.url, ["memory.created", "erasure.completed"])
        await told(client, tenant)
        await live_write(client, tenant, "gate_code", "4711")
        await wait_for(client, tenant, all_in("delivered", 1))
        receipt = await client.admin.erasure_receipt(await client.admin.erase(tenant, SUBJECT, "the user asked"))
        assert receipt.residue_total == 0 and receipt.removed.get("webhook_deliveries") == 1
        [completed] = await wait_for(client, tenant, all_in("delivered", 1))
    assert (completed.event_type, completed.subject_id) == ("erasure.completed", None)
    assert completed.payload["request_id"] == receipt.request_id and SUBJECT not in json.dumps(completed.payload)
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM webhook_deliveries WHERE subject_id = %s", (SUBJECT,))
        assert (await cur.fetchone())[0] == 0


async def test_retention_deletes_old_delivered_and_dead_deliveries(hooks, receiver, services, tenant):
    receiver.start()
    async with hooks() as client:
        await client.admin.set_retention_policy(tenant, RetentionPolicy(webhook_delivery_days=1))
        await client.admin.add_webhook(tenant, receiver.url, ["memory.created"])
        await told(client, tenant)
        await live_write(client, tenant, "gate_code", "4711")
        await live_write(client, tenant, "wifi", "orchid")
        old, recent = await wait_for(client, tenant, all_in("delivered", 2))
    async with tenant_transaction(services.pool, tenant) as conn:
        await conn.execute("UPDATE webhook_deliveries SET delivered_at = %s WHERE delivery_id = %s",
                           (datetime.now(UTC) - timedelta(days=2), old.delivery_id))
    result = await apply_retention(services.pool, services.keyring)
    assert result.webhook_deliveries_expired >= 1
    assert [d.delivery_id for d in await client.admin.webhook_deliveries(tenant)] == [recent.delivery_id]


async def test_registration_refuses_every_non_public_address_naming_the_url(client, hooks, tenant):
    assert client.services.settings.webhook_allow_private is False  # the session's: public targets only
    cases = {"https://127.0.0.1/hooks": "loopback", "https://[::1]:8443/hooks": "loopback",
             "https://localhost/hooks": "loopback", "https://2130706433/hooks": "loopback",
             "https://10.0.0.8/hooks": "private", "https://192.168.0.1/hooks": "private",
             "https://169.254.169.254/latest/meta-data": "metadata", "https://[fd00:ec2::254]/": "metadata",
             "https://169.254.10.1/hooks": "link-local", "https://[fe80::1]/hooks": "link-local",
             "https://[fd12:3456::1]/hooks": "unique-local", "https://224.0.0.9/hooks": "multicast",
             "https://0.0.0.0/hooks": "unspecified", "https://[::]/hooks": "unspecified",
             "https://240.0.0.1/hooks": "reserved", "https://[::ffff:127.0.0.1]/hooks": "loopback",
             "https://[::ffff:169.254.169.254]/": "metadata", "https://100.64.0.1/hooks": "non-public"}
    for url, kind in cases.items():
        with pytest.raises(InvalidInput, match=rf"^url is refused: its host (is|resolves to) \S+, a {kind} address"):
            await client.admin.add_webhook(tenant, url, ["memory.created"])
    assert await client.admin.webhooks(tenant) == []
    async with hooks() as allowed:  # a deployment whose receivers are on its own network
        assert (await allowed.admin.add_webhook(tenant, "https://10.0.0.8/hooks", ["memory.created"])).enabled
        with pytest.raises(InvalidInput, match="a metadata address; webhooks reach only public internet addresses: "
                                               "give a public receiver"):
            await allowed.admin.add_webhook(tenant, "https://169.254.169.254/", ["memory.created"])


async def test_a_delivery_to_a_name_resolving_to_loopback_is_refused_when_it_connects(hooks, receiver, tenant):
    receiver.start()
    async with hooks() as allowed:  # registered while the deployment allowed private targets
        await allowed.admin.add_webhook(tenant, f"http://localhost:{receiver.port}/hooks", ["memory.created"])
    async with hooks(webhook_allow_private=False) as client:
        await told(client, tenant)
        await live_write(client, tenant, "gate_code", "4711")
        [refused] = await wait_for(client, tenant, all_in("dead", 1))
    # Dead at once, without a request; the tenant sees the class, not the address or the port.
    assert (refused.attempts, refused.last_status_code, refused.last_error) == (1, None, "refused: private address")
    assert receiver.requests == []


async def test_a_failed_connection_is_shown_to_the_tenant_as_its_class(hooks, receiver, tenant):
    receiver.start()  # plain HTTP: an https:// URL to it fails in the TLS handshake
    closed = free_port()
    async with hooks(webhook_max_attempts=1) as client:
        await client.admin.add_webhook(tenant, f"https://127.0.0.1:{receiver.port}/hooks", ["memory.created"])
        await client.admin.add_webhook(tenant, f"http://127.0.0.1:{closed}/hooks", ["memory.created"])
        await told(client, tenant)
        await live_write(client, tenant, "gate_code", "4711")
        found = await wait_for(client, tenant, all_in("dead", 2))
    assert sorted(d.last_error or "" for d in found) == ["connection failed", "tls error"]
    assert all(str(receiver.port) not in (d.last_error or "") and str(closed) not in (d.last_error or "")
               for d in found)


async def test_a_delivery_dials_the_address_it_checked_and_a_rebound_name_is_refused(hooks, tenant):
    # Two receivers on one port: the checked address (127.0.0.1) and the one the name rebinds to
    # (127.0.0.2). The name's first two answers (registration, the attempt's check) are the first.
    checked, rebound = Receiver(), Receiver(host="127.0.0.2")
    rebound.port = checked.port
    checked.start()
    rebound.start()
    dns_server = DnsServer().start()
    dns_server.zone.update({"hooks.example": ["127.0.0.1", "127.0.0.1", "127.0.0.2"],
                            "rebind.example": ["93.184.215.14", "127.0.0.1"]})
    try:
        async with hooks(webhook_nameserver=dns_server.address) as client:
            await client.admin.add_webhook(tenant, f"http://hooks.example:{checked.port}/hooks", ["memory.created"])
            await told(client, tenant)
            await live_write(client, tenant, "gate_code", "4711")
            await wait_for(client, tenant, all_in("delivered", 1))
        assert [r.headers["host"] for r in checked.requests] == [f"hooks.example:{checked.port}"]
        assert rebound.requests == [] and dns_server.queries["hooks.example"] == 2  # resolved once per attempt

        # Public at registration, loopback when the attempt resolves it: refused, nothing sent.
        other = f"{tenant}-r"
        async with hooks(webhook_nameserver=dns_server.address, webhook_allow_private=False) as client:
            await client.admin.add_webhook(other, f"http://rebind.example:{checked.port}/hooks", ["memory.created"])
            await told(client, other)
            await live_write(client, other, "gate_code", "4711")
            [refused] = await wait_for(client, other, all_in("dead", 1))
        assert refused.last_error == "refused: private address" and len(checked.requests) == 1
    finally:
        checked.stop()
        rebound.stop()
        dns_server.stop()


async def test_an_endpoint_with_a_legacy_secret_moves_to_standard_signatures_by_a_rotation(hooks, receiver, services,
                                                                                           tenant):
    receiver.start()
    async with hooks() as client:
        endpoint = await client.admin.add_webhook(tenant, receiver.url, ["memory.created"])
        assert endpoint.secret_format == "standard"
        # An endpoint registered with a legacy secret (whsec_ + a URL-safe token), as migration 057
        # marks every endpoint it finds.
        legacy = f"whsec_{secrets.token_urlsafe(32)}"
        ciphertext, nonce = seal_secret(services.keyring, tenant, uuid.UUID(endpoint.endpoint_id), legacy)
        async with tenant_transaction(services.pool, tenant) as conn:
            await conn.execute("UPDATE webhook_endpoints SET secret_ciphertext = %s, secret_nonce = %s, "
                               "secret_format = 'legacy' WHERE endpoint_id = %s",
                               (ciphertext, nonce, endpoint.endpoint_id))
        [listed] = await client.admin.webhooks(tenant)
        assert listed.secret_format == "legacy"
        await told(client, tenant)
        await live_write(client, tenant, "gate_code", "4711")
        await wait_for(client, tenant, all_in("delivered", 1))
        # Its receiver keeps verifying the legacy scheme until the rotation.
        [first] = receiver.requests
        assert first.headers["webhook-signature"].startswith("v1=")
        assert verify_webhook(legacy, first.headers, first.body)["type"] == "memory.created"

        rotated = await client.admin.rotate_webhook_secret(tenant, endpoint.endpoint_id, overlap_hours=1)
        assert rotated.secret_format == "standard" and rotated.secret != legacy
        assert rotated.previous_secret_expires_at is not None and rotated.secret_rotated_at is not None
        await live_write(client, tenant, "wifi", "orchid")
        await wait_for(client, tenant, all_in("delivered", 2))
        # The overlap: a standard signature under the new secret and one under the legacy key bytes.
        second = receiver.requests[1]
        assert len(second.headers["webhook-signature"].split(" ")) == 2
        assert Webhook(rotated.secret).verify(second.body, second.headers)["type"] == "memory.created"
        assert Webhook(standard_secret(legacy)).verify(second.body, second.headers)
        assert verify_webhook(legacy, second.headers, second.body)

        # Rotated again without an overlap: the new secret alone signs.
        final = await client.admin.rotate_webhook_secret(tenant, endpoint.endpoint_id, overlap_hours=0)
        assert final.previous_secret_expires_at is None
        await live_write(client, tenant, "door", "blue")
        await wait_for(client, tenant, all_in("delivered", 3))
        third = receiver.requests[2]
        assert Webhook(final.secret).verify(third.body, third.headers)
        for old in (rotated.secret, standard_secret(legacy)):
            with pytest.raises(WebhookVerificationError):
                Webhook(old).verify(third.body, third.headers)
        with pytest.raises(InvalidInput, match="overlap_hours"):
            await client.admin.rotate_webhook_secret(tenant, endpoint.endpoint_id, overlap_hours=169)
        with pytest.raises(NotFound, match="no webhook endpoint"):
            await client.admin.rotate_webhook_secret(tenant, str(uuid.uuid4()))


def tls_receiver_context(directory: Path, name: str) -> tuple[Path, ssl.SSLContext]:
    """A certificate authority (its PEM file) and a server context whose certificate, issued by
    it, names only `name`."""
    now = datetime.now(UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "webhook test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(minutes=5))
          .not_valid_after(now + timedelta(hours=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    (directory / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (directory / "server.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    (directory / "server.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                             serialization.PrivateFormat.PKCS8,
                                                             serialization.NoEncryption()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "server.pem", directory / "server.key")
    return directory / "ca.pem", context


async def test_an_https_delivery_to_a_checked_address_verifies_the_certificate_against_the_name(hooks, tenant,
                                                                                              tmp_path):
    # One receiver on 127.0.0.1 whose certificate names hooks.example; two names resolve to it.
    ca_file, context = tls_receiver_context(tmp_path, "hooks.example")
    receiver = Receiver(tls=context)
    receiver.start()
    dns_server = DnsServer().start()
    dns_server.zone.update({"hooks.example": ["127.0.0.1"], "other.example": ["127.0.0.1"]})
    try:
        async with hooks(webhook_nameserver=dns_server.address, webhook_ca_file=ca_file,
                         webhook_max_attempts=1) as client:
            named = await client.admin.add_webhook(tenant, f"https://hooks.example:{receiver.port}/h", ["memory.created"])
            other = await client.admin.add_webhook(tenant, f"https://other.example:{receiver.port}/h", ["memory.created"])
            await told(client, tenant)
            await live_write(client, tenant, "gate_code", "4711")
            found = await wait_for(client, tenant, lambda f: len(f) == 2 and all(d.status != "pending" for d in f))
        by_endpoint = {d.endpoint_id: d for d in found}
        # Dialled at the address, verified as the name: the certificate's name passes, another fails.
        assert by_endpoint[named.endpoint_id].status == "delivered"
        assert (by_endpoint[other.endpoint_id].status, by_endpoint[other.endpoint_id].last_error) == (
            "dead", "tls error")
        assert [r.headers["host"] for r in receiver.requests] == [f"hooks.example:{receiver.port}"]
        assert Webhook(named.secret).verify(receiver.requests[0].body, receiver.requests[0].headers)
    finally:
        receiver.stop()
        dns_server.stop()
