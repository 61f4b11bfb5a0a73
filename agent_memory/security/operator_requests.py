"""Requests an authorized caller registers in Postgres before a destructive run starts.

Temporal is an orchestrator, not an authority: whoever reaches its frontend can start any
workflow. A run that destroys or rewrites more than its Schedule would therefore acts only on a
registration made by an authorized caller for that very run: an erasure on its erasure request
(agent_memory/lifecycle/erasure.py), a forced key rotation, a compaction of every table, a memory sweep with
its own grace period, a forced rebuild or a re-derivation that writes on an operator request
here. A registration names its
run by a keyed digest (the identifier key) of kind and workflow id.
"""

from __future__ import annotations

from typing import Literal

from psycopg_pool import AsyncConnectionPool

from agent_memory.core.errors import Forbidden
from agent_memory.security.keyring import KeyRing

OperatorRequestKind = Literal["key-rotation", "compaction", "memory-sweep", "rebuild", "rederive"]


class UnauthorizedRequestError(Forbidden):
    """A destructive run whose request no authorized caller registered for it."""


def _run_digest(keyring: KeyRing, kind: OperatorRequestKind, workflow_id: str) -> str:
    return keyring.request_authorization(kind, "", "", "", workflow_id)


async def register_operator_request(pool: AsyncConnectionPool, keyring: KeyRing, kind: OperatorRequestKind,
                                    workflow_id: str) -> None:
    """Registered by the operator's client (the CLI), before the run starts."""
    async with pool.connection() as conn:
        await conn.execute("INSERT INTO operator_requests (run_digest, kind) VALUES (%s, %s) "
                           "ON CONFLICT (run_digest) DO NOTHING", (_run_digest(keyring, kind, workflow_id), kind))


async def check_operator_request(pool: AsyncConnectionPool, keyring: KeyRing, kind: OperatorRequestKind,
                                 workflow_id: str) -> None:
    """Refuse a run nobody registered (raised as a non-retryable `UnauthorizedRequest`)."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT 1 FROM operator_requests WHERE run_digest = %s AND kind = %s",
                                 (_run_digest(keyring, kind, workflow_id), kind))
        found = await cur.fetchone()
    if found is None:
        raise UnauthorizedRequestError(
            f"no operator request is registered for this {kind} run ({workflow_id!r}): a run that does more than its "
            "Schedule acts only when started by agent-memory's own client, which registers it first")
