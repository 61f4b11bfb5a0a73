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


def server(services, task_queue: str, token: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env.update(AGENT_MEMORY_HOME=str(services.settings.home), AGENT_MEMORY_TASK_QUEUE=task_queue,
               AGENT_MEMORY_API_KEY=token)
    return StdioServerParameters(command=sys.executable, args=["-m", "workers.cli", "mcp"], env=env)


def payload(result) -> object:
    assert not result.is_error, result
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        return structured.get("result", structured)
    return json.loads(result.content[0].text)


async def test_an_agent_remembers_ends_a_session_and_reads_memory_through_mcp(client, services, tenant, task_queue,
                                                                                running_worker):
    writer = (await create_key(services.pool, tenant, "write")).token
    operator = (await create_key(services.pool, tenant, "erase")).token
    async with running_worker():
        async with Client(server(services, task_queue, writer)) as mcp:
            tools = {t.name for t in (await mcp.list_tools()).tools}
            assert tools == {"remember", "end_session", "context", "facts", "recall", "forget"}
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
            facts = payload(await mcp.call_tool("facts", {"subject": "lin"}))
            assert "Oslo" in {f["value"] for f in facts}
            context = payload(await mcp.call_tool("context", {"subject": "lin", "query": "what should I cook?"}))
            assert "peanut" in context["text"].lower()
            refused = await mcp.call_tool("forget", {"subject": "lin", "memory_id": facts[0]["memory_id"]})
            assert refused.is_error and "needs 'erase'" in refused.content[0].text
        async with Client(server(services, task_queue, operator)) as mcp:
            oslo = next(f for f in facts if f["value"] == "Oslo")
            forgotten = payload(await mcp.call_tool("forget", {"subject": "lin", "memory_id": oslo["memory_id"],
                                                                "reason": "ticket 3"}))
            assert forgotten["memory_kind"] == "fact"
            assert "Oslo" not in {f["value"] for f in payload(await mcp.call_tool("facts", {"subject": "lin"}))}


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
                "remember", "end_session", "context", "facts", "recall", "forget"}
            remembered = payload(await mcp.call_tool("remember", {
                "subject": "lin", "session": "h1", "turns": [{"role": "user", "content": "I live in Oslo."}]}))
            assert remembered["inserted"] == 1
            ended = payload(await mcp.call_tool("end_session", {"subject": "lin", "session": "h1"}))
            await client.consolidation_result(client.services.temporal.get_workflow_handle(ended["workflow_id"]))
            assert "Oslo" in {f["value"] for f in payload(await mcp.call_tool("facts", {"subject": "lin"}))}
            refused_tool = await mcp.call_tool("forget", {"subject": "lin", "memory_id": "x"})
            assert refused_tool.is_error and "needs 'erase'" in refused_tool.content[0].text
        async with over_http(url, stranger) as mcp:  # tenant B's key: the same subject id is another person
            assert payload(await mcp.call_tool("facts", {"subject": "lin"})) == []
        async with over_http(url, writer.token) as mcp:
            assert payload(await mcp.call_tool("facts", {"subject": "lin"}))
            # Revoked while the session is open: its next request is refused (401) at the edge.
            await revoke_key(services.pool, tenant, writer.key.key_id)
            with pytest.raises(MCPError):
                await mcp.call_tool("facts", {"subject": "lin"})
