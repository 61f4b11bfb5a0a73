"""The HTTP API's edge under attack, on the session's stack with a real uvicorn server: guessing
secrets (failures limited per client address and per key id, counted in Redis, valid keys always
served; forwarded addresses believed from trusted proxies only), timing whether a key id exists,
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
from agent_memory.security.api_keys import ApiKeyError, create_key, verify_key
from agent_memory.security.failure_limits import FailureLimiter, SharedFailureLimiter
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


def guesses_for(token: str, count: int) -> list[str]:
    """Wrong secrets for the key id of `token`."""
    return [token.rsplit(":", 1)[0] + f":{i:043d}" for i in range(count)]


async def mcp_tools(port: int, token: str) -> set[str]:
    """The tools an MCP client session over `/mcp` lists with `token` (from 127.0.0.1)."""
    from mcp.client import Client
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as mcp:
        return {tool.name for tool in (await mcp.list_tools()).tools}


async def test_guessing_secrets_is_refused_while_valid_keys_from_the_same_address_and_key_id_are_served(
        client, services, tenant):
    victim = (await create_key(services.pool, tenant, "read")).token
    bystander = (await create_key(services.pool, tenant, "read")).token
    guesses = guesses_for(victim, 40)
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
        # The address and the victim's key id are both full, and valid keys are served all the same:
        # the victim's own key, and another agent's key on the attacker's address, on REST and /mcp.
        assert (await attacker.get("/v1/subjects/lin/facts", headers=bearer(victim))).status_code == 200
        assert (await attacker.get("/v1/subjects/lin/facts", headers=bearer(bystander))).status_code == 200
        assert "facts" in await mcp_tools(port, bystander)
        assert "facts" in await mcp_tools(port, victim)
        # A failure over /mcp from the full address is refused as over REST.
        mcp_guess = await attacker.post("/mcp", headers=bearer(guesses[0]), json={})
        assert mcp_guess.status_code == 429 and mcp_guess.headers["Retry-After"]
        malformed = await attacker.get("/v1/subjects/lin/facts", headers=bearer("nonsense"))
        assert malformed.status_code == 429 and "from 127.0.0.1" in malformed.json()["detail"]
        # The key id stays refused from another address; a guess at another key id there is a 401.
        async with http_from(port, "127.0.0.2") as elsewhere:
            moved = await elsewhere.get("/v1/subjects/lin/facts", headers=bearer(guesses[0]))
            assert moved.status_code == 429 and "for key id" in moved.json()["detail"]
            other = await elsewhere.get("/v1/subjects/lin/facts", headers=bearer(guesses_for(bystander, 1)[0]))
            assert other.status_code == 401
        await asyncio.sleep(retry_after + 0.5)
        assert (await attacker.get("/v1/subjects/lin/facts", headers=bearer("nonsense"))).status_code == 401


async def test_wrong_secrets_are_limited_per_key_id_without_affecting_another_key(client, services, tenant):
    """Each guess from another address (any 127.x.y.z is this machine): only the key id's count fills."""
    guessed = (await create_key(services.pool, tenant, "read")).token
    untouched = (await create_key(services.pool, tenant, "read")).token
    async with serving(client) as port:
        statuses = []
        for i, guess in enumerate(guesses_for(guessed, 12)):
            async with http_from(port, f"127.0.1.{i + 1}") as http:
                statuses.append((await http.get("/v1/subjects/lin/facts", headers=bearer(guess))).status_code)
        assert statuses == [401] * 10 + [429] * 2
        async with http_from(port, "127.0.1.100") as http:
            refused = await http.get("/v1/subjects/lin/facts", headers=bearer(guesses_for(guessed, 1)[0]))
            assert refused.status_code == 429 and guessed.split(":")[2] in refused.json()["detail"]
            assert (await http.get("/v1/subjects/lin/facts",
                                   headers=bearer(guesses_for(untouched, 1)[0]))).status_code == 401
            assert (await http.get("/v1/subjects/lin/facts", headers=bearer(untouched))).status_code == 200
            assert (await http.get("/v1/subjects/lin/facts", headers=bearer(guessed))).status_code == 200


async def test_the_failure_counts_are_shared_by_the_api_processes_of_a_deployment(client, services, tenant):
    """Two API apps of one deployment (its task queue) count in the same Redis buckets; another
    deployment's API, on the same Redis, counts apart."""
    key = (await create_key(services.pool, tenant, "read")).token
    other_deployment = MemoryClient(services, offline_providers().embedder, task_queue=f"{client.task_queue}-b")
    async with serving(client) as first, serving(client) as second, serving(other_deployment) as third:
        assert first != second
        statuses = []
        for i in range(12):
            async with http_from((first, second)[i % 2], "127.0.2.1") as http:
                statuses.append((await http.get("/v1/subjects/lin/facts", headers=bearer("nonsense"))).status_code)
        assert statuses == [401] * 10 + [429] * 2
        async with http_from(second, "127.0.2.1") as http:
            assert (await http.get("/v1/subjects/lin/facts", headers=bearer(key))).status_code == 200
        async with http_from(third, "127.0.2.1") as http:
            assert (await http.get("/v1/subjects/lin/facts", headers=bearer("nonsense"))).status_code == 401


async def test_x_forwarded_for_is_ignored_unless_the_peer_is_a_trusted_proxy(client):
    async with serving(client) as port, http_from(port, "127.0.3.1") as http:
        answers = [await http.get("/v1/subjects/lin/facts", headers={**bearer("nonsense"),
                                                                     "X-Forwarded-For": f"10.9.0.{i}"})
                   for i in range(11)]
        assert [a.status_code for a in answers] == [401] * 10 + [429]
        assert "from 127.0.3.1" in answers[-1].json()["detail"]  # the connection's address, not a forwarded one
    behind_proxy = with_settings(client, trusted_proxies="127.0.3.2, 10.200.0.0/16")
    async with serving(behind_proxy) as port:
        async with http_from(port, "127.0.3.2") as proxy:
            forwarded = [await proxy.get("/v1/subjects/lin/facts", headers={**bearer("nonsense"),
                                                                             "X-Forwarded-For": "10.9.0.1"})
                         for _ in range(11)]
            assert [a.status_code for a in forwarded] == [401] * 10 + [429]
            assert "from 10.9.0.1" in forwarded[-1].json()["detail"]
            another = await proxy.get("/v1/subjects/lin/facts", headers={**bearer("nonsense"),
                                                                        "X-Forwarded-For": "10.9.0.2"})
            assert another.status_code == 401  # another client behind the proxy
        async with http_from(port, "127.0.3.3") as untrusted:
            answers = [await untrusted.get("/v1/subjects/lin/facts", headers={**bearer("nonsense"),
                                                                              "X-Forwarded-For": f"10.9.1.{i}"})
                       for i in range(11)]
            assert "from 127.0.3.3" in answers[-1].json()["detail"]


async def test_failures_are_counted_in_memory_while_redis_does_not_answer(services):
    from redis.asyncio import Redis

    from agent_memory.api.http.server import free_port

    nothing = Redis.from_url(f"redis://127.0.0.1:{free_port()}", socket_connect_timeout=0.5)
    limiter = SharedFailureLimiter(nothing, "a deployment", burst=2, window=60.0)
    names = {"address 10.0.0.9": "from 10.0.0.9"}
    started = time.monotonic()
    await limiter.count(names)
    await limiter.count(names)
    try:
        await limiter.count(names)
        raise AssertionError("a full bucket must be refused")
    except api_keys.TooManyFailuresError as exc:
        assert exc.retry_after == 30
    assert time.monotonic() - started < 5  # Redis is asked once, then not again for a while
    assert len(limiter.fallback) == 1
    await nothing.aclose()
    # The same buckets in the stack's Redis: the third failure is refused there too.
    shared = SharedFailureLimiter(services.redis, f"ns-{time.time_ns()}", burst=2, window=60.0)
    await shared.count(names)
    await shared.count(names)
    try:
        await shared.count(names)
        raise AssertionError("a full bucket must be refused")
    except api_keys.TooManyFailuresError as exc:
        assert exc.retry_after == 30
    assert len(shared.fallback) == 0
    assert 0 < await services.redis.pttl(shared.key("address 10.0.0.9")) <= 61_000


def test_the_in_memory_failure_limiter_keeps_a_bounded_number_of_names():
    now = [0.0]
    limiter = FailureLimiter(burst=3, window=30.0, max_names=100, clock=lambda: now[0])
    for i in range(10_000):  # a flood of key ids: memory stays bounded
        limiter.charge({f"key t:{i}": "x"})
    assert len(limiter) == 100
    names = {"address 10.0.0.9": "from 10.0.0.9"}
    for _ in range(3):
        limiter.charge(names)
    try:
        limiter.charge(names)
        raise AssertionError("a full bucket must be refused")
    except api_keys.TooManyFailuresError as exc:
        assert exc.retry_after == 10  # one failure leaks out per window / burst
    now[0] += 10
    limiter.charge(names)  # one more failure counted


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
