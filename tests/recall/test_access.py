"""Access statistics: every memory a context, prompt or recall read serves is counted in Redis
off the read's latency, flushed to Postgres, erased with its subject and dropped with a forgotten
memory; the recall score boosts what was recalled often and recently, within a bound."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from agent_memory.core.models import Message, Session
from agent_memory.lifecycle.erasure import scan_residue
from agent_memory.recall.recall_policy import DEFAULT_POLICY, access_activation
from agent_memory.store.access import (
    PENDING_KEY,
    AccessRecorder,
    access_key,
    access_rows,
    pending_member,
    record_access,
)
from agent_memory.store.db import tenant_transaction
from agent_memory.store.redis_keys import subject_keys
from tests.sessions import commit_notes

AT = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
TURNS = ("I repaired the canoe at the lake.", "We talked about the garden.", "The bakery moved downtown.",
         "Bo sold the violin last spring.")


async def _commit(client, services, tenant: str, subject: str, sessions: int = 2) -> None:
    """Sessions of the same turns at the same time: their notes match a query equally well."""
    for n in range(1, sessions + 1):
        session_id = f"{subject}-s{n}"
        await commit_notes(client, services, tenant, subject, Session(session_id=session_id, started_at=AT, messages=[
            Message(message_id=f"{session_id}:{i}", turn_index=i, role="user", speaker="Lin", content=text,
                    created_at=AT) for i, text in enumerate(TURNS, 1)]), AT)


async def _counts(services, tenant: str, subject: str) -> dict[str, int]:
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT memory_id::text, access_count FROM memory_access "
                                 "WHERE tenant_id = %s AND subject_id = %s", (tenant, subject))
        return dict(await cur.fetchall())


def _canoe_notes(context) -> list[str]:
    return [i.memory_id for i in context.episodic_items if "canoe" in i.content]


async def test_reads_are_counted_in_redis_and_the_flush_lands_them(client, services, tenant):
    subject = "lin-reads"
    await _commit(client, services, tenant, subject)
    context = await client.context(tenant, subject, "the canoe at the lake")
    served = [i.memory_id for i in context.items]
    assert len(_canoe_notes(context)) == 2
    await services.access.settle()
    key = access_key(tenant, subject)
    # In Redis, registered with the subject's keys (so erasure finds it) and pending a flush.
    held = await services.redis.hgetall(key)
    assert {f"n:{m}": "1" for m in served}.items() <= held.items()
    assert key in await subject_keys(services.redis, tenant, subject)
    assert await services.redis.sismember(PENDING_KEY, pending_member(tenant, subject))
    assert await _counts(services, tenant, subject) == {}  # nothing written on the read's path

    assert await services.access.flush() >= len(served)
    assert await _counts(services, tenant, subject) == dict.fromkeys(served, 1)
    assert not await services.redis.exists(key)
    assert not await services.redis.sismember(PENDING_KEY, pending_member(tenant, subject))

    # A prompt counts what it cites; the flush adds to the rows.
    built = await client.build_prompt(tenant, subject, "live", "the canoe at the lake")
    await services.access.flush()
    counts = await _counts(services, tenant, subject)
    assert built.cited_item_ids and all(counts[m] == 1 + (m in served) for m in built.cited_item_ids)
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT bool_and(first_accessed_at <= last_accessed_at AND last_accessed_at <= now()) "
                                 "FROM memory_access WHERE tenant_id = %s AND subject_id = %s", (tenant, subject))
        assert (await cur.fetchone())[0] is True


async def test_the_periodic_flush_lands_counts_without_being_asked(client, services, tenant):
    subject = "lin-periodic"
    await _commit(client, services, tenant, subject, sessions=1)
    recorder = AccessRecorder(services.pool, services.redis, services.keyring, flush_seconds=0.2)
    try:
        recorder.record(tenant, subject, [i.memory_id for i in
                                          (await client.context(tenant, subject, "the canoe at the lake")).items])
        for _ in range(100):
            if await access_rows(services.pool, tenant, subject):
                break
            await asyncio.sleep(0.05)
        # Counted once by this recorder and once by the client's own: both land, neither twice.
        await services.access.flush()
        assert set((await _counts(services, tenant, subject)).values()) == {2}
    finally:
        await recorder.close()


async def test_the_frequently_recalled_of_two_equal_memories_ranks_first(client, services, tenant):
    subject = "lin-ranks"
    await _commit(client, services, tenant, subject)
    as_of = AT + timedelta(days=1)
    off = DEFAULT_POLICY.model_copy(update={"access_weight": 0.0})
    query = "the canoe at the lake"
    before = await client.context(tenant, subject, query, as_of=as_of)
    first, second = _canoe_notes(before)
    # The later-listed note is recalled three times in the morning (before the as-of time).
    for hour in (1, 2, 3):
        await record_access(services.redis, tenant, subject, [second], at=AT + timedelta(hours=hour))
    await services.access.flush()
    assert (await _counts(services, tenant, subject))[second] >= 3

    boosted = await client.context(tenant, subject, query, as_of=as_of)
    assert _canoe_notes(boosted) == [second, first]
    top = boosted.episodic_items[0]
    plain = next(i for i in before.episodic_items if i.memory_id == second)
    assert plain.score < top.score <= plain.score * (1 + DEFAULT_POLICY.access_weight)

    # Off: exactly the order and scores of a store without any access recorded.
    unboosted = await client.context(tenant, subject, query, as_of=as_of, policy=off)
    assert [(i.memory_id, i.score) for i in unboosted.items] == [(i.memory_id, i.score) for i in before.items]


async def test_erasure_removes_the_access_counts_and_its_residue_check_counts_them(
        client, services, tenant, running_worker):
    subject = "lin-erased"
    await _commit(client, services, tenant, subject, sessions=1)
    await client.context(tenant, subject, "the canoe at the lake")
    await services.access.flush()
    flushed = await access_rows(services.pool, tenant, subject)
    before = await scan_residue(services.pool, services.redis, tenant, subject)
    await client.context(tenant, subject, "the garden")  # pending in Redis, not flushed
    await services.access.settle()
    residue = await scan_residue(services.pool, services.redis, tenant, subject)
    # The flushed rows are counted with the operations; the pending hash and the pending set's
    # member with working memory.
    assert flushed > 0 and residue["operations"] >= flushed
    assert residue["working_memory"] == before["working_memory"] + 2

    async with running_worker():
        receipt = await client.admin.erasure_receipt(await client.admin.erase(tenant, subject, reason="user request"))
    assert receipt.residue_total == 0 and receipt.removed["memory_access"] == flushed
    assert await access_rows(services.pool, tenant, subject) == 0
    assert not await services.redis.exists(access_key(tenant, subject))
    assert not await services.redis.sismember(PENDING_KEY, pending_member(tenant, subject))
    # A count taken before the erasure and flushed after it is dropped, not written back.
    await record_access(services.redis, tenant, subject, ["00000000-0000-4000-8000-000000000001"])
    await services.access.flush()
    assert await access_rows(services.pool, tenant, subject) == 0
    assert not any((await scan_residue(services.pool, services.redis, tenant, subject)).values())


async def test_forgetting_a_memory_drops_its_access_row(client, services, tenant):
    subject = "lin-forgets"
    await _commit(client, services, tenant, subject, sessions=1)
    context = await client.context(tenant, subject, "the canoe at the lake and the garden")
    [note] = _canoe_notes(context)
    await services.access.flush()
    assert note in await _counts(services, tenant, subject) and len(context.items) > 1
    await client.forget(tenant, subject, note, reason="asked to")
    counts = await _counts(services, tenant, subject)
    assert note not in counts and counts  # the other memories keep theirs


def test_activation_is_zero_without_recalls_bounded_and_grows_with_frequency_and_recency():
    at = datetime(2025, 1, 1, tzinfo=UTC)
    day = timedelta(days=1)

    def activation(count: int, first_days: float, last_days: float) -> float:
        return access_activation(count, at - first_days * day, at - last_days * day, at, 0.5)

    assert activation(0, 1, 1) == 0.0
    assert DEFAULT_POLICY.access_factor(0, None, None, at) == 1.0
    assert activation(1, 1, 1) < activation(5, 30, 1) < activation(20, 30, 1) < 1.0  # more often
    assert activation(1, 30, 30) < activation(1, 7, 7) < activation(1, 1, 1)  # more recently
    assert activation(3, 0, 0) == activation(3, 0, 0) > 0.99  # deterministic; just recalled: near the bound
    assert 1.0 < DEFAULT_POLICY.access_factor(50, at - day, at, at) <= 1 + DEFAULT_POLICY.access_weight
    # Recalls recorded after an as-of time in the past do not count for a read as of then.
    assert access_activation(4, at + day, at + 2 * day, at, 0.5) == 0.0
    assert DEFAULT_POLICY.model_copy(update={"access_weight": 0.0}).access_factor(9, at - day, at, at) == 1.0
