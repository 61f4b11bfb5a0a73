"""The MCP server through a real MCP client session (the official SDK's Client over stdio,
`agent-memory mcp` as a subprocess) against the session's stack and a worker."""

from __future__ import annotations

import json
import os
import sys

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from agent_memory.core.settings import ENV_VARS
from agent_memory.security.api_keys import create_key
from agent_memory.store.db import tenant_transaction
from tests.sessions import session


def server(services, task_queue: str, token: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env.update(AGENT_MEMORY_HOME=str(services.settings.home), AGENT_MEMORY_TASK_QUEUE=task_queue,
               AGENT_MEMORY_API_KEY=token)
    return StdioServerParameters(command=sys.executable, args=["-m", "workers.cli", "mcp"], env=env)


def payload(result) -> object:
    assert not result.is_error, result
    structured = getattr(result, "structured_content", None)
    if structured is not None:  # a list or a value comes wrapped as {"result": ...}
        return structured["result"] if list(structured) == ["result"] else structured
    return json.loads(result.content[0].text)


async def test_an_agent_remembers_ends_a_session_and_reads_memory_through_mcp(client, services, tenant, task_queue,
                                                                                running_worker):
    writer = (await create_key(services.pool, tenant, "write")).token
    operator = (await create_key(services.pool, tenant, "erase")).token
    reader = (await create_key(services.pool, tenant, "read")).token
    async with running_worker():
        async with Client(server(services, task_queue, writer)) as mcp:
            tools = {t.name for t in (await mcp.list_tools()).tools}
            assert tools == {"remember", "end_session", "context", "facts", "entities", "relations", "recall",
                             "correct", "forget", "restore", "claim_tool_call", "record_tool_call",
                             "stale_marks", "resolve_mark"}
            remembered = payload(await mcp.call_tool("remember", {
                "subject": "lin", "session": "m1",
                "turns": [{"role": "user", "content": "I live in Oslo.", "message_id": "m1:a"},
                          {"role": "assistant", "content": "Noted."},
                          {"role": "user", "content": "I'm allergic to peanuts."}]}))
            assert remembered["inserted"] == 3
            again = payload(await mcp.call_tool("remember", {
                "subject": "lin", "session": "m1",
                "turns": [{"role": "user", "content": "I live in Oslo.", "message_id": "m1:a"}]}))
            assert again["inserted"] == 0 and again["duplicates"] == 1  # a retry, by its id
            twice = payload(await mcp.call_tool("remember", {
                "subject": "lin", "session": "m1", "turns": [{"role": "user", "content": "yes"},
                                                             {"role": "user", "content": "yes"}]}))
            assert twice["inserted"] == 2  # without ids, every turn is a turn
            ended = payload(await mcp.call_tool("end_session", {"subject": "lin", "session": "m1"}))
            await client.consolidation_result(client.services.temporal.get_workflow_handle(ended["workflow_id"]))
            answered = await mcp.call_tool("facts", {"subject": "lin"})
            facts = payload(answered)
            assert "Oslo" in {f["value"] for f in facts}
            # What the agent reads: one compact line per fact, the same facts, no tenant or bookkeeping.
            lines = answered.content[0].text.splitlines()
            assert [json.loads(line) for line in lines] == facts
            assert all(len(line) < 300 and "tenant_id" not in line and "fact_id" not in line for line in lines)
            assert {f["memory_id"]: f["version"] for f in facts} == {
                f.memory_id: f.version for f in await client.facts(tenant, "lin")}
            entities = payload(await mcp.call_tool("entities", {"subject": "lin"}))
            assert ("place", "Oslo") in {(e["entity_type"], e["name"]) for e in entities}
            assert entities == [e.model_dump(mode="json") for e in await client.entities(tenant, "lin")]
            assert payload(await mcp.call_tool("relations", {"subject": "lin"})) == [
                r.model_dump(mode="json") for r in await client.relations(tenant, "lin")]
            context = payload(await mcp.call_tool("context", {"subject": "lin", "query": "what should I cook?"}))
            assert "peanut" in context["text"].lower()
            oslo = next(f for f in facts if f["value"] == "Oslo")
            # The agent fixes memory itself: a correction citing the person's message, a forget, a restore.
            stale = await mcp.call_tool("correct", {
                "subject": "lin", "namespace": oslo["namespace"], "key": oslo["key"], "value": "Bergen",
                "expected_version": oslo["version"] + 1, "evidence": ["m1:a"]})
            assert stale.is_error and "expected version" in stale.content[0].text
            corrected = payload(await mcp.call_tool("correct", {
                "subject": "lin", "namespace": oslo["namespace"], "key": oslo["key"], "value": "Bergen",
                "expected_version": oslo["version"], "evidence": ["m1:a"]}))
            assert corrected["facts_written"] == 1
            bergen = next(f for f in payload(await mcp.call_tool("facts", {"subject": "lin"})) if f["value"] == "Bergen")
            assert "Oslo" not in {f["value"] for f in payload(await mcp.call_tool("facts", {"subject": "lin"}))}
            forgotten = payload(await mcp.call_tool("forget", {"subject": "lin", "memory_id": bergen["memory_id"],
                                                                "reason": "the person asked"}))
            assert forgotten["memory_kind"] == "fact"
            assert "Bergen" not in {f["value"] for f in payload(await mcp.call_tool("facts", {"subject": "lin"}))}
            payload(await mcp.call_tool("restore", {"subject": "lin", "memory_id": bergen["memory_id"]}))
            assert "Bergen" in {f["value"] for f in payload(await mcp.call_tool("facts", {"subject": "lin"}))}
        async with tenant_transaction(services.pool, tenant) as conn:
            cur = await conn.execute("SELECT DISTINCT actor, actor_id FROM memory_events WHERE tenant_id = %s "
                                     "AND event_type IN ('FactSuperseded', 'MemoryForgotten', 'MemoryRestored')",
                                     (tenant,))
            assert {(a, i.split(":")[0]) for a, i in await cur.fetchall()} == {("agent", "mcp")}
        async with Client(server(services, task_queue, reader)) as mcp:  # a read key changes nothing
            refused = await mcp.call_tool("forget", {"subject": "lin", "memory_id": bergen["memory_id"]})
            assert refused.is_error and "needs 'write'" in refused.content[0].text
            refused = await mcp.call_tool("correct", {
                "subject": "lin", "namespace": "location", "key": "home_city", "value": "Oslo",
                "expected_version": 0, "evidence": ["m1:a"]})
            assert refused.is_error and "needs 'write'" in refused.content[0].text
        async with Client(server(services, task_queue, operator)) as mcp:  # the operator's erase key still can
            forgotten = payload(await mcp.call_tool("forget", {"subject": "lin", "memory_id": bergen["memory_id"],
                                                                "reason": "ticket 3"}))
            assert forgotten["memory_kind"] == "fact"


async def test_an_agent_makes_a_side_effecting_tool_call_once_through_mcp(services, tenant, task_queue):
    """claim_tool_call before the call, record_tool_call after: a retry hears it is in flight,
    then gets the recorded result; a read key cannot claim; a bad lease names the parameter."""
    writer = (await create_key(services.pool, tenant, "write")).token
    reader = (await create_key(services.pool, tenant, "read")).token
    email = {"to": "lin@example.org", "body": "Your table is booked."}
    claim = {"subject": "lin", "call_key": "booking-1", "tool": "send_email", "request": email}
    async with Client(server(services, task_queue, writer)) as mcp:
        first = payload(await mcp.call_tool("claim_tool_call", claim))
        assert (first["state"], first["attempt"]) == ("claimed", 1)
        assert payload(await mcp.call_tool("claim_tool_call", claim))["state"] == "in_flight"
        recorded = payload(await mcp.call_tool("record_tool_call", {
            "subject": "lin", "call_key": "booking-1", "attempt": 1, "result": {"sent": "msg-7"}}))
        assert (recorded["state"], recorded["result"]) == ("completed", {"sent": "msg-7"})
        retried = payload(await mcp.call_tool("claim_tool_call", claim))
        assert (retried["state"], retried["result"]) == ("completed", {"sent": "msg-7"})
        other = await mcp.call_tool("claim_tool_call", {**claim, "request": {"to": "someone@example.org"}})
        assert other.is_error and "different request" in other.content[0].text
        bad = await mcp.call_tool("claim_tool_call", {**claim, "call_key": "booking-2", "lease_seconds": 0})
        assert bad.is_error and "lease_seconds" in bad.content[0].text
    async with Client(server(services, task_queue, reader)) as mcp:
        refused = await mcp.call_tool("claim_tool_call", {**claim, "call_key": "booking-3"})
        assert refused.is_error and "needs 'write'" in refused.content[0].text


async def test_recall_and_facts_take_filters_through_mcp(client, services, tenant, task_queue):
    """`recall` narrowed to a kind and a namespace, `facts` to a namespace; a filter that cannot
    match comes back as a tool error naming the fix."""
    await client.append_messages(tenant, "lin", session("q1", "2024-05-01T09:00:00Z", "I live in Oslo."))
    for namespace, key, value in (("location", "home_city", "Oslo"), ("work", "employer", "Equinor")):
        await client.write_fact(tenant, "lin", namespace, key, value, expected_version=0,
                                evidence_message_ids=["q1:1"])
    reader = (await create_key(services.pool, tenant, "read")).token
    async with Client(server(services, task_queue, reader)) as mcp:
        found = payload(await mcp.call_tool("recall", {"subject": "lin", "query": "Oslo", "kinds": ["fact"],
                                                       "namespaces": ["work"]}))
        assert [f["value"] for f in found["facts"]] == ["Equinor"] and found["episodes"] == []
        listed = payload(await mcp.call_tool("facts", {"subject": "lin", "namespaces": ["location"]}))
        assert [f["value"] for f in listed] == ["Oslo"]
        empty = await mcp.call_tool("facts", {"subject": "lin", "since": "2024-05-01T00:00:00Z",
                                              "until": "2024-03-01T00:00:00Z"})
        assert empty.is_error and "since is after until" in empty.content[0].text
    writer = (await create_key(services.pool, tenant, "write")).token
    async with Client(server(services, task_queue, writer)) as mcp:  # metadata and a scope, read back by filters
        payload(await mcp.call_tool("remember", {"subject": "lin", "session": "q2", "agent_id": "concierge", "turns": [
            {"role": "user", "content": "Call me on Fridays.", "message_id": "q2:1", "metadata": {"channel": "sms"}}]}))
        bad = await mcp.call_tool("remember", {"subject": "lin", "session": "q3", "run_id": "no spaces",
                                               "turns": [{"role": "user", "content": "hi"}]})
        assert bad.is_error and "run_id" in bad.content[0].text
    await client.write_fact(tenant, "lin", "preference", "call_day", "Friday", expected_version=0,
                            evidence_message_ids=["q2:1"])
    async with Client(server(services, task_queue, reader)) as mcp:
        assert len(payload(await mcp.call_tool("facts", {"subject": "lin"}))) == 3
        found = payload(await mcp.call_tool("recall", {"subject": "lin", "query": "Friday",
                                                       "metadata": {"channel": "sms"}}))
        assert [f["value"] for f in found["facts"]] == ["Friday"]
        by_agent = payload(await mcp.call_tool("facts", {"subject": "lin", "agent_id": "concierge"}))
        assert [f["value"] for f in by_agent] == ["Friday"]
        in_context = payload(await mcp.call_tool("context", {"subject": "lin", "query": "Oslo Friday",
                                                             "agent_id": "concierge"}))
        assert {m for i in in_context["items"] for m in i["cited_message_ids"]} == {"q2:1"}


async def test_the_mcp_server_refuses_to_start_without_a_valid_key(services, task_queue):
    with pytest.raises(Exception):  # noqa: B017 - the SDK surfaces a dead server as a connection error
        async with Client(server(services, task_queue, "amk:t:nope:nope")) as mcp:
            await mcp.list_tools()


async def test_mcp_over_streamable_http_uses_each_requests_api_key(client, services, tenant, task_queue,
                                                                     running_worker):
    """`/mcp` of the HTTP API: a real MCP client session over streamable HTTP, the key in the
    Authorization header; no key or a bad key gets 401, and a key of another tenant sees nothing."""
    import httpx
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
    from mcp.shared.exceptions import MCPError

    from agent_memory.api.http.server import serving
    from agent_memory.security.api_keys import revoke_key

    writer = await create_key(services.pool, tenant, "write")
    stranger = (await create_key(services.pool, f"{tenant}-b", "erase")).token

    def over_http(url: str, token: str) -> Client:
        return Client(streamable_http_client(url, http_client=create_mcp_http_client(
            headers={"Authorization": f"Bearer {token}"})))

    async with running_worker(), serving(client) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with httpx.AsyncClient() as raw:
            hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            for headers in ({}, {"Authorization": "Bearer amk:x:y:z"}, {"Authorization": "Basic Zm9vOmJhcg=="}):
                refused = await raw.post(url, json=hello, headers=headers)
                assert refused.status_code == 401, refused.text
                assert refused.headers["content-type"] == "application/problem+json"
                assert refused.headers["www-authenticate"] == "Bearer"
        async with over_http(url, writer.token) as mcp:
            assert {t.name for t in (await mcp.list_tools()).tools} == {
                "remember", "end_session", "context", "facts", "entities", "relations", "recall", "correct", "forget",
                "restore", "claim_tool_call", "record_tool_call", "stale_marks", "resolve_mark"}
            remembered = payload(await mcp.call_tool("remember", {
                "subject": "lin", "session": "h1", "turns": [{"role": "user", "content": "I live in Oslo."}]}))
            assert remembered["inserted"] == 1
            ended = payload(await mcp.call_tool("end_session", {"subject": "lin", "session": "h1"}))
            await client.consolidation_result(client.services.temporal.get_workflow_handle(ended["workflow_id"]))
            assert "Oslo" in {f["value"] for f in payload(await mcp.call_tool("facts", {"subject": "lin"}))}
            unknown = await mcp.call_tool("forget", {"subject": "lin", "memory_id": "x"})
            assert unknown.is_error and "internal error" not in unknown.content[0].text
        async with over_http(url, stranger) as mcp:  # tenant B's key: the same subject id is another person
            assert payload(await mcp.call_tool("facts", {"subject": "lin"})) == []
        async with over_http(url, writer.token) as mcp:
            assert payload(await mcp.call_tool("facts", {"subject": "lin"}))
            # Revoked while the session is open: its next request is refused (401) at the edge.
            await revoke_key(services.pool, tenant, writer.key.key_id)
            with pytest.raises(MCPError):
                await mcp.call_tool("facts", {"subject": "lin"})


def tool_error(result) -> str:
    assert result.is_error, result
    text = result.content[0].text
    for internal in ("validation error", "pydantic", "Traceback", "type=", "input_value", "internal error"):
        assert internal not in text, text
    return text


async def test_the_tool_schemas_describe_every_parameter_with_the_rest_routes_bounds(services, tenant, task_queue):
    """What an agent reads before its first call: each tool says what it does, and each parameter
    what it is and its bounds, the same as the REST route doing the same thing."""
    from agent_memory.api.http.routes.memory import QueryRequest
    from agent_memory.api.http.routes.sessions import AppendRequest

    rest = {**QueryRequest.model_json_schema()["properties"], **AppendRequest.model_json_schema()["properties"]}

    def bounds(prop: dict) -> dict:
        merged = {k: v for branch in prop.get("anyOf", [prop]) for k, v in branch.items()}
        return {k: merged[k] for k in ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems")
                if k in merged}

    reader = (await create_key(services.pool, tenant, "read")).token
    async with Client(server(services, task_queue, reader)) as mcp:
        tools = {t.name: t for t in (await mcp.list_tools()).tools}
    for tool in tools.values():
        assert tool.description and len(tool.description) > 40, tool.name
        schemas = [tool.input_schema, *tool.input_schema.get("$defs", {}).values()]
        # (A definition without properties, such as a JSON value's, has no parameter to describe.)
        for name, prop in ((n, p) for s in schemas for n, p in s.get("properties", {}).items()):
            assert prop.get("description"), f"{tool.name}.{name} has no description"
    context, recall, remember = (tools[n].input_schema for n in ("context", "recall", "remember"))
    assert bounds(context["properties"]["budget"]) == bounds(rest["budget"]) == {"minimum": 50, "maximum": 32000}
    assert bounds(context["properties"]["query"]) == bounds(rest["query"]) == {"minLength": 1, "maxLength": 4000}
    assert bounds(recall["properties"]["limit"]) == bounds(rest["limit"]) == {"minimum": 1, "maximum": 50}
    assert bounds(recall["properties"]["query"]) == bounds(rest["query"])
    assert bounds(remember["properties"]["turns"]) == bounds(rest["messages"]) == {"minItems": 1, "maxItems": 1000}
    turn = remember["$defs"]["Turn"]["properties"]
    assert bounds(turn["content"]) == {"minLength": 1, "maxLength": 100_000}
    assert remember["properties"]["session"]["maxLength"] == 64 and "pattern" in remember["properties"]["session"]


async def test_bad_arguments_come_back_as_what_to_fix_naming_the_parameter(services, tenant, task_queue):
    writer = (await create_key(services.pool, tenant, "write")).token
    async with Client(server(services, task_queue, writer)) as mcp:
        for budget in (-5, 0, 49, 32001):
            text = tool_error(await mcp.call_tool("context", {"subject": "lin", "query": "dinner?", "budget": budget}))
            assert "budget must be between 50 and 32000" in text
        text = tool_error(await mcp.call_tool("recall", {"subject": "lin", "query": "dinner?", "limit": 500}))
        assert "limit must be between 1 and 50" in text
        text = tool_error(await mcp.call_tool("recall", {"subject": "lin/../x", "query": "dinner?"}))
        assert "subject must be 1-64 characters of letters" in text
        text = tool_error(await mcp.call_tool("remember", {"subject": "lin", "session": "big", "turns": [
            {"role": "user", "content": f"turn {n}"} for n in range(1001)]}))
        assert "turns must have between 1 and 1000 items" in text and "several calls" in text
        text = tool_error(await mcp.call_tool("remember", {"subject": "lin", "session": "big", "turns": [
            {"role": "system", "content": ""}]}))
        assert "turns.0.role" in text and "turns.0.content" in text
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM messages WHERE tenant_id = %s", (tenant,))
        assert (await cur.fetchone())[0] == 0  # nothing of a refused call is stored


async def test_remember_sent_again_without_ids_stores_each_turn_once(services, tenant, task_queue):
    """An agent whose call timed out sends it again: without message ids, the turns still land
    once. The same words said again later in the conversation are a new turn."""
    writer = (await create_key(services.pool, tenant, "write")).token
    call = {"subject": "lin", "session": "r1", "turns": [{"role": "user", "content": "I moved to Bergen."},
                                                         {"role": "assistant", "content": "Noted."},
                                                         {"role": "user", "content": "yes"}]}
    async with Client(server(services, task_queue, writer)) as mcp:
        first = payload(await mcp.call_tool("remember", call))
        assert first["inserted"] == 3
        again = payload(await mcp.call_tool("remember", call))
        assert again["inserted"] == 0 and again["duplicates"] == 3
        for turn in ({"role": "assistant", "content": "Anything else?"}, {"role": "user", "content": "yes"}):
            one = {"subject": "lin", "session": "r1", "turns": [turn]}
            assert payload(await mcp.call_tool("remember", one))["inserted"] == 1
            assert payload(await mcp.call_tool("remember", one))["inserted"] == 0  # its retry
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT role, content FROM messages WHERE tenant_id = %s AND session_id = 'r1' "
                                 "ORDER BY turn_index", (tenant,))
        stored = await cur.fetchall()
    assert [tuple(r) for r in stored] == [("user", "I moved to Bergen."), ("assistant", "Noted."), ("user", "yes"),
                                          ("assistant", "Anything else?"), ("user", "yes")]


async def test_over_mcp_a_tool_call_is_its_claimants(client, services, tenant):
    """A call claimed by one agent's key: the claim of its call key with another agent's key is
    refused without its result, and that key cannot record it."""
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    from agent_memory.api.http.server import serving

    def over_http(url: str, token: str) -> Client:
        return Client(streamable_http_client(url, http_client=create_mcp_http_client(
            headers={"Authorization": f"Bearer {token}"})))

    claimant = (await create_key(services.pool, tenant, "write", agent_id="support-bot")).token
    other = (await create_key(services.pool, tenant, "write", agent_id="billing-bot")).token
    order = {"subject": "lin", "call_key": "order-9", "tool": "place_order", "request": {"sku": "B-12"}}
    async with serving(client) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with over_http(url, claimant) as mcp:
            claimed = payload(await mcp.call_tool("claim_tool_call", order))
            assert claimed["state"] == "claimed"
            payload(await mcp.call_tool("record_tool_call", {"subject": "lin", "call_key": "order-9",
                                                             "attempt": claimed["attempt"],
                                                             "result": {"order_id": "A-9"}}))
        async with over_http(url, other) as mcp:
            refused = tool_error(await mcp.call_tool("claim_tool_call", order))
            assert "another agent's or app's call" in refused and "A-9" not in refused
            assert "no claim" in tool_error(await mcp.call_tool("record_tool_call", {
                "subject": "lin", "call_key": "order-9", "attempt": 1, "result": "forged"}))
        async with over_http(url, claimant) as mcp:
            again = payload(await mcp.call_tool("claim_tool_call", order))
            assert (again["state"], again["result"]) == ("completed", {"order_id": "A-9"})
