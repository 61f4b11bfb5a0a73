"""The store layer's invariants: one subject scope (tombstone by digest or clear id, for every
reader and writer) and one table registry (every tenant table declared, every list derived)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import psycopg
import pytest

from agent_memory.core import tables
from agent_memory.core.models import ConflictPlan, ExtractionResult, ImportanceResult, SummaryResult
from agent_memory.core.operation_keys import CommitKey, ProviderStepKey
from agent_memory.lifecycle import compaction, erasure
from agent_memory.memory.corrections import write_fact
from agent_memory.memory.evidence import append_messages
from agent_memory.memory.memory_store import commit_consolidation, list_facts
from agent_memory.memory.operations import OperationRecorder, SubjectErasedError
from agent_memory.projection import rebuild
from agent_memory.providers.offline import offline_providers
from agent_memory.recall.context import assemble_context
from agent_memory.recall.recall import recall
from agent_memory.store.scope import Mode, SubjectScope, subject_scope
from tests.sessions import session

# --- the registry --------------------------------------------------------------------------------


async def test_every_tenant_table_of_the_database_is_in_the_registry(services):
    """A new table with tenant data cannot be forgotten by erasure, compaction or the isolation
    tests: it must be declared in agent_memory/core/tables.py, with what it holds of a subject."""
    async with await psycopg.AsyncConnection.connect(services.settings.database_admin_url) as admin:
        cur = await admin.execute(
            "SELECT c.table_name, bool_or(s.column_name IS NOT NULL) FROM information_schema.columns c "
            "JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
            "AND t.table_type = 'BASE TABLE' "
            "LEFT JOIN information_schema.columns s ON s.table_schema = c.table_schema "
            "AND s.table_name = c.table_name AND s.column_name = 'subject_id' "
            "WHERE c.table_schema = 'public' AND c.column_name = 'tenant_id' GROUP BY c.table_name")
        with_tenant = dict(await cur.fetchall())
    assert set(with_tenant) == set(tables.tenant_tables())
    # A table naming subjects says so (and then erasure must say what it does with them).
    assert {name for name, has_subject in with_tenant.items() if has_subject} == set(tables.subject_tables())
    for table in tables.TABLES:
        if table.subject_column is not None:
            assert table.erasure is not None, f"{table.name}: what does erasure do with a subject's rows?"


def test_every_table_list_derives_from_the_registry():
    from workflows.erasure import STORES_WITH_EVENT_METADATA

    # The current frozen step list of the erasure workflow is the registry's (old lists stay frozen).
    assert STORES_WITH_EVENT_METADATA == tables.erasure_stores() == erasure.STORES
    assert tables.erasure_sql_stores() == erasure.SQL_STORES
    assert tables.erasure_tables() == compaction.ERASURE_TABLES
    # Every table an erasure deletes from or redacts is compacted afterwards.
    assert {t for ts in erasure.SQL_STORES.values() for t in ts} | {"memory_events"} <= set(compaction.ERASURE_TABLES)
    # The rebuild's digest order is the one recorded digests were made with.
    assert rebuild.TABLES == ("facts", "episodes", "observations", "memory_search", "memory_vectors", "entities",
                             "entity_mentions", "relations", "stale_marks")
    # A table added later counts only where the subject has rows in it: earlier digests still hold.
    empty = {t: hashlib.sha256(b"").hexdigest() for t in rebuild.TABLES}
    assert rebuild.combine_digests(empty) == hashlib.sha256("".join(
        f"{t}:{empty[t]}\n" for t in rebuild.TABLES if t != "stale_marks").encode()).hexdigest()
    assert set(rebuild.WRITE_COLUMNS) == set(rebuild.DIGEST_COLUMNS) == set(rebuild.TABLES)
    assert all(tables.BY_NAME[t].role == "projection" for t in rebuild.TABLES)


# --- the subject scope ---------------------------------------------------------------------------


async def _tombstone_by_digest_only(services, tenant: str, subject: str) -> None:
    """What a completed erasure keeps: a tombstone naming the subject by its keyed digest only.
    The subject's rows are left in place, so a reader that misses the tombstone shows them."""
    digest = services.keyring.subject_digest(tenant, subject)
    async with await psycopg.AsyncConnection.connect(services.settings.database_admin_url) as admin:
        await admin.execute("INSERT INTO tombstones (tenant_id, subject_id, subject_digest, request_id) "
                            "VALUES (%s, NULL, %s, 'completed-erasure')", (tenant, digest))


async def _drop_tombstones(services, tenant: str) -> None:
    async with await psycopg.AsyncConnection.connect(services.settings.database_admin_url) as admin:
        await admin.execute("DELETE FROM tombstones WHERE tenant_id = %s", (tenant,))


async def test_a_digest_only_tombstone_hides_the_subject_from_readers_and_refuses_writers(services, tenant):
    pool, keyring = services.pool, services.keyring
    embedder = offline_providers().embedder
    await append_messages(pool, None, tenant, "lin", session("s1", "2024-01-01T00:00:00Z", "I live in Oslo."),
                          subject_digest=keyring.subject_digest(tenant, "lin"))
    await write_fact(pool, keyring, tenant_id=tenant, subject_id="lin", namespace="location", key="home_city",
                     value="Oslo", expected_version=0, evidence_message_ids=["s1:1"])
    assert [f.value for f in await list_facts(pool, keyring, tenant, "lin")] == ["Oslo"]
    before = await assemble_context(pool, keyring, embedder, tenant, "lin", "where does Lin live? Oslo")
    assert "Oslo" in before.text

    await _tombstone_by_digest_only(services, tenant, "lin")
    try:
        # The scope itself: READ and EXCLUSIVE report it, WRITE refuses.
        for mode in (Mode.READ, Mode.EXCLUSIVE):
            async with subject_scope(pool, keyring, tenant, "lin", mode) as scope:
                assert isinstance(scope, SubjectScope) and scope.erased
        with pytest.raises(SubjectErasedError):
            async with subject_scope(pool, keyring, tenant, "lin", Mode.WRITE):
                pass
        async with subject_scope(pool, keyring, tenant, "other", Mode.WRITE) as scope:
            assert not scope.erased  # another subject of the tenant is untouched

        # Every reader returns nothing, though the rows are still there.
        assert await list_facts(pool, keyring, tenant, "lin") == []
        assert await list_facts(pool, keyring, tenant, "lin", include_history=True, include_candidates=True) == []
        recalled = await recall(pool, keyring, embedder, tenant, "lin", "where does Lin live? Oslo")
        assert recalled.facts == [] and recalled.episodes == []
        context = await assemble_context(pool, keyring, embedder, tenant, "lin", "where does Lin live? Oslo")
        assert context.items == [] and context.text == ""
        # A rebuild skips the subject and writes nothing.
        rebuilt = await rebuild.rebuild_subject(pool, keyring, tenant, "lin")
        assert rebuilt.skipped_erased and not rebuilt.repaired

        # Every writer is refused.
        with pytest.raises(SubjectErasedError):
            await write_fact(pool, keyring, tenant_id=tenant, subject_id="lin", namespace="location",
                             key="home_city", value="Rome", expected_version=1, evidence_message_ids=["s1:1"])
        with pytest.raises(SubjectErasedError):
            await append_messages(pool, None, tenant, "lin", session("s2", "2024-01-02T00:00:00Z", "Rome now."),
                                  subject_digest=keyring.subject_digest(tenant, "lin"))
        with pytest.raises(SubjectErasedError):
            await commit_consolidation(
                pool, keyring, tenant_id=tenant, subject_id="lin", session_id="s1", key=CommitKey("s1", "0" * 16),
                request={"session": "s1"}, extraction=ExtractionResult(extractor="x", extractor_version="1", facts=[]),
                plan=ConflictPlan(decisions=[]), importance=ImportanceResult(importance=1),
                summary=SummaryResult(sentences=[], token_count=0), happened_at=datetime(2024, 1, 1, tzinfo=UTC))

        async def never() -> ImportanceResult:
            raise AssertionError("the provider was called for an erased subject")

        with pytest.raises(SubjectErasedError):
            await OperationRecorder(pool, keyring).run(
                tenant_id=tenant, subject_id="lin", key=ProviderStepKey("importance", "lin", "s1", "p", "1", "d"),
                request={"session": "s1"}, result_type=ImportanceResult, call=never)
        with pytest.raises(SubjectErasedError):
            await OperationRecorder(pool, keyring).load(tenant, "lin", "importance/lin/s1/p-1/d", ImportanceResult)
    finally:
        await _drop_tombstones(services, tenant)


async def test_the_scope_checks_identifiers_and_accepts_a_digest_only_for_erased_listings(services, tenant):
    pool, keyring = services.pool, services.keyring
    for bad in ("", "a b", "x" * 65, "erased:zz"):
        for mode in Mode:
            with pytest.raises(ValueError):
                async with subject_scope(pool, keyring, tenant, bad, mode):
                    pass
    with pytest.raises(ValueError):
        async with subject_scope(pool, keyring, "bad tenant", "lin", Mode.READ):
            pass
    # A tenant-wide rebuild lists an erased subject by its digest: readable (as erased), never writable.
    digest = keyring.subject_digest(tenant, "lin")
    await _tombstone_by_digest_only(services, tenant, "lin")
    try:
        for mode in (Mode.READ, Mode.EXCLUSIVE):
            async with subject_scope(pool, keyring, tenant, digest, mode) as scope:
                assert scope.erased
        with pytest.raises(ValueError):
            async with subject_scope(pool, keyring, tenant, digest, Mode.WRITE):
                pass
        assert (await rebuild.rebuild_subject(pool, keyring, tenant, digest)).skipped_erased
    finally:
        await _drop_tombstones(services, tenant)
