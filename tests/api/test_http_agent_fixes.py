"""The agent fixes memory over HTTP with a write key: it corrects a fact citing the subject's
message (conditional on the version it read), forgets a memory and restores it; a read key
changes nothing; each change is audited as the agent's, with the key id."""

from __future__ import annotations

from agent_memory.security.api_keys import create_key
from agent_memory.store.db import tenant_transaction
from tests.api.test_http_api import MESSAGES, api, bearer


async def test_an_agent_corrects_forgets_and_restores_a_fact_with_a_write_key(client, services, tenant):
    writer = await create_key(services.pool, tenant, "write")
    reader = (await create_key(services.pool, tenant, "read")).token
    async with api(client) as http:
        appended = await http.post("/v1/subjects/lin/sessions/h1/messages", headers=bearer(writer.token),
                                   json={"messages": MESSAGES})
        assert appended.status_code == 200, appended.text
        url = "/v1/subjects/lin/facts/location/home_city"
        body = {"value": "Oslo", "expected_version": 0, "evidence_message_ids": ["h1:1"]}
        assert (await http.put(url, headers=bearer(reader), json=body)).status_code == 403
        written = await http.put(url, headers=bearer(writer.token), json=body)
        assert written.status_code == 200 and written.json()["facts_written"] == 1, written.text
        again = await http.put(url, headers=bearer(writer.token), json={**body, "value": "Bergen"})
        assert again.status_code == 409  # the fact moved on since version 0 was read
        assert again.headers["content-type"] == "application/problem+json"
        [oslo] = (await http.get("/v1/subjects/lin/facts", headers=bearer(reader))).json()
        corrected = await http.put(url, headers=bearer(writer.token),
                                   json={**body, "value": "Bergen", "expected_version": oslo["version"]})
        assert corrected.status_code == 200, corrected.text
        [bergen] = (await http.get("/v1/subjects/lin/facts", headers=bearer(reader))).json()
        assert bergen["value"] == "Bergen" and bergen["evidence_message_ids"] == ["h1:1"]
        memory = f"/v1/subjects/lin/memories/{bergen['memory_id']}"
        assert (await http.post(memory + "/forget", headers=bearer(reader), json={})).status_code == 403
        forgotten = await http.post(memory + "/forget", headers=bearer(writer.token), json={"reason": "asked"})
        assert forgotten.status_code == 200, forgotten.text
        assert (await http.get("/v1/subjects/lin/facts", headers=bearer(reader))).json() == []
        restored = await http.post(memory + "/restore", headers=bearer(writer.token), json={})
        assert restored.status_code == 200, restored.text
        assert [f["value"] for f in (await http.get("/v1/subjects/lin/facts", headers=bearer(reader))).json()] \
            == ["Bergen"]
        unknown_field = await http.put(url, headers=bearer(writer.token), json={**body, "confidence": 1})
        assert unknown_field.status_code == 422 and unknown_field.json()["errors"][0]["field"] == "confidence"
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT DISTINCT actor, actor_id FROM memory_events WHERE tenant_id = %s "
                                 "AND actor <> 'consolidation'", (tenant,))
        assert set(await cur.fetchall()) == {("agent", f"api-key:{writer.key.key_id}")}
