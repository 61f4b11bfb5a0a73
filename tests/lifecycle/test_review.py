"""The daily review on the real stack: sessions consolidated and facts written long ago are
reviewed by ReviewWorkflow; the marks show in `stats`, over HTTP (a typed route of the OpenAPI
document) and in `review list`; `memory.stale` reaches a real local receiver with ids and no
memory text; a mark is resolved by keeping (a confirmation), by a correction and by forgetting;
a marked fact weighs less in recall; a rebuild from the event log reproduces the marks; a second
review of the same data marks nothing."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import psycopg
from mcp.client import Client

from agent_memory.core import contract
from agent_memory.lifecycle.review import ReviewInput, ReviewResult
from agent_memory.memory.write_policy import WritePolicy
from agent_memory.projection.rebuild import projection_digest
from agent_memory.recall.context import ContextItem, _down_weight_marked
from agent_memory.recall.recall_policy import STALE_WEIGHT
from agent_memory.security.api_keys import create_key
from agent_memory.security.operator_keys import create_operator_key
from agent_memory.security.webhook_signing import verify_webhook
from agent_memory.store.db import tenant_transaction
from tests.api.test_console import console, sign_in
from tests.api.test_http_api import api, bearer
from tests.api.test_mcp_server import payload, server
from tests.cli.runner import run_cli
from tests.sessions import session
from tests.workflows.test_webhooks import Receiver, wait_for, webhook_stack

SUBJECT = "lin"
PROBLEM = "application/problem+json"
LONG_AGO = datetime(2024, 1, 10, 9, tzinfo=UTC)


async def _review(client, task_queue: str, tenant: str) -> ReviewResult:
    """One review of the test's tenant (other tests' tenants share the database)."""
    return await client.services.temporal.execute_workflow(
        contract.REVIEW_WORKFLOW, ReviewInput(tenant_id=tenant), id=f"review/test-{uuid.uuid4().hex[:12]}", task_queue=task_queue,
        result_type=ReviewResult)


async def _fact(client, tenant: str, key: str):
    [fact] = [f for f in await client.facts(tenant, SUBJECT) if f.key == key]
    return fact


async def test_the_review_marks_reports_and_resolves_stale_memory(services, tenant, task_queue):
    reader = bearer((await create_key(services.pool, tenant, "read")).token)
    writer = bearer((await create_key(services.pool, tenant, "write")).token)
    receiver = Receiver()
    receiver.start()
    try:
        async with webhook_stack(services, task_queue) as client, api(client) as http:
            endpoint = await client.admin.add_webhook(tenant, receiver.url, ["memory.stale"])
            said = session("r-1", "2024-03-01T09:00:00Z", "I live in Hangzhou.", "I'm allergic to peanuts.")
            await client.append_messages(tenant, SUBJECT, said)
            done = await client.consolidation_result(await client.end_session(tenant, SUBJECT, "r-1"))
            assert done.refused_reason is None and done.facts_written >= 1
            home = await _fact(client, tenant, "home_city")
            # Two more facts stated long ago, directly: a trip (30 days' shelf life) and an employer (365).
            await client.write_fact(tenant, SUBJECT, "travel", "trip_city", "Rome", expected_version=0,
                                    evidence_message_ids=["r-1:1"], observed_at=LONG_AGO, actor="agent")
            await client.write_fact(tenant, SUBJECT, "work", "employer", "Acme", expected_version=0,
                                    evidence_message_ids=["r-1:1"], observed_at=LONG_AGO, actor="agent")
            await client.admin.wait_for_projection(tenant, SUBJECT)

            reviewed = await _review(client, task_queue, tenant)
            assert reviewed.marked.get("stale") == 3, reviewed
            marks = {m.memory_id: m for m in await client.admin.stale_marks(tenant)}
            trip, employer = await _fact(client, tenant, "trip_city"), await _fact(client, tenant, "employer")
            assert set(marks) == {home.memory_id, trip.memory_id, employer.memory_id}
            assert all(m.reason == "stale" and m.in_force for m in marks.values())
            allergy = [f for f in await client.facts(tenant, SUBJECT) if f.namespace == "diet"]
            assert allergy and all(f.stale_reasons == [] for f in allergy)  # diet has no shelf life

            # Down-weighted: recall lists the unmarked facts first.
            recalled = await client.recall(tenant, SUBJECT, "where do I live")
            flags = [bool(f.stale_reasons) for f in recalled.facts]
            assert flags == sorted(flags) and any(flags)

            # stats, the CLI listing and the typed route.
            stats = json.loads(run_cli(services, "stats", "--tenant", tenant, "--json").stdout)
            assert stats["review"]["in_force"] == {"stale": 3}
            listed = run_cli(services, "review", "list", "--tenant", tenant, "--json")
            assert listed.returncode == 0, listed.stderr
            assert {m["mark_id"] for m in json.loads(listed.stdout)} == {m.mark_id for m in marks.values()}
            spec = (await http.get("/v1/openapi.json")).json()
            assert "/v1/stale-marks" in spec["paths"]
            assert "/v1/subjects/{subject_id}/stale-marks/{mark_id}/resolve" in spec["paths"]
            over_http = await http.get("/v1/stale-marks", params={"subject_id": SUBJECT}, headers=reader)
            assert over_http.status_code == 200, over_http.text
            assert {m["memory_id"] for m in over_http.json()} == set(marks)
            assert (await http.get("/v1/stale-marks")).status_code == 401

            # memory.stale delivered, signed, with ids and reasons, no memory text.
            found = await wait_for(client, tenant, lambda f: len(f) == 3 and all(d.status == "delivered" for d in f))
            assert {d.event_type for d in found} == {"memory.stale"}
            bodies = [verify_webhook(endpoint.secret, r.headers, r.body) for r in receiver.requests]
            assert {b["data"]["memory_id"] for b in bodies} == set(marks)
            assert {b["data"]["mark_id"] for b in bodies} == {m.mark_id for m in marks.values()}
            assert all(b["type"] == "memory.stale" and b["data"]["reason"] == "stale" for b in bodies)
            for r in receiver.requests:
                assert b"Hangzhou" not in r.body and b"Rome" not in r.body and b"Acme" not in r.body

            # keep over HTTP: a confirmation.
            kept = await http.post(f"/v1/subjects/{SUBJECT}/stale-marks/{marks[home.memory_id].mark_id}/resolve",
                                   json={"resolution": "keep"}, headers=writer)
            assert kept.status_code == 200, kept.text
            assert kept.json()["confirmed"] and kept.json()["mark"]["resolution"] == "keep"
            assert (await _fact(client, tenant, "home_city")).last_confirmed_at > home.last_confirmed_at
            again = await http.post(f"/v1/subjects/{SUBJECT}/stale-marks/{marks[home.memory_id].mark_id}/resolve",
                                    json={"resolution": "keep"}, headers=writer)
            assert again.status_code == 409 and again.headers["content-type"] == PROBLEM
            unknown = await http.post(f"/v1/subjects/{SUBJECT}/stale-marks/{uuid.uuid4()}/resolve",
                                      json={"resolution": "keep"}, headers=writer)
            assert unknown.status_code == 404 and unknown.headers["content-type"] == PROBLEM
            refused = await http.post(f"/v1/subjects/{SUBJECT}/stale-marks/{marks[trip.memory_id].mark_id}/resolve",
                                      json={"resolution": "keep"}, headers=reader)
            assert refused.status_code == 403

            # a correction over HTTP resolves the mark of the fact it corrects.
            corrected = await http.put(f"/v1/subjects/{SUBJECT}/facts/travel/trip_city", headers=writer,
                                       json={"value": "Naples", "expected_version": trip.version,
                                             "evidence_message_ids": ["r-1:1"]})
            assert corrected.status_code == 200, corrected.text
            [trip_mark] = [m for m in await client.admin.stale_marks(tenant, include_resolved=True)
                           if m.memory_id == trip.memory_id]
            assert (trip_mark.state, trip_mark.resolution) == ("resolved", "correct")

            # forget from the command line.
            forgot = run_cli(services, "review", "resolve", "--tenant", tenant, "--subject", SUBJECT, "--mark-id",
                             marks[employer.memory_id].mark_id, "--resolution", "forget", "--json")
            assert forgot.returncode == 0, forgot.stderr
            assert json.loads(forgot.stdout)["forgotten"] is True
            assert not [f for f in await client.facts(tenant, SUBJECT) if f.key == "employer"]
            assert await client.admin.stale_marks(tenant) == []
            counts = await client.admin.stale_mark_counts(tenant)
            assert counts.in_force == {} and counts.resolved == 3

            # The log reproduces the marks; the same data reviewed again marks nothing.
            await client.admin.wait_for_projection(tenant, SUBJECT)
            digest = await projection_digest(services.pool, tenant, SUBJECT)
            [entry] = (await client.admin.rebuild_result(await client.admin.rebuild(tenant, SUBJECT))).subjects
            assert entry.equal and not entry.repaired and entry.rebuilt_digest == digest
            # The marks are part of the digest: one changed behind the log's back is found and put back.
            async with await psycopg.AsyncConnection.connect(services.settings.database_admin_url) as conn:
                cur = await conn.execute("UPDATE stale_marks SET state = 'open', resolution = NULL "
                                         "WHERE tenant_id = %s AND memory_id = %s",
                                         (tenant, marks[home.memory_id].mark_id))
                assert cur.rowcount == 1
                await conn.commit()
            assert await projection_digest(services.pool, tenant, SUBJECT) != digest
            [repaired] = (await client.admin.rebuild_result(await client.admin.rebuild(tenant, SUBJECT))).subjects
            assert repaired.repaired and repaired.tables_differing == ["stale_marks"]
            assert await projection_digest(services.pool, tenant, SUBJECT) == digest
            assert (await _review(client, task_queue, tenant)).marked == {}
    finally:
        receiver.stop()


HIKE = "We hiked the ridge above Zermatt and watched the ibex on the rocks."


async def test_contradicting_candidates_duplicate_notes_and_expiring_candidates_are_marked(client, services, tenant,
                                                                                           task_queue, running_worker):
    async with running_worker():
        for s in (session("d-1", "2024-03-01T09:00:00Z", "I live in Oslo.", HIKE),
                  session("d-2", "2024-04-01T09:00:00Z", HIKE)):
            await client.append_messages(tenant, SUBJECT, s)
            assert (await client.consolidation_result(await client.end_session(tenant, SUBJECT, s.session_id))
                    ).refused_reason is None
        # A later, different home held as a candidate (it needs saying twice): it contradicts Oslo.
        await client.admin.set_write_policy(tenant, WritePolicy(corroborate_keys=["location/*"]))
        later = session("d-3", "2024-05-01T09:00:00Z", "I live in Bergen.")
        await client.append_messages(tenant, SUBJECT, later)
        assert (await client.consolidation_result(await client.end_session(tenant, SUBJECT, "d-3"))
                ).refused_reason is None
        await client.admin.wait_for_projection(tenant, SUBJECT)
        facts = await client.facts(tenant, SUBJECT, candidates=True)
        [oslo] = [f for f in facts if f.key == "home_city" and f.status == "active"]
        [bergen] = [f for f in facts if f.key == "home_city" and f.status == "candidate"]

        reviewed = await _review(client, task_queue, tenant)
        marks = await client.admin.stale_marks(tenant, subject_id=SUBJECT)
        by_reason = {(m.reason, m.memory_id): m for m in marks}
        contradicted = by_reason[("contradicted", oslo.memory_id)]
        assert contradicted.related_memory_ids == [bergen.memory_id] and contradicted.fact_id == oslo.fact_id
        # Said in March 2024, the candidate is far past candidate_days - candidate_review_days.
        assert ("candidate_expiring", bergen.memory_id) in by_reason
        [duplicate] = [m for m in marks if m.reason == "duplicate"]
        async with tenant_transaction(services.pool, tenant) as conn:
            cur = await conn.execute("SELECT memory_id::text, session_id FROM observations WHERE tenant_id = %s "
                                     "AND subject_id = %s", (tenant, SUBJECT))
            notes = dict(await cur.fetchall())
        # The later session's note is marked, the earlier one is its related memory.
        assert notes[duplicate.memory_id] == "d-2" and [notes[m] for m in duplicate.related_memory_ids] == ["d-1"]
        assert reviewed.marked.get("contradicted") == 1 and reviewed.marked.get("duplicate") == 1
        [oslo_now] = [f for f in await client.facts(tenant, SUBJECT) if f.key == "home_city"]
        assert "contradicted" in oslo_now.stale_reasons

        # The duplicate note weighs STALE_WEIGHT in the context's episodic ranking: scored equal, the
        # earlier, unmarked note ranks first and the marked one keeps half its score.
        items = [ContextItem(kind="observation", memory_id=m, text=HIKE, content=HIKE, cited_message_ids=[m],
                             score=1.0) for m in (duplicate.memory_id, duplicate.related_memory_ids[0])]
        async with tenant_transaction(services.pool, tenant) as conn:
            weighed = await _down_weight_marked(conn, tenant, SUBJECT, items)
        assert [(i.memory_id, i.score) for i in weighed] == [(duplicate.related_memory_ids[0], 1.0),
                                                             (duplicate.memory_id, STALE_WEIGHT)]

        # The console's tenant page lists the marks in force: ids and reasons, no memory text.
        operator = (await create_operator_key(services.pool, "review-console")).token
        async with console(client) as http:
            assert (await sign_in(http, operator)).status_code == 303
            page = (await http.get(f"/console/t/{tenant}")).text
        marks_section = page.split('<h2 id="review">Review marks</h2>', 1)[1]
        for mark in (contradicted, duplicate):
            assert mark.mark_id in marks_section and mark.memory_id in marks_section
        assert "contradicted" in marks_section and "duplicate" in marks_section
        assert "Zermatt" not in marks_section and "Bergen" not in marks_section

        # The agent over MCP: the marks listed, the duplicate note forgotten.
        writer = (await create_key(services.pool, tenant, "write")).token
        async with Client(server(services, task_queue, writer)) as mcp:
            listed = payload(await mcp.call_tool("stale_marks", {"subject": SUBJECT}))
            assert {contradicted.mark_id, duplicate.mark_id} <= {m["mark_id"] for m in listed}
            done = payload(await mcp.call_tool("resolve_mark", {"subject": SUBJECT, "mark_id": duplicate.mark_id,
                                                                "resolution": "forget"}))
            assert done["forgotten"] is True and done["mark"]["mark_id"] == duplicate.mark_id
        assert duplicate.mark_id not in {m.mark_id for m in await client.admin.stale_marks(tenant)}

        # Kept, the contradiction stays resolved on the next review of the same candidates.
        await client.admin.resolve_stale_mark(tenant, SUBJECT, contradicted.mark_id, "keep")
        assert (await _review(client, task_queue, tenant)).marked == {}
        assert ("contradicted", oslo.memory_id) not in {(m.reason, m.memory_id)
                                                         for m in await client.admin.stale_marks(tenant)}
