"""Context assembly: the memory items that go into a prompt, packed into a token budget.

Candidates come from two index projections — BM25 over `memory_search` and cosine distance over
`memory_vectors` — fused by reciprocal rank. Every candidate is re-read from its relational row
(same version, valid at the as-of time) before it may enter the context, all in one READ
`subject_scope` (tombstone checked once, by keyed digest or clear id, under the shared subject
lock), and every item says which evidence messages its text draws on.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

import psycopg
from pgvector import Vector
from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from agent_memory.fact_text import fact_text
from agent_memory.keyring import KeyRing
from agent_memory.leak_filter import filter_context
from agent_memory.lexical import bm25_search
from agent_memory.providers.base import Embedder, estimate_tokens
from agent_memory.recall import embed_query
from agent_memory.scope import Mode, subject_scope
from agent_memory.timeexpr import format_day

DEFAULT_TOKEN_BUDGET = 1200
CANDIDATES = 150
RRF_K = 60  # reciprocal-rank fusion constant (Cormack et al. 2009); damps the head of each list
# The offline hashing embedder is near-lexical, so the vector list mostly breaks BM25's ties;
# measured on locomo-dev (README), 0.3 beat 0, 0.6 and 1.0.
LEXICAL_WEIGHT, VECTOR_WEIGHT = 1.0, 0.3
# A matching fact is the distilled, current truth: it outranks the notes it was drawn from,
# which may be out of date ("I live in Hangzhou" before the move).
FACT_PRIOR = 2.0
FOCUS_NOTES = True  # trim long notes to their query-matching sentences

Kind = Literal["fact", "episode", "observation"]


class ContextItem(BaseModel):
    kind: Kind
    memory_id: str
    text: str  # as rendered for the prompt
    content: str  # the memory's own words (a fact's value, a note, a summary), without the rendering
    cited_message_ids: list[str]
    score: float
    happened_at: datetime | None = None


class AssembledContext(BaseModel):
    query: str
    items: list[ContextItem]
    text: str
    tokens: int
    budget: int
    leak_filter_dropped: int = 0  # packed items the leak filter removed (agent_memory.leak_filter)


class _NoteRow(BaseModel):
    """An observation or an episode as the context re-reads it."""

    memory_id: str
    version: int
    text: str
    happened_at: datetime
    source_message_ids: list[str]


class _FactHit(BaseModel):
    memory_id: str
    version: int
    namespace: str
    key: str
    value: str
    valid_from: datetime
    evidence_message_ids: list[str]


_WORD = re.compile(r"\w+")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*|\s(?=\[photo:)")
_QUERY_STOP = frozenset("a an the of in on at to and or is was were are be for with by do does did what when where "
                        "who whom which why how has have had her his she he they it its their them this that "
                        "about from as would could should will can".split())


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _terms(text: str) -> set[str]:
    return {_stem(w) for w in _WORD.findall(text.lower()) if w not in _QUERY_STOP}


def focus(body: str, query_terms: set[str], speaker_terms: set[str]) -> str:
    """Keep the sentences of a note that share a word with the query (names aside); a note that
    matched on meaning alone keeps its first sentence. Fewer tokens per item, more items."""
    sentences = [x for x in _SENTENCE.split(body) if x.strip()]
    if len(sentences) <= 1:
        return body
    wanted = query_terms - speaker_terms
    hits = [i for i, x in enumerate(sentences) if _terms(x) & wanted] or [0]
    # The sentence after a match often carries the answer ("What did she paint? ... It was a sunset.").
    keep = sorted({j for i in hits for j in (i, i + 1) if j < len(sentences)})
    return " ".join(sentences[j] for j in keep)


def fuse(*ranked: tuple[float, list[tuple[str, str, int]]]) -> dict[tuple[str, str, int], float]:
    """Weighted reciprocal-rank fusion of ranked (memory_id, kind, version) lists."""
    scores: dict[tuple[str, str, int], float] = {}
    for weight, hits in ranked:
        for rank, hit in enumerate(hits):
            scores[hit] = scores.get(hit, 0.0) + weight / (RRF_K + rank + 1)
    return scores


def pack(items: list[ContextItem], budget: int) -> list[ContextItem]:
    """Greedy by score: take each item that still fits and adds evidence not already cited."""
    chosen: list[ContextItem] = []
    cited: set[str] = set()
    used = 0
    for item in items:
        if item.cited_message_ids and set(item.cited_message_ids) <= cited:
            continue  # says nothing the context does not already hold
        cost = estimate_tokens(item.text) + 1  # +1: the newline between items
        if used + cost <= budget:
            chosen.append(item)
            cited.update(item.cited_message_ids)
            used += cost
    return chosen


async def _vector_hits(conn: psycopg.AsyncConnection, embedder: Embedder, tenant_id: str, subject_id: str,
                       query: str) -> list[tuple[str, str, int]]:
    embedded = await embed_query(embedder, query)
    # Filtered HNSW scans keep going until enough rows pass the filter (pgvector >= 0.8).
    await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
    cur = await conn.execute(
        "SELECT memory_id::text, memory_kind, version FROM memory_vectors "
        "WHERE tenant_id = %s AND subject_id = %s AND model = %s ORDER BY embedding <=> %s LIMIT %s",
        (tenant_id, subject_id, embedded.model, Vector(embedded.vectors[0]), CANDIDATES))
    return [tuple(row) for row in await cur.fetchall()]


async def _load_items(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, query: str,
                      scores: dict[tuple[str, str, int], float], as_of: datetime | None) -> list[ContextItem]:
    """Re-read each candidate from its relational row; stale, superseded or future ones drop out."""
    ids = {kind: [mid for mid, k, _ in scores if k == kind] for kind in ("fact", "episode", "observation")}
    items: list[ContextItem] = []
    query_terms = _terms(query)
    async with conn.cursor(row_factory=class_row(_NoteRow)) as notes:
        await notes.execute(
            "SELECT memory_id::text AS memory_id, version, text, happened_at, source_message_ids FROM observations "
            "WHERE tenant_id = %s AND subject_id = %s AND memory_id = ANY(%s::uuid[]) "
            "AND happened_at <= coalesce(%s::timestamptz, 'infinity')",
            (tenant_id, subject_id, ids["observation"], as_of))
        for note in await notes.fetchall():
            if (key := (note.memory_id, "observation", note.version)) in scores:
                speaker, _, body = note.text.partition(": ")
                text = f"{speaker}: {focus(body, query_terms, _terms(speaker))}" if FOCUS_NOTES else note.text
                items.append(ContextItem(kind="observation", memory_id=note.memory_id,
                                         text=f"[{format_day(note.happened_at)}] {text}", content=text,
                                         cited_message_ids=note.source_message_ids, score=scores[key],
                                         happened_at=note.happened_at))
        await notes.execute(
            "SELECT memory_id::text AS memory_id, version, summary AS text, happened_at, source_message_ids "
            "FROM episodes WHERE tenant_id = %s AND subject_id = %s AND memory_id = ANY(%s::uuid[]) "
            "AND happened_at <= coalesce(%s::timestamptz, 'infinity')", (tenant_id, subject_id, ids["episode"], as_of))
        for episode in await notes.fetchall():
            if (key := (episode.memory_id, "episode", episode.version)) in scores:
                items.append(ContextItem(kind="episode", memory_id=episode.memory_id, content=episode.text,
                                         text=f"[{format_day(episode.happened_at)}] Session summary: {episode.text}",
                                         cited_message_ids=episode.source_message_ids, score=scores[key],
                                         happened_at=episode.happened_at))
    async with conn.cursor(row_factory=class_row(_FactHit)) as facts:
        await facts.execute(
            "SELECT memory_id::text AS memory_id, version, namespace, key, value, valid_from, evidence_message_ids "
            "FROM facts WHERE tenant_id = %s AND subject_id = %s AND memory_id = ANY(%s::uuid[]) "
            "AND status IN ('active', 'closed') AND valid_from <= coalesce(%s::timestamptz, now()) "
            "AND (valid_to IS NULL OR valid_to > coalesce(%s::timestamptz, now()))",
            (tenant_id, subject_id, ids["fact"], as_of, as_of))
        for fact in await facts.fetchall():
            if (key := (fact.memory_id, "fact", fact.version)) in scores:
                rendered = fact_text(fact.namespace, fact.key, fact.value)
                items.append(ContextItem(
                    kind="fact", memory_id=fact.memory_id, content=fact.value,
                    text=f"Fact (since {format_day(fact.valid_from)}): {rendered}",
                    cited_message_ids=fact.evidence_message_ids, score=scores[key] * FACT_PRIOR,
                    happened_at=fact.valid_from))
    return items


async def assemble_context(pool: AsyncConnectionPool, keyring: KeyRing, embedder: Embedder, tenant_id: str,
                           subject_id: str, query: str, *, as_of: datetime | None = None,
                           token_budget: int = DEFAULT_TOKEN_BUDGET, redis=None) -> AssembledContext:
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.READ) as scope:
        if scope.erased:  # erased: nothing may reach a prompt
            return AssembledContext(query=query, items=[], text="", tokens=0, budget=token_budget)
        conn = scope.conn
        lexical = await bm25_search(conn, tenant_id, subject_id, query, as_of=as_of, limit=CANDIDATES)
        vector = await _vector_hits(conn, embedder, tenant_id, subject_id, query)
        scores = fuse((LEXICAL_WEIGHT, [(m, k, v) for m, k, v, _ in lexical]), (VECTOR_WEIGHT, vector))
        items = await _load_items(conn, tenant_id, subject_id, query, scores, as_of)
    items.sort(key=lambda i: (-i.score, i.memory_id))
    # pack, then the leak filter's last check (re-packing without what it dropped)
    chosen, leaks = await filter_context(pool, redis, tenant_id, subject_id, items, lambda xs: pack(xs, token_budget))
    text = "\n".join(i.text for i in chosen)
    return AssembledContext(query=query, items=chosen, text=text, tokens=estimate_tokens(text), budget=token_budget,
                            leak_filter_dropped=leaks.dropped)
