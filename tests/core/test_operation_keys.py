"""Operation keys (agent_memory/core/operation_keys.py): the ids they render are pinned (rows recorded
before the keys existed must keep matching), their fields are stored in real columns (migration
010), and an embed operation recorded before those columns is still reused by a rebuild."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import NamedTuple

import psycopg
import pytest

from agent_memory.core.models import EmbeddingResult
from agent_memory.core.operation_keys import (
    KEY_COLUMNS,
    CommitKey,
    EmbedBatchKey,
    EmbedKey,
    KeyColumns,
    LiveWriteKey,
    PlanKey,
    ProviderStepKey,
    RederiveKey,
    text_digest,
)
from agent_memory.memory.corrections import write_fact
from agent_memory.memory.operations import OperationRecorder, request_hash
from agent_memory.projection.projector import OutboxProjector
from agent_memory.projection.rebuild import rebuild_subject
from agent_memory.providers.offline import HashingEmbedder
from agent_memory.store.db import migration_files, tenant_transaction
from tests.databases import database_before

MEMORY = uuid.UUID("12345678-1234-5678-1234-567812345678")


class _Provider:
    def __init__(self, name: str, version: str):
        self.name, self.version = name, version


# --- the rendered ids: pinned literals, and the builders they replace --------------------------

def test_each_key_renders_the_pinned_id():
    embed = EmbedKey.for_text(MEMORY, 3, _Provider("hashing-embedder", "1"), "Lin lives in Hangzhou")
    assert embed.operation_id == "embed/12345678-1234-5678-1234-567812345678/3/hashing-embedder-1/b4aacbd565af"
    assert (embed.kind, embed.prefix, str(embed)) == ("embed", "embed", embed.operation_id)
    assert embed.request("Lin lives in Hangzhou") == {"text": "Lin lives in Hangzhou", "model": "hashing-embedder",
                                                      "version": "1"}
    assert EmbedBatchKey.for_operations([embed]).operation_id == (
        f"embed-batch/{request_hash({'operations': [embed.operation_id]})[:24]}")
    step = ProviderStepKey.for_messages("extract", "lin", "s/1", _Provider("rule-extractor", "2"), "abc123")
    assert step.operation_id == "extract/lin/s/1/rule-extractor-2/abc123"  # sessions are per subject (021)
    assert (step.kind, step.prefix) == ("extract", "extract")
    plan = PlanKey.for_extraction("s1", "extract/s1/rule-extractor-2/abc", 2)
    assert plan.operation_id == "plan/s1/77d3f5c78b330c5e/2"
    commit = CommitKey.for_request("s1", {"a": 1})
    assert commit.operation_id == "commit/s1/f9d86028c6e0d64e"
    live = LiveWriteKey.for_request_hash(request_hash({"a": 1}))
    assert live.operation_id == "live/f9d86028c6e0d64e225186f9"
    assert (live.kind, live.prefix) == ("commit", "live")  # a live write is recorded as a commit
    rederive = RederiveKey("r1", "lin", "s1", "rule-extractor", "9", dry_run=False)
    assert rederive.operation_id == "rederive/r1/lin/s1" and rederive.kind == "rederive"
    dry = RederiveKey("r2", "lin", "s1", "rule-extractor", "9", dry_run=True)
    assert (dry.operation_id, dry.kind, dry.prefix) == ("rederive-dry/r2/lin/s1", "rederive-dry", "rederive-dry")
    # The extractor and its version in their columns: which sessions the current one re-derived.
    assert rederive.columns()._asdict() == {
        "memory_id": None, "memory_version": None, "session_id": "s1", "model": "rule-extractor",
        "model_version": "9", "key_digest": "r1", "plan_round": None}


def _old_embed_id(memory_id, version, embedder, text):  # projection.embed_operation_id, as it was
    return f"embed/{memory_id}/{version}/{embedder.name}-{embedder.version}/{request_hash({'text': text})[:12]}"


@pytest.mark.parametrize("name,version", [("hashing-embedder", "1"),
                                          ("openai-compatible-embedder", "1-text-embedding-3-small-1536"),
                                          ("x", "y")])
def test_keys_render_what_the_old_builders_built(name, version):
    provider, memory_id = _Provider(name, version), uuid.uuid4()
    for text in ("", "Lin lives in Hangzhou", "我不吃辣。"):
        key = EmbedKey.for_text(memory_id, 7, provider, text)
        assert key.operation_id == _old_embed_id(memory_id, 7, provider, text)
        assert request_hash(key.request(text)) == request_hash({"text": text, "model": name, "version": version})
    request = {"tenant_id": "t", "session_id": "s1", "round": 0}
    assert CommitKey.for_request("s1", request).operation_id == f"commit/s1/{request_hash(request)[:16]}"
    assert ProviderStepKey.for_messages("summary", "lin", "s1", provider, "d").operation_id == (
        f"summary/lin/s1/{name}-{version}/d")
    extraction = f"extract/s1/{name}-{version}/d"
    assert PlanKey.for_extraction("s1", extraction, 1).operation_id == (
        f"plan/s1/{request_hash({'extraction': extraction})[:16]}/1")


def test_a_legacy_embed_id_parses_to_every_key_that_renders_it():
    key = EmbedKey(MEMORY, 3, "openai-compatible-embedder", "1-text-embedding-3-small-1536", "b4aacbd565af")
    candidates = EmbedKey.legacy_candidates(key.operation_id)
    assert key in candidates and all(c.operation_id == key.operation_id for c in candidates)
    assert len(candidates) == key.operation_id.split("/")[3].count("-")
    assert {(c.memory_id, c.version, c.text_digest) for c in candidates} == {(MEMORY, 3, "b4aacbd565af")}
    for other in ("commit/s1/f9d86028c6e0d64e", "embed/not-a-uuid/3/m-1/d", f"embed/{MEMORY}/x/m-1/d",
                  f"embed/{MEMORY}/3/model/d"):
        assert EmbedKey.legacy_candidates(other) == [], other


def test_columns_name_the_fields_in_order():
    key = EmbedKey(MEMORY, 3, "m", "1", "d")
    assert dict(zip(KEY_COLUMNS, key.columns(), strict=True)) == {
        "memory_id": MEMORY, "memory_version": 3, "session_id": None, "model": "m", "model_version": "1",
        "key_digest": "d", "plan_round": None}
    assert PlanKey("s", "e", 2).columns()._asdict() == {
        "memory_id": None, "memory_version": None, "session_id": "s", "model": None, "model_version": None,
        "key_digest": "e", "plan_round": 2}
    assert text_digest("Lin lives in Hangzhou") == "b4aacbd565af"


# --- migration 010: the backfill of rows recorded before -----------------------------------------

class _LegacyStep(NamedTuple):
    operation_id: str
    kind: str
    key_columns: KeyColumns

    def columns(self) -> KeyColumns:
        return self.key_columns


async def test_migration_010_backfills_the_key_columns_of_recorded_operations(services):
    embed = EmbedKey(MEMORY, 3, "openai-compatible-embedder", "1-text-embedding-3-small-1536", "b4aacbd565af")
    batch = EmbedBatchKey.for_operations([embed])
    # A provider step's id before migration 021 named no subject: {step}/{session}/{provider}/{digest}.
    step = _LegacyStep("summary/s/1/extractive-summarizer-4/0123456789abcdef01234567", "summary",
                       KeyColumns(session_id="s/1", model="extractive-summarizer", model_version="4",
                                  key_digest="0123456789abcdef01234567"))
    plan = PlanKey("s/1", "77d3f5c78b330c5e", 2)
    commit = CommitKey("s/1", "f9d86028c6e0d64e")
    live = LiveWriteKey("f9d86028c6e0d64e225186f9")
    odd = ("bench/1", "commit")  # an id of no known format keeps NULL columns
    async with database_before(services.settings.database_admin_url, "010") as (conn, migrate_the_rest):
        rows = [(k.operation_id, k.kind) for k in (embed, batch, step, plan, commit, live)] + [odd]
        for operation_id, kind in rows:  # as a deployment before 010 recorded them
            await conn.execute(
                "INSERT INTO operations (tenant_id, operation_id, subject_id, kind, request_hash, status) "
                "VALUES ('t', %s, 's', %s, 'h', 'succeeded')", (operation_id, kind))
        await migrate_the_rest()
        cur = await conn.execute(f"SELECT operation_id, {', '.join(KEY_COLUMNS)} FROM operations")
        stored = {r[0]: r[1:] for r in await cur.fetchall()}
        cur = await conn.execute("SELECT relforcerowsecurity FROM pg_class WHERE relname = 'operations'")
        forced = (await cur.fetchone())[0]
        cur = await conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'operations_memory'")
        index = (await cur.fetchone())[0]
    # The model split is ambiguous, so left NULL: readers match those rows by every split.
    assert stored[embed.operation_id] == embed.columns()._replace(model=None, model_version=None)
    assert stored[step.operation_id] == step.columns()._replace(model=None, model_version=None)
    for key in (batch, plan, commit, live):
        assert stored[key.operation_id] == key.columns(), key
    assert stored["bench/1"] == (None,) * len(KEY_COLUMNS)
    assert forced  # the backfill lifted row security for its transaction only
    assert "(tenant_id, memory_id, memory_version)" in index


# --- a rebuild reuses an embedding recorded before the key columns -------------------------------

class CountingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    async def embed(self, texts: list[str]) -> EmbeddingResult:
        self.calls += 1
        return await super().embed(texts)


def _embed_backfill() -> str:
    """Migration 010's backfill of embed rows, as it ran on the rows recorded before it."""
    text = dict(migration_files())["010_operation_keys.sql"]
    return re.search(r"UPDATE public\.operations\s+SET memory_id = .*?;", text, re.S).group(0)


@pytest.mark.parametrize("legacy", ["recorded by an old worker", "backfilled by migration 010"])
async def test_an_embedding_recorded_before_the_key_columns_is_reused_by_rebuild(services, tenant, legacy):
    pool, keyring, subject = services.pool, services.keyring, "lin"
    await write_fact(pool, keyring, tenant_id=tenant, subject_id=subject, namespace="location", key="home_city",
                     value="Hangzhou", expected_version=0, evidence_message_ids=["s1:1"],
                     observed_at=datetime(2024, 3, 1, tzinfo=UTC))
    embedder = CountingEmbedder()
    await OutboxProjector(pool, keyring, embedder).project_batch(tenant, subject)
    assert embedder.calls == 1
    async with tenant_transaction(pool, tenant) as conn:
        cur = await conn.execute(f"SELECT operation_id, {', '.join(KEY_COLUMNS)} FROM operations "
                                 "WHERE tenant_id = %s AND kind = 'embed'", (tenant,))
        [(operation_id, *columns)] = await cur.fetchall()
        [key] = [k for k in EmbedKey.legacy_candidates(operation_id) if k.model == embedder.name]
        assert tuple(columns) == key.columns()  # recorded with its typed fields
        # As a deployment before migration 010 recorded it: the id alone; and the vector lost.
        await conn.execute(f"UPDATE operations SET {', '.join(f'{c} = NULL' for c in KEY_COLUMNS)} "
                           "WHERE tenant_id = %s AND operation_id = %s", (tenant, operation_id))
        await conn.execute("DELETE FROM memory_vectors WHERE tenant_id = %s", (tenant,))
    if legacy == "backfilled by migration 010":
        async with await psycopg.AsyncConnection.connect(services.settings.database_admin_url) as admin:
            await admin.execute("SELECT set_config('app.tenant_id', %s, false)", (tenant,))
            await admin.execute(_embed_backfill())
            await admin.commit()
        async with tenant_transaction(pool, tenant) as conn:
            cur = await conn.execute(f"SELECT {', '.join(KEY_COLUMNS)} FROM operations "
                                     "WHERE tenant_id = %s AND operation_id = %s", (tenant, operation_id))
            assert await cur.fetchone() == key.columns()._replace(model=None, model_version=None)

    rebuilt = await rebuild_subject(pool, keyring, tenant, subject, recorder=OperationRecorder(pool, keyring),
                                    embedder=embedder)
    assert embedder.calls == 1  # no provider call: the recorded embedding was reused
    assert rebuilt.repaired and rebuilt.tables_differing == ["memory_vectors"]
    assert (rebuilt.vectors_from_operations, rebuilt.vectors_reembedded, rebuilt.unmatched_operations) == (1, 0, 0)
    async with tenant_transaction(pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM memory_vectors WHERE tenant_id = %s", (tenant,))
        assert (await cur.fetchone())[0] == 1
        cur = await conn.execute("SELECT count(*) FROM operations WHERE tenant_id = %s AND kind = 'embed'", (tenant,))
        assert (await cur.fetchone())[0] == 1
