"""`subject_scope`: the one way in to a subject's rows.

It validates the identifiers, opens the tenant transaction (row-level security by
app.tenant_id), takes the subject's advisory lock and checks the tombstone — by the subject's
keyed digest (all a completed erasure keeps) or by its clear id (a running or legacy erasure) —
and yields a `SubjectScope` (connection, tenant, subject, erased flag).

Modes:

- WRITE: the shared subject lock; an erased subject raises SubjectErasedError. Writers share
  the lock with each other; erasure's tombstone takes it exclusively, so a write either commits
  before the tombstone (and is then erased) or sees the tombstone and is refused.
- READ: the shared subject lock too, held for the whole read, and `erased=True` for an erased
  subject, which readers turn into an empty answer. Holding the lock makes a read atomic with
  respect to erasure: the tombstone waits for the read to finish, so a read either ends before
  the erasure begins or sees its tombstone — it never returns a half-erased subject (the
  deletions run after the tombstone commits, in later transactions). The cost: a read waits
  for a running rebuild of the same subject (exclusive, one transaction; the swap it makes is
  atomic anyway).
- EXCLUSIVE: the exclusive lock (erasure's tombstone, a rebuild); `erased` is reported, not
  raised: a rebuild skips an erased subject, an erasure is idempotent.

A tenant-wide rebuild lists an erased subject by its keyed digest ('erased:…'), so READ and
EXCLUSIVE accept a digest as the subject id (it always finds its tombstone); WRITE never does.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

import psycopg
from psycopg_pool import AsyncConnectionPool

from agent_memory.core.errors import Conflict
from agent_memory.core.models import check_identifier
from agent_memory.store.db import lock_subject, tenant_transaction

DIGEST_PREFIX = "erased:"


class SubjectErasedError(Conflict):
    """The subject has a tombstone: nothing may be written for it any more."""

    def __init__(self, tenant_id: str, subject_id: str):
        super().__init__(f"subject {subject_id!r} of tenant {tenant_id!r} was erased; writes are refused")
        self.tenant_id = tenant_id
        self.subject_id = subject_id


class Mode(enum.Enum):
    READ = "read"
    WRITE = "write"
    EXCLUSIVE = "exclusive"


class DigestSource(Protocol):
    """What the scope needs of a KeyRing: the subject's keyed digest."""

    def subject_digest(self, tenant_id: str, subject_id: str) -> str: ...


@dataclass(frozen=True)
class SubjectScope:
    conn: psycopg.AsyncConnection
    tenant_id: str
    subject_id: str
    erased: bool


def is_subject_digest(value: str) -> bool:
    hexpart = value.removeprefix(DIGEST_PREFIX)
    return value.startswith(DIGEST_PREFIX) and len(hexpart) == 64 and all(c in "0123456789abcdef" for c in hexpart)


def check_subject(subject_id: str, mode: Mode) -> str:
    if mode is not Mode.WRITE and is_subject_digest(subject_id):
        return subject_id
    return check_identifier("subject", subject_id)


async def is_tombstoned(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, digest: str) -> bool:
    """Whether the subject has a tombstone: matched by keyed digest, by clear id, or — for a
    subject listed by its digest — by that digest itself."""
    cur = await conn.execute("SELECT 1 FROM tombstones WHERE tenant_id = %s "
                             "AND (subject_digest = ANY(%s) OR subject_id = %s) LIMIT 1",
                             (tenant_id, [digest, subject_id], subject_id))
    return await cur.fetchone() is not None


async def enter_subject(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, digest: str,
                        mode: Mode) -> SubjectScope:
    """The scope's checks inside a transaction the caller already opened with
    `db.tenant_transaction` (for callers that hold a digest rather than a KeyRing)."""
    check_subject(subject_id, mode)
    await lock_subject(conn, tenant_id, subject_id, exclusive=mode is Mode.EXCLUSIVE)
    erased = await is_tombstoned(conn, tenant_id, subject_id, digest)
    if erased and mode is Mode.WRITE:
        raise SubjectErasedError(tenant_id, subject_id)
    return SubjectScope(conn=conn, tenant_id=tenant_id, subject_id=subject_id, erased=erased)


@asynccontextmanager
async def subject_scope(pool: AsyncConnectionPool, keyring: DigestSource, tenant_id: str, subject_id: str,
                        mode: Mode) -> AsyncIterator[SubjectScope]:
    """One tenant transaction on one subject, locked and tombstone-checked (see the module)."""
    check_identifier("tenant", tenant_id)
    check_subject(subject_id, mode)
    digest = keyring.subject_digest(tenant_id, subject_id)
    async with tenant_transaction(pool, tenant_id) as conn:
        yield await enter_subject(conn, tenant_id, subject_id, digest, mode)
