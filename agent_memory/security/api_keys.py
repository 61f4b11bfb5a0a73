"""API keys of the HTTP API: created, listed and revoked per tenant (`agent-memory keys
create|list|revoke`), stored as a SHA-256 of their secret.

A key reads `amk:{tenant}:{key id}:{secret}`. The tenant comes from the key and only from the
key, never from a URL or a body. It is verified in that tenant's own transaction (row-level
security), against the stored hash, with a constant-time compare; an unknown key id is compared
against a dummy hash the same way, so the answer takes as long whether the id exists or not. Scopes nest: `read` reads
memory, `write` also appends and ends sessions, and `erase` also forgets, restores and erases.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime
from typing import Literal

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from agent_memory.core.errors import Forbidden, InvalidInput, TooManyRequests, Unauthorized
from agent_memory.core.models import IDENTIFIER_PATTERN, check_identifier
from agent_memory.store.db import tenant_transaction

KeyScope = Literal["read", "write", "erase"]
SCOPES: tuple[KeyScope, ...] = ("read", "write", "erase")
PREFIX = "amk"
OPERATOR_PREFIX = "amo"  # agent_memory/security/operator_keys.py


# Why a credential was refused, as the metrics count it (agent_memory_auth_failures_total): none
# sent, not of the key's form, unknown or revoked (one answer: a caller is not told which), a valid
# key without the scope, or a refusal of the failure limiter.
AuthFailureReason = Literal["missing", "malformed", "unknown", "scope", "limited"]


class ApiKeyError(Unauthorized):
    """The key is missing, malformed, unknown or revoked (the message says which; `reason` as the
    metrics count it)."""

    def __init__(self, message: str, reason: AuthFailureReason = "unknown"):
        super().__init__(message)
        self.reason: AuthFailureReason = reason


class TooManyFailuresError(TooManyRequests):
    """Too many failed authentications from this client address or for this key id: a failing
    attempt is answered 429 until `retry_after` seconds have passed (a valid key is still served;
    agent_memory/security/failure_limits.py)."""

    def __init__(self, what: str, retry_after: int):
        super().__init__(f"too many failed authentications {what}: retry after {retry_after} s", retry_after)


class ApiKey(BaseModel):
    tenant_id: str
    key_id: str
    scope: KeyScope
    name: str | None
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    # A key limited to one agent writes that agent's messages only and reads as that agent: the
    # other agents' private sessions, episodes and notes are invisible to it (migration 046).
    agent_id: str | None = None
    # A key limited to one app writes that app's messages only, and its reads keep the memories
    # citing them (agent_memory.memory.filters.MemoryFilter.within_key_limits).
    app_id: str | None = None


def key_identity(key: ApiKey) -> str:
    """Whom a key acts as, where what it claims is its own (a tool call: migration 056): the agent
    and app it is limited to, so that every key of that agent (a rotated one, a read key) is the
    same claimant; a key limited to neither acts as the tenant, as all such keys do."""
    if key.agent_id is not None and key.app_id is not None:
        return f"agent:{key.agent_id}/app:{key.app_id}"
    if key.agent_id is not None:
        return f"agent:{key.agent_id}"
    if key.app_id is not None:
        return f"app:{key.app_id}"
    return "tenant"


def audited_actor(key: ApiKey) -> Literal["agent", "operator"]:
    """Who the audit records for a change made with `key`: an operator's erase key, else the agent
    holding it (the same on HTTP and MCP)."""
    return "operator" if key.scope == "erase" else "agent"


class CreatedKey(BaseModel):
    key: ApiKey
    token: str  # shown once: only its hash is stored


def secret_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


# What an unknown key id's secret is compared against: the same hash and compare as for a known
# id, so the time of a refusal does not tell whether the id exists. No secret hashes to it.
_DUMMY_VERIFIER = secret_digest(secrets.token_urlsafe(32))


def secret_matches(stored_sha256: str | None, secret: str) -> bool:
    """Whether `secret` hashes to the stored digest, in constant time; with no stored digest (an
    unknown key id) the same work is done against a dummy one, and the answer is no."""
    matches = hmac.compare_digest((stored_sha256 or _DUMMY_VERIFIER).encode(), secret_digest(secret).encode())
    return matches and stored_sha256 is not None


def allows(scope: KeyScope, needed: KeyScope) -> bool:
    return SCOPES.index(scope) >= SCOPES.index(needed)


async def create_key(pool: AsyncConnectionPool, tenant_id: str, scope: KeyScope, name: str | None = None, *,
                     agent_id: str | None = None, app_id: str | None = None) -> CreatedKey:
    check_identifier("tenant", tenant_id)
    for field, value in (("agent_id", agent_id), ("app_id", app_id)):
        if value is not None:
            check_identifier(field, value)
            if scope == "erase":
                raise InvalidInput(f"{field}: an erase key acts for the whole tenant; limit a read or write key")
    if scope not in SCOPES:
        raise InvalidInput(f"scope {scope!r} is not one of {', '.join(SCOPES)}")
    if name is not None and len(name) > 200:
        raise InvalidInput("name is over 200 characters: a short label, e.g. 'support-bot'")
    key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            "INSERT INTO api_keys (tenant_id, key_id, secret_sha256, scope, name, agent_id, app_id) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING created_at",
            (tenant_id, key_id, secret_digest(secret), scope, name, agent_id, app_id))
        row = await cur.fetchone()
    assert row is not None
    key = ApiKey(tenant_id=tenant_id, key_id=key_id, scope=scope, name=name, created_at=row[0], last_used_at=None,
                 revoked_at=None, agent_id=agent_id, app_id=app_id)
    return CreatedKey(key=key, token=f"{PREFIX}:{tenant_id}:{key_id}:{secret}")


async def list_keys(pool: AsyncConnectionPool, tenant_id: str) -> list[ApiKey]:
    check_identifier("tenant", tenant_id)
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute("SELECT tenant_id, key_id, scope, name, created_at, last_used_at, revoked_at, "
                                 "agent_id, app_id FROM api_keys WHERE tenant_id = %s ORDER BY created_at",
                                 (tenant_id,))
        return [ApiKey(tenant_id=t, key_id=k, scope=s, name=n, created_at=c, last_used_at=u, revoked_at=r, agent_id=a,
                       app_id=p) for t, k, s, n, c, u, r, a, p in await cur.fetchall()]


async def revoke_key(pool: AsyncConnectionPool, tenant_id: str, key_id: str) -> bool:
    check_identifier("tenant", tenant_id)
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute("UPDATE api_keys SET revoked_at = now() WHERE tenant_id = %s AND key_id = %s "
                                 "AND revoked_at IS NULL", (tenant_id, key_id))
        return cur.rowcount > 0


async def verify_key(pool: AsyncConnectionPool, token: str, needed: KeyScope) -> ApiKey:
    """The key a bearer token names, if it is valid, not revoked, and has the `needed` scope."""
    parts = token.split(":")
    if len(parts) != 4 or parts[0] != PREFIX or not IDENTIFIER_PATTERN.match(parts[1]):
        raise ApiKeyError("the API key is malformed: send `Authorization: Bearer amk:...` as `agent-memory keys "
                          "create` printed it", "malformed")
    _, tenant_id, key_id, secret = parts
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute("SELECT secret_sha256, scope, name, created_at, last_used_at, revoked_at, agent_id, "
                                 "app_id FROM api_keys WHERE tenant_id = %s AND key_id = %s", (tenant_id, key_id))
        row = await cur.fetchone()
        if not secret_matches(row[0] if row else None, secret) or row is None or row[5] is not None:
            raise ApiKeyError("the API key is unknown or revoked: create one with `agent-memory keys create`")
        if not allows(row[1], needed):
            raise Forbidden(f"this key's scope is {row[1]!r}; the request needs {needed!r}")
        await conn.execute("UPDATE api_keys SET last_used_at = now() WHERE tenant_id = %s AND key_id = %s",
                           (tenant_id, key_id))
    return ApiKey(tenant_id=tenant_id, key_id=key_id, scope=row[1], name=row[2], created_at=row[3],
                  last_used_at=row[4], revoked_at=None, agent_id=row[6], app_id=row[7])
