"""Operator keys: `agent-memory keys create-operator|list-operator|revoke-operator`.

The operator-facing surfaces of `agent-memory serve` (the Temporal UI's codec endpoint, the
console) read across tenants, so their key names no tenant: `amo:{key id}:{secret}`. Only a
SHA-256 of the secret is stored, compared in constant time; an unknown key id costs the same
compare as a known one. A tenant's key (`amk:...`) is refused with 403: it is a key, not this one.
"""

from __future__ import annotations

import secrets
from datetime import datetime

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from agent_memory.core.errors import Forbidden, InvalidInput
from agent_memory.security.api_keys import OPERATOR_PREFIX as PREFIX
from agent_memory.security.api_keys import PREFIX as TENANT_PREFIX
from agent_memory.security.api_keys import ApiKeyError, secret_digest, secret_matches, verify_key


class OperatorKey(BaseModel):
    key_id: str
    name: str | None
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class CreatedOperatorKey(BaseModel):
    key: OperatorKey
    token: str  # shown once: only its hash is stored


async def create_operator_key(pool: AsyncConnectionPool, name: str | None = None) -> CreatedOperatorKey:
    if name is not None and len(name) > 200:
        raise InvalidInput("name is over 200 characters: a short label, e.g. 'on-call'")
    key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
    async with pool.connection() as conn:
        cur = await conn.execute("INSERT INTO operator_keys (key_id, secret_sha256, name) VALUES (%s, %s, %s) "
                                 "RETURNING created_at", (key_id, secret_digest(secret), name))
        row = await cur.fetchone()
    assert row is not None
    key = OperatorKey(key_id=key_id, name=name, created_at=row[0], last_used_at=None, revoked_at=None)
    return CreatedOperatorKey(key=key, token=f"{PREFIX}:{key_id}:{secret}")


async def list_operator_keys(pool: AsyncConnectionPool) -> list[OperatorKey]:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT key_id, name, created_at, last_used_at, revoked_at FROM operator_keys "
                                 "ORDER BY created_at")
        return [OperatorKey(key_id=k, name=n, created_at=c, last_used_at=u, revoked_at=r)
                for k, n, c, u, r in await cur.fetchall()]


async def revoke_operator_key(pool: AsyncConnectionPool, key_id: str) -> bool:
    async with pool.connection() as conn:
        cur = await conn.execute("UPDATE operator_keys SET revoked_at = now() WHERE key_id = %s "
                                 "AND revoked_at IS NULL", (key_id,))
        return cur.rowcount > 0


async def verify_operator_key(pool: AsyncConnectionPool, token: str) -> OperatorKey:
    """The operator key a bearer token names, if it is valid and not revoked. A valid tenant key
    raises Forbidden (403); anything else ApiKeyError (401)."""
    if token.startswith(f"{TENANT_PREFIX}:"):
        await verify_key(pool, token, "read")  # a wrong tenant key is a failed authentication (401)
        raise Forbidden("a tenant's API key cannot open the operator's surfaces: use an operator key "
                        "(agent-memory keys create-operator)")
    parts = token.split(":")
    if len(parts) != 3 or parts[0] != PREFIX or len(parts[1]) > 64:
        raise ApiKeyError("the operator key is malformed: send it as `agent-memory keys create-operator` printed "
                          "it (amo:...)", "malformed")
    _, key_id, secret = parts
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT secret_sha256, name, created_at, last_used_at, revoked_at "
                                 "FROM operator_keys WHERE key_id = %s", (key_id,))
        row = await cur.fetchone()
        if not secret_matches(row[0] if row else None, secret) or row is None or row[4] is not None:
            raise ApiKeyError("the operator key is unknown or revoked: create one with "
                              "`agent-memory keys create-operator`")
        await conn.execute("UPDATE operator_keys SET last_used_at = now() WHERE key_id = %s", (key_id,))
    return OperatorKey(key_id=key_id, name=row[1], created_at=row[2], last_used_at=row[3], revoked_at=None)
