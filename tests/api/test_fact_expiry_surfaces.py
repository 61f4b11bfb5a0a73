"""A fact written with an expiry over HTTP (PUT with `expires_at` or `ttl_seconds`) and through
the MCP tool `correct`: it holds until its end and no read returns it after; an expiry out of
bounds is a 422 (a tool error over MCP) naming the field, and nothing is written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mcp.client import Client

from agent_memory.security.api_keys import create_key
from tests.api.test_http_api import MESSAGES, api, bearer
from tests.api.test_mcp_server import payload, server

URL = "/v1/subjects/lin/facts/home/gate_code"


async def test_a_fact_put_with_an_expiry_is_read_until_its_end_and_never_after(client, services, tenant):
    writer = (await create_key(services.pool, tenant, "write")).token
    reader = (await create_key(services.pool, tenant, "read")).token
    said_at = datetime.now(UTC).replace(microsecond=0) - timedelta(days=2)
    messages = [{**m, "created_at": (said_at + timedelta(minutes=i)).isoformat()} for i, m in enumerate(MESSAGES)]
    async with api(client) as http:
        appended = await http.post("/v1/subjects/lin/sessions/h1/messages", headers=bearer(writer),
                                   json={"messages": messages})
        assert appended.status_code == 200, appended.text
        body = {"value": "4711", "expected_version": 0, "evidence_message_ids": ["h1:1"],
                "observed_at": said_at.isoformat(), "ttl_seconds": 86400}
        written = await http.put(URL, headers=bearer(writer), json=body)
        assert written.status_code == 200, written.text
        held = await http.put("/v1/subjects/lin/facts/diet/allergy", headers=bearer(writer), json={
            "value": "peanuts", "expected_version": 0, "evidence_message_ids": ["h1:2"],
            "observed_at": said_at.isoformat(), "expires_at": (said_at + timedelta(days=7)).isoformat()})
        assert held.status_code == 200, held.text

        while_held = (said_at + timedelta(hours=1)).isoformat()
        then = (await http.get("/v1/subjects/lin/facts", headers=bearer(reader), params={"as_of": while_held})).json()
        assert {f["key"]: f["permanence"] for f in then} == {"gate_code": "temporary", "allergy": "temporary"}
        now = (await http.get("/v1/subjects/lin/facts", headers=bearer(reader))).json()
        assert [f["value"] for f in now] == ["peanuts"]
        query = {"query": "what is the gate code, any allergy?"}
        context = await http.post("/v1/subjects/lin/context", headers=bearer(reader),
                                  json={**query, "as_of": while_held})
        assert "4711" in context.json()["text"]
        context = await http.post("/v1/subjects/lin/context", headers=bearer(reader), json=query)
        assert "4711" not in context.json()["text"] and "peanuts" in context.json()["text"]
        recalled = await http.post("/v1/subjects/lin/recall", headers=bearer(reader), json=query)
        assert [f["value"] for f in recalled.json()["facts"]] == ["peanuts"]

        for wrong, field in (({"ttl_seconds": 0}, "ttl_seconds"),
                             ({"ttl_seconds": 86400, "expires_at": "2030-01-01T00:00:00Z"}, "expires_at, ttl_seconds"),
                             ({"ttl_seconds": None, "expires_at": (said_at - timedelta(hours=1)).isoformat()},
                              "expires_at")):
            refused = await http.put("/v1/subjects/lin/facts/home/door_code", headers=bearer(writer),
                                     json={**body, **wrong})
            assert refused.status_code == 422, refused.text
            assert refused.json()["detail"].startswith(f"{field}: "), refused.json()
        history = (await http.get("/v1/subjects/lin/facts", headers=bearer(reader), params={"history": "true"})).json()
        assert "door_code" not in {f["key"] for f in history}


async def test_the_mcp_correct_tool_writes_a_fact_with_an_expiry(client, services, tenant, task_queue):
    writer = (await create_key(services.pool, tenant, "write")).token
    async with Client(server(services, task_queue, writer)) as mcp:
        payload(await mcp.call_tool("remember", {"subject": "lin", "session": "m1", "turns": [
            {"role": "user", "content": "The gate code is 4711 this week.", "message_id": "m1:a"}]}))
        fact = {"subject": "lin", "namespace": "home", "key": "gate_code", "value": "4711", "expected_version": 0,
                "evidence": ["m1:a"]}
        too_short = await mcp.call_tool("correct", {**fact, "ttl_seconds": 30})
        assert too_short.is_error and "ttl_seconds" in too_short.content[0].text
        past = await mcp.call_tool("correct", {**fact, "expires_at": "2020-01-01T00:00:00Z"})
        assert past.is_error and "expires_at" in past.content[0].text
        started = datetime.now(UTC)
        assert payload(await mcp.call_tool("correct", {**fact, "ttl_seconds": 7 * 86400}))["facts_written"] == 1
    [gate] = await client.facts(tenant, "lin")
    assert gate.permanence == "temporary" and gate.valid_to is not None
    assert started + timedelta(days=7) <= gate.valid_to <= datetime.now(UTC) + timedelta(days=7)
