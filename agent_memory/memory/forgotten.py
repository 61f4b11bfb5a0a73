"""Whether a forgotten or swept memory may take a new value: the write path's hold-back."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import psycopg


@dataclass(frozen=True)
class ForgottenState:
    """A memory the operator forgot (in its grace period) or the sweeper removed (tombstone)."""

    state: str  # forgotten | swept
    version: int  # the forget's event version
    forgotten_at: datetime


async def forgotten_state(conn: psycopg.AsyncConnection, tenant_id: str, memory_id: uuid.UUID) -> ForgottenState | None:
    cur = await conn.execute("SELECT state, version, forgotten_at FROM forgotten_memories "
                             "WHERE tenant_id = %s AND memory_id = %s", (tenant_id, memory_id))
    row = await cur.fetchone()
    return ForgottenState(row[0], int(row[1]), row[2]) if row else None


def writable_version(forgotten: ForgottenState | None, expected_version: int, observed_at: datetime) -> int | None:
    """The version a new value of a forgotten or swept memory must expect, or None when it must
    be held back: a forgotten memory takes no new value until restored or swept, and nothing
    observed before its forget (a consolidation of an old session) may bring a swept one back.
    Said again after the forget, a swept memory starts a new life after its tombstone."""
    if forgotten is None:
        return expected_version
    if forgotten.state == "forgotten" or observed_at <= forgotten.forgotten_at:
        return None
    return expected_version or forgotten.version
