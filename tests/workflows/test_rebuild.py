"""Rebuild of the projections from the event log ("prove it survives") on the real stack."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime

import psycopg

from agent_memory.projection.rebuild import projection_digest
from agent_memory.store.db import tenant_transaction
from agent_memory.telemetry.metrics import REGISTRY
from tests.cli.runner import run_cli
from tests.sessions import session
from workflows.rebuild import RebuildWorkflow

HANGZHOU = session("r-hz", "2024-03-01T09:00:00Z", "Hi, my name is Lin Wei.", "I live in Hangzhou.",
                   ("assistant", "Nice to meet you."), "I'm allergic to peanuts.")
TRIP = session("r-trip", "2024-04-10T20:00:00Z", "我下周去北京出差三天。", "我不吃辣。")
MOVE = session("r-move", "2024-06-02T18:30:00Z", "I moved to Shanghai last month.", "I live in Shanghai now.")
AGAIN = session("r-again", "2024-07-01T08:00:00Z", "I live in Shanghai.", "I'm allergic to peanuts.")


async def _consolidate(client, tenant, subject, *sessions):
    for s in sessions:
        await client.append_messages(tenant, subject, s)
        result = await client.consolidation_result(await client.end_session(tenant, subject, s.session_id))
        assert result.refused_reason is None
    await client.admin.wait_for_projection(tenant, subject)  # consolidation ends at its commit; vectors follow


async def _scalar(services, tenant, query, *params):
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute(query, params)
        return (await cur.fetchone())[0]


async def _admin(services, tenant, *statements):
    """Corrupt the projection behind the application's back, as the owner role."""
    async with await psycopg.AsyncConnection.connect(services.settings.database_admin_url) as conn:
        await conn.execute("SELECT set_config('app.tenant_id', %s, false)", (tenant,))
        for statement, params in statements:
            cur = await conn.execute(statement, params)
            assert cur.rowcount == 1, statement
        await conn.commit()


async def test_rebuild_proves_equality_repairs_corruption_and_is_stable(client, services, tenant, running_worker):
    subject = "lin"
    async with running_worker():
        await _consolidate(client, tenant, subject, HANGZHOU, TRIP, MOVE, AGAIN)
        history = await client.facts(tenant, subject, history=True)
        assert [(f.value, f.status) for f in history if f.key == "home_city"] == [
            ("Hangzhou", "closed"), ("Shanghai", "active")]  # a move: superseded
        shanghai = next(f for f in history if f.value == "Shanghai")
        assert len(shanghai.evidence_message_ids) > 1 and "r-again:1" in shanghai.evidence_message_ids  # confirmed
        assert any(f.permanence == "temporary" and f.valid_to for f in history)  # the trip
        embeds = await _scalar(services, tenant, "SELECT count(*) FROM operations WHERE tenant_id = %s "
                               "AND kind = 'embed'", tenant)
        digest = await projection_digest(services.pool, tenant, subject)

        def rebuilds() -> list[float]:
            return [REGISTRY.get_sample_value(name, labels) or 0.0 for name, labels in (
                ("agent_memory_rebuilds_total", {"outcome": "equal"}),
                ("agent_memory_rebuilds_total", {"outcome": "mismatch"}),
                ("agent_memory_rebuild_digest_mismatches_total", {}))]

        counted = rebuilds()
        started = time.monotonic()
        handle = await client.admin.rebuild(tenant)  # every subject of the tenant
        first = await client.admin.rebuild_result(handle)
        elapsed = time.monotonic() - started
        assert handle.id.startswith(f"rebuild/{tenant}/*/")
        assert (await handle.query(RebuildWorkflow.progress)).step == "done"
        [entry] = first.subjects
        assert entry.subject == subject and entry.equal and not entry.repaired and not entry.skipped_erased
        assert entry.live_digest == entry.rebuilt_digest == digest
        assert entry.rows == sum(entry.live_rows_by_table.values()) > 20
        assert entry.rows_by_table == entry.live_rows_by_table
        assert entry.vectors_from_operations == entry.rows_by_table["memory_vectors"] and entry.vectors_missing == 0
        assert first.all_equal and first.subjects_equal == 1 and first.rows == entry.rows

        # Corrupt: a fact's value, a vector and a lexical index row.
        await _admin(services, tenant,
                     ("UPDATE facts SET value = 'Atlantis' WHERE tenant_id = %s AND subject_id = %s "
                      "AND key = 'home_city' AND status = 'active'", (tenant, subject)),
                     # A row's ctid is unique within its partition only (migration 027).
                     ("DELETE FROM memory_vectors WHERE (tableoid, ctid) = (SELECT tableoid, ctid FROM memory_vectors "
                      "WHERE tenant_id = %s AND subject_id = %s LIMIT 1)", (tenant, subject)),
                     ("DELETE FROM memory_search WHERE ctid = (SELECT ctid FROM memory_search "
                      "WHERE tenant_id = %s AND subject_id = %s AND memory_kind = 'episode' LIMIT 1)",
                      (tenant, subject)))
        assert await projection_digest(services.pool, tenant, subject) != digest

        second = await client.admin.rebuild_result(await client.admin.rebuild(tenant, subject))
        [repair] = second.subjects
        assert not repair.equal and repair.repaired and not second.all_equal
        assert repair.rebuilt_digest == digest != repair.live_digest
        assert repair.tables_differing == ["facts", "memory_search", "memory_vectors"]
        assert await projection_digest(services.pool, tenant, subject) == digest
        current = {f.key: f.value for f in await client.facts(tenant, subject)}
        assert current["home_city"] == "Shanghai"
        # The deleted vector came back from its recorded embed operation: no provider call.
        assert await _scalar(services, tenant, "SELECT count(*) FROM operations WHERE tenant_id = %s "
                             "AND kind = 'embed'", tenant) == embeds
        assert repair.vectors_reembedded == 0

        third = await client.admin.rebuild_result(await client.admin.rebuild(tenant, subject))
        assert third.all_equal and third.subjects[0].equal and not third.subjects[0].repaired
        assert third.subjects[0].live_digest == digest

        # --force swaps everything in anyway; the digest does not move.
        forced = await client.admin.rebuild_result(await client.admin.rebuild(tenant, subject, force=True))
        assert forced.subjects[0].equal and forced.subjects[0].repaired
        assert await projection_digest(services.pool, tenant, subject) == digest
        recalled = await client.recall(tenant, subject, "where does Lin live now, Shanghai?")
        assert {f.value for f in recalled.facts} >= {"Shanghai", "peanuts"}
        # The operator's counters: three equal rebuilds of the subject, one mismatch (repaired).
        assert [now - then for now, then in zip(rebuilds(), counted, strict=True)] == [3, 1, 1]
    print(f"\nrebuild: {entry.rows} rows from {entry.events} events in {entry.elapsed_ms} ms "
          f"(workflow {elapsed:.2f} s)")


async def test_erased_subject_stays_erased_after_rebuild(client, services, tenant, running_worker):
    async with running_worker():
        await _consolidate(client, tenant, "zoe", session("rz1", "2024-02-01T08:00:00Z", "My name is Zoe.",
                                                          "I live in Berlin.", "I have a dog named Rex."))
        await _consolidate(client, tenant, "max", session("rm1", "2024-02-01T09:00:00Z", "I live in Paris."))
        before = await client.admin.rebuild_result(await client.admin.rebuild(tenant, "zoe"))  # a report naming zoe
        assert [e.subject for e in before.subjects] == ["zoe"]
        await client.admin.erasure_receipt(await client.admin.erase(tenant, "zoe", reason="GDPR art. 17"))

        for force in (False, True):
            handle = await client.admin.rebuild(tenant, force=force)
            result = await client.admin.rebuild_result(handle)
            by_subject = {e.subject: e for e in result.subjects}
            erased = services.keyring.subject_digest(tenant, "zoe")  # erasure keeps no clear id
            assert set(by_subject) == {"max", erased}
            zoe = by_subject[erased]
            assert zoe.skipped_erased and zoe.rows == 0 and zoe.events == 0 and not zoe.repaired
            assert zoe.equal and zoe.live_digest == zoe.rebuilt_digest  # nothing of zoe is live
            assert by_subject["max"].equal and not by_subject["max"].skipped_erased
            assert result.skipped_erased == 1 and result.all_equal
        one = await client.admin.rebuild_result(await client.admin.rebuild(tenant, "zoe"))
        assert one.subjects[0].skipped_erased

    assert await client.facts(tenant, "zoe", history=True) == []
    for table in ("facts", "episodes", "observations", "entities", "entity_mentions", "relations", "memory_search",
                  "memory_vectors", "rebuild_reports"):
        assert await _scalar(services, tenant, f"SELECT count(*) FROM {table} WHERE tenant_id = %s "
                             "AND subject_id = 'zoe'", tenant) == 0  # erasure deleted zoe's report too
    described = await handle.describe()
    attrs = {k.name: v for k, v in described.typed_search_attributes}
    assert attrs.get("TenantId") == tenant
    subject_run = await client.services.temporal.get_workflow_handle(one.workflow_id).describe()
    assert {k.name: v for k, v in subject_run.typed_search_attributes}.get("SubjectId") == "zoe"


async def test_rebuild_from_the_cli(services, tenant, running_worker, task_queue, client):
    async with running_worker():
        await _consolidate(client, tenant, "kim", session("rk1", "2024-01-01T10:00:00Z", "I live in Kyoto."))
        out = await asyncio.to_thread(run_cli, services, "rebuild", "--tenant", tenant, "--subject", "kim", "--json",
                                      task_queue=task_queue)
        text = await asyncio.to_thread(run_cli, services, "rebuild", "--tenant", tenant, "--wait",
                                       task_queue=task_queue)
    assert text.returncode == 0, text.stderr
    assert f"workflow rebuild/{tenant}/*/" in text.stdout and "1 subjects: 1 equal, 0 repaired" in text.stdout
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["workflow_id"].startswith(f"rebuild/{tenant}/kim/")
    assert result["all_equal"] and result["subjects"][0]["rows"] > 0


async def test_replay_closes_with_least_and_keeps_temporary_ends(services, tenant):
    """Replay through the write path's apply_event into scratch tables: supersede closes at
    least(valid_to, observed_at); a temporary fact ends at valid_until; confirm appends evidence,
    writes no row and moves the memory's version; candidates are not indexed. A legacy event
    (MemoryUpdated with an action) is upcast and applied the same way."""
    import uuid

    from agent_memory.memory.events import (
        CandidateHeld,
        FactConfirmed,
        FactCreated,
        FactSuperseded,
        MemoryEvent,
        upcast,
    )
    from agent_memory.projection.rebuild import _replay

    t = lambda d: datetime(2024, 1, d, tzinfo=UTC)  # noqa: E731
    trip, city, guess = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    fact = {"namespace": "travel", "key": "trip_city", "claim_type": "explicit", "permanence": "temporary",
            "confidence": 0.9, "session_id": "s", "reason": "r"}
    home = {**fact, "namespace": "location", "key": "home_city", "permanence": "permanent"}

    def ev(memory_id, version, day, sources, payload):
        return MemoryEvent(memory_id=memory_id, version=version, namespace=payload.namespace, occurred_at=t(day),
                           source_message_ids=tuple(sources), operation_id=f"op{version}", payload=payload)

    events = [
        ev(trip, 1, 1, ["m1"], FactCreated(**fact, value="Beijing", valid_until=t(10))),
        ev(trip, 2, 20, ["m2"], FactSuperseded(**{**fact, "reason": "moved on"}, value="Tokyo")),
        ev(city, 1, 1, ["m3"], FactCreated(**home, value="Rome")),
        ev(city, 2, 5, ["m4"], upcast("MemoryUpdated", "location", {**home, "value": "rome", "action": "confirm",
                                                                      "valid_until": None})),
        ev(guess, 1, 2, ["m5"], CandidateHeld(**{**fact, "namespace": "diet", "key": "vegan",
                                                 "claim_type": "inference"}, value="yes")),
    ]
    assert isinstance(events[3].payload, FactConfirmed)
    async with tenant_transaction(services.pool, tenant) as conn:
        replayed = await _replay(conn, tenant, "replay-unit", events)
        cur = await conn.execute("SELECT memory_id, version, memory_version, status, valid_to, close_reason, "
                                 "evidence_message_ids, source_kind FROM rebuild_facts")
        rows = {(r[0], r[1]): r[2:] for r in await cur.fetchall()}
        cur = await conn.execute("SELECT memory_id, version FROM rebuild_memory_search")
        search = sorted((m == guess, v) for m, v in await cur.fetchall())
    assert rows[(trip, 1)][1:4] == ("closed", t(10), "moved on")  # least(10, 20)
    assert rows[(trip, 2)][1] == "active" and rows[(trip, 1)][0] == rows[(trip, 2)][0] == 2
    assert rows[(city, 1)][4] == ["m3", "m4"] and (city, 2) not in rows
    assert rows[(city, 1)][0] == 2  # the confirmation moved the memory's version, not the interval's
    assert rows[(guess, 1)][1] == "candidate" and rows[(guess, 1)][5] == "model_inference"
    assert search == [(False, 1), (False, 1), (False, 2)]
    assert len(replayed.vector_items) == 4  # candidates are embedded too, as the live outbox does


async def test_vector_without_recorded_embedding_is_reembedded_once(client, services, tenant, running_worker):
    subject = "ana"
    async with running_worker():
        await _consolidate(client, tenant, subject, session("ra1", "2024-01-01T10:00:00Z", "I live in Lisbon."))
        digest = await projection_digest(services.pool, tenant, subject)
        # Lose a vector and its recorded embedding: the rebuild cannot take it from the log.
        async with await psycopg.AsyncConnection.connect(services.settings.database_admin_url) as conn:
            cur = await conn.execute("SELECT memory_id, version FROM memory_vectors WHERE tenant_id = %s "
                                     "AND subject_id = %s AND memory_kind = 'fact'", (tenant, subject))
            memory_id, version = await cur.fetchone()
            await conn.execute("DELETE FROM memory_vectors WHERE tenant_id = %s AND memory_id = %s",
                               (tenant, memory_id))
            await conn.execute("DELETE FROM operations WHERE tenant_id = %s AND kind = 'embed' "
                               "AND memory_id = %s AND memory_version = %s", (tenant, memory_id, version))
            await conn.commit()
        result = await client.admin.rebuild_result(await client.admin.rebuild(tenant, subject))
    [entry] = result.subjects
    assert not entry.equal and entry.repaired and entry.tables_differing == ["memory_vectors"]
    assert entry.vectors_missing == 0 and entry.vectors_reembedded == 1
    assert entry.rebuilt_digest == digest  # the same vector, embedded again (deterministic embedder)
    assert await projection_digest(services.pool, tenant, subject) == digest
    assert await _scalar(services, tenant, "SELECT count(*) FROM operations WHERE tenant_id = %s AND kind = 'embed' "
                         "AND memory_id = %s AND memory_version = %s", tenant, memory_id, version) == 1
    assert await _scalar(services, tenant, "SELECT count(*) FROM projection_outbox WHERE tenant_id = %s "
                         "AND processed_at IS NULL", tenant) == 0


async def test_rebuild_replays_a_promoted_candidate(client, services, tenant, running_worker):
    subject = "pia"
    async with running_worker():
        await _consolidate(client, tenant, subject, session("rp1", "2024-01-01T10:00:00Z", "I live in Oslo lol"),
                           session("rp2", "2024-02-01T10:00:00Z", "I live in Oslo lol"))
        async with tenant_transaction(services.pool, tenant) as conn:
            cur = await conn.execute("SELECT status, close_reason FROM facts WHERE tenant_id = %s AND subject_id = %s "
                                     "AND key = 'home_city' ORDER BY status", (tenant, subject))
            rows = await cur.fetchall()
        result = await client.admin.rebuild_result(await client.admin.rebuild(tenant, subject))
    assert ("promoted", "promoted to current fact") in rows and ("active", None) in rows
    assert result.all_equal and not result.subjects[0].repaired


async def test_a_tenant_wide_rebuild_pages_through_subjects_in_runs(client, tenant, running_worker):
    subjects = ["ada", "bo", "cy", "di", "ed"]
    async with running_worker():
        for n, subject in enumerate(subjects):
            # A question answered: the note is indexed with it, and the replay must index it alike.
            await _consolidate(client, tenant, subject,
                               session(f"page-{n}", "2024-01-01T10:00:00Z", ("assistant", "Where do you live?"),
                                       f"I live in City{n}."))
        handle = await client.admin.rebuild(tenant, subjects_per_run=2)  # 5 subjects: runs of 2, 2 and 1
        result = await client.admin.rebuild_result(handle)
    assert result.subjects_total == 5 and result.subjects_equal == 5 and result.all_equal
    assert [e.subject for e in result.subjects] == subjects
    started = [e.workflow_execution_started_event_attributes async for e in handle.fetch_history_events()
               if e.HasField("workflow_execution_started_event_attributes")]  # of the latest run
    assert started[0].continued_execution_run_id  # it continued an earlier run of the chain


async def test_a_forced_tenant_wide_rebuild_carries_a_bounded_result(client, tenant, running_worker):
    """A forced rebuild repairs every subject; the result carried across continue-as-new used to
    list them all (3.1 MB at 5,000 subjects, past the 2 MB payload limit: the chain stalled)."""
    subjects = [f"s{n}" for n in range(7)]
    async with running_worker():
        for n, subject in enumerate(subjects):
            await _consolidate(client, tenant, subject, session(f"bound-{n}", "2024-01-01T10:00:00Z",
                                                                 f"I live in Town{n}."))
        handle = await client.admin.rebuild(tenant, force=True, subjects_per_run=2, listed_max=3)
        result = await client.admin.rebuild_result(handle)
    assert result.subjects_total == 7 and result.subjects_repaired == 7 and result.all_equal
    assert len(result.subjects) == 3 and result.subjects_not_listed == 4
    # Every subject's report is in the table; the workflow carried counts and a cursor only.
    assert await _scalar(client.services, tenant, "SELECT count(*) FROM rebuild_reports WHERE tenant_id = %s "
                         "AND request_id = %s", tenant, result.request_id) == 7
    assert (await handle.result()).subjects == []
    async for event in handle.fetch_history_events():  # every run of the chain started small
        if event.HasField("workflow_execution_started_event_attributes"):
            assert sum(len(p.data) for p in event.workflow_execution_started_event_attributes.input.payloads) < 20_000


async def test_the_demo_sessions_rebuild_to_the_same_projection(client, tenant, running_worker):
    """Everything the write path does on realistic input (EN and ZH, a move, a trip, a restated
    preference, questions answered) is reproduced by the replay, byte for byte in the digest."""
    from workers.demo import sample_sessions

    async with running_worker():
        await _consolidate(client, tenant, "lin", *sample_sessions("rb"))
        result = await client.admin.rebuild_result(await client.admin.rebuild(tenant, "lin"))
    [entry] = result.subjects
    assert entry.equal and not entry.repaired and entry.live_digest == entry.rebuilt_digest
    assert entry.rows > 50


async def test_rebuild_reproduces_relations_and_repairs_a_corrupted_edge(client, services, tenant):
    """Edges between entities replay equal; an interval reopened and one deleted behind the
    application's back are repaired from the log, and a forced swap rewrites entities and edges
    together (their keys are checked at commit)."""
    from agent_memory.core.models import (
        ConflictPlan,
        ExtractedEntity,
        ExtractedRelation,
        ExtractionResult,
        ImportanceResult,
        SummaryResult,
    )
    from agent_memory.core.operation_keys import CommitKey
    from agent_memory.memory.memory_store import commit_consolidation
    from agent_memory.projection.rebuild import rebuild_subject

    subject = "lin"
    for s, city in ((HANGZHOU, "Hangzhou"), (MOVE, "Shanghai")):
        await client.append_messages(tenant, subject, s)
        first = s.messages[0]
        extraction = ExtractionResult(
            provider="test", extractor="written-out", extractor_version="1", facts=[],
            entities=[ExtractedEntity(name=n, entity_type=t, evidence_message_ids=[first.message_id])
                      for n, t in (("Lin Wei", "person"), (city, "place"), ("Mia", "person"))],
            relations=[ExtractedRelation(source="Lin Wei", relation="lives_in", target=city, observed_at=first.created_at,
                                         evidence_message_ids=[first.message_id]),
                       ExtractedRelation(source="Lin Wei", relation="friend", target="Mia", observed_at=first.created_at,
                                         evidence_message_ids=[first.message_id])])
        request = {"session": s.session_id}
        await commit_consolidation(
            services.pool, services.keyring, tenant_id=tenant, subject_id=subject, session_id=s.session_id,
            key=CommitKey.for_request(s.session_id, request), request=request, extraction=extraction,
            plan=ConflictPlan(decisions=[]), importance=ImportanceResult(importance=3),
            summary=SummaryResult(sentences=[], token_count=0), happened_at=s.messages[-1].created_at)
    digest = await projection_digest(services.pool, tenant, subject)
    entry = await rebuild_subject(services.pool, services.keyring, tenant, subject)
    assert entry.equal and entry.rows_by_table["relations"] == 3  # Hangzhou closed, Shanghai and Mia current

    await _admin(services, tenant,
                 ("UPDATE relations SET valid_to = NULL, closed_version = NULL, closed_event_id = NULL "
                  "WHERE tenant_id = %s AND subject_id = %s AND valid_to IS NOT NULL", (tenant, subject)),
                 ("DELETE FROM relations WHERE tenant_id = %s AND subject_id = %s AND relation = 'friend'",
                  (tenant, subject)))
    repair = await rebuild_subject(services.pool, services.keyring, tenant, subject)
    assert repair.repaired and repair.tables_differing == ["relations"] and repair.rebuilt_digest == digest
    assert await projection_digest(services.pool, tenant, subject) == digest
    forced = await rebuild_subject(services.pool, services.keyring, tenant, subject, force=True)
    assert forced.equal and forced.repaired and await projection_digest(services.pool, tenant, subject) == digest
