"""The HTTP API's edge under attack, on the session's stack with a real uvicorn server: guessing
secrets (rate limit per client address and per key id), timing whether a key id exists,
connections that stall mid-request, and `export --out` aimed at a symbolic link."""

from __future__ import annotations

import asyncio
import hmac
import socket
import statistics
import time
from dataclasses import replace

import httpx

from agent_memory.api.client import MemoryClient
from agent_memory.api.http.server import serving
from agent_memory.providers.offline import offline_providers
from agent_memory.security import api_keys
from agent_memory.security.api_keys import ApiKeyError, FailureLimiter, create_key, verify_key
from tests.cli.runner import run_cli


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def http_from(port: int, address: str) -> httpx.AsyncClient:
    """A client whose connections come from `address` (any 127.x.y.z is this machine)."""
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30,
                             transport=httpx.AsyncHTTPTransport(local_address=address))


def with_settings(client: MemoryClient, **changes) -> MemoryClient:
    """A client on the same connections whose settings differ (the server's limits)."""
    services = replace(client.services, settings=client.services.settings.with_services(**changes))
    return MemoryClient(services, offline_providers().embedder, task_queue=client.task_queue)


# --- guessing secrets ------------------------------------------------------------------------------


async def test_guessing_secrets_is_refused_per_address_and_per_key_id_after_a_few_failures(client, services,
                                                                                          tenant):
    victim = (await create_key(services.pool, tenant, "read")).token
    bystander = (await create_key(services.pool, tenant, "read")).token
    guesses = [victim.rsplit(":", 1)[0] + f":{i:043d}" for i in range(300)]
    async with serving(client) as port, http_from(port, "127.0.0.1") as attacker:
        answers = [await attacker.get("/v1/subjects/lin/facts", headers=bearer(g)) for g in guesses]
        statuses = [a.status_code for a in answers]
        assert statuses[:10] == [401] * 10  # the default burst: 10 failures
        assert set(statuses[10:]) == {429}
        refused = answers[-1]
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.json()["status"] == 429 and "too many failed authentications" in refused.json()["detail"]
        retry_after = int(refused.headers["Retry-After"])
        assert 1 <= retry_after <= 60
        # The address is refused even with a good key, over /mcp too, until Retry-After passes.
        assert (await attacker.get("/v1/subjects/lin/facts", headers=bearer(bystander))).status_code == 429
        assert (await attacker.post("/mcp", headers=bearer(guesses[0]), json={})).status_code == 429
        # The key id is refused from any address; another key from another address is not.
        async with http_from(port, "127.0.0.2") as elsewhere:
            moved = await elsewhere.get("/v1/subjects/lin/facts", headers=bearer(guesses[0]))
            assert moved.status_code == 429 and "for key id" in moved.json()["detail"]
            assert (await elsewhere.get("/v1/subjects/lin/facts", headers=bearer(victim))).status_code == 429
        async with http_from(port, "127.0.0.3") as honest:
            assert (await honest.get("/v1/subjects/lin/facts", headers=bearer(bystander))).status_code == 200
        await asyncio.sleep(retry_after + 0.5)
        assert (await attacker.get("/v1/subjects/lin/facts", headers=bearer(bystander))).status_code == 200


def test_the_failure_limiter_keeps_a_bounded_number_of_names():
    now = [0.0]
    limiter = FailureLimiter(burst=3, window=30.0, max_names=100, clock=lambda: now[0])
    for i in range(10_000):  # a flood of key ids: memory stays bounded
        limiter.failed({f"key t:{i}": "x"})
    assert len(limiter) == 100
    names = {"address 10.0.0.9": "from 10.0.0.9"}
    for _ in range(3):
        limiter.check(names)
        limiter.failed(names)
    try:
        limiter.check(names)
        raise AssertionError("a full bucket must be refused")
    except api_keys.TooManyFailuresError as exc:
        assert exc.retry_after == 10  # one failure leaks out per window / burst
    now[0] += 10
    limiter.check(names)  # one more attempt allowed


# --- whether a key id exists -----------------------------------------------------------------------


async def test_an_unknown_key_id_is_refused_with_the_same_hash_work_and_time_as_a_known_one(client, services,
                                                                                           tenant, monkeypatch):
    token = (await create_key(services.pool, tenant, "read")).token
    known = token.rsplit(":", 1)[0] + ":" + "x" * 43
    unknown = f"amk:{tenant}:000000000000:" + "x" * 43
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a, b):
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(api_keys.hmac, "compare_digest", spy)
    for wrong in (known, unknown):
        try:
            await verify_key(services.pool, wrong, "read")
            raise AssertionError("a wrong secret must be refused")
        except ApiKeyError as exc:
            assert "unknown or revoked" in str(exc)  # one message for both
    assert len(compared) == 2  # the unknown id was compared too, against a dummy verifier
    assert {len(a) for a, _ in compared} == {64}
    monkeypatch.undo()
    # What an attacker measures: the refusal's time over HTTP (with the failure limit out of the way).
    patient = with_settings(client, auth_failure_burst=10_000)
    times: dict[str, list[float]] = {"known": [], "unknown": []}
    async with serving(patient) as port, http_from(port, "127.0.0.1") as http:
        for _ in range(100):  # interleaved, so load on the machine hits both alike
            for name, wrong in (("known", known), ("unknown", unknown)):
                started = time.perf_counter()
                answer = await http.get("/v1/subjects/lin/facts", headers=bearer(wrong))
                times[name].append(time.perf_counter() - started)
                assert answer.status_code == 401
    ratio = statistics.median(times["known"]) / statistics.median(times["unknown"])
    assert 0.67 < ratio < 1.5, ratio


# --- stalled connections ---------------------------------------------------------------------------


def closed_after(sock: socket.socket, limit: float) -> float | None:
    """Seconds until the server closed `sock` (reads until EOF), or None if it was still open after `limit`."""
    started = time.monotonic()
    sock.settimeout(0.2)
    while time.monotonic() - started < limit:
        try:
            if sock.recv(4096) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue
        except ConnectionResetError:
            return time.monotonic() - started
    return None


async def test_connections_stalled_before_the_headers_end_are_closed_within_the_header_timeout(client):
    async with serving(client) as port:  # the default header timeout: 10 s
        def probe(first: bytes, dribble: bytes = b"") -> float | None:
            with socket.create_connection(("127.0.0.1", port)) as sock:
                started = time.monotonic()
                if first:
                    sock.sendall(first)
                for byte in dribble:  # one byte every 0.5 s: never idle, never done
                    time.sleep(0.5)
                    try:
                        sock.sendall(bytes([byte]))
                    except OSError:  # closed by the server
                        return time.monotonic() - started
                if closed_after(sock, 14 - (time.monotonic() - started)) is None:
                    return None
                return time.monotonic() - started

        partial_line, silent, partial_headers, dribbling = await asyncio.gather(
            asyncio.to_thread(probe, b"GET /v1/hea"),
            asyncio.to_thread(probe, b""),
            asyncio.to_thread(probe, b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: "),
            asyncio.to_thread(probe, b"G", b"ET /v1/health HTTP/1.1\r\nHost: x\r\nX-" + b"a" * 40))
        for name, seconds in (("partial request line", partial_line), ("silent", silent),
                              ("partial headers", partial_headers), ("dribbling", dribbling)):
            assert seconds is not None and seconds < 13, (name, seconds)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:  # requests still go through
            assert (await http.get("/v1/health")).json() == {"status": "ok"}


async def test_a_body_that_stalls_is_closed_within_the_body_timeout(client, services, tenant):
    writer = (await create_key(services.pool, tenant, "write")).token
    edge = with_settings(client, http_body_timeout_seconds=1.0, http_header_timeout_seconds=2.0)
    async with serving(edge) as port:
        def stall() -> float | None:
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(b"POST /v1/subjects/lin/sessions/s/messages HTTP/1.1\r\nHost: x\r\n"
                             b"Authorization: Bearer " + writer.encode() + b"\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 500\r\n\r\n{\"messages\": [")
                return closed_after(sock, 6)

        seconds = await asyncio.to_thread(stall)
        assert seconds is not None and seconds < 3, seconds
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            assert (await http.get("/v1/health")).status_code == 200


# --- export --out and symbolic links ---------------------------------------------------------------


async def test_export_out_never_writes_through_a_symbolic_link_nor_over_a_file_without_force(services, tenant,
                                                                                            tmp_path):
    target = tmp_path / "victim.txt"
    target.write_text("precious\n")
    link = tmp_path / "export.json"
    link.symlink_to(target)

    def export(*extra: str):
        return run_cli(services, "export", "--tenant", tenant, "--subject", "lin", *extra)

    for force in ((), ("--force",)):
        refused = await asyncio.to_thread(export, "--out", str(link), *force)
        assert refused.returncode == 2 and "symbolic link" in refused.stderr, refused.stderr
        assert target.read_text() == "precious\n" and link.is_symlink()
    existing = tmp_path / "old.json"
    existing.write_text("old\n")
    existing.chmod(0o644)
    refused = await asyncio.to_thread(export, "--out", str(existing))
    assert refused.returncode == 2 and "exists" in refused.stderr and "--force" in refused.stderr
    assert existing.read_text() == "old\n"
    replaced = await asyncio.to_thread(export, "--out", str(existing), "--force")
    assert replaced.returncode == 0, replaced.stderr
    assert '"subject_id": "lin"' in existing.read_text() and existing.stat().st_mode & 0o777 == 0o600
    fresh = tmp_path / "new.json"
    created = await asyncio.to_thread(export, "--out", str(fresh))
    assert created.returncode == 0 and fresh.stat().st_mode & 0o777 == 0o600


def test_only_errors_of_an_unreachable_dependency_are_answered_as_an_outage():
    import psycopg
    from psycopg_pool import PoolTimeout
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import ResponseError
    from temporalio.service import RPCError, RPCStatusCode

    from agent_memory.api.outages import dependency_down

    wrapped = RuntimeError("the step failed")
    wrapped.__cause__ = RedisConnectionError("Connection refused")
    assert dependency_down(psycopg.OperationalError("connection refused")) == "postgres"
    assert dependency_down(psycopg.errors.AdminShutdown("terminating connection")) == "postgres"
    assert dependency_down(PoolTimeout("couldn't get a connection after 15.00 sec")) == "postgres"
    assert dependency_down(wrapped) == "redis"
    assert dependency_down(RPCError("unavailable", RPCStatusCode.UNAVAILABLE, b"")) == "temporal"
    # A live server's answers are not outages.
    assert dependency_down(psycopg.errors.SerializationFailure("could not serialize")) is None
    assert dependency_down(ResponseError("WRONGTYPE")) is None
    assert dependency_down(RPCError("not found", RPCStatusCode.NOT_FOUND, b"")) is None
