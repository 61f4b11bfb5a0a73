"""Consent and authorization at write time: what may become memory at all.

A tenant's write policy (`agent-memory write-policy show|set|reset`) says:

- `stored_namespaces`: the namespaces that may be stored at all (None: every one). A fact of
  another namespace never reaches the facts table. It is withheld as `namespace_not_allowed`.
- `consent_namespaces`: the namespaces stored only under the subject's consent, for example
  `health`. Consents are managed with `agent-memory consent grant|revoke|list`. Without an
  active consent the fact is withheld as `no_consent`. With one, its event carries the
  `consent_id`.
- `confirm_keys`: keys (`namespace/key` globs) whose value never changes silently: billing and
  delivery addresses, payment details. A new value of such a key waits in the candidate area
  until it is confirmed (`agent-memory facts --confirm`, `client.admin.confirm_fact`). A key's first
  value is stored as usual.
- `corroborate_keys`: keys (`namespace/key` globs) whose value, first or new, is taken only once
  it is said twice: a statement said in one message waits in the candidate area until a later
  session says it again (it is promoted then) or it is confirmed. None by default.

The gate runs in the commit's transaction (`memory_store.decide_fact_events`), so a policy or
consent change applies to the next commit of any session. What it withheld is reported in the
consolidation result and counted per tenant and reason in Postgres (`stats`).
"""

from __future__ import annotations

import fnmatch
import json

import psycopg
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, ConfigDict, Field

from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import check_identifier
from agent_memory.security.keyring import KeyRing
from agent_memory.store.db import tenant_transaction
from agent_memory.store.scope import Mode, subject_scope

NAMESPACE_NOT_ALLOWED = "namespace_not_allowed"
NO_CONSENT = "no_consent"
MAX_CONSENT_ID = 200


class WritePolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    stored_namespaces: list[str] | None = None
    consent_namespaces: list[str] = Field(default_factory=list)
    confirm_keys: list[str] = Field(default_factory=lambda: [
        "*/billing_address", "*/delivery_address", "*/shipping_address", "payment/*", "*/payment_method",
        "*/card_number", "*/iban"])
    corroborate_keys: list[str] = Field(default_factory=list)

    def withheld_reason(self, namespace: str, consents: dict[str, str]) -> str | None:
        if self.stored_namespaces is not None and namespace not in self.stored_namespaces:
            return NAMESPACE_NOT_ALLOWED
        if namespace in self.consent_namespaces and namespace not in consents:
            return NO_CONSENT
        return None

    def consent_for(self, namespace: str, consents: dict[str, str]) -> str | None:
        return consents.get(namespace) if namespace in self.consent_namespaces else None

    def needs_confirmation(self, namespace: str, key: str) -> bool:
        return any(fnmatch.fnmatchcase(f"{namespace}/{key}", pattern) for pattern in self.confirm_keys)

    def needs_corroboration(self, namespace: str, key: str) -> bool:
        return any(fnmatch.fnmatchcase(f"{namespace}/{key}", pattern) for pattern in self.corroborate_keys)


DEFAULT_WRITE_POLICY = WritePolicy()


class Consent(BaseModel):
    namespace: str
    consent_id: str
    granted_at: str
    revoked_at: str | None


async def read_write_policy(conn: psycopg.AsyncConnection, tenant_id: str) -> WritePolicy:
    cur = await conn.execute("SELECT policy FROM write_policies WHERE tenant_id = %s", (tenant_id,))
    row = await cur.fetchone()
    return DEFAULT_WRITE_POLICY if row is None else WritePolicy.model_validate(row[0])


async def write_write_policy(conn: psycopg.AsyncConnection, tenant_id: str, policy: WritePolicy | None) -> None:
    if policy is None:
        await conn.execute("DELETE FROM write_policies WHERE tenant_id = %s", (tenant_id,))
        return
    await conn.execute(
        "INSERT INTO write_policies (tenant_id, policy) VALUES (%s, %s::jsonb) "
        "ON CONFLICT (tenant_id) DO UPDATE SET policy = excluded.policy, updated_at = now()",
        (tenant_id, json.dumps(policy.model_dump(mode="json"))))


async def active_consents(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str) -> dict[str, str]:
    """namespace → consent id, of the subject's consents not revoked."""
    cur = await conn.execute("SELECT namespace, consent_id FROM consents WHERE tenant_id = %s AND subject_id = %s "
                             "AND revoked_at IS NULL", (tenant_id, subject_id))
    return {ns: consent for ns, consent in await cur.fetchall()}


async def count_withheld(conn: psycopg.AsyncConnection, tenant_id: str, withheld: dict[str, int]) -> None:
    for reason, n in withheld.items():
        if n:
            await conn.execute(
                "INSERT INTO write_gate_counts (tenant_id, reason, count) VALUES (%s, %s, %s) "
                "ON CONFLICT (tenant_id, reason) DO UPDATE SET count = write_gate_counts.count + EXCLUDED.count",
                (tenant_id, reason, n))


async def withheld_counts(pool: AsyncConnectionPool, tenant_id: str) -> dict[str, int]:
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute("SELECT reason, count FROM write_gate_counts WHERE tenant_id = %s ORDER BY reason",
                                 (tenant_id,))
        return {reason: int(n) for reason, n in await cur.fetchall()}


def _check_namespace(namespace: str) -> str:
    if not namespace.strip() or len(namespace) > 100 or "/" in namespace:
        raise InvalidInput(f"namespace {namespace[:100]!r} is not a namespace: name one as facts show it, e.g. 'health'")
    return namespace


async def grant_consent(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str,
                        namespace: str, consent_id: str) -> None:
    """Record (or renew) the subject's consent to storing `namespace`, under the caller's id for
    it (a consent record in the product that asked: a form, a ticket)."""
    _check_namespace(namespace)
    check_identifier("consent id", consent_id)
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.WRITE) as scope:
        await scope.conn.execute(
            "INSERT INTO consents (tenant_id, subject_id, namespace, consent_id) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (tenant_id, subject_id, namespace) DO UPDATE SET consent_id = EXCLUDED.consent_id, "
            "granted_at = now(), revoked_at = NULL", (tenant_id, subject_id, namespace, consent_id))


async def revoke_consent(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str,
                         namespace: str) -> bool:
    """Revoke it: later commits withhold the namespace. Facts stored under it stay until
    forgotten (`agent-memory forget`), which is the operator's decision. False: no consent."""
    _check_namespace(namespace)
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.WRITE) as scope:
        cur = await scope.conn.execute(
            "UPDATE consents SET revoked_at = now() WHERE tenant_id = %s AND subject_id = %s AND namespace = %s "
            "AND revoked_at IS NULL", (tenant_id, subject_id, namespace))
        return cur.rowcount > 0


async def list_consents(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str) -> list[Consent]:
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.READ) as scope:
        cur = await scope.conn.execute(
            "SELECT namespace, consent_id, granted_at::text, revoked_at::text FROM consents "
            "WHERE tenant_id = %s AND subject_id = %s ORDER BY namespace", (tenant_id, subject_id))
        return [Consent(namespace=ns, consent_id=c, granted_at=g, revoked_at=r) for ns, c, g, r in await cur.fetchall()]
