"""Concurrent appends to one session, on the real Postgres and Redis: appends are serialised per
session, a stale parent is reported as AppendConflictError (never silently dropped or
interleaved), and re-sending stored messages stays idempotent."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

import pytest

from agent_memory.core.models import Message, Session
from agent_memory.memory.evidence import (
    NO_PARENT,
    SKIPPED_TURNS_SHOWN,
    AppendConflictError,
    MessageConflictError,
    TurnConflictError,
    last_message_id,
    load_session,
    recent_messages,
)
from agent_memory.store.db import tenant_transaction

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
SUBJECT = "conc"


def batch(session_id: str, start_turn: int, ids: list[str], parent: str | None) -> Session:
    """Messages chained after `parent`: each content names the message it was written after."""
    messages, before = [], parent
    for i, mid in enumerate(ids):
        messages.append(Message(message_id=mid, turn_index=start_turn + i, role="user", speaker="Conc",
                                content=f"{mid} after {before}", created_at=T0 + timedelta(seconds=start_turn + i)))
        before = mid
    return Session(session_id=session_id, started_at=T0, messages=messages)


async def head(services, tenant: str, session_id: str) -> tuple[str | None, int]:
    """The session's last message id and the next turn index, read in one snapshot."""
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT message_id, turn_index FROM messages WHERE tenant_id = %s AND session_id = %s "
                                 "ORDER BY turn_index DESC, created_at DESC, message_id DESC LIMIT 1",
                                 (tenant, session_id))
        row = await cur.fetchone()
    return (None, 0) if row is None else (row[0], row[1] + 1)


async def message_count(services, tenant: str) -> int:
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM messages")
        return (await cur.fetchone())[0]


async def test_many_appenders_on_one_session_lose_nothing_and_every_conflict_is_reported(client, services, tenant):
    sid, appenders, batches_each, batch_size = "shared", 12, 2, 2  # 48 messages: all fit working memory (50)
    conflicts: list[AppendConflictError] = []
    calls = 0

    async def appender(k: int) -> None:
        nonlocal calls
        for b in range(batches_each):
            ids = [f"a{k}-b{b}-m{i}" for i in range(batch_size)]
            while True:
                parent, turn = await head(services, tenant, sid)
                calls += 1
                try:
                    result = await client.append_messages(tenant, SUBJECT, batch(sid, turn, ids, parent),
                                                          expected_parent=parent if parent is not None else NO_PARENT)
                except AppendConflictError as err:
                    assert (err.session_id, err.expected_parent) == (sid, parent if parent is not None else NO_PARENT)
                    assert err.actual_parent is not None and err.actual_parent != parent
                    assert sid in str(err) and repr(err.actual_parent) in str(err)
                    conflicts.append(err)
                    await asyncio.sleep(random.random() / 100)
                    continue
                # an accepted call wrote all of its messages: nothing silently dropped
                assert (result.inserted, result.duplicates, result.last_message_id) == (batch_size, 0, ids[-1])
                break

    await asyncio.gather(*(appender(k) for k in range(appenders)))

    total = appenders * batches_each * batch_size
    messages, _ = await load_session(services.pool, tenant, SUBJECT, sid)
    assert len(messages) == total == await message_count(services, tenant)
    assert sorted(m.message_id for m in messages) == sorted(
        f"a{k}-b{b}-m{i}" for k in range(appenders) for b in range(batches_each) for i in range(batch_size))
    # One consistent sequence: turns 0..n-1, each message written after the one before it, and
    # each batch contiguous (a conflicting call left nothing behind).
    assert [m.turn_index for m in messages] == list(range(total))
    before = None
    for m in messages:
        assert m.content == f"{m.message_id} after {before}"
        before = m.message_id
    for start in range(0, total, batch_size):
        assert len({m.message_id.rsplit("-m", 1)[0] for m in messages[start:start + batch_size]}) == 1
    assert calls == appenders * batches_each + len(conflicts)  # every failed call was a reported conflict
    print(f"\n{appenders} appenders, {calls} calls, {len(conflicts)} conflicts reported")
    assert conflicts, "12 concurrent appenders on one session should have collided at least once"
    assert await last_message_id(services.pool, tenant, SUBJECT, sid) == messages[-1].message_id
    cached = await recent_messages(services.redis, tenant, SUBJECT, sid)
    assert sorted(m.message_id for m in cached) == sorted(m.message_id for m in messages)  # working memory too


async def test_unconditional_concurrent_appends_all_land(client, services, tenant):
    sid = "free-for-all"
    sessions = [batch(sid, k, [f"u{k}"], None) for k in range(20)]
    results = await asyncio.gather(*(client.append_messages(tenant, SUBJECT, s) for s in sessions))
    assert [r.inserted for r in results] == [1] * 20
    # the same messages again, concurrently: idempotent
    again = await asyncio.gather(*(client.append_messages(tenant, SUBJECT, s) for s in sessions))
    assert [(r.inserted, r.duplicates) for r in again] == [(0, 1)] * 20
    assert await message_count(services, tenant) == 20


async def test_racing_identical_first_messages_insert_once_without_conflict(client, services, tenant):
    sid = "same-first"
    first = batch(sid, 0, ["m1"], None)
    results = await asyncio.gather(*(client.append_messages(tenant, SUBJECT, first, expected_parent=NO_PARENT)
                                     for _ in range(10)))
    assert sorted((r.inserted, r.duplicates) for r in results) == [(0, 1)] * 9 + [(1, 0)]
    assert await message_count(services, tenant) == 1


async def test_stale_parent_conflicts_and_writes_nothing_but_a_replay_is_idempotent(client, services, tenant):
    sid = "chain"
    assert (await client.append_messages(tenant, SUBJECT, batch(sid, 0, ["m1"], None),
                                         expected_parent=NO_PARENT)).last_message_id == "m1"
    await client.append_messages(tenant, SUBJECT, batch(sid, 1, ["m2"], "m1"), expected_parent="m1")

    with pytest.raises(AppendConflictError) as err:  # a writer that still believes m1 is the last message
        await client.append_messages(tenant, SUBJECT, batch(sid, 2, ["m3", "m4"], "m1"), expected_parent="m1")
    assert (err.value.session_id, err.value.expected_parent, err.value.actual_parent) == (sid, "m1", "m2")
    assert "'chain'" in str(err.value) and "'m1'" in str(err.value) and "'m2'" in str(err.value)
    with pytest.raises(AppendConflictError) as err:  # believes the session is new
        await client.append_messages(tenant, SUBJECT, batch(sid, 2, ["m3"], None), expected_parent=NO_PARENT)
    assert err.value.actual_parent == "m2"
    assert await message_count(services, tenant) == 2

    # A retry of calls that were stored already (their response was lost): no conflict, no write.
    replay = await client.append_messages(tenant, SUBJECT, batch(sid, 0, ["m1"], None), expected_parent=NO_PARENT)
    assert (replay.inserted, replay.duplicates, replay.last_message_id) == (0, 1, "m2")
    replay = await client.append_messages(tenant, SUBJECT, batch(sid, 1, ["m2"], "m1"), expected_parent="m1")
    assert (replay.inserted, replay.duplicates) == (0, 1)
    # A changed body under a stored id is refused.
    changed = batch(sid, 1, ["m2"], "m1")
    changed.messages[0].content = "rewritten"
    with pytest.raises(MessageConflictError):
        await client.append_messages(tenant, SUBJECT, changed, expected_parent="m2")

    # An unknown session with an expected parent: conflict, and not even the session row is left.
    with pytest.raises(AppendConflictError) as err:
        await client.append_messages(tenant, SUBJECT, batch("nope", 0, ["x1"], "ghost"), expected_parent="ghost")
    assert (err.value.expected_parent, err.value.actual_parent) == ("ghost", None)
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM sessions WHERE session_id = 'nope'")
        assert (await cur.fetchone())[0] == 0
    assert await last_message_id(services.pool, tenant, SUBJECT, "nope") is None


async def test_a_position_held_by_another_message_is_refused_and_a_skipped_one_is_reported(client, services, tenant):
    sid = "positions"
    first = await client.append_messages(tenant, SUBJECT, batch(sid, 0, ["p0", "p1"], None))
    assert first.inserted == 2 and first.skipped_turns == []
    # Another message at position 1: refused, naming the field, and nothing of the call is written.
    with pytest.raises(TurnConflictError, match=r"messages\[1\]\.turn_index: position 1 .* held by message 'p1'"):
        await client.append_messages(tenant, SUBJECT, Session(session_id=sid, messages=[
            *batch(sid, 2, ["p2"], "p1").messages, *batch(sid, 1, ["other"], "p2").messages]))
    assert await message_count(services, tenant) == 2
    # Two messages of one call at one position: refused before anything is read.
    with pytest.raises(ValueError, match=r"messages\[1\]\.turn_index: position 2 is also given to message 'p2'"):
        Session(session_id=sid, messages=[*batch(sid, 2, ["p2"], "p1").messages, *batch(sid, 2, ["q2"], "p2").messages])
    # Positions 2 and 3 passed over: stored, and said.
    later = await client.append_messages(tenant, SUBJECT, batch(sid, 4, ["p4", "p5"], "p1"))
    assert later.inserted == 2 and later.skipped_turns == [2, 3]
    # Far ahead: the first positions passed over are listed, not all two billion of them.
    far = await client.append_messages(tenant, SUBJECT, Session(session_id=sid, messages=[Message(
        message_id="last", turn_index=2**31 - 1, role="user", content="last", created_at=T0)]))
    assert far.skipped_turns == list(range(6, 6 + SKIPPED_TURNS_SHOWN))
    # The same call again is a duplicate, not a conflict with itself.
    again = await client.append_messages(tenant, SUBJECT, batch(sid, 4, ["p4", "p5"], "p1"))
    assert (again.inserted, again.duplicates, again.skipped_turns) == (0, 2, [])
