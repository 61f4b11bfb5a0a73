"""Idempotent tool calls on the real stack: a claim before the side effect and a record after it
make a retried call happen once — a retry gets the recorded result, a concurrent one hears the
call is in flight, a lease that ran out hands the call to the next attempt without letting the
old one overwrite it, a failure lets the next claim try again. Records are tenant-isolated,
encrypted under the subject's key, exported, swept by retention and erased with the subject."""

from __future__ import annotations

import asyncio

import pytest

from agent_memory.core.errors import Conflict, InvalidInput, NotFound
from agent_memory.lifecycle.retention import RetentionPolicy, apply_retention
from agent_memory.memory.tool_calls import TOOL_CALL_JSON_MAX_BYTES
from agent_memory.store.db import tenant_transaction

SUBJECT = "lin"
EMAIL = {"to": "mei@example.org", "subject": "Your refund", "body": "It is on its way."}
SENT = {"message_id": "smtp-42", "accepted": True}


async def _expire(services, tenant: str, column: str, call_key: str) -> None:
    """Move the call's lease or record expiry into the past (as time passing would)."""
    async with tenant_transaction(services.pool, tenant) as conn:
        await conn.execute(f"UPDATE tool_calls SET {column} = now() - interval '1 second' "
                           "WHERE tenant_id = %s AND call_key = %s", (tenant, call_key))


async def test_a_retried_call_gets_the_recorded_result_and_a_concurrent_one_hears_it_is_in_flight(
        client, tenant):
    first = await client.claim_tool_call(tenant, SUBJECT, "refund-7", "send_email", EMAIL)
    assert (first.state, first.attempt, first.result) == ("claimed", 1, None)
    again = await client.claim_tool_call(tenant, SUBJECT, "refund-7", "send_email", EMAIL)
    assert (again.state, again.attempt) == ("in_flight", 1) and again.lease_expires_at > again.claimed_at

    done = await client.record_tool_call(tenant, SUBJECT, "refund-7", attempt=1, result=SENT)
    assert (done.state, done.result) == ("completed", SENT) and done.completed_at is not None
    # The same record again answers the same; another result for the same attempt is refused.
    assert (await client.record_tool_call(tenant, SUBJECT, "refund-7", attempt=1, result=SENT)).result == SENT
    with pytest.raises(Conflict, match="already recorded"):
        await client.record_tool_call(tenant, SUBJECT, "refund-7", attempt=1, result={"accepted": False})

    retried = await client.claim_tool_call(tenant, SUBJECT, "refund-7", "send_email", EMAIL)
    assert (retried.state, retried.attempt, retried.result) == ("completed", 1, SENT)
    assert (await client.tool_call(tenant, SUBJECT, "refund-7")).result == SENT
    # The key names one request: another request under it is refused, naming the fix.
    with pytest.raises(Conflict, match="different request: a new request needs a new call_key"):
        await client.claim_tool_call(tenant, SUBJECT, "refund-7", "send_email", {**EMAIL, "body": "Sorry."})
    with pytest.raises(Conflict, match="different request"):
        await client.claim_tool_call(tenant, SUBJECT, "refund-7", "place_order", EMAIL)


async def test_concurrent_claims_of_one_key_hand_it_to_exactly_one(client, tenant):
    answers = await asyncio.gather(*(client.claim_tool_call(tenant, SUBJECT, "order-1", "place_order", {"sku": 9})
                                     for _ in range(8)))
    assert sorted(a.state for a in answers) == ["claimed"] + ["in_flight"] * 7


async def test_a_lease_that_ran_out_hands_the_call_over_and_fences_the_old_attempt(client, services, tenant):
    await client.claim_tool_call(tenant, SUBJECT, "order-2", "place_order", {"sku": 1}, lease_seconds=60)
    await _expire(services, tenant, "lease_expires_at", "order-2")
    taken = await client.claim_tool_call(tenant, SUBJECT, "order-2", "place_order", {"sku": 1})
    assert (taken.state, taken.attempt) == ("claimed", 2)
    with pytest.raises(Conflict, match="attempt 1 no longer holds"):
        await client.record_tool_call(tenant, SUBJECT, "order-2", attempt=1, result={"order": "late"})
    assert (await client.record_tool_call(tenant, SUBJECT, "order-2", attempt=2, result={"order": "A9"})).attempt == 2
    assert (await client.tool_call(tenant, SUBJECT, "order-2")).result == {"order": "A9"}


async def test_a_recorded_failure_lets_the_next_claim_make_the_call_again(client, tenant):
    await client.claim_tool_call(tenant, SUBJECT, "order-3", "place_order", {"sku": 2})
    failed = await client.record_tool_call(tenant, SUBJECT, "order-3", attempt=1, result={"error": "503"},
                                           outcome="failed")
    assert (failed.state, (await client.tool_call(tenant, SUBJECT, "order-3")).state) == ("failed", "failed")
    again = await client.claim_tool_call(tenant, SUBJECT, "order-3", "place_order", {"sku": 2})
    assert (again.state, again.attempt, again.result) == ("claimed", 2, None)


async def test_bad_calls_are_refused_naming_the_field(client, tenant):
    with pytest.raises(NotFound, match="has no claim: claim it before the call"):
        await client.record_tool_call(tenant, SUBJECT, "never-claimed", attempt=1, result=None)
    with pytest.raises(InvalidInput, match="call_key"):
        await client.claim_tool_call(tenant, SUBJECT, "bad key/with spaces", "send_email", {})
    with pytest.raises(InvalidInput, match="lease_seconds"):
        await client.claim_tool_call(tenant, SUBJECT, "k1", "send_email", {}, lease_seconds=0)
    with pytest.raises(InvalidInput, match=f"request is .* bytes as JSON: keep it within {TOOL_CALL_JSON_MAX_BYTES}"):
        await client.claim_tool_call(tenant, SUBJECT, "k1", "send_email", {"body": "x" * TOOL_CALL_JSON_MAX_BYTES})
    with pytest.raises(InvalidInput, match="tool"):
        await client.claim_tool_call(tenant, SUBJECT, "k1", "", {})
    await client.claim_tool_call(tenant, SUBJECT, "k1", "send_email", {})
    with pytest.raises(InvalidInput, match="outcome"):
        await client.record_tool_call(tenant, SUBJECT, "k1", attempt=1, result=None,
                                      outcome="maybe")  # type: ignore[arg-type]


async def test_records_are_tenant_isolated_and_their_results_encrypted(client, services, tenant):
    await client.claim_tool_call(tenant, SUBJECT, "refund-8", "send_email", EMAIL)
    await client.record_tool_call(tenant, SUBJECT, "refund-8", attempt=1, result=SENT)
    with pytest.raises(NotFound):
        await client.tool_call(f"{tenant}-other", SUBJECT, "refund-8")
    # The subject's export (the right of access) carries the record with its result.
    exported = (await client.admin.export(tenant, SUBJECT)).tool_calls
    assert [(c.call_key, c.state, c.result) for c in exported] == [("refund-8", "completed", SENT)]
    assert (await client.admin.export(f"{tenant}-other", SUBJECT)).tool_calls == []
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT t::text FROM tool_calls t WHERE tenant_id = %s", (tenant,))
        (stored,), = await cur.fetchall()
    for clear in ("smtp-42", "mei@example.org", "refund"):  # neither the result nor the request in clear
        assert clear not in stored.replace("refund-8", "")


async def test_retention_sweeps_expired_records_and_the_key_starts_over(client, services, tenant):
    await client.admin.set_retention_policy(tenant, RetentionPolicy(tool_call_days=1))
    claimed = await client.claim_tool_call(tenant, SUBJECT, "refund-9", "send_email", EMAIL)
    assert (claimed.expires_at - claimed.claimed_at).days == 1
    await client.record_tool_call(tenant, SUBJECT, "refund-9", attempt=1, result=SENT)
    await _expire(services, tenant, "expires_at", "refund-9")
    with pytest.raises(NotFound, match="expired"):
        await client.tool_call(tenant, SUBJECT, "refund-9")
    swept = await apply_retention(services.pool, services.keyring)
    assert swept.tool_calls_expired >= 1
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM tool_calls WHERE tenant_id = %s", (tenant,))
        assert (await cur.fetchone()) == (0,)
    fresh = await client.claim_tool_call(tenant, SUBJECT, "refund-9", "send_email", {"other": "request"})
    assert fresh.state == "claimed"


async def test_an_erased_subject_leaves_no_tool_call_and_cannot_claim_again(client, services, tenant, running_worker):
    await client.claim_tool_call(tenant, SUBJECT, "refund-10", "send_email", EMAIL)
    await client.record_tool_call(tenant, SUBJECT, "refund-10", attempt=1, result=SENT)
    async with running_worker():
        receipt = await client.admin.erasure_receipt(await client.admin.erase(tenant, SUBJECT, reason="user request"))
    assert receipt.residue_total == 0 and receipt.key_shredded
    assert receipt.removed["tool_calls"] == 1 and receipt.residue["operations"] == 0
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM tool_calls WHERE tenant_id = %s", (tenant,))
        assert (await cur.fetchone()) == (0,)
    with pytest.raises(Exception, match="erased"):
        await client.claim_tool_call(tenant, SUBJECT, "refund-11", "send_email", EMAIL)
