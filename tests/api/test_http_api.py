"""The HTTP API through a real HTTP client (httpx) against a real uvicorn server on the session's
stack: keys and scopes, the hooks and reads, problem+json errors, the body limit, and a key of
tenant A that can read, write or erase nothing of tenant B."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from agent_memory.api.http.edge import MAX_BODY_BYTES
from agent_memory.api.http.server import serving
from agent_memory.core.models import ErasureReceipt
from agent_memory.security.api_keys import create_key

MESSAGES = [{"message_id": "h1:1", "turn_index": 0, "role": "user", "content": "I live in Oslo.",
             "created_at": "2024-05-01T09:00:00Z"},
            {"message_id": "h1:2", "turn_index": 1, "role": "user", "content": "I'm allergic to peanuts.",
             "created_at": "2024-05-01T09:01:00Z"}]


@asynccontextmanager
async def api(client) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(client) as port, httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
        yield http


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_the_hooks_and_reads_over_http(client, services, tenant, running_worker):
    writer = (await create_key(services.pool, tenant, "write")).token
    reader = (await create_key(services.pool, tenant, "read")).token
    async with running_worker(), api(client) as http:
        assert (await http.get("/v1/health")).json() == {"status": "ok"}
        spec = (await http.get("/v1/openapi.json")).json()
        assert "/v1/subjects/{subject_id}/sessions/{session_id}/messages" in spec["paths"]
        appended = await http.post("/v1/subjects/lin/sessions/h1/messages", headers=bearer(writer),
                                   json={"messages": MESSAGES})
        assert appended.status_code == 200 and appended.json()["inserted"] == 2
        again = await http.post("/v1/subjects/lin/sessions/h1/messages", headers=bearer(writer),
                                json={"messages": MESSAGES})
        assert again.json()["inserted"] == 0 and again.json()["duplicates"] == 2  # idempotent by message id
        ended = await http.post("/v1/subjects/lin/sessions/h1/end", headers=bearer(writer))
        assert ended.status_code == 200 and ended.json()["workflow_id"] == f"consolidate/{tenant}/lin/h1"
        await client.consolidation_result(client.services.temporal.get_workflow_handle(ended.json()["workflow_id"]))
        run = await http.get(f"/v1/runs/{ended.json()['workflow_id']}", headers=bearer(reader))
        assert run.json()["status"] == "completed" and run.json()["result"]["facts_written"] >= 1
        facts = await http.get("/v1/subjects/lin/facts", headers=bearer(reader))
        assert "Oslo" in {f["value"] for f in facts.json()}
        context = await http.post("/v1/subjects/lin/context", headers=bearer(reader), json={"query": "what to cook?"})
        assert context.status_code == 200 and "peanut" in context.json()["text"].lower()
        recall = await http.post("/v1/subjects/lin/recall", headers=bearer(reader), json={"query": "where?"})
        assert recall.status_code == 200 and recall.json()["facts"]
        prompt = await http.post("/v1/subjects/lin/prompt", headers=bearer(reader),
                                 json={"session_id": "h2", "input": "dinner ideas?"})
        assert prompt.json()["messages"][-1] == {"role": "user", "content": "dinner ideas?"}
        export = await http.get("/v1/subjects/lin/export", headers=bearer(reader))
        assert export.status_code == 200 and export.json()["subject_id"] == "lin"
        # A read key cannot write; no key, or a wrong one, is 401; problem+json every time.
        refused = await http.post("/v1/subjects/lin/sessions/h1/end", headers=bearer(reader))
        assert refused.status_code == 403 and refused.headers["content-type"] == "application/problem+json"
        assert "needs 'write'" in refused.json()["detail"]
        assert (await http.get("/v1/subjects/lin/facts")).status_code == 401
        forged = writer.rsplit(":", 1)[0] + ":" + "x" * 43
        assert (await http.get("/v1/subjects/lin/facts", headers=bearer(forged))).status_code == 401


async def test_errors_name_the_field_and_the_body_is_limited(client, services, tenant):
    writer = (await create_key(services.pool, tenant, "write")).token
    async with api(client) as http:
        bad = await http.post("/v1/subjects/lin/sessions/h1/messages", headers=bearer(writer),
                              json={"messages": [{"message_id": "x", "turn_index": -1, "role": "user",
                                                  "content": "hi", "created_at": "2024-05-01T09:00:00Z"}]})
        assert bad.status_code == 422 and bad.headers["content-type"] == "application/problem+json"
        assert bad.json()["detail"].startswith("messages.0.turn_index") and bad.json()["errors"]
        one_position = await http.post("/v1/subjects/lin/sessions/h1/messages", headers=bearer(writer), json={
            "messages": [MESSAGES[0], {**MESSAGES[1], "turn_index": 0}]})
        assert one_position.status_code == 422, one_position.text
        assert "messages[1].turn_index: position 0 is also given to message 'h1:1'" in one_position.json()["detail"]
        bad_subject = await http.get("/v1/subjects/no%20spaces/facts", headers=bearer(writer))
        assert bad_subject.status_code == 422 and "subject" in bad_subject.json()["detail"]
        huge = await http.post("/v1/subjects/lin/sessions/h1/messages",
                               headers={**bearer(writer), "content-type": "application/json"},
                               content=b"{" + b" " * (MAX_BODY_BYTES + 10) + b"}")
        assert huge.status_code == 413 and "over 1,000,000 bytes" in huge.json()["detail"]

        async def chunks():  # no Content-Length: counted as it arrives
            for _ in range(20):
                yield b" " * 100_000

        chunked = await http.post("/v1/subjects/lin/sessions/h1/messages",
                                  headers={**bearer(writer), "content-type": "application/json"}, content=chunks())
        assert chunked.status_code == 413 and chunked.headers["content-type"] == "application/problem+json"
        unknown = await http.post("/v1/subjects/lin/sessions/nope/end", headers=bearer(writer))
        assert unknown.status_code == 404 and "no session 'nope'" in unknown.json()["detail"]


async def test_a_key_of_one_tenant_reaches_nothing_of_another(client, services, tenant, running_worker):
    other = f"t-{uuid.uuid4().hex[:12]}"
    owner = (await create_key(services.pool, other, "erase")).token
    intruder = (await create_key(services.pool, tenant, "erase")).token
    async with running_worker(), api(client) as http:
        await http.post("/v1/subjects/lin/sessions/h1/messages", headers=bearer(owner), json={"messages": MESSAGES})
        ended = await http.post("/v1/subjects/lin/sessions/h1/end", headers=bearer(owner))
        await client.consolidation_result(client.services.temporal.get_workflow_handle(ended.json()["workflow_id"]))
        # The intruder's key names its own tenant: the same paths show it nothing of the other's.
        assert (await http.get("/v1/subjects/lin/facts", headers=bearer(intruder))).json() == []
        run = await http.get(f"/v1/runs/{ended.json()['workflow_id']}", headers=bearer(intruder))
        assert run.status_code == 404
        reader = (await create_key(services.pool, other, "read")).token
        end = await http.post("/v1/subjects/lin/sessions/h1/end", headers=bearer(intruder))
        assert end.status_code == 404  # no such session in the intruder's tenant
        erased = await http.post("/v1/subjects/lin/erasure", headers=bearer(intruder), json={"reason": "x"})
        assert erased.status_code == 404 and "has no data" in erased.json()["detail"]
        # A key that claims the other tenant with a secret it does not have is refused.
        claimed = intruder.replace(f"amk:{tenant}:", f"amk:{other}:")
        assert (await http.get("/v1/subjects/lin/facts", headers=bearer(claimed))).status_code == 401
        # The owner still has everything.
        assert "Oslo" in {f["value"] for f in (await http.get("/v1/subjects/lin/facts", headers=bearer(owner))).json()}
        erase = await http.post("/v1/subjects/lin/erasure", headers=bearer(owner), json={"reason": "art. 17"})
        assert erase.status_code == 200
        receipt = await client.admin.erasure_receipt(client.services.temporal.get_workflow_handle(
            erase.json()["workflow_id"], result_type=ErasureReceipt))
        # A read key of the same tenant does not see an erasure's result.
        hidden = await http.get(f"/v1/runs/{erase.json()['workflow_id']}", headers=bearer(reader))
        assert hidden.status_code == 403
    assert receipt.residue_total == 0 and receipt.data_found


async def test_keys_are_created_listed_and_revoked_from_the_cli(client, services, tenant):
    import json

    from tests.cli.runner import run_cli

    created = run_cli(services, "keys", "create", "--tenant", tenant, "--scope", "read", "--name", "bot", "--json")
    assert created.returncode == 0, created.stderr
    token, key_id = json.loads(created.stdout)["token"], json.loads(created.stdout)["key"]["key_id"]
    listed = run_cli(services, "keys", "list", "--tenant", tenant, "--json")
    assert [(k["key_id"], k["scope"], k["name"]) for k in json.loads(listed.stdout)] == [(key_id, "read", "bot")]
    assert token not in listed.stdout and "secret" not in listed.stdout
    async with api(client) as http:
        assert (await http.get("/v1/subjects/lin/facts", headers=bearer(token))).status_code == 200
        revoked = run_cli(services, "keys", "revoke", "--tenant", tenant, "--key-id", key_id)
        assert revoked.returncode == 0 and "revoked" in revoked.stdout
        gone = await http.get("/v1/subjects/lin/facts", headers=bearer(token))
        assert gone.status_code == 401 and "revoked" in gone.json()["detail"]
    again = run_cli(services, "keys", "revoke", "--tenant", tenant, "--key-id", key_id)
    assert again.returncode == 2 and "no active API key" in again.stderr
