"""An erasure receipt names its subject by the keyed digest wherever it is read: the run's
result (`/v1/runs`), the request's status (`/v1/erasures`) and the subject's export; the run
itself shows its ids and counts in clear."""

from __future__ import annotations

from temporalio.api.sdk.v1 import WorkflowMetadata

from agent_memory.security.api_keys import create_key
from tests.api.test_http_api import MESSAGES, api, bearer


async def test_the_receipt_shows_the_subject_digest_in_runs_erasures_and_export(client, services, tenant,
                                                                                running_worker):
    owner = (await create_key(services.pool, tenant, "erase")).token
    digest = services.keyring.subject_digest(tenant, "lin")
    async with running_worker(), api(client) as http:
        await http.post("/v1/subjects/lin/sessions/h1/messages", headers=bearer(owner), json={"messages": MESSAGES})
        ended = await http.post("/v1/subjects/lin/sessions/h1/end", headers=bearer(owner))
        await client.consolidation_result(client.services.temporal.get_workflow_handle(ended.json()["workflow_id"]))
        erase = await http.post("/v1/subjects/lin/erasure", headers=bearer(owner),
                                json={"reason": "art. 17", "request_id": "req-digest"})
        workflow_id = erase.json()["workflow_id"]
        erasure_run = client.services.temporal.get_workflow_handle(workflow_id)
        await erasure_run.result()
        # What the UI shows of the run without the key: ids in its summary, counts in its details.
        described = await erasure_run.describe()
        assert await described.static_summary() == f"erase {tenant}/lin/req-digest"
        current = await erasure_run.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        assert current.current_details.startswith("**done**") and "residue: 0" in current.current_details
        run = (await http.get(f"/v1/runs/{workflow_id}", headers=bearer(owner))).json()
        status = (await http.get("/v1/erasures/req-digest", headers=bearer(owner))).json()
        export = (await http.get("/v1/subjects/lin/export", headers=bearer(owner))).json()
    receipts = {"run": run["result"], "status": status["receipt"],
                "export": export["erasure_requests"][0]["receipt"]}
    for where, receipt in receipts.items():
        assert receipt["subject_id"] == digest, where
        assert receipt["request_id"] == "req-digest" and receipt["residue_total"] == 0, where
    assert digest.startswith("erased:")
