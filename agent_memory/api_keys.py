"""API keys of the HTTP API: created, listed and revoked per tenant (`agent-memory keys
create|list|revoke`), stored as a SHA-256 of their secret.

A key reads `amk:{tenant}:{key id}:{secret}`. The tenant comes from the key and only from the
key, never from a URL or a body. It is verified in that tenant's own transaction (row-level
security), against the stored hash, with a constant-time compare. Scopes nest: `read` reads
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

from agent_memory.db import tenant_transaction
from agent_memory.models import IDENTIFIER_PATTERN, check_identifier

KeyScope = Literal["read", "write", "erase"]
SCOPES: tuple[KeyScope, ...] = ("read", "write", "erase")
PREFIX = "amk"


class ApiKeyError(Exception):
    """The key is malformed, unknown, revoked, or lacks the scope (the message says which)."""


class ApiKey(BaseModel):
    tenant_id: str
    key_id: str
    scope: KeyScope
    name: str | None
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class CreatedKey(BaseModel):
    key: ApiKey
    token: str  # shown once: only its hash is stored


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def allows(scope: KeyScope, needed: KeyScope) -> bool:
    return SCOPES.index(scope) >= SCOPES.index(needed)


async def create_key(pool: AsyncConnectionPool, tenant_id: str, scope: KeyScope, name: str | None = None) -> CreatedKey:
    check_identifier("tenant", tenant_id)
    if scope not in SCOPES:
        raise ValueError(f"scope {scope!r} is not one of {', '.join(SCOPES)}")
    if name is not None and len(name) > 200:
        raise ValueError("name is over 200 characters: a short label, e.g. 'support-bot'")
    key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            "INSERT INTO api_keys (tenant_id, key_id, secret_sha256, scope, name) VALUES (%s, %s, %s, %s, %s) "
            "RETURNING created_at", (tenant_id, key_id, _digest(secret), scope, name))
        row = await cur.fetchone()
    assert row is not None
    key = ApiKey(tenant_id=tenant_id, key_id=key_id, scope=scope, name=name, created_at=row[0], last_used_at=None,
                 revoked_at=None)
    return CreatedKey(key=key, token=f"{PREFIX}:{tenant_id}:{key_id}:{secret}")


async def list_keys(pool: AsyncConnectionPool, tenant_id: str) -> list[ApiKey]:
    check_identifier("tenant", tenant_id)
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute("SELECT tenant_id, key_id, scope, name, created_at, last_used_at, revoked_at "
                                 "FROM api_keys WHERE tenant_id = %s ORDER BY created_at", (tenant_id,))
        return [ApiKey(tenant_id=t, key_id=k, scope=s, name=n, created_at=c, last_used_at=u, revoked_at=r)
                for t, k, s, n, c, u, r in await cur.fetchall()]


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
                          "create` printed it")
    _, tenant_id, key_id, secret = parts
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute("SELECT secret_sha256, scope, name, created_at, last_used_at, revoked_at "
                                 "FROM api_keys WHERE tenant_id = %s AND key_id = %s", (tenant_id, key_id))
        row = await cur.fetchone()
        if row is None or not hmac.compare_digest(row[0], _digest(secret)) or row[5] is not None:
            raise ApiKeyError("the API key is unknown or revoked: create one with `agent-memory keys create`")
        if not allows(row[1], needed):
            raise PermissionError(f"this key's scope is {row[1]!r}; the request needs {needed!r}")
        await conn.execute("UPDATE api_keys SET last_used_at = now() WHERE tenant_id = %s AND key_id = %s",
                           (tenant_id, key_id))
    return ApiKey(tenant_id=tenant_id, key_id=key_id, scope=row[1], name=row[2], created_at=row[3],
                  last_used_at=row[4], revoked_at=None)
