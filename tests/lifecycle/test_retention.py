"""Retention per memory type and the re-drive of stuck erasures, on the real stack:
the memory-sweep workflow forgets what a tenant's policy expires (restorable, then swept), and
the erasure re-drive starts again an erasure whose workflow is gone."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta

from agent_memory.core.models import ConflictPlan, ExtractedFact, ExtractionResult, ImportanceResult, SummaryResult
from agent_memory.core.operation_keys import CommitKey
from agent_memory.lifecycle.erasure import register_erasure_request
from agent_memory.lifecycle.erasure_runs import erasure_counts, start_erasure_workflow
from agent_memory.lifecycle.retention import DEFAULT_RETENTION, RetentionPolicy
from agent_memory.memory.conflicts import decide
from agent_memory.memory.memory_store import (
    commit_consolidation,
    current_candidates,
    current_facts,
    ended_fact_versions,
)
from agent_memory.store.db import tenant_transaction
from tests.cli.runner import run_cli
from tests.sessions import session

SUBJECT = "ria"


async def commit_facts(services, tenant: str, session_id: str, *facts: ExtractedFact) -> None:
    async with tenant_transaction(services.pool, tenant) as conn:
        current = await current_facts(conn, tenant, SUBJECT)
        held = await current_candidates(conn, tenant, SUBJECT)
        ended = await ended_fact_versions(conn, tenant, SUBJECT)
    extraction = ExtractionResult(provider="test", extractor="written-out", extractor_version="1", facts=list(facts))
    request = {"session": session_id, "facts": [f.model_dump(mode="json") for f in facts]}
    await commit_consolidation(
        services.pool, services.keyring, tenant_id=tenant, subject_id=SUBJECT, session_id=session_id,
        key=CommitKey.for_request(session_id, request), request=request, extraction=extraction,
        plan=ConflictPlan(decisions=decide(extraction.facts, current, held, ended)),
        importance=ImportanceResult(importance=3), summary=SummaryResult(sentences=[], token_count=0),
        happened_at=facts[0].observed_at)


async def test_retention_forgets_what_the_policy_expires_and_the_sweep_removes_it_after_the_grace(
        client, services, tenant, running_worker):
    recent = (datetime.now(UTC) - timedelta(days=3)).strftime("%Y-%m-%dT09:00:00Z")
    async with running_worker():
        # Four messages each: a shorter session gets no episode (the substance gate), and the old
        # session's episode is what retention forgets.
        for s in (session("old", "2023-02-01T09:00:00Z", "I moved to Lisbon last week and the flat is tiny.",
                          "My sister Maja is getting married in June, I am so nervous about the speech.",
                          ("assistant", "Have you started writing the speech?"),
                          "Can you help me find a funny opening line?"),
                  session("new", recent, "My sister Maja asked me to hold the rings at her wedding.",
                          "I started learning the cello, my teacher is very strict.",
                          ("assistant", "How long are your cello lessons?"),
                          "Can you suggest a few easy pieces for beginners?")):
            await client.append_messages(tenant, SUBJECT, s)
            await client.consolidation_result(await client.end_session(tenant, SUBJECT, s.session_id))
        await client.admin.wait_for_projection(tenant, SUBJECT)
        old_day = datetime(2023, 2, 1, 9, tzinfo=UTC)
        await commit_facts(services, tenant, "facts",
                           ExtractedFact(namespace="work", key="employer", value="Acme", claim_type="inference",
                                         confidence=0.6, evidence_message_ids=["old:1"], observed_at=old_day),
                           ExtractedFact(namespace="travel", key="current_trip", value="Rome", claim_type="explicit",
                                         confidence=0.9, evidence_message_ids=["old:2"], observed_at=old_day,
                                         valid_until=datetime(2023, 2, 10, tzinfo=UTC)))
        assert await client.admin.get_retention_policy(tenant) == DEFAULT_RETENTION
        policy = await client.admin.set_retention_policy(tenant, RetentionPolicy(episode_days=365, note_days=365))
        assert policy.candidate_days == 90 and policy.temporary_fact_days == 30
        before = await client.context(tenant, SUBJECT, "sister wedding speech rings")
        assert {i.session_id for i in before.items if i.tier == "episodic"} == {"old", "new"}

        swept = await client.admin.sweep(grace_seconds=3600)  # retention forgets; nothing is past the grace yet
        assert swept.retention_forgotten.get("episode", 0) >= 1 and swept.retention_forgotten.get("note", 0) >= 1
        assert swept.retention_forgotten.get("candidate", 0) >= 1
        assert swept.retention_forgotten.get("temporary_fact", 0) >= 1
        forgotten = await client.admin.forgotten(tenant, SUBJECT)
        assert forgotten and {f.actor for f in forgotten} == {"retention"} and {f.state for f in forgotten} == {
            "forgotten"}
        after = await client.context(tenant, SUBJECT, "sister wedding speech rings")
        assert {i.session_id for i in after.items if i.tier == "episodic"} == {"new"}  # the old session is gone
        assert not [f for f in await client.facts(tenant, SUBJECT, candidates=True, history=True)
                    if f.key in ("employer", "current_trip")]
        await client.admin.sweep(grace_seconds=3600)  # a second run forgets nothing more of the subject
        assert {f.memory_id for f in await client.admin.forgotten(tenant, SUBJECT)} == {f.memory_id for f in forgotten}

        done = await client.admin.sweep(grace_seconds=0, retention=False)
    assert done.residue_found == 0
    states = {f.state for f in await client.admin.forgotten(tenant, SUBJECT)}
    assert states == {"swept"}
    counts = await client.admin.lifecycle_counts(tenant)
    assert counts.swept == len(forgotten) and counts.forgotten_in_grace == 0 and counts.swept_with_residue == 0


async def test_a_stuck_erasure_is_redriven_and_a_running_one_left_alone(client, services, tenant, running_worker):
    async with running_worker():
        await client.append_messages(tenant, SUBJECT, session("e1", "2024-03-01T09:00:00Z", "I live in Porto."))
        # A request recorded, whose workflow never ran (lost with its namespace, say).
        await register_erasure_request(services.pool, services.keyring, tenant, SUBJECT, "req-lost", "gdpr")
        # And one whose workflow is running on a queue no worker polls (an outage): left alone.
        await register_erasure_request(services.pool, services.keyring, tenant, "other", "req-slow", "gdpr")
        slow = await start_erasure_workflow(services.temporal, f"nobody-{uuid.uuid4()}", tenant, "other", "req-slow")
        async with tenant_transaction(services.pool, tenant) as conn:
            await conn.execute("UPDATE erasure_requests SET requested_at = now() - interval '2 hours' "
                               "WHERE tenant_id = %s", (tenant,))
        stats = await client.admin.erasure_counts(tenant)
        assert (stats.started, stats.stuck, stats.redriven, stats.completed) == (2, 2, 0, 0)
        assert stats.oldest_open_age_seconds is not None and stats.oldest_open_age_seconds >= 7200
        # Stuck means open past the erasure deadline (AGENT_MEMORY_ERASURE_DEADLINE_SECONDS).
        assert (await erasure_counts(services.pool, tenant, stuck_after_seconds=3 * 3600)).stuck == 0

        result = await client.admin.redrive_erasures(stuck_after_seconds=3600)
        assert result.redriven >= 1 and result.still_running >= 1 and result.failed == 0
        receipt = await services.temporal.get_workflow_handle(
            f"erase/{tenant}/{SUBJECT}/req-lost").result()
        assert receipt["residue_total"] == 0
        await slow.terminate("test over")
    status = await client.admin.erasure_status(tenant, "req-lost")
    assert status.status == "completed"
    stats = await client.admin.erasure_counts(tenant)
    assert (stats.started, stats.redriven, stats.redrives, stats.completed) == (1, 1, 1, 1)
    # The request left running was never re-driven: open, and no run of it ended without completing.
    assert stats.failed == 0
    assert await client.facts(tenant, SUBJECT) == []


async def test_the_retention_and_redrive_commands(services, tenant, task_queue, running_worker):
    shown = run_cli(services, "retention", "show", "--tenant", tenant, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == {**DEFAULT_RETENTION.model_dump(), "working_memory_hours": 4}
    changed = run_cli(services, "retention", "set", "--tenant", tenant, "note_days=365", "candidate_days=none",
                      "--json")
    assert changed.returncode == 0, changed.stderr
    assert json.loads(changed.stdout)["note_days"] == 365 and json.loads(changed.stdout)["candidate_days"] is None
    bad = run_cli(services, "retention", "set", "--tenant", tenant, "note_dayz=3")
    assert bad.returncode == 2 and "note_dayz" in bad.stderr and "Traceback" not in bad.stderr
    bad = run_cli(services, "retention", "set", "--tenant", tenant, "note_days=0")
    assert bad.returncode == 2 and "note_days" in bad.stderr
    assert run_cli(services, "retention", "reset", "--tenant", tenant).returncode == 0
    text = run_cli(services, "retention", "show", "--tenant", tenant)
    assert "working_memory_hours = 4 (fixed)" in text.stdout and "episode_days = none (until forgotten)" in text.stdout
    async with running_worker():
        out = await asyncio.to_thread(run_cli, services, "redrive-erasures", "--json", task_queue=task_queue)
        assert out.returncode == 0, out.stderr
        assert set(json.loads(out.stdout)) == {"tenants", "stuck", "still_running", "redriven", "failed"}
    stats = run_cli(services, "stats", "--tenant", tenant)
    assert "erasures: 0 started" in stats.stdout and "forgotten: 0 in grace" in stats.stdout


def test_shelf_lives_are_set_per_namespace_and_merged_into_the_policy():
    import pytest
    from pydantic import ValidationError

    from agent_memory.cli.formatting import with_changes
    from agent_memory.core.errors import InvalidInput
    from agent_memory.lifecycle.retention import DEFAULT_SHELF_LIFE_DAYS, RetentionPolicy

    changed = with_changes(RetentionPolicy(), ["shelf_life_days=location:90,diet:none", "candidate_review_days=7"])
    assert changed.shelf_life_days == {**DEFAULT_SHELF_LIFE_DAYS, "location": 90, "diet": None}
    assert changed.candidate_review_days == 7
    assert RetentionPolicy().shelf_life_days["profile"] is None and RetentionPolicy().shelf_life_days["travel"] == 30
    with pytest.raises(InvalidInput, match="shelf_life_days: 'location' is not KEY:VALUE"):
        with_changes(RetentionPolicy(), ["shelf_life_days=location"])
    with pytest.raises(ValidationError, match="location = 0; give 1 to 36500 days"):
        with_changes(RetentionPolicy(), ["shelf_life_days=location:0"])
