"""Flow 3: compliance erasure on the real servers, and that nothing resurrects the subject."""

from __future__ import annotations

import pytest

from agent_memory.core import contract
from agent_memory.core.models import ConsolidationInput, ConsolidationResult
from agent_memory.memory.evidence import recent_messages
from agent_memory.memory.operations import SubjectErasedError
from agent_memory.store.db import tenant_transaction
from agent_memory.telemetry.metrics import REGISTRY
from tests.sessions import session
from workflows.erasure import ErasureWorkflow


async def test_erasure_removes_everything_and_returns_the_same_receipt(client, services, tenant, running_worker):
    subject = "zoe"
    other = "max"  # same tenant, different subject: must be untouched
    # Four messages: a shorter session gets no episode (the substance gate), and z1's is erased.
    s1 = session("z1", "2024-02-01T08:00:00Z", "My name is Zoe.", "I live in Berlin.", "I have a dog named Rex.",
                 ("assistant", "What breed is Rex?"))
    s2 = session("m1", "2024-02-01T09:00:00Z", "I live in Paris.")
    async with running_worker():
        await client.append_messages(tenant, subject, s1)
        await client.append_messages(tenant, other, s2)
        for subj, s in ((subject, s1), (other, s2)):
            await client.consolidation_result(await client.end_session(tenant, subj, s.session_id))
        assert len(await recent_messages(services.redis, tenant, subject, "z1")) == 4

        erasures = REGISTRY.get_sample_value("agent_memory_erasure_duration_seconds_count") or 0.0
        handle = await client.admin.erase(tenant, subject, reason="GDPR art. 17 request #1")
        receipt = await client.admin.erasure_receipt(handle)
        assert handle.id == f"erase/{tenant}/{subject}/{receipt.request_id}"
        progress = await handle.query(ErasureWorkflow.progress)
        assert progress.step == "done"

        again = await client.admin.erasure_receipt(await client.admin.erase(tenant, subject, reason="GDPR art. 17 request #1"))
        assert again == receipt
        # Timed once, registration to receipt: the repeat is answered with the same receipt.
        assert REGISTRY.get_sample_value("agent_memory_erasure_duration_seconds_count") == erasures + 1

    assert receipt.residue_total == 0 and receipt.key_shredded
    assert receipt.removed["messages"] == 4 and receipt.removed["sessions"] == 1
    assert receipt.removed["facts"] >= 3 and receipt.removed["episodes"] == 1
    assert receipt.removed["vectors"] >= 4 and receipt.removed["working_memory"] == 1
    assert receipt.removed["operations"] >= 5
    assert receipt.tombstoned_at <= receipt.completed_at

    assert await client.facts(tenant, subject, history=True) == []
    assert (await client.recall(tenant, subject, "Berlin dog")).episodes == []
    assert await recent_messages(services.redis, tenant, subject, "z1") == []
    digest = services.keyring.subject_digest(tenant, subject)
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*), count(payload_ciphertext) FROM memory_events "
                                 "WHERE tenant_id = %s AND subject_id = %s", (tenant, digest))
        events, ciphertexts = await cur.fetchone()
        cur = await conn.execute("SELECT count(*) FROM subject_keys WHERE tenant_id = %s AND subject_id = %s",
                                 (tenant, subject))
        keys = (await cur.fetchone())[0]
    assert events == ciphertexts > 0 and keys == 0  # the log stays, as unreadable ciphertext
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT DISTINCT namespace, operation_id, source_message_ids, occurred_at "
                                 "FROM memory_events WHERE tenant_id = %s AND subject_id = %s", (tenant, digest))
        # …and with nothing in the clear: no namespace, no session-naming operation, no message
        # ids, no observation times, and the subject named only by its keyed digest.
        rows = await cur.fetchall()
        assert [r[:3] for r in rows] == [("erased", "erased", [])] and rows[0][3].year == 1970
        # What erasure keeps (tombstone, request, receipt) holds no clear subject id and no reason.
        cur = await conn.execute("SELECT count(*) FROM memory_events WHERE tenant_id = %s AND subject_id = %s",
                                 (tenant, subject))
        assert (await cur.fetchone())[0] == 0
        cur = await conn.execute("SELECT subject_id, subject_digest FROM tombstones WHERE tenant_id = %s", (tenant,))
        assert await cur.fetchall() == [(None, digest)]
        cur = await conn.execute("SELECT subject_id, reason, receipt::text, reason_ciphertext IS NOT NULL "
                                 "FROM erasure_requests WHERE tenant_id = %s", (tenant,))
        kept_subject, clear_reason, kept_receipt, encrypted = await cur.fetchone()
        assert kept_subject is None and clear_reason is None and encrypted
        assert subject not in kept_receipt.replace(digest, "") and "GDPR" not in kept_receipt
    assert receipt.removed["event_metadata"] == events

    # The other subject keeps everything.
    assert [f.value for f in await client.facts(tenant, other)] == ["Paris"]


async def test_erased_subject_is_never_resurrected(client, tenant, running_worker):
    subject = "ivy"
    s1 = session("i1", "2024-02-01T08:00:00Z", "I live in Rome.")
    await client.append_messages(tenant, subject, s1)
    async with running_worker():
        # Erase before the session-end hook fires: the late consolidation must be refused.
        await client.admin.erasure_receipt(await client.admin.erase(tenant, subject, reason="user request"))
        with pytest.raises(SubjectErasedError):
            await client.append_messages(tenant, subject, session("i2", "2024-02-02T08:00:00Z", "I live in Oslo."))
        # The session-end hook says so at once (nothing is started)…
        with pytest.raises(SubjectErasedError):
            await client.end_session(tenant, subject, "i1")
        # …and a consolidation that starts anyway (the idle timer racing the erasure) is refused.
        handle = await client.services.temporal.start_workflow(
            contract.CONSOLIDATION_WORKFLOW, ConsolidationInput(tenant_id=tenant, subject_id=subject, session_id="i1"),
            id=contract.consolidation_workflow_id(tenant, subject, "i1"), task_queue=client.task_queue,
            result_type=ConsolidationResult)
        result = await client.consolidation_result(handle)
    assert result.refused_reason == "subject erased"
    assert result.events_appended == 0
    assert await client.facts(tenant, subject, history=True) == []


def test_the_current_step_list_is_frozen_and_covers_every_store():
    """A new store needs a new frozen list behind workflow.patched(); old lists never change,
    or old histories stop replaying."""
    from agent_memory.lifecycle.erasure import STORES
    from workflows.erasure import STORES_BEFORE_EVENT_METADATA, STORES_BEFORE_OBSERVATIONS, STORES_WITH_EVENT_METADATA

    assert STORES_WITH_EVENT_METADATA == STORES
    assert STORES_BEFORE_EVENT_METADATA == ("working_memory", "vectors", "search_index", "outbox", "observations",
                                            "episodes", "facts", "operations", "messages")
    assert STORES_BEFORE_OBSERVATIONS == ("working_memory", "vectors", "outbox", "episodes", "facts", "operations",
                                          "messages")
