"""Retention per memory type: how long each kind of memory is kept, per tenant.

The hourly memory-sweep Schedule enforces it (workflows/lifecycle.py): every memory past its
type's age is forgotten by the `retention` actor — gone from every read at once, restorable
within the grace period like an operator's forget — and the same Schedule's sweeper removes it
from every store once the grace period is over. Defaults (docs/lifecycle.md):

| type | kept | field |
| --- | --- | --- |
| working memory (the live session in Redis) | 4 h after its last message | fixed |
| episodes (session summaries) | until forgotten | `episode_days` |
| notes (observations) | until forgotten | `note_days` |
| candidate-area values (not corroborated) | 90 days after first said | `candidate_days` |
| temporary facts ("until June", a write's expiry) | 30 days after their end date | `temporary_fact_days` |
| profile facts | until changed (history kept) or forgotten | — |
| webhook deliveries, delivered or dead | 30 days | `webhook_delivery_days` |

The same policy says how long a current fact is trusted unconfirmed before the daily review
marks it stale (`shelf_life_days`, per namespace) and how early a candidate is marked before its
`candidate_days` end (`candidate_review_days`): agent_memory/lifecycle/review.py.

Ages are measured against when a memory happened (an episode's session time, a note's message
time, a candidate's observation, a temporary fact's end), not when it was recorded: a backfill
of old conversations is subject to the policy at once.

A fact written with an expiry (`expires_at` / `ttl_seconds`, memory/corrections.py) is a
temporary fact ending then: no read returns it after its end, and the `temporary_fact` rule
forgets it here like any other (`temporary_fact_days=0`: as soon as it expires).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

import psycopg
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent_memory.core.run_inputs import RunInput
from agent_memory.lifecycle.forgetting import forget_memory
from agent_memory.memory.evidence import WORKING_MEMORY_TTL_SECONDS
from agent_memory.memory.tool_calls import TOOL_CALL_DAYS_DEFAULT, sweep_expired_tool_calls
from agent_memory.memory.webhooks import WEBHOOK_DELIVERY_DAYS_DEFAULT, sweep_old_deliveries
from agent_memory.security.keyring import KeyRing
from agent_memory.store.db import registered_tenants, tenant_transaction
from agent_memory.store.scope import SubjectErasedError

WORKING_MEMORY_HOURS = WORKING_MEMORY_TTL_SECONDS / 3600
# How long a current fact of a namespace is trusted without being said again or confirmed before
# the daily review marks it stale (agent_memory/lifecycle/review.py). A namespace not named here,
# or named with None, never goes stale (identity, name, birthday, language, diet).
DEFAULT_SHELF_LIFE_DAYS: dict[str, int | None] = {
    "location": 180, "work": 365, "travel": 30, "budget": 90, "preference": 365, "relationship": 365,
    "pet": 730, "profile": None}
MAX_SHELF_LIFE_NAMESPACES = 100


def _check_shelf_life(value: dict[str, int | None]) -> dict[str, int | None]:
    if len(value) > MAX_SHELF_LIFE_NAMESPACES:
        raise ValueError(f"shelf_life_days names {len(value)} namespaces: at most {MAX_SHELF_LIFE_NAMESPACES}")
    for namespace, days in value.items():
        if not namespace or len(namespace) > 64 or not namespace.replace("_", "").isalnum():
            raise ValueError(f"shelf_life_days: {namespace[:80]!r} is not a namespace (letters, digits, _)")
        if days is not None and not 1 <= days <= 36500:
            raise ValueError(f"shelf_life_days: {namespace} = {days}; give 1 to 36500 days, or none (never stale)")
    return value


class RetentionPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    episode_days: int | None = Field(default=None, ge=1)
    note_days: int | None = Field(default=None, ge=1)
    candidate_days: int | None = Field(default=90, ge=1)
    temporary_fact_days: int | None = Field(default=30, ge=0)
    # How long an agent's recorded tool call answers its retries (memory/tool_calls.py).
    tool_call_days: int = Field(default=TOOL_CALL_DAYS_DEFAULT, ge=1, le=3650)
    # How long a delivered or dead webhook delivery stays listed (memory/webhooks.py).
    webhook_delivery_days: int = Field(default=WEBHOOK_DELIVERY_DAYS_DEFAULT, ge=1, le=3650)
    # The review (agent_memory/lifecycle/review.py): per namespace, the days a current fact is
    # trusted unconfirmed (None: never stale); and how many days before `candidate_days` ends a
    # held candidate is marked due for review.
    shelf_life_days: dict[str, int | None] = Field(default_factory=lambda: dict(DEFAULT_SHELF_LIFE_DAYS))
    candidate_review_days: int = Field(default=14, ge=0, le=3650)

    @field_validator("shelf_life_days")
    @classmethod
    def _shelf_life(cls, value: dict[str, int | None]) -> dict[str, int | None]:
        return _check_shelf_life(value)


DEFAULT_RETENTION = RetentionPolicy()


class RetentionInput(RunInput):
    limit_per_tenant: int = Field(default=1000, ge=1)


class RetentionResult(BaseModel):
    tenants: int = 0
    forgotten: dict[str, int] = Field(default_factory=dict)  # per rule: episode, note, candidate, temporary_fact
    skipped_erased: int = 0
    tool_calls_expired: int = 0
    webhook_deliveries_expired: int = 0


async def read_retention(conn: psycopg.AsyncConnection, tenant_id: str) -> RetentionPolicy:
    cur = await conn.execute("SELECT policy FROM retention_policies WHERE tenant_id = %s", (tenant_id,))
    row = await cur.fetchone()
    return DEFAULT_RETENTION if row is None else RetentionPolicy.model_validate(row[0])


async def write_retention(conn: psycopg.AsyncConnection, tenant_id: str, policy: RetentionPolicy | None) -> None:
    """Store the tenant's policy (None: back to the defaults)."""
    if policy is None:
        await conn.execute("DELETE FROM retention_policies WHERE tenant_id = %s", (tenant_id,))
        return
    await conn.execute(
        "INSERT INTO retention_policies (tenant_id, policy) VALUES (%s, %s::jsonb) "
        "ON CONFLICT (tenant_id) DO UPDATE SET policy = excluded.policy, updated_at = now()",
        (tenant_id, json.dumps(policy.model_dump(mode="json"))))


async def expired_memories(conn: psycopg.AsyncConnection, tenant_id: str, policy: RetentionPolicy,
                           limit: int) -> list[tuple[str, str, uuid.UUID]]:
    """(rule, subject, memory id) of memories past their type's age, oldest rules first."""
    cur = await conn.execute(
        """
        (SELECT 'episode', subject_id, memory_id FROM episodes
          WHERE tenant_id = %(t)s AND %(episode)s::int IS NOT NULL
            AND happened_at < now() - make_interval(days => %(episode)s::int) LIMIT %(n)s)
        UNION ALL
        (SELECT 'note', subject_id, memory_id FROM observations
          WHERE tenant_id = %(t)s AND %(note)s::int IS NOT NULL
            AND happened_at < now() - make_interval(days => %(note)s::int) LIMIT %(n)s)
        UNION ALL
        (SELECT 'candidate', subject_id, memory_id FROM facts
          WHERE tenant_id = %(t)s AND %(candidate)s::int IS NOT NULL AND status = 'candidate'
            AND valid_from < now() - make_interval(days => %(candidate)s::int) LIMIT %(n)s)
        UNION ALL
        (SELECT 'temporary_fact', subject_id, memory_id FROM facts
          WHERE tenant_id = %(t)s AND %(temporary)s::int IS NOT NULL AND status IN ('active', 'closed', 'voided')
          GROUP BY subject_id, memory_id
         HAVING bool_and(valid_until IS NOT NULL)
            AND max(valid_until) < now() - make_interval(days => %(temporary)s::int) LIMIT %(n)s)
        """, {"t": tenant_id, "episode": policy.episode_days, "note": policy.note_days,
              "candidate": policy.candidate_days, "temporary": policy.temporary_fact_days, "n": limit})
    return [(rule, subject, memory_id) for rule, subject, memory_id in await cur.fetchall()][:limit]


async def apply_retention(pool: AsyncConnectionPool, keyring: KeyRing, *, limit_per_tenant: int = 1000,
                          progress: Callable[[RetentionResult], None] | None = None) -> RetentionResult:
    """Forget (actor `retention`) every memory past its tenant's retention, in every tenant; at
    most `limit_per_tenant` per run (the next hourly run takes the rest)."""
    result = RetentionResult()
    for tenant_id in await registered_tenants(pool):
        result.tenants += 1
        async with tenant_transaction(pool, tenant_id) as conn:
            policy = await read_retention(conn, tenant_id)
            expired = await expired_memories(conn, tenant_id, policy, limit_per_tenant)
            result.tool_calls_expired += await sweep_expired_tool_calls(conn, tenant_id, limit_per_tenant)
            result.webhook_deliveries_expired += await sweep_old_deliveries(conn, tenant_id,
                                                                            policy.webhook_delivery_days,
                                                                            limit_per_tenant)
        for rule, subject_id, memory_id in expired:
            try:
                done = await forget_memory(pool, keyring, tenant_id=tenant_id, subject_id=subject_id,
                                           memory_id=str(memory_id), actor="retention",
                                           reason=f"retention: {rule.replace('_', ' ')} past the tenant's policy")
            except SubjectErasedError:
                result.skipped_erased += 1
                continue
            except LookupError:
                continue  # forgotten or swept since it was listed
            if not done.already_forgotten:
                result.forgotten[rule] = result.forgotten.get(rule, 0) + 1
            if progress is not None:
                progress(result)
    return result
