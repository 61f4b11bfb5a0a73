"""An agent's side-effecting tool call made once over HTTP: claim before the call and record
after with a write key, read the record with a read key; the answers a retry gets, the 409 of a
used key with another request, the 404 of a record without a claim, the 422 naming the field,
and nothing of another tenant, nor of another agent of the same tenant."""

from __future__ import annotations

from agent_memory.security.api_keys import create_key
from tests.api.test_http_api import api, bearer

CLAIM = "/v1/subjects/lin/tool-calls/order-77/claim"
RESULT = "/v1/subjects/lin/tool-calls/order-77/result"
ORDER = {"tool": "place_order", "request": {"sku": "B-12", "quantity": 2}}


async def test_a_tool_call_is_claimed_recorded_and_replayed_over_http(client, services, tenant):
    writer = bearer((await create_key(services.pool, tenant, "write")).token)
    reader = bearer((await create_key(services.pool, tenant, "read")).token)
    stranger = bearer((await create_key(services.pool, f"{tenant}-other", "erase")).token)
    async with api(client) as http:
        first = await http.post(CLAIM, json=ORDER, headers=writer)
        assert first.status_code == 200, first.text
        assert (first.json()["state"], first.json()["attempt"]) == ("claimed", 1)
        assert (await http.post(CLAIM, json=ORDER, headers=writer)).json()["state"] == "in_flight"

        done = await http.post(RESULT, json={"attempt": 1, "result": {"order_id": "A-9"}}, headers=writer)
        assert done.status_code == 200 and done.json()["state"] == "completed"
        retried = await http.post(CLAIM, json=ORDER, headers=writer)
        assert (retried.json()["state"], retried.json()["result"]) == ("completed", {"order_id": "A-9"})
        read = await http.get("/v1/subjects/lin/tool-calls/order-77", headers=reader)
        assert read.status_code == 200 and read.json()["result"] == {"order_id": "A-9"}

        other = await http.post(CLAIM, json={**ORDER, "request": {"sku": "B-13"}}, headers=writer)
        assert other.status_code == 409 and other.headers["content-type"] == "application/problem+json"
        assert "new call_key" in other.json()["detail"]
        assert (await http.post(CLAIM, json=ORDER, headers=reader)).status_code == 403
        assert (await http.post(CLAIM, json=ORDER)).status_code == 401
        # Another tenant's key: the same subject and key there have no record.
        assert (await http.get("/v1/subjects/lin/tool-calls/order-77", headers=stranger)).status_code == 404

        unclaimed = await http.post("/v1/subjects/lin/tool-calls/order-78/result",
                                    json={"attempt": 1, "result": None}, headers=writer)
        assert unclaimed.status_code == 404 and "claim it before the call" in unclaimed.json()["detail"]
        bad_key = await http.post("/v1/subjects/lin/tool-calls/bad%20key/claim", json=ORDER, headers=writer)
        assert bad_key.status_code == 422 and "call_key" in bad_key.json()["detail"]
        bad_lease = await http.post(CLAIM, json={**ORDER, "lease_seconds": 0}, headers=writer)
        assert bad_lease.status_code == 422 and "lease_seconds" in bad_lease.text
        extra = await http.post(RESULT, json={"attempt": 1, "result": 1, "status": "ok"}, headers=writer)
        assert extra.status_code == 422 and "status" in extra.text


async def test_a_tool_call_is_its_claimants_and_no_other_agents_key_reads_it(client, services, tenant):
    """A call claimed with a key limited to an agent answers that agent's keys only: another
    agent's key, and a key of the tenant limited to no agent, are told it does not exist."""
    claimant = bearer((await create_key(services.pool, tenant, "write", agent_id="support-bot")).token)
    same_agent = bearer((await create_key(services.pool, tenant, "read", agent_id="support-bot")).token)
    other_agent = bearer((await create_key(services.pool, tenant, "write", agent_id="billing-bot")).token)
    other_reader = bearer((await create_key(services.pool, tenant, "read", agent_id="billing-bot")).token)
    tenant_wide = bearer((await create_key(services.pool, tenant, "write")).token)
    record = "/v1/subjects/lin/tool-calls/order-77"
    async with api(client) as http:
        assert (await http.post(CLAIM, json=ORDER, headers=claimant)).json()["state"] == "claimed"
        done = await http.post(RESULT, json={"attempt": 1, "result": {"order_id": "A-9"}}, headers=claimant)
        assert done.status_code == 200
        mine = await http.get(record, headers=same_agent)  # the agent's other key
        assert mine.status_code == 200 and mine.json()["result"] == {"order_id": "A-9"}
        for stranger in (other_agent, other_reader, tenant_wide):
            hidden = await http.get(record, headers=stranger)
            assert hidden.status_code == 404 and "A-9" not in hidden.text
            never = (await http.get(record + "-never", headers=stranger)).json()["detail"]
            assert hidden.json()["detail"] == never.replace("order-77-never", "order-77")  # as if never claimed
        for stranger in (other_agent, tenant_wide):
            taken = await http.post(CLAIM, json=ORDER, headers=stranger)
            assert taken.status_code == 409 and "A-9" not in taken.text, taken.text
            overwritten = await http.post(RESULT, json={"attempt": 1, "result": "forged"}, headers=stranger)
            assert overwritten.status_code == 404
        # The claimant's retry still gets its result back, unchanged.
        retried = await http.post(CLAIM, json=ORDER, headers=claimant)
        assert (retried.json()["state"], retried.json()["result"]) == ("completed", {"order_id": "A-9"})
        # A call claimed with a tenant-wide key is the tenant's: its read keys read it, agents' keys do not.
        other_call = "/v1/subjects/lin/tool-calls/order-80"
        assert (await http.post(other_call + "/claim", json=ORDER, headers=tenant_wide)).status_code == 200
        tenant_reader = bearer((await create_key(services.pool, tenant, "read")).token)
        assert (await http.get(other_call, headers=tenant_reader)).status_code == 200
        assert (await http.get(other_call, headers=same_agent)).status_code == 404
