"""Memory private to an agent: a session whose messages are private to their agent is seen, with
its episode and notes, only by that agent's keys and by tenant-wide ones. Row-level security
enforces it (a query that forgets to filter by agent still sees nothing of another agent's), in
the style of the tenant drills; a private session adds nothing to the shared profile; rebuild
reproduces it and erasure leaves nothing of it."""

from __future__ import annotations

import json

import psycopg
import pytest

from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import Message, Session
from agent_memory.lifecycle.forgetting import MemoryNotFoundError
from agent_memory.memory.evidence import as_writing_agent, session_private_to
from agent_memory.projection.rebuild import rebuild_subject
from agent_memory.security.api_keys import create_key
from agent_memory.store.db import acting_as, tenant_transaction
from tests.api.test_http_api import api, bearer
from tests.sessions import session


def _private(s: Session, agent: str) -> Session:
    return s.model_copy(update={"messages": [m.model_copy(update={"agent_id": agent, "private": True})
                                             for m in s.messages]})


# Four messages each: a shorter session gets no episode (the substance gate), and every session's
# episode is checked below.
SHARED = session("shared", "2024-04-01T09:00:00Z", "I live in Oslo.", "I love sailing on the fjord.",
                 ("assistant", "How often do you go out on the water?"), "Can you suggest a good sailing jacket?")
SUPPORT = _private(session("support", "2024-04-02T09:00:00Z", "I moved to Bergen last week.",
                           "My locker code at the sailing club is 4711.", ("assistant", "Is the club near your new flat?"),
                           "Can you remind me of the code on race day?"), "support")
TRAVEL = _private(session("travel", "2024-04-03T09:00:00Z", "Book me a sailing trip to Crete in May.",
                          ("assistant", "How many people are travelling?"), "Can you find a boat with a skipper?",
                          ("assistant", "Would a week or a long weekend suit you better?")), "travel")
TABLES = ("messages", "episodes", "observations")


def test_a_private_message_needs_its_agent_and_a_session_is_private_to_one_agent_or_none():
    anonymous = Message(message_id="m1", turn_index=0, role="user", content="hi", created_at="2024-01-01T00:00:00Z",
                        private=True)
    with pytest.raises(InvalidInput, match=r"messages\[0\].private: a private message needs an agent_id"):
        session_private_to(Session(session_id="s", messages=[anonymous]))
    with acting_as(agent_id="support"):  # a key limited to an agent names it for the message
        assert session_private_to(as_writing_agent(Session(session_id="s", messages=[anonymous]))) == "support"
    mixed = SUPPORT.model_copy(update={"messages": [SUPPORT.messages[0],
                                                    SUPPORT.messages[1].model_copy(update={"private": False})]})
    with pytest.raises(InvalidInput, match=r"messages\[1\].private"):
        session_private_to(mixed)
    assert session_private_to(SUPPORT) == "support" and session_private_to(SHARED) is None


async def _seen(services, tenant) -> dict[str, set[str | None]]:
    """Whose rows a transaction sees, per table, with no filter on the agent on purpose."""
    seen: dict[str, set[str | None]] = {}
    async with tenant_transaction(services.pool, tenant) as conn:
        for table in TABLES:
            cur = await conn.execute(f"SELECT DISTINCT private_to FROM {table}")
            seen[table] = {row[0] for row in await cur.fetchall()}
    return seen


def _each(agents: set[str | None]) -> dict[str, set[str | None]]:
    return {table: agents for table in TABLES}


def _cited(items) -> set[str]:
    return {m for i in items for m in (i.cited_message_ids if hasattr(i, "cited_message_ids") else i)}


async def test_private_sessions_are_invisible_to_other_agents_in_postgres_and_every_read(client, services, tenant,
                                                                                     running_worker):
    async with running_worker():
        results = {}
        for s in (SHARED, SUPPORT, TRAVEL):
            await client.append_messages(tenant, "lin", s)
            results[s.session_id] = await client.consolidation_result(
                await client.end_session(tenant, "lin", s.session_id))
    # The profile is shared: the private move to Bergen is no fact, the shared home is.
    assert results["support"].facts_written == 0 and results["support"].episode_written
    assert [(f.key, f.value) for f in await client.facts(tenant, "lin") if f.namespace == "location"] == [
        ("home_city", "Oslo")]

    everyone = {None, "support", "travel"}
    assert await _seen(services, tenant) == _each(everyone)
    with acting_as(agent_id="travel"):
        assert await _seen(services, tenant) == _each({None, "travel"})
        async with tenant_transaction(services.pool, tenant) as conn:  # nor can it write another agent's row
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await conn.execute(
                    "INSERT INTO messages (tenant_id, session_id, message_id, subject_id, turn_index, role, content, "
                    "created_at, content_sha256, private_to) VALUES (%s, 'support', 'x', 'lin', 9, 'user', 'x', "
                    "now(), 'x', 'support')", (tenant,))
        context = await client.context(tenant, "lin", "sailing locker Bergen Crete trip")
        recalled = await client.recall(tenant, "lin", "sailing locker Bergen Crete trip")
        exported = await client.admin.export(tenant, "lin")
    assert _cited(context.items) and not {m for m in _cited(context.items) if m.startswith("support:")}
    assert "travel:1" in _cited(context.items)
    assert {e.session_id for e in recalled.episodes} <= {"shared", "travel"} and recalled.episodes
    assert {m.session_id for m in exported.cited_messages} <= {"shared", "travel"}
    assert {e.session_id for e in exported.episodes} == {"shared", "travel"}
    assert "4711" not in exported.model_dump_json() and "4711" not in context.text
    whole = await client.context(tenant, "lin", "sailing locker Bergen Crete trip")
    assert "support:2" in _cited(whole.items)  # a tenant-wide reader sees every agent's

    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT memory_id::text FROM observations WHERE session_id = 'support' LIMIT 1")
        (support_note,) = await cur.fetchone()
    with acting_as(agent_id="travel"), pytest.raises(MemoryNotFoundError):
        await client.forget(tenant, "lin", support_note, reason="not travel's to forget")

    support_reader = (await create_key(services.pool, tenant, "read", agent_id="support")).token
    travel_writer = (await create_key(services.pool, tenant, "write", agent_id="travel")).token
    async with api(client) as http:
        answered = await http.post("/v1/subjects/lin/context", headers=bearer(support_reader),
                                   json={"query": "sailing locker Bergen Crete trip"})
        assert answered.status_code == 200, answered.text
        cited = {m for item in answered.json()["items"] for m in item["cited_message_ids"]}
        assert "support:2" in cited and not {m for m in cited if m.startswith("travel:")}
        message = {"message_id": "t2:1", "turn_index": 0, "role": "user", "content": "Window seat, please.",
                   "created_at": "2024-04-04T09:00:00Z"}
        refused = await http.post("/v1/subjects/lin/sessions/t2/messages", headers=bearer(travel_writer),
                                  json={"messages": [{**message, "agent_id": "support"}]})
        assert refused.status_code == 403 and "messages[0].agent_id" in refused.text, refused.text
        stamped = await http.post("/v1/subjects/lin/sessions/t2/messages", headers=bearer(travel_writer),
                                  json={"messages": [message]})
        assert stamped.status_code == 200, stamped.text
        mixed = await http.post("/v1/subjects/lin/sessions/travel/messages", headers=bearer(travel_writer),
                                json={"messages": [{**message, "message_id": "travel:9", "turn_index": 9}]})
        assert mixed.status_code == 409 and "private to agent 'travel'" in mixed.text, mixed.text
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT agent_id, private_to FROM messages WHERE session_id = 't2'")
        assert await cur.fetchall() == [("travel", None)]

    assert (await rebuild_subject(services.pool, services.keyring, tenant, "lin")).equal
    async with running_worker():
        receipt = await client.admin.erasure_receipt(await client.admin.erase(tenant, "lin", reason="user request"))
    assert receipt.residue_total == 0
    assert await _seen(services, tenant) == _each(set())


async def test_an_erase_key_is_never_limited_to_an_agent(services, tenant):
    with pytest.raises(InvalidInput, match="agent_id"):
        await create_key(services.pool, tenant, "erase", agent_id="support")
    with pytest.raises(InvalidInput, match="agent_id"):
        await create_key(services.pool, tenant, "read", agent_id="no spaces")


async def test_an_agents_key_over_mcp_writes_as_its_agent_and_reads_nothing_private_of_another(
        client, services, tenant, task_queue):
    from mcp.client import Client

    from tests.api.test_mcp_server import payload, server

    await client.append_messages(tenant, "lin", SUPPORT)
    writer = (await create_key(services.pool, tenant, "write", agent_id="travel")).token
    async with Client(server(services, task_queue, writer)) as mcp:
        other = await mcp.call_tool("remember", {"subject": "lin", "session": "m1", "agent_id": "support",
                                                 "turns": [{"role": "user", "content": "hi"}]})
        assert other.is_error and "agent_id" in other.content[0].text
        payload(await mcp.call_tool("remember", {"subject": "lin", "session": "m1",
                                                 "turns": [{"role": "user", "content": "Aisle seat, please."}]}))
        context = payload(await mcp.call_tool("context", {"subject": "lin", "query": "Bergen locker sailing",
                                                          "session": "support"}))
    assert "4711" not in json.dumps(context) and "Bergen" not in json.dumps(context)
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT DISTINCT agent_id FROM messages WHERE session_id = 'm1'")
        assert await cur.fetchall() == [("travel",)]
