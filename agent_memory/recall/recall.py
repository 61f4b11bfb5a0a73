"""Recall: current facts plus the episodes nearest the query.

A vector hit is only a pointer: it reaches the caller only after the relational row it points at
is re-read in the same transaction with the same version. Facts and episodes are read in one
READ `subject_scope`: it checks the tombstone (by keyed digest or clear id) once and holds the
shared subject lock, so no tombstone can appear while the hits are re-read.

Asked to explain, the result lists a RecallExplanation per fact and episode: its rank in the
result, an episode's rank among the vector hits and its cosine similarity, and the staleness term
that orders a fact the review marked after the others.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt, wait_exponential

from agent_memory.core.errors import InvalidInput
from agent_memory.core.fact_text import fact_line
from agent_memory.core.models import EmbeddingResult, FactRow
from agent_memory.memory.categories import categories_named
from agent_memory.memory.filters import NO_FILTER, MemoryFilter, matching_messages
from agent_memory.memory.memory_store import read_facts
from agent_memory.projection.reembedding import reading_embedder
from agent_memory.providers.base import Embedder
from agent_memory.providers.errors import ProviderRetryableError
from agent_memory.providers.metering import metered
from agent_memory.providers.policy import text_for_embedder
from agent_memory.recall.read_metrics import count_read
from agent_memory.recall.recall_policy import STALE_WEIGHT
from agent_memory.recall.vector_search import nearest
from agent_memory.security.keyring import KeyRing
from agent_memory.security.leak_filter import filter_items
from agent_memory.store.scope import Mode, subject_scope


async def embed_query(embedder: Embedder, text: str, tenant_id: str | None = None) -> EmbeddingResult:
    """Query embedding on the read path: outside workflows, so tenacity owns the retries,
    waiting as long as the server asked (Retry-After) when it did. Each call is counted for
    `tenant_id` (agent_memory.providers.metering)."""
    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        hinted = getattr(exc, "retry_after", None)
        return min(hinted, 10.0) if hinted else wait_exponential(multiplier=0.2, max=5)(state)

    async for attempt in AsyncRetrying(retry=retry_if_exception_type(ProviderRetryableError), wait=wait,
                                       stop=stop_after_attempt(4), reraise=True):
        with attempt:
            # An embedder that embeds queries differently from passages (e5) says so.
            query_embed = getattr(embedder, "embed_query", None)
            return await metered(tenant_id, embedder, "query",
                                 query_embed(text) if query_embed is not None else embedder.embed([text]))
    raise AssertionError("unreachable")


class RecalledEpisode(BaseModel):
    memory_id: str
    session_id: str
    summary: str
    importance: int
    happened_at: datetime
    source_message_ids: list[str]
    score: float


class _VectorHit(BaseModel):
    memory_id: str
    version: int
    score: float


class _EpisodeRow(BaseModel):
    session_id: str
    summary: str
    importance: int
    happened_at: datetime
    source_message_ids: list[str]


class RecallExplanation(BaseModel):
    """Why a fact or an episode is in a recall, and in its place."""

    memory_id: str
    kind: Literal["fact", "episode"]
    rank: int = Field(description="its place among the recalled memories of its kind, 1 first")
    vector_rank: int | None = Field(default=None, description="episode: its rank among the vector search's hits")
    similarity: float | None = Field(default=None, description="episode: cosine similarity to the query (its score)")
    staleness_term: float = Field(description="fact: STALE_WEIGHT for a fact the review marked (ordered after "
                                              "the others), else 1")


class RecallResult(BaseModel):
    tenant_id: str
    subject_id: str
    query: str
    facts: list[FactRow]
    episodes: list[RecalledEpisode]
    stale_hits_dropped: int  # vector hits whose row was gone, replaced or tombstoned
    leak_filter_dropped: int = 0  # facts and episodes the leak filter removed (agent_memory.security.leak_filter)
    explanations: list[RecallExplanation] | None = Field(
        default=None, exclude_if=lambda value: value is None,
        description="when asked to explain: one per fact, then per episode, in the result's order; absent otherwise")


async def recall(pool: AsyncConnectionPool, keyring: KeyRing, embedder: Embedder, tenant_id: str, subject_id: str,
                 query: str, *, limit: int = 5, as_of: datetime | None = None, redis=None,
                 filters: MemoryFilter = NO_FILTER, explain: bool = False) -> RecallResult:
    """The subject's current facts and the episodes nearest the query, narrowed by `filters`
    (kinds, fact namespaces, categories, a time range, cited messages' metadata and scope) and by
    the limits of the request's key; `explain` adds each one's RecallExplanation."""
    filters = filters.within_key_limits()
    if not query.strip():
        raise InvalidInput("query is empty: ask something, e.g. \"where does she live?\"")
    if limit < 1:
        raise InvalidInput(f"limit {limit} is below 1: ask for at least one episode, e.g. --limit 5")
    # The tenant's active model (the old one while a re-embedding runs), not always the configured one.
    query_embedder = await reading_embedder(pool, tenant_id, embedder)
    embedded = await embed_query(query_embedder, await text_for_embedder(pool, tenant_id, query_embedder, query),
                                 tenant_id)
    embedding = embedded.vectors[0]
    episodes: list[RecalledEpisode] = []
    dropped = 0
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.READ) as scope:
        if scope.erased:  # nothing of an erased subject is recalled, even while its erasure runs
            return RecallResult(tenant_id=tenant_id, subject_id=subject_id, query=query, facts=[], episodes=[],
                                stale_hits_dropped=0, explanations=[] if explain else None)
        conn = scope.conn
        # Facts the review marked (stale_reasons) come after the others: STALE_WEIGHT of their weight.
        facts = sorted((f for f in await read_facts(scope, as_of=as_of) if filters.fact_matches(f)),
                       key=lambda f: 1.0 if not f.stale_reasons else STALE_WEIGHT, reverse=True)
        # A query with no features (punctuation only, for the hashing embedder) embeds to zeros,
        # whose cosine distance is NaN: no episode is near it.
        # A time range, metadata, a scope or categories drop candidates after the search: ask for more of them.
        candidates = limit * (10 if filters.narrows_time() or filters.narrows_content() else 3)
        matching = (await matching_messages(conn, tenant_id, subject_id, filters) if filters.narrows_messages()
                    else None)
        if matching is not None:
            facts = [f for f in facts if matching.intersection(f.evidence_message_ids) or filters.held_by(f.metadata)]
        categories = (await categories_named(conn, tenant_id, filters.categories) if filters.categories is not None
                      else None)
        if categories is not None:
            facts = [f for f in facts
                     if any(c.holds_fact(f.namespace, fact_line(f.namespace, f.key, f.value)) for c in categories)]
        hits = [_VectorHit(memory_id=m, version=v, score=1 - distance) for m, _, v, distance in
                await nearest(conn, tenant_id, subject_id, embedded.model, embedding, ("episode",), candidates)
                ] if any(embedding) and filters.wants("episode") else []
        vector_ranks: dict[str, int] = {}
        async with conn.cursor(row_factory=class_row(_EpisodeRow)) as cur:
            for vector_rank, hit in enumerate(hits, start=1):
                await cur.execute(
                    """
                    SELECT e.session_id, e.summary, e.importance, e.happened_at, e.source_message_ids
                      FROM episodes e
                     WHERE e.tenant_id = %s AND e.memory_id = %s AND e.version = %s AND e.subject_id = %s
                    """, (tenant_id, hit.memory_id, hit.version, subject_id))
                row = await cur.fetchone()
                if row is None or (as_of is not None and row.happened_at > as_of):
                    dropped += row is None
                    continue
                if not filters.in_range(row.happened_at) or (
                        matching is not None and not matching.intersection(row.source_message_ids)) or (
                        categories is not None and not any(c.holds_text(row.summary) for c in categories)):
                    continue
                episodes.append(RecalledEpisode(memory_id=hit.memory_id, score=hit.score, **row.model_dump()))
                vector_ranks[hit.memory_id] = vector_rank
                if len(episodes) == limit:
                    break
        # Last check, in the read's transaction: nothing that names another subject or tenant
        # reaches the caller.
        facts, fact_leaks = await filter_items(pool, redis, tenant_id, subject_id, facts, text_of=lambda f: f.value,
                                               cited_of=lambda f: f.evidence_message_ids, id_of=lambda f: f.memory_id,
                                               conn=conn)
        episodes, episode_leaks = await filter_items(pool, redis, tenant_id, subject_id, episodes,
                                                     text_of=lambda e: e.summary,
                                                     cited_of=lambda e: e.source_message_ids,
                                                     id_of=lambda e: e.memory_id, conn=conn)
        await count_read(pool, tenant_id, kind="recall", items=len(facts) + len(episodes),
                         leak_filter_dropped=fact_leaks.dropped + episode_leaks.dropped, conn=conn)
    explanations = None
    if explain:
        explanations = [RecallExplanation(memory_id=f.memory_id, kind="fact", rank=n,
                                          staleness_term=STALE_WEIGHT if f.stale_reasons else 1.0)
                        for n, f in enumerate(facts, start=1)]
        explanations += [RecallExplanation(memory_id=e.memory_id, kind="episode", rank=n,
                                           vector_rank=vector_ranks[e.memory_id], similarity=e.score,
                                           staleness_term=1.0) for n, e in enumerate(episodes, start=1)]
    return RecallResult(tenant_id=tenant_id, subject_id=subject_id, query=query, facts=facts, episodes=episodes,
                        stale_hits_dropped=dropped, leak_filter_dropped=fact_leaks.dropped + episode_leaks.dropped,
                        explanations=explanations)
