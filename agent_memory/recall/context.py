"""Context assembly: the memory that goes into a prompt, in two tiers within token budgets.

- **Profile**: the subject's current facts (confidence above the policy's floor), not decayed and
  never ranked against notes, packed first within the profile budget, most important first.
- **Episodic**: episode summaries and notes, found by two index projections — BM25 over
  `memory_search` and cosine distance over `memory_vectors` — and by the entities the question
  names (the memories of the messages that mention them, agent_memory.recall.entity_route),
  fused by reciprocal rank into a relevance normalised to [0, 1], then scored relevance × time decay × importance
  × access (how often and how recently each was recalled, agent_memory.store.access) and cut to the
  recall window and the minimum relevance (agent_memory.recall.recall_policy); a question about a
  sequence also brings in the notes next in time to the best hits (agent_memory.recall.sequence).
  It gets its own budget plus what the profile left.

Asked to explain (`explain=True`), every item carries an ItemExplanation: the routes that found it
with their ranks and scores, the fused score and each factor of its final score (relevance, time
decay, importance, access, staleness), or for a fact the reasons of its rank; and the context lists
`below_budget`, the best candidates of each tier that were not admitted, read through the same key
limits and leak filter as the admitted ones. Without it nothing of this is computed and the
response has neither key.

The four routes (profile read, lexical, vector, entities) run in parallel, each on its own
connection. A hit is only a pointer: each episodic route re-reads its candidates from their relational
rows (same version, valid at the as-of time, inside the window) in its own transaction, so one
route's re-read overlaps the other routes' searches. Once every route has read, one READ
`subject_scope` checks the tombstone: an erasure commits its tombstone before it deletes
anything, so a read that met a half-erased subject is always caught there, and an erased subject
yields nothing. The leak filter's lookups and the read's count run in that transaction. Every
item says which evidence messages its text draws on.
"""

from __future__ import annotations

import asyncio
import functools
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

import psycopg
from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field, PrivateAttr

from agent_memory.core.fact_text import fact_line, fact_line_parts
from agent_memory.core.models import FactRow
from agent_memory.core.timeexpr import format_day
from agent_memory.memory.filters import NO_FILTER, MemoryFilter, matching_items
from agent_memory.memory.memory_store import read_facts
from agent_memory.memory.stale_marks import IN_FORCE
from agent_memory.projection.reembedding import reading_embedder
from agent_memory.providers.base import Embedder, estimate_tokens
from agent_memory.providers.policy import text_for_embedder
from agent_memory.recall.entity_route import entity_hits
from agent_memory.recall.read_metrics import count_read
from agent_memory.recall.recall import embed_query
from agent_memory.recall.recall_policy import STALE_WEIGHT, RecallPolicy, read_policy
from agent_memory.recall.sequence import ANCHORS, STEP_DECAY, Direction, neighbour_notes, sequence_direction
from agent_memory.recall.vector_search import nearest
from agent_memory.security.keyring import KeyRing
from agent_memory.security.leak_filter import context_item_text, filter_context, filter_items
from agent_memory.store.access import read_access
from agent_memory.store.db import tenant_transaction
from agent_memory.store.lexical import bm25_search
from agent_memory.store.scope import Mode, subject_scope
from agent_memory.telemetry.metrics import CONTEXT_ITEMS, CONTEXT_TOKENS
from agent_memory.telemetry.record import observe

DEFAULT_TOKEN_BUDGET = 1200
CANDIDATES = 150
RRF_K = 60  # reciprocal-rank fusion constant (Cormack et al. 2009); damps the head of each list
# The offline hashing embedder is near-lexical, so the vector list mostly breaks BM25's ties;
# measured on locomo-dev (docs/recall.md), 0.3 beat 0, 0.6 and 1.0.
LEXICAL_WEIGHT, VECTOR_WEIGHT = 1.0, 0.3
# The entity route (recall/entity_route.py) links memories that name no query word; it ranks by
# link, not by text, so it weighs like the vector list: a tie-breaker that can also bring in.
ENTITY_WEIGHT = 0.3
FOCUS_NOTES = True  # trim long notes to their query-matching sentences
DEFAULT_IMPORTANCE = 5  # a note whose session has no episode (yet)
# Which facts a full profile keeps first: what the assistant must never get wrong (name, health,
# diet), then where the user lives and works, the people and animals in their life, then the rest.
PROFILE_ORDER = ("profile", "allergy", "health", "diet", "location", "work", "relationship", "family", "pet",
                 "budget", "travel", "preference", "dislike")
# Each item ends with the ids of the messages it comes from, in brackets.
PROFILE_HEADER = "What you know about the user (current facts; [message ids] cite the evidence):"
EPISODIC_HEADER = "Relevant past conversations and notes ([message ids] cite the evidence):"
CITED_SHOWN = 3  # message ids shown after an item; the rest are counted
MESSAGE_OVERHEAD = 4  # tokens a chat message costs beyond its content (role, separators); a block is one
BELOW_BUDGET_SHOWN = 5  # per tier: the candidates an explained context lists after its admitted items

Tier = Literal["profile", "episodic"]
Kind = Literal["fact", "episode", "observation"]

Route = Literal["lexical", "vector", "entity"]
NotAdmitted = Literal["budget", "repeats", "max_episodes"]


class RouteHit(BaseModel):
    """Where one route ranked an item and what that rank added to its fused score."""

    rank: int = Field(description="1 for the route's best candidate")
    score: float = Field(description="the route's share of the fused score: weight / (RRF_K + rank)")
    bm25: float | None = Field(default=None, description="lexical: the BM25 score of the match")
    similarity: float | None = Field(default=None, description="vector: cosine similarity to the query")


class ProfileRank(BaseModel):
    """Why a fact ranks where it does in the profile: facts sharing words with the query first,
    then by kind (PROFILE_ORDER), confidence and recency; its score is the facts after it, plus one."""

    rank: int = Field(description="1 for the first fact of the profile, before the stale ones are moved down")
    of: int = Field(description="the facts the profile ranked")
    shared_terms: list[str] = Field(description="the query's words (stemmed) the fact's namespace, key or value share")
    namespace_order: int | None = Field(description="the namespace's place in PROFILE_ORDER; None: after them")
    confidence: float
    task_local: bool = Field(description="a task-local fact, in the context because it is read in its session")


class ItemExplanation(BaseModel):
    """The terms of an item's score: an episodic item's score is relevance × time_decay ×
    importance_term × staleness_term × access_term; a fact's is its profile rank's weight ×
    staleness_term."""

    tier: Tier
    admitted: bool = Field(description="in the context; false for an item of below_budget")
    not_admitted: NotAdmitted | None = Field(
        default=None, description="why a candidate is not in the context: budget (did not fit), repeats (cites "
                                  "only messages the items before it cite), max_episodes (enough summaries)")
    score: float = Field(description="the final score: the item's `score`")
    routes: dict[Route, RouteHit] = Field(default_factory=dict, description="the episodic routes that found it")
    fused: float | None = Field(default=None, description="the weighted reciprocal-rank sum of its routes' scores")
    relevance: float | None = Field(default=None, description="the fused score normalised to [0, 1] (or, for a "
                                                              "note next in time to a hit, its anchor's, stepped down)")
    neighbour_of: str | None = Field(default=None, description="a note brought in as next in time to this memory")
    neighbour_step: int | None = None
    time_decay: float | None = Field(default=None, description="exp(-age in days / tau_days)")
    importance_term: float | None = Field(default=None, description="base + slope · importance")
    access_term: float | None = Field(default=None, description="1 + access_weight · activation; 1: never recalled")
    staleness_term: float = Field(default=1.0, description="STALE_WEIGHT for a memory the review marked, else 1")
    profile: ProfileRank | None = None


def _unasked(value: object) -> bool:
    """An explanation nobody asked for is left out of the serialised item: an unexplained read
    serialises exactly as one that cannot explain."""
    return value is None


class ContextItem(BaseModel):
    kind: Kind
    memory_id: str
    text: str  # as rendered for the prompt, without its citation
    content: str  # the memory's own words (a fact's value, a note, a summary), without the rendering
    cited_message_ids: list[str]
    score: float
    happened_at: datetime | None = None
    tier: Tier = "episodic"
    relevance: float | None = None  # episodic: fused lexical + vector match, normalised to [0, 1]
    importance: int | None = None  # episodic: the session's importance, 1–10
    session_id: str | None = None  # episodic: the session it comes from
    # profile: when the fact's value was last said again or confirmed (data only: not in the prompt)
    last_confirmed_at: datetime | None = None
    # profile: (before, object, after, since) of a fact that may share its line with the facts said
    # with it (agent_memory.recall.context.render_block); None when it reads alone
    _shared_line: tuple[str, str, str, str] | None = PrivateAttr(default=None)
    explanation: ItemExplanation | None = Field(default=None, exclude_if=_unasked,
                                                description="the terms of its score, when asked to explain; absent "
                                                            "otherwise")

    @property
    def line(self) -> str:
        """The item as the prompt shows it: its text, then the messages it cites."""
        ids = self.cited_message_ids
        if not ids:
            return f"- {self.text}"
        more = f" +{len(ids) - CITED_SHOWN}" if len(ids) > CITED_SHOWN else ""
        return f"- {self.text} [{', '.join(ids[:CITED_SHOWN])}{more}]"


class AssembledContext(BaseModel):
    query: str
    items: list[ContextItem]  # profile items first, then episodic ones by score
    text: str  # every item's text, one a line (no headers, no citations)
    tokens: int
    budget: int
    profile_text: str = ""  # the profile block as a prompt shows it (header, items with citations)
    episodic_text: str = ""
    profile_tokens: int = 0  # a block's tokens as one chat message (agent_memory.recall.context.block_tokens)
    episodic_tokens: int = 0
    profile_budget: int = 0
    episodic_budget: int = 0  # its own budget plus what the profile left, within the total
    as_of: datetime | None = None
    policy: RecallPolicy | None = None
    leak_filter_dropped: int = 0  # packed items the leak filter removed (agent_memory.security.leak_filter)
    below_budget: list[ContextItem] | None = Field(
        default=None, exclude_if=_unasked,
        description=f"when asked to explain: per tier, up to {BELOW_BUDGET_SHOWN} candidates that were not admitted, "
                    "best first, each readable by the key and clean of the leak filter; absent otherwise")

    @property
    def profile_items(self) -> list[ContextItem]:
        return [i for i in self.items if i.tier == "profile"]

    @property
    def episodic_items(self) -> list[ContextItem]:
        return [i for i in self.items if i.tier == "episodic"]


class _NoteRow(BaseModel):
    """An observation or an episode as the context re-reads it."""

    kind: str
    memory_id: str
    version: int
    text: str
    happened_at: datetime
    source_message_ids: list[str]
    importance: int | None
    session_id: str


Pointer = tuple[str, str, int]  # (memory_id, kind, version)
# A route's ranked hits, their re-read rows and the route's own scores of them (BM25; minus the
# cosine distance; none for the entity route, which ranks by link).
_Route = tuple[list[Pointer], dict[Pointer, _NoteRow], dict[Pointer, float]]


@dataclass
class _Trace:
    """What the episodic scoring did to each item, kept only when the context is explained."""

    stale: set[str] = field(default_factory=set)  # memory ids weighted STALE_WEIGHT
    access: dict[str, float] = field(default_factory=dict)  # memory id: access factor
    neighbours: dict[str, tuple[str, int]] = field(default_factory=dict)  # memory id: (anchor, step)
    skipped: dict[str, NotAdmitted] = field(default_factory=dict)  # the last packing's left-out candidates


_WORD = re.compile(r"\w+")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*|\s(?=\[photo:)")
_CJK_PAIR = re.compile(r"(?=([\u3400-\u9fff\uf900-\ufaff]{2}))")
_QUERY_STOP = frozenset("a an the of in on at to and or is was were are be for with by do does did what when where "
                        "who whom which why how has have had her his she he they it its their them this that "
                        "about from as would could should will can".split())


@functools.lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    # Cached: focusing the candidates of one context stems some 6,000 words, most of them seen before.
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _terms(text: str) -> set[str]:
    return {_stem(w) for w in _WORD.findall(text.lower()) if w not in _QUERY_STOP}


def _match_terms(text: str) -> set[str]:
    """Words and, for Chinese, character pairs: what a query and a fact can share."""
    return _terms(text) | set(_CJK_PAIR.findall(text))


@functools.lru_cache(maxsize=256)
def _starting_with(terms: frozenset[str]) -> re.Pattern[str]:
    """Matches a word that begins with one of `terms` (never, for none)."""
    if not terms:
        return re.compile(r"(?!)")
    return re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, sorted(terms, key=lambda t: (-len(t), t)))) + ")")


def focus(body: str, query_terms: set[str], speaker_terms: set[str]) -> str:
    """Keep the sentences of a note that share a word with the query (names aside); a note that
    matched on meaning alone keeps its first sentence. Fewer tokens per item, more items."""
    sentences = [x for x in _SENTENCE.split(body) if x.strip()]
    if len(sentences) <= 1:
        return body
    wanted = query_terms - speaker_terms
    # A word stems to a wanted term only if it begins with it: a sentence with no word that does
    # is passed over without stemming (most sentences of most notes).
    starts = _starting_with(frozenset(wanted))
    hits = [i for i, x in enumerate(sentences) if starts.search(x.lower()) and _terms(x) & wanted] or [0]
    # The sentence after a match often carries the answer ("What did she paint? ... It was a sunset.").
    keep = sorted({j for i in hits for j in (i, i + 1) if j < len(sentences)})
    return " ".join(sentences[j] for j in keep)


def fuse(*ranked: tuple[float, list[Pointer]]) -> dict[Pointer, float]:
    """Weighted reciprocal-rank fusion of ranked (memory_id, kind, version) lists."""
    scores: dict[Pointer, float] = {}
    for weight, hits in ranked:
        for rank, hit in enumerate(hits):
            scores[hit] = scores.get(hit, 0.0) + weight / (RRF_K + rank + 1)
    return scores


def normalise(scores: dict[Pointer, float], weights: float = LEXICAL_WEIGHT + VECTOR_WEIGHT) -> dict[Pointer, float]:
    """Relevance in [0, 1]: the best candidate 1. An item first in every list scores the sum of
    the lists' weights (`weights`) over RRF_K + 1, so dividing by that maximum keeps 'first in
    every list' at 1 and makes the decay and importance factors, not the list lengths, decide
    between equally relevant items."""
    best = weights / (RRF_K + 1)
    return {k: min(1.0, v / best) for k, v in scores.items()}


def episodic_score(relevance: float, happened_at: datetime, importance: int, as_of: datetime,
                   policy: RecallPolicy) -> float:
    """relevance × exp(−Δt / τ) × (base + slope · importance); a future item has Δt = 0."""
    age_days = max(0.0, (as_of - happened_at).total_seconds() / 86400)
    return relevance * math.exp(-age_days / policy.tau_days) * policy.importance_factor(importance)


def truncate_tokens(text: str, cap: int) -> str:
    """The text cut to at most `cap` estimated tokens, at a word boundary where there is one."""
    if estimate_tokens(text) <= cap:
        return text
    lo, hi = 0, len(text)
    while lo < hi:  # the longest prefix (plus the ellipsis) within the cap
        mid = (lo + hi + 1) // 2
        if estimate_tokens(text[:mid] + "…") <= cap:
            lo = mid
        else:
            hi = mid - 1
    cut = text[:lo]
    space = cut.rfind(" ")
    return (cut[:space] if space > lo // 2 else cut).rstrip() + "…"


def _profile_rank(fact: FactRow, query_terms: set[str]) -> tuple:
    """Facts the query names first, then by PROFILE_ORDER, confidence and recency."""
    shared = len(_match_terms(f"{fact.namespace} {fact.key} {fact.value}") & query_terms)
    order = PROFILE_ORDER.index(fact.namespace) if fact.namespace in PROFILE_ORDER else len(PROFILE_ORDER)
    return (-shared, order, -fact.confidence, -fact.valid_from.timestamp(), fact.namespace, fact.key)


def in_task(fact: FactRow, session_id: str | None) -> bool:
    """Whether a fact belongs in a context read in `session_id`: a task-local fact only in the
    session it was stated in (and in no context read outside a session), every other fact always."""
    return fact.permanence != "task_local" or (session_id is not None and fact.task_session_id == session_id)


def profile_items(facts: list[FactRow], query: str, policy: RecallPolicy,
                  session_id: str | None = None, *, explain: bool = False) -> list[ContextItem]:
    query_terms = _match_terms(query)
    kept = sorted((f for f in facts if f.confidence > policy.profile_min_confidence and in_task(f, session_id)),
                  key=lambda f: _profile_rank(f, query_terms))
    # A fact the review marked weighs STALE_WEIGHT of its rank's score: packed after the unmarked.
    weighted = sorted(((float(len(kept) - n) * (STALE_WEIGHT if f.stale_reasons else 1.0), f)
                       for n, f in enumerate(kept)), key=lambda pair: -pair[0])
    scores = {f.memory_id: score for score, f in weighted}
    ranks = {f.memory_id: n for n, f in enumerate(kept, start=1)} if explain else {}
    items = []
    for f in _said_together_adjacent([f for _, f in weighted]):
        before, named, after = fact_line_parts(f.namespace, f.key, f.value)
        since = f" (since {format_day(f.valid_from)})"
        item = ContextItem(kind="fact", memory_id=f.memory_id, content=f.value, tier="profile",
                           text=f"{before}{named}{after}{since}", cited_message_ids=f.evidence_message_ids,
                           score=scores[f.memory_id], happened_at=f.valid_from, last_confirmed_at=f.last_confirmed_at)
        if named:
            item._shared_line = (before, named, after, since)
        if explain:
            item.explanation = _fact_explanation(f, ranks[f.memory_id], len(kept), query_terms, item.score)
        items.append(item)
    return items


def _fact_explanation(fact: FactRow, rank: int, of: int, query_terms: set[str], score: float) -> ItemExplanation:
    order = PROFILE_ORDER.index(fact.namespace) if fact.namespace in PROFILE_ORDER else None
    shared = sorted(_match_terms(f"{fact.namespace} {fact.key} {fact.value}") & query_terms)
    return ItemExplanation(tier="profile", admitted=False, score=score,
                           staleness_term=STALE_WEIGHT if fact.stale_reasons else 1.0,
                           profile=ProfileRank(rank=rank, of=of, shared_terms=shared, namespace_order=order,
                                               confidence=fact.confidence, task_local=fact.permanence == "task_local"))


def _explain_episodic(items: list[ContextItem], routes: dict[Route, tuple[float, list[Pointer], dict[Pointer, float]]],
                      fused: dict[Pointer, float], trace: _Trace, as_of: datetime | None,
                      policy: RecallPolicy) -> None:
    """Set each episodic item's explanation from the routes' ranks and the scoring's trace; the
    product of its terms, in the order the scoring applies them, is its score."""
    scored_at = as_of or datetime.now(UTC)
    hits: dict[str, dict[Route, RouteHit]] = {}
    fused_by_id: dict[str, float] = {}
    for name, (weight, ranked, scores) in routes.items():
        for rank, pointer in enumerate(ranked, start=1):
            if pointer[0] in hits and name in hits[pointer[0]]:
                continue
            raw = scores.get(pointer)
            hits.setdefault(pointer[0], {})[name] = RouteHit(
                rank=rank, score=weight / (RRF_K + rank), bm25=raw if name == "lexical" else None,
                similarity=1.0 + raw if name == "vector" and raw is not None else None)
    for pointer, value in fused.items():
        fused_by_id.setdefault(pointer[0], value)
    for item in items:
        importance = item.importance or DEFAULT_IMPORTANCE
        age_days = max(0.0, (scored_at - item.happened_at).total_seconds() / 86400) if item.happened_at else 0.0
        decay, weight = math.exp(-age_days / policy.tau_days), policy.importance_factor(importance)
        stale = STALE_WEIGHT if item.memory_id in trace.stale else 1.0
        access = trace.access.get(item.memory_id, 1.0)
        anchor, step = trace.neighbours.get(item.memory_id, (None, None))
        item.explanation = ItemExplanation(
            tier="episodic", admitted=False, score=item.score, routes=hits.get(item.memory_id, {}),
            fused=fused_by_id.get(item.memory_id), relevance=item.relevance, neighbour_of=anchor, neighbour_step=step,
            time_decay=decay, importance_term=weight, access_term=access, staleness_term=stale)


def _said_together_adjacent(facts: list[FactRow]) -> list[FactRow]:
    """The ranked facts with each fact said together with a higher-ranked one (same namespace,
    same messages, same start: "allergic to peanuts and shellfish") moved right after it, so the
    two can share a line."""
    groups: dict[tuple, list[FactRow]] = {}
    for f in facts:
        groups.setdefault((f.namespace, tuple(f.evidence_message_ids), f.valid_from), []).append(f)
    placed: set[str] = set()
    ordered: list[FactRow] = []
    for f in facts:
        if f.memory_id not in placed:
            for member in groups[(f.namespace, tuple(f.evidence_message_ids), f.valid_from)]:
                placed.add(member.memory_id)
                ordered.append(member)
    return ordered


def block_tokens(text: str) -> int:
    """What a block costs in a prompt: its text as one chat message (0 when empty)."""
    return estimate_tokens(text) + MESSAGE_OVERHEAD if text else 0


def _cost(item: ContextItem) -> int:
    return estimate_tokens(item.line) + 1  # +1: the newline before it


def _joins(line: list[ContextItem], item: ContextItem) -> bool:
    """Whether `item` shares the line of `line` (facts said together): the same wording around
    the object, the same start and the same citations."""
    first = line[0]._shared_line if line else None
    mine = item._shared_line
    return (first is not None and mine is not None and (first[0], first[2], first[3]) == (mine[0], mine[2], mine[3])
            and item.cited_message_ids == line[0].cited_message_ids)


def _line_text(line: list[ContextItem]) -> str:
    """Facts said together on one line: "- likes coconut milk, chocolate (since …) [D1:3]"."""
    if len(line) == 1:
        return line[0].line
    before, _, after, since = line[0]._shared_line  # type: ignore[misc]
    text = f"{before}{', '.join(i._shared_line[1] for i in line)}{after}{since}"  # type: ignore[index]
    return ContextItem(kind="fact", memory_id="", text=text, content="", cited_message_ids=line[0].cited_message_ids,
                       score=0.0).line


def _profile_lines(items: list[ContextItem]) -> list[list[ContextItem]]:
    lines: list[list[ContextItem]] = []
    for item in items:
        if lines and _joins(lines[-1], item):
            lines[-1].append(item)
        else:
            lines.append([item])
    return lines


def pack_tiers(items: list[ContextItem], policy: RecallPolicy,
               skipped: dict[str, NotAdmitted] | None = None) -> list[ContextItem]:
    """The profile greedily within its budget (header included), then the episodic items by
    score within theirs plus what the profile left, at most `max_episodes` summaries; an
    episodic item citing nothing the episodic items before it do not already cite is skipped.
    `skipped`, when given, is set to why each item left out was."""
    if skipped is not None:
        skipped.clear()
    chosen: list[ContextItem] = []
    profile = [i for i in items if i.tier == "profile"]
    used = 0
    header = block_tokens(PROFILE_HEADER)
    line: list[ContextItem] = []  # the last line packed: an item said with it joins it
    for item in profile:
        if line and line[-1] is chosen[-1] and _joins(line, item):
            cost = estimate_tokens(_line_text([*line, item])) - estimate_tokens(_line_text(line))
            if header + used + cost <= policy.profile_tokens:
                chosen.append(item)
                line.append(item)
                used += cost
            elif skipped is not None:
                skipped[item.memory_id] = "budget"
            continue
        cost = _cost(item)
        if header + used + cost <= policy.profile_tokens:
            chosen.append(item)
            line = [item]
            used += cost
        elif skipped is not None:
            skipped[item.memory_id] = "budget"
    profile_used = header + used if used else 0
    allowance = min(policy.episodic_tokens + policy.profile_tokens - profile_used, policy.total_tokens - profile_used)
    used, episodes = block_tokens(EPISODIC_HEADER), 0
    # Deduplicated among themselves only: a note says more than the fact drawn from its message.
    cited: set[str] = set()
    for item in (i for i in items if i.tier == "episodic"):
        if item.cited_message_ids and set(item.cited_message_ids) <= cited:
            if skipped is not None:
                skipped[item.memory_id] = "repeats"
            continue  # says nothing the context does not already hold
        if item.kind == "episode" and episodes >= policy.max_episodes:
            if skipped is not None:
                skipped[item.memory_id] = "max_episodes"
            continue
        cost = _cost(item)
        if used + cost <= allowance:
            chosen.append(item)
            cited.update(item.cited_message_ids)
            used += cost
            episodes += item.kind == "episode"
        elif skipped is not None:
            skipped[item.memory_id] = "budget"
    return chosen


def render_block(header: str, items: list[ContextItem]) -> str:
    """A tier as the prompt shows it: its header, then an item a line, facts said together sharing one."""
    return "\n".join([header, *(_line_text(line) for line in _profile_lines(items))]) if items else ""


def _tie_order(happened_at: datetime | None, session_id: str | None, message_ids: list[str],
               kind: str) -> tuple[float, str, str, str]:
    """Orders equally scored items the same in every store that holds the same conversations
    (memory ids are keyed per subject, so an id would not): the newer first, then by session and
    message."""
    return (-(happened_at.timestamp() if happened_at else 0.0), session_id or "", message_ids[0] if message_ids else "",
            kind)


async def _scored_route(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                        hits: list[tuple[str, str, int, float]], as_of: datetime | None,
                        since: datetime | None) -> _Route:
    """A route's hits, best (highest score) first, re-read from their rows; equal scores in the
    order of what the items are. A hit without a row (a stale version) takes no rank."""
    scores = {(m, k, v): score for m, k, v, score in hits}
    rows = await _read_candidates(conn, tenant_id, subject_id, list(scores), as_of, since)
    ranked = sorted(rows, key=lambda p: (-scores[p], _tie_order(rows[p].happened_at, rows[p].session_id,
                                                                rows[p].source_message_ids, rows[p].kind), p[0]))
    return ranked, rows, scores


async def _lexical_route(pool: AsyncConnectionPool, tenant_id: str, subject_id: str, query: str,
                         as_of: datetime | None, since: datetime | None) -> _Route:
    async with tenant_transaction(pool, tenant_id) as conn:
        hits = await bm25_search(conn, tenant_id, subject_id, query, as_of=as_of, limit=CANDIDATES,
                                 kinds=("episode", "observation"), since=since)
        return await _scored_route(conn, tenant_id, subject_id, hits, as_of, since)


async def _vector_route(pool: AsyncConnectionPool, embedder: Embedder, tenant_id: str, subject_id: str,
                        query: str, as_of: datetime | None, since: datetime | None) -> _Route:
    # The tenant's active model (the old one while a re-embedding runs), not always the configured one.
    query_embedder = await reading_embedder(pool, tenant_id, embedder)
    embedded = await embed_query(query_embedder, await text_for_embedder(pool, tenant_id, query_embedder, query),
                                 tenant_id)
    async with tenant_transaction(pool, tenant_id) as conn:
        hits = await nearest(conn, tenant_id, subject_id, embedded.model, embedded.vectors[0],
                             ("episode", "observation"), CANDIDATES)
        # Nearest first: the distance as a negative score.
        return await _scored_route(conn, tenant_id, subject_id, [(m, k, v, -d) for m, k, v, d in hits], as_of, since)


async def _entity_route(pool: AsyncConnectionPool, tenant_id: str, subject_id: str, query: str,
                        as_of: datetime | None, since: datetime | None) -> _Route:
    async with tenant_transaction(pool, tenant_id) as conn:
        pointers = await entity_hits(conn, tenant_id, subject_id, query, CANDIDATES)
        rows = await _read_candidates(conn, tenant_id, subject_id, pointers, as_of, since)
        return [p for p in pointers if p in rows], rows, {}


async def _profile_route(pool: AsyncConnectionPool, keyring: KeyRing, tenant_id: str, subject_id: str,
                         as_of: datetime | None) -> list[FactRow] | None:
    """The subject's facts valid at `as_of`; None for an erased subject."""
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.READ) as scope:
        return None if scope.erased else await read_facts(scope, as_of=as_of)


def _scored(row: _NoteRow, kind: Kind, content: str, text: str, relevance: float, scored_at: datetime,
            policy: RecallPolicy) -> ContextItem:
    """An episodic item from its re-read row, scored by the policy (a note takes its session's importance)."""
    importance = row.importance or DEFAULT_IMPORTANCE
    return ContextItem(kind=kind, memory_id=row.memory_id, text=text, content=content,
                       cited_message_ids=row.source_message_ids, happened_at=row.happened_at, relevance=relevance,
                       importance=importance, session_id=row.session_id,
                       score=episodic_score(relevance, row.happened_at, importance, scored_at, policy))


async def _read_candidates(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, hits: list[Pointer],
                           as_of: datetime | None, since: datetime | None) -> dict[Pointer, _NoteRow]:
    """Re-read a route's candidates from their relational rows, in the route's transaction (so it
    overlaps the other route): a stale version, a superseded, future or out-of-window item has
    no row here and drops out. A note takes its session's importance. Whether the subject was
    erased meanwhile is checked once, after every route has read (assemble_context)."""
    if not hits:
        return {}
    ids = {kind: [mid for mid, k, _ in hits if k == kind] for kind in ("episode", "observation")}
    wanted = set(hits)
    rows: dict[Pointer, _NoteRow] = {}
    async with conn.cursor(row_factory=class_row(_NoteRow)) as cur:
        await cur.execute(_CANDIDATE_ROWS_SQL, {"tenant": tenant_id, "subject": subject_id, "as_of": as_of,
                                                "since": since, "observations": ids["observation"],
                                                "episodes": ids["episode"]})
        for row in await cur.fetchall():
            if (key := (row.memory_id, row.kind, row.version)) in wanted:
                rows[key] = row
    return rows


# Both kinds in one round trip.
_CANDIDATE_ROWS_SQL = """
SELECT 'observation' AS kind, x.memory_id::text AS memory_id, x.version, x.text, x.happened_at, x.source_message_ids,
       e.importance::int AS importance, x.session_id
  FROM observations x LEFT JOIN episodes e
    ON e.tenant_id = x.tenant_id AND e.session_id = x.session_id AND e.subject_id = x.subject_id
 WHERE x.tenant_id = %(tenant)s AND x.subject_id = %(subject)s AND x.memory_id = ANY(%(observations)s::uuid[])
   AND x.happened_at <= coalesce(%(as_of)s::timestamptz, 'infinity')
   AND x.happened_at >= coalesce(%(since)s::timestamptz, '-infinity')
UNION ALL
SELECT 'episode', x.memory_id::text, x.version, x.summary, x.happened_at, x.source_message_ids,
       x.importance::int, x.session_id
  FROM episodes x
 WHERE x.tenant_id = %(tenant)s AND x.subject_id = %(subject)s AND x.memory_id = ANY(%(episodes)s::uuid[])
   AND x.happened_at <= coalesce(%(as_of)s::timestamptz, 'infinity')
   AND x.happened_at >= coalesce(%(since)s::timestamptz, '-infinity')
"""


def _note_item(row: _NoteRow, query_terms: set[str], relevance: float, scored_at: datetime,
               policy: RecallPolicy) -> ContextItem:
    speaker, _, body = row.text.partition(": ")
    text = f"{speaker}: {focus(body, query_terms, _terms(speaker))}" if FOCUS_NOTES else row.text
    return _scored(row, "observation", text, f"[{format_day(row.happened_at)}] {text}", relevance, scored_at, policy)


def _episodic_items(query: str, relevance: dict[Pointer, float], rows: dict[Pointer, _NoteRow],
                    as_of: datetime | None, policy: RecallPolicy) -> list[ContextItem]:
    """The re-read candidates as scored context items; those below the policy's minimum
    relevance are left out, so weak matches do not fill the budget."""
    scored_at = as_of or datetime.now(UTC)
    query_terms = _terms(query)
    items: list[ContextItem] = []
    for key, row in rows.items():
        if relevance[key] < policy.min_relevance:
            continue
        if key[1] == "observation":
            items.append(_note_item(row, query_terms, relevance[key], scored_at, policy))
        else:
            summary = truncate_tokens(row.text, policy.episode_tokens)
            items.append(_scored(row, "episode", summary, f"[{format_day(row.happened_at)}] Session summary: {summary}",
                                 relevance[key], scored_at, policy))
    return items


def _ranked(items: list[ContextItem]) -> list[ContextItem]:
    """By score; equal scores: the newer item first, then by session and message (ids are keyed
    per subject: an id would order ties differently in two stores holding the same memories)."""
    return sorted(items, key=lambda i: (-i.score, _tie_order(i.happened_at, i.session_id, i.cited_message_ids, i.kind),
                                        i.memory_id))


async def _with_neighbours(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, query: str,
                           episodic: list[ContextItem], direction: Direction, as_of: datetime | None,
                           since: datetime | None, policy: RecallPolicy,
                           trace: _Trace | None = None) -> list[ContextItem]:
    """The ranked items plus the notes next in time to the best-ranked notes
    (agent_memory.recall.sequence), each a step below its anchor; an item already present keeps
    the higher of its two scores."""
    anchors = [i for i in episodic if i.kind == "observation"][:ANCHORS]
    rows = await neighbour_notes(conn, tenant_id, subject_id, [i.memory_id for i in anchors], direction, as_of, since)
    by_id = {i.memory_id: i for i in episodic}
    scored_at, query_terms = as_of or datetime.now(UTC), _terms(query)
    for anchor_id, step, row in rows:
        relevance = (by_id[anchor_id].relevance or 0.0) * STEP_DECAY ** step
        if relevance < policy.min_relevance:
            continue
        item = _note_item(_NoteRow(kind="observation", **row), query_terms, relevance, scored_at, policy)
        if item.memory_id not in by_id or by_id[item.memory_id].score < item.score:
            by_id[item.memory_id] = item
            if trace is not None:  # scored afresh: its anchor's relevance, not down-weighted
                trace.neighbours[item.memory_id] = (anchor_id, step)
                trace.stale.discard(item.memory_id)
    return _ranked(list(by_id.values()))


async def _with_access(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, episodic: list[ContextItem],
                       as_of: datetime | None, policy: RecallPolicy, trace: _Trace | None = None) -> list[ContextItem]:
    """The items' scores times their access factor (agent_memory.recall.recall_policy), re-ranked:
    one read of the flushed access rows of the candidates, in the read's last transaction. A
    memory never recalled keeps its score."""
    stats = await read_access(conn, tenant_id, subject_id, (i.memory_id for i in episodic))
    if not stats:
        return episodic
    scored_at = as_of or datetime.now(UTC)
    factors = {i.memory_id: policy.access_factor(a.count, a.first_at, a.last_at, scored_at)
               for i in episodic if (a := stats.get(i.memory_id)) is not None}
    if trace is not None:
        trace.access.update(factors)
    boosted = [i.model_copy(update={"score": i.score * factors[i.memory_id]}) if i.memory_id in factors else i
               for i in episodic]
    return _ranked(boosted)


async def _down_weight_marked(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                              items: list[ContextItem], trace: _Trace | None = None) -> list[ContextItem]:
    """Notes the review marked as near-duplicates (mark in force) weigh STALE_WEIGHT of their score."""
    notes = [i.memory_id for i in items if i.kind == "observation"]
    if not notes:
        return items
    cur = await conn.execute(
        f"SELECT s.marked_memory_id::text FROM stale_marks s WHERE s.tenant_id = %s AND s.subject_id = %s "
        f"AND s.marked_memory_id = ANY(%s::uuid[]) AND {IN_FORCE}", (tenant_id, subject_id, notes))
    marked = {row[0] for row in await cur.fetchall()}
    if not marked:
        return items
    if trace is not None:
        trace.stale.update(marked)
    return _ranked([i.model_copy(update={"score": i.score * STALE_WEIGHT}) if i.memory_id in marked else i
                    for i in items])


async def _below_budget(pool: AsyncConnectionPool, redis, tenant_id: str, subject_id: str,
                        candidates: list[ContextItem], chosen: list[ContextItem], trace: _Trace, leaked: set[str],
                        conn: psycopg.AsyncConnection) -> list[ContextItem]:
    """Per tier, the first BELOW_BUDGET_SHOWN candidates left out, in the order packing met them;
    the chosen items' explanations marked admitted. Each passes the leak filter here as the
    admitted ones did (its drops are not counted: they would not have been shown); what the key
    may not read was never a candidate."""
    admitted = {i.memory_id for i in chosen}
    for item in chosen:
        if item.explanation is not None:
            item.explanation.admitted = True
    below: list[ContextItem] = []
    for tier in ("profile", "episodic"):
        left = [i for i in candidates if i.tier == tier and i.memory_id not in admitted and i.memory_id not in leaked]
        kept: list[ContextItem] = []
        while left and len(kept) < BELOW_BUDGET_SHOWN:
            batch, left = left[:BELOW_BUDGET_SHOWN], left[BELOW_BUDGET_SHOWN:]
            clean, _ = await filter_items(pool, redis, tenant_id, subject_id, batch, text_of=context_item_text,
                                          cited_of=lambda i: i.cited_message_ids, id_of=lambda i: i.memory_id,
                                          conn=conn, count=False)
            kept.extend(clean)
        for item in kept[:BELOW_BUDGET_SHOWN]:
            if item.explanation is not None:
                item.explanation.not_admitted = trace.skipped.get(item.memory_id, "budget")
            below.append(item)
    return below


async def load_policy(pool: AsyncConnectionPool, tenant_id: str) -> RecallPolicy:
    async with tenant_transaction(pool, tenant_id) as conn:
        return await read_policy(conn, tenant_id)


async def assemble_context(pool: AsyncConnectionPool, keyring: KeyRing, embedder: Embedder, tenant_id: str,
                           subject_id: str, query: str, *, as_of: datetime | None = None,
                           token_budget: int | None = None, policy: RecallPolicy | None = None,
                           session_id: str | None = None, redis=None, parallel: bool = True,
                           filters: MemoryFilter = NO_FILTER, explain: bool = False) -> AssembledContext:
    """The context for `query`: the tenant's recall policy (or `policy`), its tiers scaled to
    `token_budget` when one is given; read in `session_id`, it includes that session's task-local
    facts. `filters` narrows it: `fact` the profile, `episode` the past sessions and notes, fact
    namespaces, and a time range on when a fact became true or an episode or note happened.
    `parallel=False` runs the four routes one after another (the recall benchmark's comparison).
    `explain` gives every item its ItemExplanation and lists the candidates below the budget."""
    filters = filters.within_key_limits()
    policy = policy or await load_policy(pool, tenant_id)
    if token_budget is not None:
        policy = policy.scaled(token_budget)
    empty = AssembledContext(query=query, items=[], text="", tokens=0, budget=policy.total_tokens, as_of=as_of,
                             policy=policy, profile_budget=policy.profile_tokens, below_budget=[] if explain else None)
    since = None
    if policy.window_days is not None:
        since = (as_of or datetime.now(UTC)) - timedelta(days=policy.window_days)
    profile_route = _profile_route(pool, keyring, tenant_id, subject_id, as_of)
    routes = (_lexical_route(pool, tenant_id, subject_id, query, as_of, since),
              _vector_route(pool, embedder, tenant_id, subject_id, query, as_of, since),
              _entity_route(pool, tenant_id, subject_id, query, as_of, since))
    if parallel:
        facts, *ranked = await asyncio.gather(profile_route, *routes)
    else:
        facts, ranked = await profile_route, [await route for route in routes]
    (lexical, lexical_rows, lexical_scores), (vector, vector_rows, vector_scores), (linked, linked_rows, _) = ranked
    trace = _Trace() if explain else None
    if facts is None:  # erased: nothing may reach a prompt
        return empty
    # After every read: an erasure commits its tombstone before it deletes anything, so a route
    # that read a half-erased subject is caught here. The leak filter's lookups and the read's
    # count join this transaction: one transaction after the routes, not three.
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.READ) as scope:
        if scope.erased:  # erased while the routes ran
            return empty
        # The entity list counts only when the question names an entity: without one, relevance is
        # the two index routes' alone.
        weights = LEXICAL_WEIGHT + VECTOR_WEIGHT + (ENTITY_WEIGHT if linked else 0.0)
        fused = fuse((LEXICAL_WEIGHT, lexical), (VECTOR_WEIGHT, vector), (ENTITY_WEIGHT, linked))
        relevance = normalise(fused, weights)
        episodic = _ranked(_episodic_items(query, relevance, {**lexical_rows, **vector_rows, **linked_rows},
                                           as_of, policy))
        episodic = await _down_weight_marked(scope.conn, tenant_id, subject_id, episodic, trace)
        if (direction := sequence_direction(query)) is not None:
            episodic = await _with_neighbours(scope.conn, tenant_id, subject_id, query, episodic, direction, as_of,
                                              since, policy, trace)
        if policy.access_weight > 0 and episodic:
            episodic = await _with_access(scope.conn, tenant_id, subject_id, episodic, as_of, policy, trace)
        if filters != NO_FILTER:
            facts = [f for f in facts if filters.fact_matches(f)]
            episodic = [i for i in episodic if filters.wants("episode")
                        and (i.happened_at is None or filters.in_range(i.happened_at))]
            facts = await matching_items(scope.conn, tenant_id, subject_id, filters, facts,
                                         lambda f: f.evidence_message_ids,
                                         lambda f: fact_line(f.namespace, f.key, f.value), lambda f: f.namespace,
                                         lambda f: f.metadata)
            episodic = await matching_items(scope.conn, tenant_id, subject_id, filters, episodic,
                                            lambda i: i.cited_message_ids, lambda i: i.content)
        if trace is not None:
            _explain_episodic(episodic, {"lexical": (LEXICAL_WEIGHT, lexical, lexical_scores),
                                         "vector": (VECTOR_WEIGHT, vector, vector_scores),
                                         "entity": (ENTITY_WEIGHT, linked, {})}, fused, trace, as_of, policy)
        candidates = profile_items(facts, query, policy, session_id, explain=explain) + episodic
        # pack, then the leak filter's last check (re-packing without what it dropped)
        skipped = trace.skipped if trace is not None else None
        chosen, leaks = await filter_context(pool, redis, tenant_id, subject_id, candidates,
                                             lambda xs: pack_tiers(xs, policy, skipped), conn=scope.conn)
        below = None
        if trace is not None:
            below = await _below_budget(pool, redis, tenant_id, subject_id, candidates, chosen, trace,
                                        set(leaks.dropped_ids), scope.conn)
        await count_read(pool, tenant_id, items=len(chosen), leak_filter_dropped=leaks.dropped, conn=scope.conn)
    profile = [i for i in chosen if i.tier == "profile"]
    recalled = [i for i in chosen if i.tier == "episodic"]
    profile_text, episodic_text = render_block(PROFILE_HEADER, profile), render_block(EPISODIC_HEADER, recalled)
    profile_tokens = block_tokens(profile_text)
    text = "\n".join(i.text for i in chosen)
    tokens = estimate_tokens(text)
    observe(CONTEXT_ITEMS, len(chosen))
    observe(CONTEXT_TOKENS, tokens)
    return AssembledContext(
        query=query, items=chosen, text=text, tokens=tokens, budget=policy.total_tokens,
        profile_text=profile_text, episodic_text=episodic_text, profile_tokens=profile_tokens,
        episodic_tokens=block_tokens(episodic_text), profile_budget=policy.profile_tokens,
        episodic_budget=min(policy.episodic_tokens + policy.profile_tokens - profile_tokens,
                            policy.total_tokens - profile_tokens),
        as_of=as_of, policy=policy, leak_filter_dropped=leaks.dropped, below_budget=below)
