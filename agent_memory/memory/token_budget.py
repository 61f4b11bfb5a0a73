"""A tenant's daily model-token budget (`agent-memory token-budget show|set|reset`).

What is counted: the input and output tokens of every model call whose result is recorded for the
tenant (the operations table: a consolidation's extraction, importance and summary, a remote
embedder's batches), as the provider reported them, on the UTC day the result was recorded. A
recorded result reused by a retry is not counted again. Providers that compute in the worker's
process (the offline default) make no model call and report no tokens: they spend nothing.

The budget: the tenant's own (migration 049), else the deployment's default
(AGENT_MEMORY_DAILY_TOKEN_BUDGET; unset or 0: unlimited). A consolidation checks it before its
model calls; when the day's tokens reached it, the run parks (workflows/consolidation.py) until
the next UTC day or until the budget is raised, and then goes on. It is a brake, not a hard cap:
calls already under way when the budget runs out complete and are counted.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import psycopg
from psycopg_pool import AsyncConnectionPool

from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import TokenBudgetState
from agent_memory.store.counters import add_counts_in
from agent_memory.store.db import tenant_transaction

# The largest budget accepted (a bigint column; far above any day's spend).
MAX_DAILY_TOKENS = 10**15
UNLIMITED_WORDS = ("unlimited", "none")


def usage_counter(day: date) -> str:
    """The operator counter of a day's model tokens (agent_memory/store/counters.py)."""
    return f"model_tokens:{day.isoformat()}"


def utc_today() -> date:
    return datetime.now(UTC).date()


def check_daily_tokens(value: object, field: str = "daily_tokens") -> int | None:
    """A budget as given (a number, its text, or `unlimited`/None) → tokens per day, or None for
    unlimited; anything else is refused naming `field`."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip().replace("_", "").replace(",", "")
        if text.lower() in UNLIMITED_WORDS:
            return None
        try:
            value = int(text)
        except ValueError:
            raise InvalidInput(f"{field} must be a whole number of tokens per day (>= 1) or 'unlimited', "
                               f"not {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{field} must be a whole number of tokens per day (>= 1) or 'unlimited', not {value!r}")
    if value < 1:
        raise InvalidInput(f"{field} must be at least 1 token per day (use 'unlimited' for no budget), not {value}")
    if value > MAX_DAILY_TOKENS:
        raise InvalidInput(f"{field} must be at most {MAX_DAILY_TOKENS:,} tokens per day, not {value:,}")
    return value


async def add_model_tokens(conn: psycopg.AsyncConnection, tenant_id: str, tokens: int) -> None:
    """Count `tokens` spent today, in the caller's transaction (the one recording the result)."""
    if tokens > 0:
        await add_counts_in(conn, tenant_id, {usage_counter(utc_today()): tokens})


async def used_tokens(conn: psycopg.AsyncConnection, tenant_id: str, day: date) -> int:
    cur = await conn.execute("SELECT coalesce(sum(count), 0)::bigint FROM operator_counters "
                             "WHERE tenant_id = %s AND counter = %s", (tenant_id, usage_counter(day)))
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def read_token_budget(conn: psycopg.AsyncConnection, tenant_id: str, default_daily_tokens: int | None,
                            day: date | None = None) -> TokenBudgetState:
    """The budget in force for the tenant and the tokens spent on `day` (default: today, UTC)."""
    day = day or utc_today()
    cur = await conn.execute("SELECT daily_tokens FROM token_budgets WHERE tenant_id = %s", (tenant_id,))
    row = await cur.fetchone()
    used = await used_tokens(conn, tenant_id, day)
    if row is not None:
        return TokenBudgetState(tenant_id=tenant_id, daily_tokens=row[0], source="tenant", day=day, used_tokens=used)
    return TokenBudgetState(tenant_id=tenant_id, daily_tokens=default_daily_tokens or None, source="default", day=day,
                            used_tokens=used)


async def token_budget_state(pool: AsyncConnectionPool, tenant_id: str,
                             default_daily_tokens: int | None) -> TokenBudgetState:
    async with tenant_transaction(pool, tenant_id) as conn:
        return await read_token_budget(conn, tenant_id, default_daily_tokens)


async def write_token_budget(conn: psycopg.AsyncConnection, tenant_id: str, daily_tokens: int | None, *,
                             reset: bool = False) -> None:
    """Set the tenant's budget (None: unlimited), or with `reset` drop it (the default applies)."""
    if reset:
        await conn.execute("DELETE FROM token_budgets WHERE tenant_id = %s", (tenant_id,))
        return
    await conn.execute(
        "INSERT INTO token_budgets (tenant_id, daily_tokens) VALUES (%s, %s) "
        "ON CONFLICT (tenant_id) DO UPDATE SET daily_tokens = excluded.daily_tokens, updated_at = now()",
        (tenant_id, check_daily_tokens(daily_tokens)))
