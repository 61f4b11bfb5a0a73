"""How often and how recently each memory entered a context or a recall result: usage telemetry
for the recall score's access term (agent_memory.recall.recall_policy), never memory.

Recording stays off a read's latency. The client answers the read, then a background task adds
the memory ids it served to the subject's Redis hash `am:{tenant}:{subject}:access` (per memory:
a count, the first and the last time, in one script call), registers the hash in the subject's
key registry (agent_memory.store.redis_keys: erasure deletes it, the residue check counts it) and
notes the subject in the pending set `am:access:pending`. An `AccessRecorder` in each process
that serves reads moves the pending hashes to Postgres (`memory_access`, migration 052) every
`FLUSH_SECONDS` and when the process closes:

- each hash is taken and deleted in one script call, so two processes flushing at once never
  add one access twice;
- its counts are written under the subject's shared lock (a WRITE `subject_scope`): an erasure's
  tombstone either waits for the write, which its deletion then removes, or is seen and the
  counts are dropped, so a flush never writes for an erased subject after its erasure;
- a write that fails puts the counts back into Redis for the next flush.

What is lost in a crash: the counts a process had taken and not yet written (one batch), and
the increments of reads whose background task had not run. Access counts steer a bounded boost
of the ranking; they are not worth a write on the read path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg
from psycopg_pool import AsyncConnectionPool
from redis.asyncio import Redis

from agent_memory.store.db import tenant_transaction
from agent_memory.store.redis_keys import delete_subject_keys, redis_prefix, registry_key
from agent_memory.store.scope import DigestSource, Mode, SubjectErasedError, subject_scope

PENDING_KEY = "am:access:pending"  # three parts: not a subject key (redis_keys' backfill skips it)
ACCESS_SUFFIX = "access"
# As long as working memory lives (agent_memory.memory.evidence.WORKING_MEMORY_TTL_SECONDS): the
# registry's expiry is renewed with each write, so it never lapses before the other members'.
ACCESS_TTL_SECONDS = 4 * 3600
FLUSH_SECONDS = 30.0
FLUSH_BATCH = 200  # subjects taken per step of a flush
FLUSH_ROUNDS = 50

log = logging.getLogger("agent_memory.access")


@dataclass(frozen=True)
class AccessStats:
    count: int
    first_at: datetime
    last_at: datetime


def access_key(tenant_id: str, subject_id: str) -> str:
    return f"{redis_prefix(tenant_id, subject_id)}{ACCESS_SUFFIX}"


def pending_member(tenant_id: str, subject_id: str) -> str:
    """The pending set's member for a subject (identifiers hold no ':')."""
    return f"{tenant_id}:{subject_id}"


# KEYS: the hash, the subject's registry, the pending set; ARGV: now (ms), ttl, pending member,
# then the memory ids. A memory served twice in one read counts once.
_RECORD = """
local now = tonumber(ARGV[1])
local seen = {}
for i = 4, #ARGV do
    local m = ARGV[i]
    if not seen[m] then
        seen[m] = true
        redis.call('HINCRBY', KEYS[1], 'n:' .. m, 1)
        redis.call('HSETNX', KEYS[1], 'f:' .. m, now)
        local last = tonumber(redis.call('HGET', KEYS[1], 'l:' .. m) or '0')
        if last < now then redis.call('HSET', KEYS[1], 'l:' .. m, now) end
    end
end
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('SADD', KEYS[2], KEYS[1])
redis.call('EXPIRE', KEYS[2], ARGV[2])
redis.call('SADD', KEYS[3], ARGV[3])
return 1
"""
# KEYS: the hash, the pending set; ARGV: the pending member. Takes the counts and forgets them.
_TAKE = """
local fields = redis.call('HGETALL', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
return fields
"""


async def record_access(redis: Redis, tenant_id: str, subject_id: str, memory_ids: Iterable[str], *,
                        at: datetime | None = None) -> int:
    """Count one access of each memory (at `at`, default now); returns how many were counted."""
    ids = sorted(set(memory_ids))
    if not ids:
        return 0
    now_ms = int((at or datetime.now(UTC)).timestamp() * 1000)
    await redis.eval(_RECORD, 3, access_key(tenant_id, subject_id), registry_key(tenant_id, subject_id),
                     PENDING_KEY, now_ms, ACCESS_TTL_SECONDS, pending_member(tenant_id, subject_id), *ids)
    return len(ids)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _parse(fields: list[str]) -> dict[str, tuple[int, int, int]]:
    """HGETALL's flat list → memory id → (count, first ms, last ms); ids that are not UUIDs are dropped."""
    raw = dict(zip(fields[::2], fields[1::2], strict=True))
    stats: dict[str, tuple[int, int, int]] = {}
    for name, value in raw.items():
        tag, _, memory_id = name.partition(":")
        if tag != "n":
            continue
        try:
            uuid.UUID(memory_id)
        except ValueError:
            continue
        last = int(raw.get(f"l:{memory_id}", 0))
        stats[memory_id] = (int(value), int(raw.get(f"f:{memory_id}", last)), last)
    return stats


_UPSERT = """
INSERT INTO memory_access AS a (tenant_id, subject_id, memory_id, access_count, first_accessed_at, last_accessed_at)
SELECT %(tenant)s, %(subject)s, m, n, to_timestamp(f / 1000.0), to_timestamp(l / 1000.0)
  FROM unnest(%(ids)s::uuid[], %(counts)s::bigint[], %(firsts)s::bigint[], %(lasts)s::bigint[]) AS i(m, n, f, l)
ON CONFLICT (tenant_id, subject_id, memory_id) DO UPDATE
   SET access_count = a.access_count + EXCLUDED.access_count,
       first_accessed_at = least(a.first_accessed_at, EXCLUDED.first_accessed_at),
       last_accessed_at = greatest(a.last_accessed_at, EXCLUDED.last_accessed_at)
"""


async def _write(pool: AsyncConnectionPool, keyring: DigestSource, tenant_id: str, subject_id: str,
                 stats: dict[str, tuple[int, int, int]]) -> int | None:
    """Add the counts under the subject's shared lock; an erased subject's are dropped (None)."""
    ids = sorted(stats)
    try:
        async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.WRITE) as scope:
            # Telemetry: a crash of the database may lose the last fraction of a second of it.
            await scope.conn.execute("SET LOCAL synchronous_commit = off")
            await scope.conn.execute(_UPSERT, {
                "tenant": tenant_id, "subject": subject_id, "ids": ids, "counts": [stats[m][0] for m in ids],
                "firsts": [stats[m][1] for m in ids], "lasts": [stats[m][2] for m in ids]})
    except SubjectErasedError:
        return None
    return len(ids)


async def _restore(redis: Redis, tenant_id: str, subject_id: str, stats: dict[str, tuple[int, int, int]]) -> None:
    """Put taken counts back (a write failed): added to whatever was recorded meanwhile."""
    key = access_key(tenant_id, subject_id)
    async with redis.pipeline(transaction=True) as pipe:
        for memory_id, (count, first, last) in stats.items():
            pipe.hincrby(key, f"n:{memory_id}", count)
            pipe.hsetnx(key, f"f:{memory_id}", first)
            pipe.hsetnx(key, f"l:{memory_id}", last)
        pipe.expire(key, ACCESS_TTL_SECONDS)
        pipe.sadd(registry_key(tenant_id, subject_id), key)
        pipe.expire(registry_key(tenant_id, subject_id), ACCESS_TTL_SECONDS)
        pipe.sadd(PENDING_KEY, pending_member(tenant_id, subject_id))
        await pipe.execute()


async def flush_access(pool: AsyncConnectionPool, redis: Redis, keyring: DigestSource) -> int:
    """Move every pending subject's counts from Redis to Postgres; returns the rows written."""
    written = 0
    for _ in range(FLUSH_ROUNDS):  # what reads keep adding meanwhile waits for the next flush
        members = await redis.srandmember(PENDING_KEY, FLUSH_BATCH)
        if not members:
            break
        for raw in members:
            member = _text(raw)
            tenant_id, _, subject_id = member.partition(":")
            fields = await redis.eval(_TAKE, 2, access_key(tenant_id, subject_id), PENDING_KEY, member)
            stats = _parse([_text(f) for f in fields])
            if not stats:
                continue
            try:
                rows = await _write(pool, keyring, tenant_id, subject_id, stats)
            except Exception:
                await _restore(redis, tenant_id, subject_id, stats)
                raise
            if rows is None:  # recorded as its erasure ran: nothing of the subject may stay in Redis
                await delete_subject_keys(redis, tenant_id, subject_id)
            else:
                written += rows
    return written


async def read_access(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                      memory_ids: Iterable[str]) -> dict[str, AccessStats]:
    """The flushed access statistics of the named memories (none for a memory never recalled)."""
    ids = sorted(set(memory_ids))
    if not ids:
        return {}
    cur = await conn.execute(
        "SELECT memory_id::text, access_count, first_accessed_at, last_accessed_at FROM memory_access "
        "WHERE tenant_id = %s AND subject_id = %s AND memory_id = ANY(%s::uuid[])", (tenant_id, subject_id, ids))
    return {m: AccessStats(count=int(n), first_at=first, last_at=last) for m, n, first, last in await cur.fetchall()}


async def delete_memory_access(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                               memory_ids: Iterable[uuid.UUID | str]) -> int:
    """Drop the access rows of forgotten or swept memories, in the caller's transaction."""
    ids = [str(m) for m in memory_ids]
    if not ids:
        return 0
    cur = await conn.execute("DELETE FROM memory_access WHERE tenant_id = %s AND subject_id = %s "
                             "AND memory_id = ANY(%s::uuid[])", (tenant_id, subject_id, ids))
    return cur.rowcount


async def forget_pending(redis: Redis, tenant_id: str, subject_id: str) -> None:
    """Erasure: the subject leaves the pending set (its hash goes with its registered keys)."""
    await redis.srem(PENDING_KEY, pending_member(tenant_id, subject_id))


async def pending_residue(redis: Redis, tenant_id: str, subject_id: str) -> int:
    """1 while the pending set still names the subject (erasure's residue check), else 0."""
    return int(await redis.sismember(PENDING_KEY, pending_member(tenant_id, subject_id)))


async def access_rows(pool: AsyncConnectionPool, tenant_id: str, subject_id: str) -> int:
    """The subject's flushed access rows."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute("SELECT count(*) FROM memory_access WHERE tenant_id = %s AND subject_id = %s",
                                 (tenant_id, subject_id))
        row = await cur.fetchone()
    return int(row[0]) if row else 0


class AccessRecorder:
    """Records reads' accesses in the background and flushes them periodically (see the module).
    One per process's Services; `close` stops the flusher after a last flush."""

    def __init__(self, pool: AsyncConnectionPool, redis: Redis, keyring: DigestSource, *,
                 flush_seconds: float | None = FLUSH_SECONDS):
        """flush_seconds: the periodic flush's interval (None: only `flush` and `close` flush)."""
        self.pool, self.redis, self.keyring = pool, redis, keyring
        self.flush_seconds = flush_seconds
        self._tasks: set[asyncio.Task[None]] = set()
        self._flusher: asyncio.Task[None] | None = None
        self._recorded = False  # a process that recorded nothing leaves the flush to others at close

    def record(self, tenant_id: str, subject_id: str, memory_ids: Iterable[str]) -> None:
        """Count one access of each memory, without waiting: the caller's read has answered."""
        ids = list(memory_ids)
        if not ids:
            return
        self._recorded = True
        task = asyncio.get_running_loop().create_task(self._record(tenant_id, subject_id, ids))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if self.flush_seconds is not None and (self._flusher is None or self._flusher.done()):
            self._flusher = asyncio.get_running_loop().create_task(self._flush_periodically())

    async def _record(self, tenant_id: str, subject_id: str, memory_ids: list[str]) -> None:
        try:
            await record_access(self.redis, tenant_id, subject_id, memory_ids)
        except Exception as exc:  # telemetry: a read never fails for it
            log.warning("access not recorded tenant=%s error=%s", tenant_id, type(exc).__name__)

    async def settle(self) -> None:
        """Wait for the recordings under way (they are in Redis afterwards)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def flush(self) -> int:
        """Record what is under way, then move every pending count to Postgres."""
        await self.settle()
        return await flush_access(self.pool, self.redis, self.keyring)

    async def _flush_periodically(self) -> None:
        while self.flush_seconds is not None:
            await asyncio.sleep(self.flush_seconds)
            try:
                await self.flush()
            except Exception as exc:
                log.warning("access flush failed error=%s", type(exc).__name__)

    async def stop(self) -> None:
        """Stop the periodic flusher (a later recording starts it again, unless flush_seconds is None)."""
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            self._flusher = None

    async def close(self) -> None:
        """Stop the flusher after a last flush (what fails to flush stays pending in Redis)."""
        await self.stop()
        if not self._recorded:
            return
        try:
            await self.flush()
        except Exception as exc:
            log.warning("access flush at close failed error=%s", type(exc).__name__)
