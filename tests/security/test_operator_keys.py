"""Operator keys on the session's stack: created by the CLI (shown once), verified against the
stored hash, refused when wrong, revoked or a tenant's key, and failures rate-limited like
tenant keys."""

from __future__ import annotations

import json

import pytest

from agent_memory.api.http.auth import checked_operator_key
from agent_memory.core.errors import Forbidden
from agent_memory.security.api_keys import ApiKeyError, create_key
from agent_memory.security.failure_limits import FailureLimiter
from agent_memory.security.operator_keys import list_operator_keys, revoke_operator_key, verify_operator_key
from tests.cli.runner import run_cli


async def test_an_operator_key_from_the_cli_is_verified_until_revoked(services):
    done = run_cli(services, "keys", "create-operator", "--name", "on-call", "--json")
    assert done.returncode == 0, done.stderr
    created = json.loads(done.stdout)
    token, key_id = created["token"], created["key"]["key_id"]
    assert token.startswith(f"amo:{key_id}:")

    key = await verify_operator_key(services.pool, token)
    assert (key.key_id, key.name) == (key_id, "on-call")
    listed = {k.key_id: k for k in await list_operator_keys(services.pool)}
    assert listed[key_id].last_used_at is not None
    listing = run_cli(services, "keys", "list-operator", "--json")
    assert key_id in {k["key_id"] for k in json.loads(listing.stdout)}
    assert token.rsplit(":", 1)[1] not in listing.stdout  # never the secret

    with pytest.raises(ApiKeyError, match="unknown or revoked"):
        await verify_operator_key(services.pool, token[:-4] + "AAAA")
    revoked = run_cli(services, "keys", "revoke-operator", "--key-id", key_id)
    assert revoked.returncode == 0, revoked.stderr
    with pytest.raises(ApiKeyError, match="unknown or revoked"):
        await verify_operator_key(services.pool, token)
    assert not await revoke_operator_key(services.pool, key_id)  # already revoked


async def test_a_tenant_key_is_forbidden_and_a_malformed_one_unauthorized(services, tenant):
    tenant_token = (await create_key(services.pool, tenant, "erase")).token
    with pytest.raises(Forbidden, match="operator key"):
        await verify_operator_key(services.pool, tenant_token)
    with pytest.raises(ApiKeyError, match="unknown or revoked"):  # a wrong tenant secret: 401, not 403
        await verify_operator_key(services.pool, tenant_token[:-4] + "AAAA")
    for malformed in ("amo:x", "bearer", "amo:" + "k" * 65 + ":s"):
        with pytest.raises(ApiKeyError, match="malformed"):
            await verify_operator_key(services.pool, malformed)


async def test_failed_operator_authentications_are_limited_per_key_id(services):
    limiter = FailureLimiter(burst=3, window=60)
    guess = "amo:abcdef012345:" + "x" * 43
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        with pytest.raises(ApiKeyError):
            await checked_operator_key(limiter, services.pool, address, guess)
    with pytest.raises(Exception, match="too many failed authentications for operator key id"):
        await checked_operator_key(limiter, services.pool, "10.0.0.4", guess)
