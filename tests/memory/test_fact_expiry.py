"""A fact written with an expiry ("remember this for a week"): it is a temporary fact that every
read returns until its end and none after it — facts, recall, context and prompt at once — and
the memory sweep forgets it under the tenant's retention of temporary facts, then removes it
from every store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_memory.core.errors import InvalidInput
from agent_memory.lifecycle.retention import RetentionPolicy, apply_retention
from agent_memory.lifecycle.sweeper import sweep_forgotten
from agent_memory.store.db import tenant_transaction
from tests.sessions import session

SUBJECT = "lin"
DAY = 86400


async def _told(client, tenant: str, when: datetime) -> None:
    said = session("s1", when.strftime("%Y-%m-%dT%H:%M:%SZ"), "Remember that the gate code is 4711 this week.",
                   "And I am staying at the Hotel Borg.")
    await client.append_messages(tenant, SUBJECT, said)


async def test_an_expired_fact_leaves_every_read_at_its_end(client, tenant):
    said_at = datetime.now(UTC).replace(microsecond=0) - timedelta(days=2)
    await _told(client, tenant, said_at)
    # Held for a day from two days ago: it ended yesterday. The other holds for a week.
    await client.write_fact(tenant, SUBJECT, "home", "gate_code", "4711", expected_version=0,
                            evidence_message_ids=["s1:1"], observed_at=said_at, ttl_seconds=DAY)
    await client.write_fact(tenant, SUBJECT, "travel", "hotel", "Hotel Borg", expected_version=0,
                            evidence_message_ids=["s1:2"], observed_at=said_at,
                            expires_at=said_at + timedelta(days=7))
    while_held = said_at + timedelta(hours=1)

    then = {f.key: f for f in await client.facts(tenant, SUBJECT, as_of=while_held)}
    assert then["gate_code"].value == "4711" and then["gate_code"].permanence == "temporary"
    assert then["gate_code"].valid_to == said_at + timedelta(days=1)
    assert then["hotel"].valid_to == said_at + timedelta(days=7)
    assert [f.key for f in await client.facts(tenant, SUBJECT)] == ["hotel"]

    query = "what is the gate code and which hotel"
    assert "4711" in (await client.context(tenant, SUBJECT, query, as_of=while_held)).text
    now_context = (await client.context(tenant, SUBJECT, query)).text
    assert "4711" not in now_context and "Hotel Borg" in now_context
    assert [f.value for f in (await client.recall(tenant, SUBJECT, query, as_of=while_held)).facts] \
        == ["4711", "Hotel Borg"]
    assert [f.value for f in (await client.recall(tenant, SUBJECT, query)).facts] == ["Hotel Borg"]
    prompt = str((await client.build_prompt(tenant, SUBJECT, "s2", query)).chat_messages())
    assert "4711" not in prompt and "Hotel Borg" in prompt

    # The history keeps the interval; a new value of the key expects the version it shows.
    [expired] = [f for f in await client.facts(tenant, SUBJECT, history=True) if f.key == "gate_code"]
    await client.write_fact(tenant, SUBJECT, "home", "gate_code", "1234", expected_version=expired.version,
                            evidence_message_ids=["s1:1"])
    assert {f.key: f.value for f in await client.facts(tenant, SUBJECT)} == {"gate_code": "1234",
                                                                            "hotel": "Hotel Borg"}


@pytest.mark.parametrize(("expiry", "field"), [
    ({"ttl_seconds": DAY, "expires_at": datetime(2024, 5, 8, tzinfo=UTC)}, "expires_at, ttl_seconds"),
    ({"ttl_seconds": 0}, "ttl_seconds"),
    ({"ttl_seconds": 59}, "ttl_seconds"),
    ({"ttl_seconds": 11 * 365 * DAY}, "ttl_seconds"),
    ({"expires_at": datetime(2024, 5, 1, 9, tzinfo=UTC)}, "expires_at"),
    ({"expires_at": datetime(2024, 4, 30, tzinfo=UTC)}, "expires_at"),
    ({"expires_at": datetime(2024, 5, 8)}, "expires_at"),
])
async def test_an_expiry_out_of_bounds_is_refused_naming_the_field(client, tenant, expiry, field):
    await _told(client, tenant, datetime(2024, 5, 1, 9, tzinfo=UTC))
    with pytest.raises(InvalidInput, match=f"^{field}: "):
        await client.write_fact(tenant, SUBJECT, "home", "gate_code", "4711", expected_version=0,
                                evidence_message_ids=["s1:1"], observed_at=datetime(2024, 5, 1, 9, tzinfo=UTC),
                                **expiry)
    assert await client.facts(tenant, SUBJECT, history=True) == []


async def test_the_memory_sweep_forgets_an_expired_fact_under_the_retention_of_temporary_facts(
        client, services, tenant):
    said_at = datetime.now(UTC).replace(microsecond=0) - timedelta(days=2)
    await _told(client, tenant, said_at)
    await client.write_fact(tenant, SUBJECT, "home", "gate_code", "4711", expected_version=0,
                            evidence_message_ids=["s1:1"], observed_at=said_at, ttl_seconds=DAY)
    await client.write_fact(tenant, SUBJECT, "travel", "hotel", "Hotel Borg", expected_version=0,
                            evidence_message_ids=["s1:2"], observed_at=said_at, ttl_seconds=7 * DAY)
    [gate] = [f for f in await client.facts(tenant, SUBJECT, history=True) if f.key == "gate_code"]

    # The default keeps a temporary fact 30 days past its end: ended yesterday, it stays.
    await apply_retention(services.pool, services.keyring)
    assert await client.admin.forgotten(tenant, SUBJECT) == []

    # A tenant that keeps nothing past its end: the sweep's retention step forgets it.
    await client.admin.set_retention_policy(tenant, RetentionPolicy(temporary_fact_days=0))
    retained = await apply_retention(services.pool, services.keyring)
    assert retained.forgotten.get("temporary_fact", 0) >= 1
    [forgotten] = await client.admin.forgotten(tenant, SUBJECT)
    assert (str(forgotten.memory_id), forgotten.actor, forgotten.state) == (gate.memory_id, "retention", "forgotten")
    assert [f.key for f in await client.facts(tenant, SUBJECT, history=True)] == ["hotel"]

    # Past the grace period the sweep removes it from every store.
    swept = await sweep_forgotten(services.pool, services.keyring, grace=timedelta(0))
    assert swept.residue_found == 0
    assert [f.state for f in await client.admin.forgotten(tenant, SUBJECT)] == ["swept"]
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute(
            "SELECT (SELECT count(*) FROM facts WHERE tenant_id = %(t)s AND memory_id = %(m)s)"
            " + (SELECT count(*) FROM memory_search WHERE tenant_id = %(t)s AND memory_id = %(m)s)"
            " + (SELECT count(*) FROM memory_events WHERE tenant_id = %(t)s AND memory_id = %(m)s)",
            {"t": tenant, "m": gate.memory_id})
        assert await cur.fetchone() == (0,)
