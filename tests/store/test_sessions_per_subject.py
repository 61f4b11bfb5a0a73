"""Session ids are scoped per subject: two people of one tenant may each
have a session "s1". Against the real stack and a worker; migration 021 on rows stored before it."""

from __future__ import annotations

import psycopg
import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError

from agent_memory.core import contract
from agent_memory.core.models import ConsolidationInput, ConsolidationResult, SessionIdleInput, SessionIdleResult
from agent_memory.store.db import tenant_transaction
from tests.databases import database_before
from tests.sessions import session


async def test_two_subjects_each_have_their_own_session_s1(client, services, tenant, running_worker):
    # Four messages each: a shorter session gets no episode (the substance gate), and both have one.
    lin = session("s1", "2024-03-01T09:00:00Z", "I live in Oslo.", "I have a cat named Pixel.",
                  ("assistant", "How old is Pixel?"), "Can you suggest a good cat food brand?")
    kim = session("s1", "2024-03-02T09:00:00Z", "I live in Rome.", ("assistant", "Which part of the city do you live in?"),
                  "Is the metro open at night?", ("assistant", "Do you take the bus to work?"))
    async with running_worker():
        assert (await client.append_messages(tenant, "lin", lin)).inserted == 4
        assert (await client.append_messages(tenant, "kim", kim)).inserted == 4  # not "another subject's"
        lin_run = await client.end_session(tenant, "lin", "s1")
        kim_run = await client.end_session(tenant, "kim", "s1")
        assert (lin_run.id, kim_run.id) == (f"consolidate/{tenant}/lin/s1", f"consolidate/{tenant}/kim/s1")
        lin_done, kim_done = await client.consolidation_result(lin_run), await client.consolidation_result(kim_run)
        assert lin_done.episode_written and kim_done.episode_written
        kim_done_facts = await client.facts(tenant, "kim")
        # A retry of kim's hook attaches to kim's run, not lin's.
        assert (await (await client.end_session(tenant, "kim", "s1")).describe()).run_id == (
            await kim_run.describe()).run_id
        # Erasing kim (below) leaves lin's s1 whole.
        await client.admin.erasure_receipt(await client.admin.erase(tenant, "kim", reason="test"))
        assert await client.facts(tenant, "kim") == []
    assert {f.value for f in await client.facts(tenant, "lin")} >= {"Oslo"}
    assert "Rome" in {f.value for f in kim_done_facts}
    assert "Oslo" not in {f.value for f in kim_done_facts}
    # Each subject's prompt sees its own session's turns only.
    lin_prompt = await client.build_prompt(tenant, "lin", "s1", "and now?")
    recent = {b.name: b for b in lin_prompt.blocks}["recent"].messages
    assert [m.content for m in recent] == ["I live in Oslo.", "I have a cat named Pixel.", "How old is Pixel?",
                                           "Can you suggest a good cat food brand?"]
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT subject_id, count(*) FROM messages WHERE tenant_id = %s AND session_id = 's1' "
                                 "GROUP BY subject_id", (tenant,))
        assert dict(await cur.fetchall()) == {"lin": 4}
        cur = await conn.execute("SELECT subject_id FROM episodes WHERE tenant_id = %s AND session_id = 's1'",
                                 (tenant,))
        assert [r[0] for r in await cur.fetchall()] == ["lin"]


def _attributes(tenant: str, subject: str, session_id: str) -> TypedSearchAttributes:
    return TypedSearchAttributes([SearchAttributePair(contract.TENANT_ID, tenant),
                                  SearchAttributePair(contract.SUBJECT_ID, subject),
                                  SearchAttributePair(contract.SESSION_ID, session_id)])


async def test_end_session_attaches_to_the_runs_started_under_the_old_ids(client, services, tenant, task_queue,
                                                                         running_worker):
    """Runs started before migration 021 keep ids without the subject. The hook ends the caller's
    old idle timer and attaches to its old consolidation (no second run over the same messages),
    and leaves another subject's old timer of the same session name alone."""
    temporal = services.temporal
    # Four messages: a shorter session gets no episode (the substance gate), and lin's s1 has one.
    await client.append_messages(tenant, "lin", session("s1", "2024-03-01T09:00:00Z", "I live in Oslo.",
                                                        ("assistant", "Which part of the city do you live in?"),
                                                        "Is the metro open at night?",
                                                        ("assistant", "Do you take the bus to work?")))
    await client.append_messages(tenant, "kim", session("s2", "2024-03-02T09:00:00Z", "I live in Rome."))
    await client.append_messages(tenant, "lin", session("s2", "2024-03-03T09:00:00Z", "I like tea."))
    async with running_worker():
        old_idle = await temporal.start_workflow(
            contract.SESSION_IDLE_WORKFLOW, SessionIdleInput(tenant_id=tenant, subject_id="lin", session_id="s1",
                                                             idle_seconds=3600),
            id=contract.legacy_idle_workflow_id(tenant, "s1"), task_queue=task_queue,
            start_signal=contract.SIGNAL_TOUCH, search_attributes=_attributes(tenant, "lin", "s1"),
            result_type=SessionIdleResult)
        kim_idle = await temporal.start_workflow(
            contract.SESSION_IDLE_WORKFLOW, SessionIdleInput(tenant_id=tenant, subject_id="kim", session_id="s2",
                                                             idle_seconds=3600),
            id=contract.legacy_idle_workflow_id(tenant, "s2"), task_queue=task_queue,
            start_signal=contract.SIGNAL_TOUCH, search_attributes=_attributes(tenant, "kim", "s2"))
        old_run = await temporal.start_workflow(
            contract.CONSOLIDATION_WORKFLOW, ConsolidationInput(tenant_id=tenant, subject_id="lin", session_id="s1"),
            id=contract.legacy_consolidation_workflow_id(tenant, "s1"), task_queue=task_queue,
            search_attributes=_attributes(tenant, "lin", "s1"), result_type=ConsolidationResult)
        hooked = await client.end_session(tenant, "lin", "s1")
        assert (hooked.id, (await hooked.describe()).run_id) == (old_run.id, old_run.result_run_id)
        # The old timer leaves the consolidation to the hook, which attached to the run under the old id.
        assert (await old_idle.result()).outcome == "ended by the session-end hook"
        assert (await client.consolidation_result(hooked)).episode_written
        # Done and nothing new: a second hook attaches to the old run again.
        again = await client.end_session(tenant, "lin", "s1")
        assert (again.id, (await again.describe()).run_id) == (old_run.id, old_run.result_run_id)
        with pytest.raises(RPCError):
            await temporal.get_workflow_handle(contract.consolidation_workflow_id(tenant, "lin", "s1")).describe()
        # lin's new s2 is not kim's old s2: kim's timer keeps waiting.
        lin_s2 = await client.end_session(tenant, "lin", "s2")
        assert lin_s2.id == contract.consolidation_workflow_id(tenant, "lin", "s2")
        await client.consolidation_result(lin_s2)
        assert (await kim_idle.describe()).status == WorkflowExecutionStatus.RUNNING
        await kim_idle.terminate("test over")


async def test_migration_021_keeps_the_sessions_stored_before_it(services):
    """Before 021 a session id was unique per tenant; its rows keep their ids, and after it a
    second subject can store the same session id."""
    async with database_before(services.settings.database_admin_url, "021") as (conn, migrate_the_rest):
        await conn.execute("INSERT INTO sessions (tenant_id, session_id, subject_id) VALUES ('t', 's1', 'lin')")
        await conn.execute(
            "INSERT INTO messages (tenant_id, session_id, message_id, subject_id, turn_index, role, content, "
            "created_at, content_sha256) VALUES ('t', 's1', 'm1', 'lin', 0, 'user', 'hi', now(), 'x')")
        await migrate_the_rest()
        await conn.execute("INSERT INTO sessions (tenant_id, session_id, subject_id) VALUES ('t', 's1', 'kim')")
        await conn.execute(
            "INSERT INTO messages (tenant_id, session_id, message_id, subject_id, turn_index, role, content, "
            "created_at, content_sha256) VALUES ('t', 's1', 'm1', 'kim', 0, 'user', 'hey', now(), 'y')")
        cur = await conn.execute("SELECT subject_id, content FROM messages ORDER BY subject_id")
        assert await cur.fetchall() == [("kim", "hey"), ("lin", "hi")]
        # A message of a session the subject does not have is refused by the foreign key.
        try:
            await conn.execute(
                "INSERT INTO messages (tenant_id, session_id, message_id, subject_id, turn_index, role, content, "
                "created_at, content_sha256) VALUES ('t', 's1', 'm2', 'ana', 0, 'user', 'x', now(), 'z')")
        except psycopg.errors.ForeignKeyViolation:
            await conn.rollback()
        else:
            raise AssertionError("a message of another subject's session was stored")
