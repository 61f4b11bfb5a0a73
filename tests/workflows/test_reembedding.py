"""Re-embedding after an embedding-model change, on the real dev server and Postgres:
recall reads the old model's vectors until every memory has its vector under the new one, then
switches; the old vectors go; a width other than 384 is stored; a batch retried after its
embedder call makes no second call; a finished re-embedding replayed under its id does nothing."""

from __future__ import annotations

import pytest

from agent_memory.api.client import MemoryClient
from agent_memory.projection.rebuild import rebuild_subject
from agent_memory.projection.reembedding import (
    BeginReembedInput,
    ModelMismatchError,
    ReembedBatchInput,
    begin_reembedding,
    reading_embedder,
    reembed_batch,
    reembedding_needed,
)
from agent_memory.providers.hashing import HashingEmbedder
from agent_memory.providers.offline import OfflineProviders, offline_providers
from agent_memory.store.db import tenant_transaction
from tests.security.replays import refused_as_consumed, replay
from tests.sessions import session

SUBJECT = "ana"


class NarrowHashingEmbedder(HashingEmbedder):
    """The hashing embedder at 64 dimensions: another model, another width (and version, as the
    remote embedder's version names its width)."""

    dimensions = 64
    version = "1-64"


class CountingEmbedder(NarrowHashingEmbedder):
    def __init__(self) -> None:
        self.texts = 0

    async def embed(self, texts):
        self.texts += len(texts)
        return await super().embed(texts)


def providers_with(embedder) -> OfflineProviders:
    p = offline_providers()
    return OfflineProviders(p.extractor, p.scorer, p.summarizer, embedder)


SESSIONS = [session("r1", "2024-03-01T09:00:00Z", "My sister Maja is getting married in June.",
                    "I am writing the speech for her wedding and I am nervous."),
            session("r2", "2024-04-01T09:00:00Z", "I adopted a grey cat called Miso from the shelter.",
                    "Miso sleeps on my keyboard all day."),
            session("r3", "2024-05-01T09:00:00Z", "I started learning the cello with a strict teacher.")]


async def vector_models(services, tenant: str) -> dict[str, tuple[int, int]]:
    """model → (vectors, their width)."""
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT model, count(*), max(vector_dims(embedding)) FROM memory_vectors "
                                 "WHERE tenant_id = %s GROUP BY model", (tenant,))
        return {m: (n, d) for m, n, d in await cur.fetchall()}


async def test_a_model_change_reembeds_every_memory_and_recall_switches_only_when_complete(
        services, tenant, task_queue, running_worker):
    old = HashingEmbedder()
    new = CountingEmbedder()
    before = MemoryClient(services, old, task_queue=task_queue)
    async with running_worker(providers=providers_with(old)):
        for s in SESSIONS:
            await before.append_messages(tenant, SUBJECT, s)
            await before.consolidation_result(await before.end_session(tenant, SUBJECT, s.session_id))
        await before.admin.wait_for_projection(tenant, SUBJECT)
    [(count, width)] = (await vector_models(services, tenant)).values()
    assert width == 384 and count >= 5
    asked = await before.context(tenant, SUBJECT, "wedding speech for my sister")
    assert "r1" in {i.session_id for i in asked.items}

    after = MemoryClient(services, new, task_queue=task_queue)
    assert await reembedding_needed(services.pool, tenant, new.model)
    # Begun, not switched: recall still embeds the query with the old model and reads its vectors.
    begun = await begin_reembedding(services.pool, BeginReembedInput(tenant_id=tenant, target_model=new.model,
                                                                      target_dimensions=64))
    assert begun.source_model == old.model and begun.total == count
    reader = await reading_embedder(services.pool, tenant, new)
    assert reader.model == old.model
    during = await after.context(tenant, SUBJECT, "wedding speech for my sister")
    assert [i.memory_id for i in during.items] == [i.memory_id for i in asked.items]

    # A batch whose vectors were recorded but not written (a crash after the call) makes no second call.
    with pytest.raises(ModelMismatchError):
        await reembed_batch(services.pool, old, ReembedBatchInput(tenant_id=tenant, source_model=old.model,
                                                                  target_model=new.model, batch_size=2))
    first = await reembed_batch(services.pool, new, ReembedBatchInput(
        tenant_id=tenant, source_model=old.model, target_model=new.model, batch_size=2))
    assert first.embedded == 2 and first.written == 2 and new.texts == 2
    async with tenant_transaction(services.pool, tenant) as conn:
        await conn.execute("DELETE FROM memory_vectors WHERE tenant_id = %s AND model = %s", (tenant, new.model))
    again = await reembed_batch(services.pool, new, ReembedBatchInput(
        tenant_id=tenant, source_model=old.model, target_model=new.model, batch_size=2))
    assert (again.embedded, again.reused, again.written) == (0, 2, 2) and new.texts == 2

    async with running_worker(providers=providers_with(new)):
        handle = await after.admin.reembed(tenant)
        progress = await handle.result()
        assert (await after.admin.reembed_progress(handle)) == progress
    assert progress.state == "switched" and progress.source_model == old.model
    assert progress.done + 2 == progress.total == count  # the first batch's two were there already
    assert await vector_models(services, tenant) == {new.model: (count, 64)}  # the old vectors are gone
    assert not await reembedding_needed(services.pool, tenant, new.model)
    assert (await reading_embedder(services.pool, tenant, new)).model == new.model
    switched = await after.context(tenant, SUBJECT, "wedding speech for my sister")
    assert "r1" in {i.session_id for i in switched.items}
    rebuilt = await rebuild_subject(services.pool, services.keyring, tenant, SUBJECT)
    assert rebuilt.equal, rebuilt  # a rebuild does not bring the retired model's vectors back


async def test_a_tenant_already_on_the_model_has_nothing_to_do(services, tenant, task_queue, running_worker):
    embedder = HashingEmbedder()
    client = MemoryClient(services, embedder, task_queue=task_queue)
    async with running_worker(providers=providers_with(embedder)):
        await client.append_messages(tenant, SUBJECT, SESSIONS[0])
        await client.consolidation_result(await client.end_session(tenant, SUBJECT, "r1"))
        await client.admin.wait_for_projection(tenant, SUBJECT)
        assert not await reembedding_needed(services.pool, tenant, embedder.model)
        progress = await (await client.admin.reembed(tenant)).result()
    assert progress.state == "nothing to do"


async def test_a_reembedding_replayed_under_its_own_id_is_refused_before_it_begins(
        services, tenant, task_queue, running_worker):
    """The switch deletes the old model's vectors: a finished re-embedding copied from its history
    and started again under its workflow id is refused at `begin`, and the vectors stay."""
    old, new = HashingEmbedder(), NarrowHashingEmbedder()
    before = MemoryClient(services, old, task_queue=task_queue)
    async with running_worker(providers=providers_with(old)):
        await before.append_messages(tenant, SUBJECT, SESSIONS[1])
        await before.consolidation_result(await before.end_session(tenant, SUBJECT, "r2"))
        await before.admin.wait_for_projection(tenant, SUBJECT)
    after = MemoryClient(services, new, task_queue=task_queue)
    async with running_worker(providers=providers_with(new)):
        handle = await after.admin.reembed(tenant, registered_by="operator-key:reembed")
        assert (await handle.result()).state == "switched"
        vectors = await vector_models(services, tenant)
        first_run, replayed = await replay(services, handle.id, task_queue)
        await refused_as_consumed(replayed, first_run)
    assert await vector_models(services, tenant) == vectors
    [authorization] = [a for a in await after.admin.authorizations(limit=10_000)
                       if a.registered_by == "operator-key:reembed"]
    assert (authorization.kind, authorization.tenant_id, authorization.claimed_by_run_id) == (
        "reembedding", tenant, first_run)
