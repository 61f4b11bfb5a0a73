"""Forgetting one memory: gone from every read at once, restorable within the grace
period, swept from every store after it by the sweeper (a workflow a Schedule runs), and never
resurrected — by a rebuild, a late commit of an old session or a late projector. On the real
stack: Temporal dev server, Postgres with row-level security, the offline providers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.client import ScheduleActionStartWorkflow

from agent_memory.core.models import ConflictPlan, ExtractedFact, ExtractionResult, ImportanceResult, SummaryResult
from agent_memory.core.operation_keys import CommitKey
from agent_memory.lifecycle.forgetting import MemoryNotForgottenError, RestoreWindowClosedError, restore_memory
from agent_memory.memory.conflicts import decide
from agent_memory.memory.corrections import MemoryForgottenError
from agent_memory.memory.events import (
    EpisodeCreated,
    FactCreated,
    MemoryEvent,
    MemoryForgotten,
    MemoryRestored,
    effective_events,
)
from agent_memory.memory.memory_store import (
    commit_consolidation,
    current_candidates,
    current_facts,
    ended_fact_versions,
)
from agent_memory.projection.rebuild import projection_digest, rebuild_subject
from agent_memory.store.db import tenant_transaction
from agent_memory.telemetry.metrics import REGISTRY, tenant_label
from tests.cli.runner import run_cli
from tests.sessions import session
from workers.schedules import MEMORY_SWEEP_SCHEDULE, ensure_schedules

SUBJECT = "lin"


async def consolidate(client, tenant: str, *sessions, wait_projection: bool = True) -> None:
    for s in sessions:
        await client.append_messages(tenant, SUBJECT, s)
        await client.consolidation_result(await client.end_session(tenant, SUBJECT, s.session_id))
    if wait_projection:
        await client.admin.wait_for_projection(tenant, SUBJECT)


async def rows_of(services, tenant: str, memory_id: str) -> dict[str, int]:
    """Rows holding the memory, per store."""
    counts = {}
    async with tenant_transaction(services.pool, tenant) as conn:
        for table in ("facts", "episodes", "observations", "memory_search", "projection_outbox", "memory_vectors",
                      "memory_events", "operations"):
            cur = await conn.execute(f"SELECT count(*) FROM {table} WHERE tenant_id = %s AND memory_id = %s",
                                     (tenant, uuid.UUID(memory_id)))
            row = await cur.fetchone()
            counts[table] = row[0] if row else 0
    return counts


async def commit_written_out(services, tenant: str, session_id: str, fact: ExtractedFact):
    """A consolidation commit with a written-out extraction (a re-run of an old session, say)."""
    async with tenant_transaction(services.pool, tenant) as conn:
        current = await current_facts(conn, tenant, SUBJECT)
        held = await current_candidates(conn, tenant, SUBJECT)
        ended = await ended_fact_versions(conn, tenant, SUBJECT)
    extraction = ExtractionResult(provider="test", extractor="written-out", extractor_version="1", facts=[fact])
    plan = ConflictPlan(decisions=decide(extraction.facts, current, held, ended))
    request = {"session": session_id, "fact": fact.model_dump(mode="json")}
    return await commit_consolidation(
        services.pool, services.keyring, tenant_id=tenant, subject_id=SUBJECT, session_id=session_id,
        key=CommitKey.for_request(session_id, request), request=request, extraction=extraction, plan=plan,
        importance=ImportanceResult(importance=3), summary=SummaryResult(sentences=[], token_count=0),
        happened_at=fact.observed_at)


def said(value: str, at: datetime, message_id: str) -> ExtractedFact:
    return ExtractedFact(namespace="location", key="home_city", value=value, claim_type="explicit", confidence=0.9,
                         evidence_message_ids=[message_id], observed_at=at)


async def home_fact(client, tenant: str):
    [fact] = [f for f in await client.facts(tenant, SUBJECT) if f.key == "home_city"]
    return fact


async def test_a_forgotten_fact_leaves_every_read_at_once_and_a_restore_brings_it_back(
        client, services, tenant, running_worker):
    async with running_worker():
        await consolidate(client, tenant,
                          session("s1", "2024-03-01T09:00:00Z", "I live in Oslo.", "I work as a nurse."),
                          session("s2", "2024-04-01T09:00:00Z", "I have a dog named Rex."))
        before = await client.facts(tenant, SUBJECT)
        history_before = await client.facts(tenant, SUBJECT, history=True)
        digest_before = await projection_digest(services.pool, tenant, SUBJECT)
        oslo = await home_fact(client, tenant)
        assert (await rows_of(services, tenant, oslo.memory_id))["memory_vectors"] == 1

        forgotten = await client.forget(tenant, SUBJECT, oslo.memory_id, reason="ticket 42", actor_id="ops-ana")
        assert forgotten.memory_kind == "fact" and not forgotten.already_forgotten
        assert forgotten.restorable_until - forgotten.forgotten_at == timedelta(hours=24)
        assert forgotten.vectors_removed == 1 and forgotten.projection_rows_removed >= 2  # fact row + index row

        # Gone from every read: current facts, as-of, history, recall, context, prompt.
        assert oslo.memory_id not in {f.memory_id for f in await client.facts(tenant, SUBJECT)}
        as_of = await client.facts(tenant, SUBJECT, as_of=datetime(2024, 3, 15, tzinfo=UTC))
        assert "home_city" not in {f.key for f in as_of} and as_of  # the other facts of s1 are there
        assert oslo.memory_id not in {f.memory_id for f in await client.facts(tenant, SUBJECT, history=True)}
        recalled = await client.recall(tenant, SUBJECT, "where do I live? Oslo")
        assert oslo.memory_id not in {f.memory_id for f in recalled.facts}
        ctx = await client.context(tenant, SUBJECT, "where do I live? Oslo")
        assert oslo.memory_id not in {i.memory_id for i in ctx.items}
        built = await client.build_prompt(tenant, SUBJECT, "s3", "Where do I live again?")
        assert oslo.memory_id not in built.cited_item_ids
        assert {k: v for k, v in (await rows_of(services, tenant, oslo.memory_id)).items() if v} == {
            "memory_events": 2, "operations": 1}  # the log (for a restore) and the recorded embedding
        # The other memories are untouched.
        assert [f for f in before if f.memory_id != oslo.memory_id] == await client.facts(tenant, SUBJECT)
        # Forgetting again is the same forget; a rebuild replays the log to the same projection.
        again = await client.forget(tenant, SUBJECT, oslo.memory_id)
        assert again.already_forgotten and again.forgotten_at == forgotten.forgotten_at
        rebuilt = await rebuild_subject(services.pool, services.keyring, tenant, SUBJECT)
        assert rebuilt.equal, rebuilt

        # While forgotten, the write path holds back the key: a re-run of the old session, a live write.
        outcome = await commit_written_out(services, tenant, "s1-rerun", said("Oslo", datetime(2024, 3, 1, 9, tzinfo=UTC),
                                                                              "s1:1"))
        assert outcome.events_appended == 0
        with pytest.raises(MemoryForgottenError, match="restore it"):
            await client.write_fact(tenant, SUBJECT, "location", "home_city", "Bergen", expected_version=0,
                                    evidence_message_ids=["s2:1"])

        restored = await client.restore(tenant, SUBJECT, oslo.memory_id, reason="asked by mistake")
        assert restored.version == forgotten.version + 1 and restored.events_reapplied >= 1
        await client.admin.wait_for_projection(tenant, SUBJECT)
    back = await home_fact(client, tenant)
    assert (back.value, back.valid_from, back.evidence_message_ids) == (oslo.value, oslo.valid_from,
                                                                        oslo.evidence_message_ids)
    assert back.version == restored.version  # the memory's version moved on; reads show it
    # The same intervals, known again since the restore (recorded_at is the restore's time).
    same = {"version": 0, "recorded_at": None}
    assert [f.model_copy(update=same) for f in await client.facts(tenant, SUBJECT, history=True)] == \
        [f.model_copy(update=same) for f in history_before]
    assert (await rows_of(services, tenant, oslo.memory_id))["memory_vectors"] == 1  # re-projected, recorded
    assert (await rebuild_subject(services.pool, services.keyring, tenant, SUBJECT)).equal
    # Same rows as before the forget, but for the memory's version.
    assert await projection_digest(services.pool, tenant, SUBJECT) != digest_before
    with pytest.raises(MemoryNotForgottenError):
        await client.restore(tenant, SUBJECT, oslo.memory_id)


async def test_a_forget_while_the_vector_is_pending_never_gets_a_vector(client, services, tenant, running_worker):
    async with running_worker():
        await consolidate(client, tenant, session("p1", "2024-03-01T09:00:00Z", "I live in Lima."),
                          wait_projection=False)
        lima = await home_fact(client, tenant)
        await client.forget(tenant, SUBJECT, lima.memory_id)
        await client.admin.wait_for_projection(tenant, SUBJECT)
        await asyncio.sleep(0.5)  # a projector batch that read the row before the forget has finished
    assert (await rows_of(services, tenant, lima.memory_id))["memory_vectors"] == 0


async def test_the_sweeper_removes_a_forgotten_memory_from_every_store_and_nothing_resurrects_it(
        client, services, tenant, running_worker):
    async with running_worker():
        await consolidate(client, tenant,
                          # Four messages: a shorter session gets no episode (the substance gate), and
                          # w1's episode is forgotten and swept below.
                          session("w1", "2024-03-01T09:00:00Z", "I live in Oslo.", ("assistant", "Any news this week?"),
                                  "My sister Maja is getting married in June, I am so nervous about the speech.",
                                  ("assistant", "Would an outline of the speech help?")),
                          session("w2", "2024-04-01T09:00:00Z", "I have a dog named Rex."))
        oslo = await home_fact(client, tenant)
        ctx = await client.context(tenant, SUBJECT, "sister wedding speech")
        [episode] = [i for i in ctx.items if i.kind == "episode" and i.session_id == "w1"]
        rex = [f for f in await client.facts(tenant, SUBJECT) if f.memory_id != oslo.memory_id]
        for memory_id in (oslo.memory_id, episode.memory_id):
            await client.forget(tenant, SUBJECT, memory_id)
        kept = await client.admin.sweep(grace_seconds=3600)  # nothing is an hour old: nothing goes
        assert {f.state for f in await client.admin.forgotten(tenant, SUBJECT)} == {"forgotten"}
        swept_sample = ("agent_memory_swept_memories_total", {"tenant": tenant_label(tenant)})
        before = REGISTRY.get_sample_value(*swept_sample) or 0.0
        swept = await client.admin.sweep(grace_seconds=0)
        assert REGISTRY.get_sample_value(*swept_sample) == before + 2  # this tenant's two
    assert swept.swept >= 2 and swept.residue_found == 0 and swept.events_deleted >= 3
    assert kept.swept == 0 or kept.tenants >= 1
    tombstones = {str(f.memory_id): f for f in await client.admin.forgotten(tenant, SUBJECT)}
    assert {t.state for t in tombstones.values()} == {"swept"} and set(tombstones) == {oslo.memory_id,
                                                                                       episode.memory_id}
    assert all(t.residue == 0 for t in tombstones.values())
    for memory_id in (oslo.memory_id, episode.memory_id):
        assert set((await rows_of(services, tenant, memory_id)).values()) == {0}
    async with tenant_transaction(services.pool, tenant) as conn:  # the sessions' recorded provider results
        cur = await conn.execute("SELECT kind FROM operations WHERE tenant_id = %s AND session_id = 'w1' "
                                 "AND kind IN ('extract', 'summary', 'plan', 'importance')", (tenant,))
        assert await cur.fetchall() == []
    counts = await client.admin.lifecycle_counts(tenant)
    assert (counts.forgotten_in_grace, counts.swept, counts.swept_with_residue) == (0, 2, 0)
    # The rest of the subject is as it was.
    assert [f.memory_id for f in await client.facts(tenant, SUBJECT)] == [f.memory_id for f in rex]

    with pytest.raises(RestoreWindowClosedError, match="swept"):
        await client.restore(tenant, SUBJECT, oslo.memory_id)
    # No resurrection: a rebuild replays what is left, a re-run of the old session is held back.
    rebuilt = await rebuild_subject(services.pool, services.keyring, tenant, SUBJECT)
    assert rebuilt.equal, rebuilt
    outcome = await commit_written_out(services, tenant, "w1-rerun",
                                       said("Oslo", datetime(2024, 3, 1, 9, tzinfo=UTC), "w1:1"))
    assert outcome.events_appended == 0 and "home_city" not in {f.key for f in await client.facts(tenant, SUBJECT)}
    # Said again after the forget, the key lives again, after its tombstone's version.
    later = await commit_written_out(services, tenant, "w9", said("Bergen", datetime.now(UTC), "w2:1"))
    assert later.events_appended == 1
    bergen = await home_fact(client, tenant)
    assert bergen.memory_id == oslo.memory_id and bergen.value == "Bergen"
    assert bergen.version == tombstones[oslo.memory_id].version + 1
    assert (await rebuild_subject(services.pool, services.keyring, tenant, SUBJECT)).equal


async def test_forget_and_restore_refuse_what_they_cannot_do(client, services, tenant, running_worker):
    with pytest.raises(ValueError, match="not a UUID"):
        await client.forget(tenant, SUBJECT, "oslo")
    with pytest.raises(LookupError, match="no memory"):
        await client.forget(tenant, SUBJECT, str(uuid.uuid4()))
    with pytest.raises(ValueError, match="reason has"):
        await client.forget(tenant, SUBJECT, str(uuid.uuid4()), reason="x" * 1001)
    async with running_worker():
        await consolidate(client, tenant, session("r1", "2024-03-01T09:00:00Z", "I live in Quito."))
    quito = await home_fact(client, tenant)
    other_tenant = f"t-{uuid.uuid4().hex[:12]}"
    with pytest.raises(LookupError, match="no memory"):  # row-level security: another tenant sees nothing
        await client.forget(other_tenant, SUBJECT, quito.memory_id)
    with pytest.raises(LookupError, match="no memory"):  # nor another subject of the tenant
        await client.forget(tenant, "someone-else", quito.memory_id)
    await client.forget(tenant, SUBJECT, quito.memory_id)
    with pytest.raises(RestoreWindowClosedError, match="grace period ended"):
        await restore_memory(services.pool, services.keyring, tenant_id=tenant, subject_id=SUBJECT,
                             memory_id=quito.memory_id, grace=timedelta(0))


async def test_an_erasure_removes_the_subjects_forgotten_memories_too(client, services, tenant, running_worker):
    async with running_worker():
        await consolidate(client, tenant, session("e1", "2024-03-01T09:00:00Z", "I live in Porto."))
        await client.forget(tenant, SUBJECT, (await home_fact(client, tenant)).memory_id)
        receipt = await client.admin.erasure_receipt(await client.admin.erase(tenant, SUBJECT, reason="test"))
    assert receipt.residue_total == 0
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM forgotten_memories WHERE tenant_id = %s", (tenant,))
        assert await cur.fetchone() == (0,)


async def test_the_sweep_schedule_runs_the_sweeper(services, client, tenant, task_queue, running_worker):
    temporal = services.temporal
    with contextlib.suppress(Exception):  # a fresh schedule on this test's task queue
        await temporal.get_schedule_handle(MEMORY_SWEEP_SCHEDULE).delete()
    assert MEMORY_SWEEP_SCHEDULE in [r.schedule_id for r in await ensure_schedules(temporal, task_queue,
                                                                                   keys_rotatable=False)
                                     if r.outcome == "created"]
    handle = temporal.get_schedule_handle(MEMORY_SWEEP_SCHEDULE)
    described = await handle.describe()
    action = described.schedule.action
    assert isinstance(action, ScheduleActionStartWorkflow) and action.workflow == "MemorySweepWorkflow"
    assert described.schedule.spec.intervals[0].every == timedelta(hours=1)
    async with running_worker():
        await handle.trigger()
        for _ in range(300):
            recent = (await handle.describe()).info.recent_actions
            if recent:
                run = temporal.get_workflow_handle(recent[-1].action.workflow_id,
                                                   first_execution_run_id=recent[-1].action.first_execution_run_id)
                result = await run.result()
                assert result["grace_seconds"] == 24 * 3600 and result["residue_found"] == 0
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the triggered sweep never ran")
    await handle.delete()


def test_replay_skips_a_forgotten_memory_and_a_forget_undone_by_a_restore():
    t = datetime(2024, 1, 1, tzinfo=UTC)
    kept, gone = uuid.uuid4(), uuid.uuid4()
    fact = FactCreated(namespace="n", key="k", value="v", claim_type="explicit", permanence="stable",
                       confidence=0.9, session_id="s", reason="r")

    def event(memory_id, version, payload) -> MemoryEvent:
        return MemoryEvent(memory_id=memory_id, version=version, namespace="n", occurred_at=t,
                           source_message_ids=(), operation_id="op", payload=payload)

    log = [event(kept, 1, fact), event(kept, 2, MemoryForgotten(memory_kind="fact")), event(kept, 3, MemoryRestored()),
           event(gone, 1, EpisodeCreated(session_id="s", summary="x", importance=3, sentences=[])),
           event(gone, 2, MemoryForgotten(memory_kind="episode"))]
    assert [(e.memory_id, e.version) for e in effective_events(log)] == [(kept, 1), (kept, 3)]


async def test_the_forget_commands(client, services, tenant, task_queue, running_worker):
    async with running_worker():
        await consolidate(client, tenant, session("c1", "2024-03-01T09:00:00Z", "I live in Kyoto."))
        kyoto = await home_fact(client, tenant)
        args = ("--tenant", tenant, "--subject", SUBJECT, "--memory-id", kyoto.memory_id)
        out = run_cli(services, "forget", *args, "--reason", "ticket 7", task_queue=task_queue)
        assert out.returncode == 0, out.stderr
        assert "forgotten" in out.stdout and "restorable until" in out.stdout
        listed = run_cli(services, "forgotten", "--tenant", tenant, "--subject", SUBJECT, "--json")
        assert [i["memory_id"] for i in json.loads(listed.stdout)] == [kyoto.memory_id]
        stats = run_cli(services, "stats", "--tenant", tenant, "--json")
        assert json.loads(stats.stdout)["lifecycle"] == {"forgotten_in_grace": 1, "swept": 0, "swept_with_residue": 0}
        out = await asyncio.to_thread(run_cli, services, "restore", *args, task_queue=task_queue)
        assert out.returncode == 0 and "restored" in out.stdout, out.stderr
        out = run_cli(services, "restore", *args, task_queue=task_queue)
        assert out.returncode == 2 and "not forgotten" in out.stderr and "Traceback" not in out.stderr
        bad = run_cli(services, "forget", "--tenant", tenant, "--subject", SUBJECT, "--memory-id", "kyoto")
        assert bad.returncode == 2 and "not a UUID" in bad.stderr
        swept = await asyncio.to_thread(run_cli, services, "sweep", "--grace-seconds", "3600", "--json",
                                        task_queue=task_queue)
        assert swept.returncode == 0, swept.stderr
        assert json.loads(swept.stdout)["grace_seconds"] == 3600


async def test_an_export_holds_every_interval_its_evidence_and_what_is_forgotten(
        client, services, tenant, task_queue, running_worker, tmp_path):
    async with running_worker():
        # Four messages each: a shorter session gets no episode (the substance gate), and both are exported.
        await consolidate(client, tenant, session("x1", "2024-03-01T09:00:00Z", "I live in Oslo.",
                                                  ("assistant", "Is there anything you don't eat?"),
                                                  "I am allergic to peanuts.",
                                                  ("assistant", "Do you carry an epinephrine pen?")),
                          session("x2", "2024-05-01T09:00:00Z", "I moved to Bergen last week.",
                                  ("assistant", "How is the new place?"), "Is it normal for the rain to last all week?",
                                  ("assistant", "Did the removal van arrive on time?")))
        bergen = await home_fact(client, tenant)
        forgotten_fact = next(f for f in await client.facts(tenant, SUBJECT) if f.memory_id != bergen.memory_id)
        await client.forget(tenant, SUBJECT, forgotten_fact.memory_id, reason="ticket 9")
        out = tmp_path / "lin.json"
        done = await asyncio.to_thread(run_cli, services, "export", "--tenant", tenant, "--subject", SUBJECT,
                                       "--out", str(out))
        assert done.returncode == 0, done.stderr
    assert out.stat().st_mode & 0o777 == 0o600
    document = json.loads(out.read_text())
    assert document["format"] == "agent-memory-export/1" and not document["erased"]
    intervals = [(f["value"], f["status"]) for f in document["facts"] if f["key"] == "home_city"]
    assert intervals == [("Oslo", "closed"), ("Bergen", "active")]  # history with validity
    cited = {m["message_id"]: m["content"] for m in document["cited_messages"]}
    assert cited["x1:1"] == "I live in Oslo." and cited["x2:1"] == "I moved to Bergen last week."
    assert {e["session_id"] for e in document["episodes"]} >= {"x1", "x2"}
    [gone] = document["forgotten"]
    assert gone["memory_id"] == forgotten_fact.memory_id and gone["state"] == "forgotten"
    assert gone["restorable_until"] and gone["content"][0]["value"] == forgotten_fact.value
    assert forgotten_fact.memory_id not in {f["memory_id"] for f in document["facts"]}
    # An erased subject exports as erased, with its receipt and nothing else.
    async with running_worker():
        await client.admin.erasure_receipt(await client.admin.erase(tenant, SUBJECT, reason="art. 17", request_id="r-export"))
    erased = await client.admin.export(tenant, SUBJECT)
    assert erased.erased and erased.facts == [] and erased.cited_messages == [] and erased.forgotten == []
    [request] = erased.erasure_requests
    assert request.request_id == "r-export" and request.receipt is not None and request.receipt.residue_total == 0


async def test_the_schedules_commands(services, task_queue):
    ensured = run_cli(services, "schedules", "ensure", task_queue=task_queue)
    assert ensured.returncode == 0, ensured.stderr
    listed = run_cli(services, "schedules", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    by_id = {s["schedule_id"]: s for s in json.loads(listed.stdout)}
    assert {MEMORY_SWEEP_SCHEDULE, "agent-memory/erasure-redrive", "agent-memory/projection-sweep",
            "agent-memory/physical-compaction"} <= set(by_id)
    assert by_id[MEMORY_SWEEP_SCHEDULE]["workflow"] == "MemorySweepWorkflow"
    assert by_id[MEMORY_SWEEP_SCHEDULE]["every"] == "1:00:00" and not by_id[MEMORY_SWEEP_SCHEDULE]["paused"]
    again = run_cli(services, "schedules", "ensure", task_queue=task_queue)
    assert again.returncode == 0 and again.stdout.count("unchanged") == len(again.stdout.splitlines())
    for schedule_id in by_id:  # they would fire on this test's queue later
        await services.temporal.get_schedule_handle(schedule_id).delete()


async def test_a_forged_tombstone_opens_no_event_and_a_fact_takes_its_candidates_along(client, services, tenant):
    import psycopg

    await commit_written_out(services, tenant, "f1", said("Oslo", datetime(2024, 3, 1, 9, tzinfo=UTC), "f1:1"))
    oslo = await home_fact(client, tenant)
    # The app role cannot forge a swept tombstone to delete a memory's history.
    async with tenant_transaction(services.pool, tenant) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            async with conn.transaction():
                await conn.execute(
                    "INSERT INTO forgotten_memories (tenant_id, subject_id, memory_id, memory_kind, version, "
                    "forgotten_at, actor, state) VALUES (%s, %s, %s, 'fact', 99, now(), 'operator', 'swept')",
                    (tenant, SUBJECT, uuid.UUID(oslo.memory_id)))
        await conn.execute(
            "INSERT INTO forgotten_memories (tenant_id, subject_id, memory_id, memory_kind, version, forgotten_at, "
            "actor, state) VALUES (%s, %s, %s, 'fact', 99, now(), 'operator', 'forgotten')",
            (tenant, SUBJECT, uuid.UUID(oslo.memory_id)))
        await conn.execute("UPDATE forgotten_memories SET state = 'swept' WHERE tenant_id = %s", (tenant,))
        cur = await conn.execute("DELETE FROM memory_events WHERE tenant_id = %s", (tenant,))
        assert cur.rowcount == 0  # no MemoryForgotten event at version 99: nothing opens
        await conn.execute("DELETE FROM forgotten_memories WHERE tenant_id = %s", (tenant,))
    # A weaker value waits as a candidate of the same key; forgetting the fact forgets it too.
    weak = said("Bergen", datetime(2024, 3, 2, 9, tzinfo=UTC), "f1:2").model_copy(
        update={"claim_type": "inference", "confidence": 0.5})
    await commit_written_out(services, tenant, "f2", weak)
    assert {f.value for f in await client.facts(tenant, SUBJECT, candidates=True)} == {"Oslo", "Bergen"}
    await client.forget(tenant, SUBJECT, oslo.memory_id)
    assert await client.facts(tenant, SUBJECT, candidates=True, history=True) == []
    assert {f.state for f in await client.admin.forgotten(tenant, SUBJECT)} == {"forgotten"}
    assert len(await client.admin.forgotten(tenant, SUBJECT)) == 2
    # A re-run of the old session brings back neither the fact nor its candidate.
    again = await commit_written_out(services, tenant, "f2-rerun", weak)
    assert again.events_appended == 0 and again.withheld == {"forgotten": 1}


async def test_a_restore_after_a_second_life_keeps_the_first_tombstone(client, services, tenant, running_worker):
    await commit_written_out(services, tenant, "g1", said("Oslo", datetime(2024, 3, 1, 9, tzinfo=UTC), "g1:1"))
    oslo = await home_fact(client, tenant)
    await client.forget(tenant, SUBJECT, oslo.memory_id)
    async with running_worker():
        await client.admin.sweep(grace_seconds=0, retention=False)
    [first] = await client.admin.forgotten(tenant, SUBJECT)
    await commit_written_out(services, tenant, "g9", said("Bergen", datetime.now(UTC), "g1:1"))  # a second life
    await client.forget(tenant, SUBJECT, oslo.memory_id)
    await client.restore(tenant, SUBJECT, oslo.memory_id)
    assert (await home_fact(client, tenant)).value == "Bergen"
    [kept] = await client.admin.forgotten(tenant, SUBJECT)
    assert (kept.state, kept.version, kept.forgotten_at) == ("swept", first.version, first.forgotten_at)
    rerun = await commit_written_out(services, tenant, "g1-rerun", said("Oslo", datetime(2024, 3, 1, 9, tzinfo=UTC),
                                                                        "g1:1"))
    assert rerun.events_appended == 0  # what was said before the sweep stays held back
    assert (await home_fact(client, tenant)).value == "Bergen"
