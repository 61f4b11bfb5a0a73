"""Time sanity: a message dated in the future is refused at every ingest (HTTP, MCP, the Python
client, the CLI) with an error naming created_at and nothing written; and should a future time
reach the write path anyway, no fact interval closes or opens after the transaction that records
it, so `facts` keeps showing the value valid now."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest
from mcp.client import Client

from agent_memory.core.models import Message, Session
from agent_memory.memory.ingest import InputError
from agent_memory.security.api_keys import create_key
from agent_memory.store.db import tenant_transaction
from tests.api.test_http_api import api, bearer
from tests.api.test_mcp_server import server
from tests.cli.runner import run_cli, write_lines
from tests.memory.test_fact_operations import SUBJECT, consolidate, said, values

FUTURE = "2099-01-01T00:00:00Z"
NOW_ISH = datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


async def stored_messages(services, tenant: str) -> int:
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM messages WHERE tenant_id = %s", (tenant,))
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def test_a_message_dated_2099_is_refused_by_every_ingest_and_nothing_is_written(
        client, services, tenant, task_queue, tmp_path):
    good = {"message_id": "f:1", "turn_index": 0, "role": "user", "content": "I live in Oslo.",
            "created_at": NOW_ISH}
    future = {"message_id": "f:2", "turn_index": 1, "role": "user", "content": "I moved to Bergen.",
              "created_at": FUTURE}

    # The Python client: InputError naming the field, before anything is written.
    with pytest.raises(InputError, match=r"messages\.1\.created_at: 2099-01-01T00:00:00\+00:00 is .* in the future"):
        await client.append_messages(tenant, "lin", Session.model_validate({"session_id": "f", "messages": [good, future]}))
    # HTTP: problem+json 422, the detail names the field and the fix.
    writer = (await create_key(services.pool, tenant, "write")).token
    async with api(client) as http:
        refused = await http.post("/v1/subjects/lin/sessions/f/messages", headers=bearer(writer),
                                  json={"messages": [good, future]})
    assert refused.status_code == 422 and refused.headers["content-type"] == "application/problem+json"
    detail = refused.json()["detail"]
    assert detail.startswith("messages.1.created_at: 2099-01-01") and "e.g. 2024-05-01T10:00:00Z" in detail
    # MCP: the tool's error text names the field.
    async with Client(server(services, task_queue, writer)) as mcp:
        answer = await mcp.call_tool("remember", {"subject": "lin", "session": "f", "turns": [
            {"role": "user", "content": "I live in Oslo."},
            {"role": "user", "content": "I moved to Bergen.", "created_at": FUTURE}]})
    assert answer.is_error and "messages.1.created_at: 2099-01-01" in answer.content[0].text
    # The CLI: exit 2, the line and field named, and the file's earlier good line not written either.
    file = write_lines(tmp_path / "s.jsonl", {"session_id": "c0", "messages": [good]},
                       {"session_id": "c1", "messages": [{**future, "turn_index": 0}]})
    out = await asyncio.to_thread(run_cli, services, "ingest", file, "--tenant", tenant, "--subject", "lin")
    assert out.returncode == 2, out.stderr
    assert "line 2: messages.0.created_at: 2099-01-01" in out.stderr and "Traceback" not in out.stderr
    assert await stored_messages(services, tenant) == 0
    # Within the tolerance (clock skew) a message is taken.
    skewed = {**good, "created_at": (datetime.now(UTC) + timedelta(minutes=2)).isoformat()}
    result = await client.append_messages(tenant, "lin", Session.model_validate({"session_id": "f",
                                                                                 "messages": [skewed]}))
    assert result.inserted == 1 and await stored_messages(services, tenant) == 1


async def test_a_session_started_in_the_future_is_refused(client, tenant):
    message = Message(message_id="s:1", turn_index=0, role="user", content="hi", created_at=datetime.now(UTC))
    with pytest.raises(InputError, match=r"^started_at: 2099"):
        await client.append_messages(tenant, "lin", Session(session_id="s", messages=[message],
                                                            started_at=datetime(2099, 1, 1, tzinfo=UTC)))


async def test_a_live_write_observed_in_the_future_is_refused(client, tenant):
    with pytest.raises(InputError, match=r"^observed_at: 2099"):
        await client.write_fact(tenant, "lin", "location", "home_city", "Bergen", expected_version=0,
                                evidence_message_ids=["m1"], observed_at=datetime(2099, 1, 1, tzinfo=UTC))


async def test_a_future_dated_statement_cannot_close_the_current_fact_in_the_future(services, client, tenant):
    """Past ingest (a message stored by an older version, a clock far ahead): the supersession is
    recorded at the transaction time, so today's value is closed now and the new one holds now."""
    yesterday = datetime.now(UTC) - timedelta(days=1)
    await consolidate(services, tenant, "s1", said("location", "home_city", "Oslo", yesterday))
    before = datetime.now(UTC)
    await consolidate(services, tenant, "s2", said("location", "home_city", "Bergen", datetime(2099, 1, 1, tzinfo=UTC)))
    after = datetime.now(UTC)
    assert (await values(client, tenant))["location/home_city"] == "Bergen"
    history = await client.facts(tenant, SUBJECT, history=True)
    assert history and all(f.valid_from <= after and (f.valid_to is None or f.valid_to <= after) for f in history)
    [oslo] = [f for f in history if f.value == "Oslo"]
    assert oslo.status == "closed" and oslo.valid_to is not None and before - timedelta(seconds=5) <= oslo.valid_to
    # The CLI's `facts` shows the value valid now.
    out = await asyncio.to_thread(run_cli, services, "facts", "--tenant", tenant, "--subject", SUBJECT, "--json")
    assert out.returncode == 0, out.stderr
    assert [(f["key"], f["value"]) for f in json.loads(out.stdout)] == [("home_city", "Bergen")]


async def test_a_future_dated_end_closes_the_fact_now(services, client, tenant):
    yesterday = datetime.now(UTC) - timedelta(days=1)
    await consolidate(services, tenant, "s1", said("diet", "restriction", "vegetarian", yesterday))
    await consolidate(services, tenant, "s2", said("diet", "restriction", "vegetarian",
                                                   datetime(2099, 1, 1, tzinfo=UTC), operation="end"))
    after = datetime.now(UTC)
    assert "diet/restriction" not in await values(client, tenant)
    [closed] = await client.facts(tenant, SUBJECT, history=True)
    assert closed.status == "closed" and closed.valid_to is not None and closed.valid_to <= after


async def test_a_time_without_an_offset_is_read_as_utc_and_stored_once(client, services, tenant):
    """`2024-05-01T10:00:00` is 10:00 UTC (never the database server's zone), for the message and
    the session alike; the same message sent again with `Z` is the same message."""
    naive = {"message_id": "n:1", "turn_index": 0, "role": "user", "content": "I live in Oslo.",
             "created_at": "2024-05-01T10:00:00"}
    session = Session.model_validate({"session_id": "n", "started_at": "2024-05-01T09:00:00", "messages": [naive]})
    assert session.started_at == datetime(2024, 5, 1, 9, tzinfo=UTC)
    assert session.messages[0].created_at == datetime(2024, 5, 1, 10, tzinfo=UTC)
    assert (await client.append_messages(tenant, "lin", session)).inserted == 1
    again = Session.model_validate({"session_id": "n", "messages": [{**naive, "created_at": "2024-05-01T10:00:00Z"}]})
    assert (await client.append_messages(tenant, "lin", again)).inserted == 0
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT created_at FROM messages WHERE tenant_id = %s", (tenant,))
        assert [row[0] for row in await cur.fetchall()] == [datetime(2024, 5, 1, 10, tzinfo=UTC)]
