"""Key-encryption keys in use: which one wraps new subject keys, loading and creating subject
keys, and rotation (re-wrap every live subject key under a new KEK, then destroy the old KEK).

The database records KEK ids and states (`key_encryption_keys`); the bytes stay in the key
provider. A process refuses to start when the database names a KEK its provider lacks, instead
of wrapping new keys under a stray one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import datetime
from typing import Literal

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from agent_memory.core.run_inputs import RunInput
from agent_memory.security.crypto import (
    LEGACY_KEK_ID,
    KeyProvider,
    KeyUnavailableError,
    SubjectKey,
    decrypt_reason,
    encrypt_reason,
    identifier_check_value,
    kek_check_value,
    kek_matches,
    request_authorization,
    rewrap_check,
    rewrap_proof,
    subject_digest,
    unwrap_subject_key,
    wrap_subject_key,
)
from agent_memory.store.db import fetch_one

# Arbitrary constants: serialise first registration and rotation across processes.
KEYRING_LOCK_ID = 7_331_004_212
ROTATION_LOCK_ID = 7_331_004_213
REWRAP_BATCH = 500
# Rotation's statements wait this long at most for a lock, and run this long at most.
ROTATION_LOCK_TIMEOUT = "30s"
ROTATION_STATEMENT_TIMEOUT = "5min"


class KeyRotationInput(RunInput):
    kind: Literal["key-rotation"] = "key-rotation"
    # False: rotate only when a subject key was shredded since the last rotation (the Schedule).
    force: bool = False

    def beyond_schedule(self) -> bool:
        return self.force


class RotationResult(BaseModel):
    new_kek_id: str
    rewrapped_subject_keys: int
    reencrypted_reasons: int
    destroyed_kek_ids: list[str]
    shreds_made_irreversible: int
    elapsed_seconds: float
    rotated: bool = True  # False: nothing to do (no shred since the last rotation, not forced)


class KeyRing:
    """The key provider plus what the database says about its keys."""

    def __init__(self, provider: KeyProvider):
        self.provider = provider
        self._identifier: bytes | None = None

    def kek(self, kek_id: str) -> bytes:
        key = self.provider.kek(kek_id)
        if key is None:
            raise KeyUnavailableError(f"key-encryption key {kek_id!r} is not in the key provider")
        return key

    def identifier_key(self) -> bytes:
        if self._identifier is None:
            key = self.provider.identifier_key()
            if key is None:
                raise KeyUnavailableError("the identifier key is missing from the key provider: restore it "
                                          "(identifier.key / AGENT_MEMORY_IDENTIFIER_KEY); without it erased "
                                          "subjects could come back")
            self._identifier = key
        return self._identifier

    def subject_digest(self, tenant_id: str, subject_id: str) -> str:
        return subject_digest(self.identifier_key(), tenant_id, subject_id)

    def request_authorization(self, kind: str, tenant_id: str, subject_id: str, request_id: str,
                              workflow_id: str) -> str:
        return request_authorization(self.identifier_key(), kind, tenant_id, subject_id, request_id, workflow_id)

    async def ensure_ready(self, pool: AsyncConnectionPool) -> str:
        """Register a first KEK when there is none; refuse when the database needs one we lack.
        Returns the active KEK id."""
        async with pool.connection() as conn:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (KEYRING_LOCK_ID,))
                cur = await conn.execute("SELECT kek_id, state, check_nonce, check_ciphertext "
                                         "FROM key_encryption_keys WHERE state <> 'destroyed'")
                rows = await cur.fetchall()
                if not rows:
                    kek_id = await self._register_first(conn)
                    rows = [(kek_id, "active", None, None)]
                for kek_id, state, nonce, ciphertext in rows:
                    key = self.provider.kek(kek_id)
                    if key is None and state == "retiring" and not await self._still_wraps(conn, kek_id):
                        continue  # a rotation died after destroying it: the next rotation records that
                    if key is None:
                        raise KeyUnavailableError(
                            f"the database's subject keys are wrapped by key-encryption key {kek_id!r}, which this "
                            "process's key provider does not hold (AGENT_MEMORY_KEY_DIR / AGENT_MEMORY_MASTER_KEY); "
                            "refusing to start rather than wrap new keys under another key")
                    if nonce is not None and not kek_matches(key, bytes(nonce), bytes(ciphertext)):
                        raise KeyUnavailableError(
                            f"key-encryption key {kek_id!r} in the key provider is not the one the database "
                            "registered; refusing to start")
                await self._check_identifier_key(conn)
                active: str = next(kek_id for kek_id, state, *_ in rows if state == "active")
                return active

    async def _check_identifier_key(self, conn: psycopg.AsyncConnection) -> None:
        """Created once, with the first start; afterwards it must be the registered one, or
        tombstones (keyed digests) would stop matching and erased subjects could come back."""
        cur = await conn.execute("SELECT check_value FROM identifier_key_check")
        row = await cur.fetchone()
        key = self.provider.identifier_key(create=row is None)
        if key is None:
            raise KeyUnavailableError("the identifier key is missing from the key provider, but the database has "
                                      "digests made with it: restore identifier.key (or AGENT_MEMORY_IDENTIFIER_KEY); "
                                      "refusing to start, or erased subjects could come back")
        if row is None:
            await conn.execute("INSERT INTO identifier_key_check (check_value) VALUES (%s)",
                               (identifier_check_value(key),))
        elif row[0] != identifier_check_value(key):
            raise KeyUnavailableError("the identifier key in the key provider is not the one the database registered; "
                                      "refusing to start, or erased subjects could come back")
        self._identifier = key

    async def _still_wraps(self, conn: psycopg.AsyncConnection, kek_id: str) -> bool:
        """Whether any tenant's subject key or erasure reason is wrapped under the KEK (migration 031)."""
        cur = await conn.execute("SELECT public.kek_still_wraps(%s)", (kek_id,))
        return bool((await fetch_one(cur))[0])

    async def _register_first(self, conn: psycopg.AsyncConnection) -> str:
        # Subject keys wrapped before KEK ids existed need the old master key as 'legacy'.
        if await self._still_wraps(conn, LEGACY_KEK_ID):
            kek_id = LEGACY_KEK_ID
            self.kek(kek_id)  # raises if the old master key is missing
        elif getattr(self.provider, "newest", None):
            kek_id = self.provider.newest  # type: ignore[attr-defined]
        else:
            kek_id = self.provider.create_kek()
        nonce, check = kek_check_value(self.kek(kek_id))
        await _bounded(conn)
        await conn.execute("SELECT public.kek_register_first(%s, %s, %s)", (kek_id, nonce, check))
        return kek_id

    async def active_kek_for_update(self, conn: psycopg.AsyncConnection) -> tuple[str, bytes]:
        """The KEK that wraps new keys, share-locked until the transaction ends: a rotation
        cannot retire it between our read and our insert."""
        cur = await conn.execute("SELECT kek_id FROM key_encryption_keys WHERE state = 'active' FOR SHARE")
        row = await cur.fetchone()
        if row is None:
            raise KeyUnavailableError("no active key-encryption key is registered: run `agent-memory migrate` "
                                      "and start a worker once")
        return row[0], self.kek(row[0])

    async def subject_key(self, conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                          *, create: bool) -> SubjectKey | None:
        """The subject's data key (unwrapped), created under the active KEK when asked."""
        cur = await conn.execute("SELECT kek_id, wrapped_key, wrap_nonce FROM subject_keys "
                                 "WHERE tenant_id = %s AND subject_id = %s", (tenant_id, subject_id))
        row = await cur.fetchone()
        if row is None and create:
            kek_id, kek = await self.active_kek_for_update(conn)
            key = os.urandom(32)
            wrapped, nonce = wrap_subject_key(kek, tenant_id, subject_id, key)
            await conn.execute(
                "INSERT INTO subject_keys (tenant_id, subject_id, wrapped_key, wrap_nonce, kek_id, rewrap_check) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (tenant_id, subject_id) DO NOTHING",
                (tenant_id, subject_id, wrapped, nonce, kek_id, rewrap_check(key, tenant_id, subject_id)))
            cur = await conn.execute("SELECT kek_id, wrapped_key, wrap_nonce FROM subject_keys "
                                     "WHERE tenant_id = %s AND subject_id = %s", (tenant_id, subject_id))
            row = await cur.fetchone()
        if row is None:
            return None
        kek_id, wrapped, nonce = row
        return unwrap_subject_key(self.kek(kek_id), tenant_id, subject_id, bytes(wrapped), bytes(nonce))

    async def encrypt_reason(self, conn: psycopg.AsyncConnection, tenant_id: str, request_id: str,
                             reason: str) -> tuple[bytes, bytes, str]:
        kek_id, kek = await self.active_kek_for_update(conn)
        ciphertext, nonce = encrypt_reason(kek, tenant_id, request_id, reason)
        return ciphertext, nonce, kek_id

    # --- rotation ------------------------------------------------------------------------------

    async def rotate(self, pool: AsyncConnectionPool, *, force: bool = True) -> RotationResult:
        """Re-wrap every live subject key and erasure reason under a new KEK, then destroy the
        retired KEKs. Safe to re-run after a crash: it resumes with the keys not yet re-wrapped.
        With force=False it rotates only when a subject key was shredded since the last one."""
        started = time.monotonic()
        async with pool.connection() as lock_conn:
            await lock_conn.execute("SELECT pg_advisory_lock(%s)", (ROTATION_LOCK_ID,))
            await lock_conn.commit()
            try:
                return await self._rotate_locked(pool, force=force, started=started)
            finally:
                await lock_conn.execute("SELECT pg_advisory_unlock(%s)", (ROTATION_LOCK_ID,))
                await lock_conn.commit()

    async def _rotate_locked(self, pool: AsyncConnectionPool, *, force: bool, started: float) -> RotationResult:
        async with pool.connection() as conn:
            cur = await conn.execute("SELECT kek_id, shredded_keys FROM key_encryption_keys WHERE state = 'active'")
            active = await cur.fetchone()
            cur = await conn.execute("SELECT count(*) FROM key_encryption_keys WHERE state = 'retiring'")
            resuming = (await fetch_one(cur))[0] > 0
            await conn.commit()
        if active is None:
            raise KeyUnavailableError("no active key-encryption key is registered: start a worker once first")
        if not (force or resuming or active[1] > 0):
            return RotationResult(new_kek_id=active[0], rewrapped_subject_keys=0, reencrypted_reasons=0,
                                  destroyed_kek_ids=[], shreds_made_irreversible=0,
                                  elapsed_seconds=round(time.monotonic() - started, 3), rotated=False)
        if resuming:
            new_id = active[0]  # a crashed rotation already switched; finish its re-wrap
        else:
            new_id = self.provider.create_kek()
            nonce, check = kek_check_value(self.kek(new_id))
            async with pool.connection() as conn, conn.transaction():
                await _bounded(conn)
                # Waits (bounded) for transactions that share-locked the old KEK to wrap a key under it.
                await conn.execute("SELECT public.kek_begin_rotation(%s, %s, %s)", (new_id, nonce, check))
        new_kek = self.kek(new_id)
        rewrapped = await self._rewrap(pool, new_id, new_kek)
        reasons = await self._reencrypt_reasons(pool, new_id, new_kek)
        destroyed, irreversible = await self._destroy_retired(pool)
        return RotationResult(new_kek_id=new_id, rewrapped_subject_keys=rewrapped, reencrypted_reasons=reasons,
                              destroyed_kek_ids=destroyed, shreds_made_irreversible=irreversible,
                              elapsed_seconds=round(time.monotonic() - started, 3))

    async def _rewrap(self, pool: AsyncConnectionPool, new_id: str, new_kek: bytes) -> int:
        def reseal(kek: bytes, tenant_id: str, subject_id: str, wrapped: bytes, nonce: bytes) -> tuple[bytes, ...]:
            key = unwrap_subject_key(kek, tenant_id, subject_id, wrapped, nonce)
            return (*wrap_subject_key(new_kek, tenant_id, subject_id, key.key),
                    rewrap_proof(key.key, tenant_id, subject_id))

        return await self._reseal(pool, "kek_rewrap_candidates", "kek_rewrap_subject_key", new_id, reseal)

    async def _reencrypt_reasons(self, pool: AsyncConnectionPool, new_id: str, new_kek: bytes) -> int:
        def reseal(kek: bytes, tenant_id: str, request_id: str, ciphertext: bytes, nonce: bytes) -> tuple[bytes, ...]:
            reason = decrypt_reason(kek, tenant_id, request_id, ciphertext, nonce)
            return encrypt_reason(new_kek, tenant_id, request_id, reason)

        return await self._reseal(pool, "kek_reencrypt_candidates", "kek_reencrypt_reason", new_id, reseal)

    async def _reseal(self, pool: AsyncConnectionPool, candidates: str, move: str, new_id: str,
                      reseal: Callable[[bytes, str, str, bytes, bytes], tuple[bytes, ...]]) -> int:
        """Re-encrypt, in batches of one transaction each, every row (all tenants) still under a
        retiring KEK, through the rotator's functions (migration 031): `candidates` lists them in
        key order, `move` swaps one row's ciphertext if it is still the one read. `reseal` gives
        the new ciphertext, its nonce and what else `move` takes. A row changed meanwhile (an
        erasure shredded it) is left; the retired KEK then stays until the next rotation finishes it."""
        list_rows = sql.SQL("SELECT * FROM public.{}(%s, %s, %s)").format(sql.Identifier(candidates))
        after = ("", "")
        total = 0
        while True:
            async with pool.connection() as conn, conn.transaction():
                await _bounded(conn)
                cur = await conn.execute(list_rows, (*after, REWRAP_BATCH))
                rows = await cur.fetchall()
                for tenant_id, row_id, kek_id, ciphertext, nonce in rows:
                    sealed = reseal(self.kek(kek_id), tenant_id, row_id, bytes(ciphertext), bytes(nonce))
                    params = (tenant_id, row_id, kek_id, new_id, ciphertext, *sealed)
                    move_row = sql.SQL("SELECT public.{}({})").format(
                        sql.Identifier(move), sql.SQL(", ").join(sql.Placeholder() * len(params)))
                    cur = await conn.execute(move_row, params)
                    total += bool((await fetch_one(cur))[0])
            if len(rows) < REWRAP_BATCH:
                return total
            after = (rows[-1][0], rows[-1][1])

    async def _destroy_retired(self, pool: AsyncConnectionPool) -> tuple[list[str], int]:
        """Destroy each retiring KEK nothing is wrapped under any more: its key file first (and
        checked gone), then the database's record, which refuses while rows reference it."""
        destroyed: list[str] = []
        irreversible = 0
        async with pool.connection() as conn:
            cur = await conn.execute("SELECT kek_id, shredded_keys FROM key_encryption_keys WHERE state = 'retiring'")
            retiring = await cur.fetchall()
            await conn.commit()
        for kek_id, shredded in retiring:
            async with pool.connection() as conn, conn.transaction():
                await _bounded(conn)
                if await self._still_wraps(conn, kek_id):  # a row the re-wrap skipped: the next run finishes it
                    continue
                self.provider.destroy_kek(kek_id)
                if self.provider.kek(kek_id) is not None:
                    raise KeyUnavailableError(f"key-encryption key {kek_id!r} is still in the key provider after "
                                              "its destruction; not recording it as destroyed")
                await conn.execute("SELECT public.kek_mark_destroyed(%s)", (kek_id,))
            destroyed.append(kek_id)
            irreversible += shredded
        return destroyed, irreversible


async def _bounded(conn: psycopg.AsyncConnection) -> None:
    """Rotation's statements, in the caller's transaction: bounded waits for locks and time."""
    await conn.execute("SELECT set_config('lock_timeout', %s, true), set_config('statement_timeout', %s, true)",
                       (ROTATION_LOCK_TIMEOUT, ROTATION_STATEMENT_TIMEOUT))


class KekStatus(BaseModel):
    kek_id: str
    state: str
    shredded_keys: int
    created_at: datetime
    retired_at: datetime | None
    destroyed_at: datetime | None
    destroyed_by: str | None


async def list_keks(pool: AsyncConnectionPool) -> list[KekStatus]:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT kek_id, state, shredded_keys, created_at, retired_at, destroyed_at, "
                                 "destroyed_by FROM key_encryption_keys ORDER BY created_at")
        rows = await cur.fetchall()
        await conn.commit()
    return [KekStatus(kek_id=r[0], state=r[1], shredded_keys=r[2], created_at=r[3], retired_at=r[4],
                      destroyed_at=r[5], destroyed_by=r[6]) for r in rows]
