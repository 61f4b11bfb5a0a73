"""Conflict checks: decide, for each extracted fact, what it does to the current facts.

Pure functions over plain data, so the decision is deterministic for the same inputs and can
be re-made when an optimistic version check fails at commit time.

Order of the gates:
1. Dedup: the same value restated (normalised text, then similarity for keys derived from the
   value, such as preferences) confirms the current fact: evidence is added, no new row.
2. Candidate area: an inference or a low-confidence statement is held as a candidate. A
   candidate said again in a later session is corroborated and promoted.
3. Hard rules: a model inference never overrides a user's explicit statement or a safety
   constraint (allergies, diet restrictions).
4. Otherwise the new value and the current one are ranked by support
   S = ws·Rs + wc·Rc + wt·Rt + wf·Rf (source reliability, confirmation, recency, relevance);
   the new value supersedes when it ranks at least as high, else it waits as a candidate.

Recency is the server's order of receipt, not the client's clock (`arrival`): a client whose clock
is behind cannot make its newer statement lose, nor one ahead make an older one win. Statements
received together (one append) rank by their own times; a message received long after the time it
carries (an imported history) ranks by that time, so an old conversation imported today does not
override what is known since.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from agent_memory.core.fact_text import normalise_value
from agent_memory.core.models import ExtractedFact, FactAction, FactDecision

# Below this an explicit statement is kept as a candidate rather than a current fact.
MIN_CURRENT_CONFIDENCE = 0.5
# Recency weighs most: a user's fresh statement of a changed state (a move) must beat an older
# value however often that was confirmed; reliability of the source comes next.
WEIGHTS = {"source": 0.35, "confirmation": 0.10, "recency": 0.35, "relevance": 0.20}
# Namespaces whose key is derived from the value ("preference/hiking"): restatements can use a
# slightly different wording and hence a different key.
VALUE_KEYED_NAMESPACES = frozenset({"preference", "dislike"})
SAFETY_NAMESPACES = frozenset({"diet"})
SIMILARITY_THRESHOLD = 0.5
# Values of `preference/<object>`: the object is the key, the value its polarity.
POLARITIES = frozenset({"like", "dislike"})
# A message received more than this after the time it carries was not sent as it was written: it is
# backfill (an imported history). A day covers a client clock off by a time zone (a local time sent as
# UTC) and a device that sends its queue after a few hours offline.
BACKFILL_LAG = timedelta(days=1)


@dataclass(frozen=True)
class CurrentFact:
    namespace: str
    key: str
    value: str
    version: int  # the aggregate's current version
    claim_type: str
    confidence: float = 1.0
    evidence_count: int = 1
    observed_at: datetime | None = None  # when the value began to hold (valid_from)
    # Where its newest evidence stands in the order of receipt (`arrival`); None: unknown.
    received_at: datetime | None = None


@dataclass(frozen=True)
class Candidate:
    namespace: str
    key: str
    value: str
    evidence_message_ids: tuple[str, ...]


def arrival(created_at: datetime, recorded_at: datetime) -> datetime:
    """Where a message stands in the order statements rank by: when the server recorded it; a
    backfilled message (recorded more than BACKFILL_LAG after its own time) at its own time."""
    return created_at if recorded_at - created_at > BACKFILL_LAG else recorded_at


def _received(fact: ExtractedFact, received_at: Mapping[str, datetime]) -> datetime | None:
    """The arrival of the fact's newest evidence message (None: none of them is known)."""
    return max((received_at[i] for i in fact.evidence_message_ids if i in received_at), default=None)


def is_newer(fact: ExtractedFact, received: datetime | None, existing: CurrentFact) -> bool:
    """Whether the statement was made after the current value's newest evidence: by arrival when
    both are known and differ, else (one append, or an arrival unknown) by the statements' own
    times. A past state ("I lived in Oslo until 2019", a closed interval) is placed by the times it
    names: being said later does not make it current."""
    past_state = fact.permanence == "permanent" and fact.valid_until is not None
    if received is not None and existing.received_at is not None and received != existing.received_at \
            and not past_state:
        return received > existing.received_at
    return existing.observed_at is None or fact.observed_at >= existing.observed_at


def _tokens(value: str) -> set[str]:
    text = normalise_value(value)
    cjk = re.findall(r"[\u3400-\u9fff]+", text)
    words = set(re.findall(r"[^\W\d_]+|\d+", re.sub(r"[\u3400-\u9fff]+", " ", text)))
    return words | {run[i:i + 2] for run in cjk for i in range(max(1, len(run) - 1))}


def similarity(a: str, b: str) -> float:
    """Containment-aware overlap: 'hiking' vs 'hiking on weekends' is 1.0."""
    ta, tb = _tokens(a), _tokens(b)
    if not ta or not tb:
        return 0.0
    return len(ta & tb) / min(len(ta), len(tb))


def support(claim_type: str, confidence: float, evidence_count: int, is_newest: bool) -> float:
    reliability = 1.0 if claim_type == "explicit" else 0.4
    confirmation = min(1.0, evidence_count / 3)
    recency = 1.0 if is_newest else 0.5
    return (WEIGHTS["source"] * reliability + WEIGHTS["confirmation"] * confirmation
            + WEIGHTS["recency"] * recency + WEIGHTS["relevance"] * confidence)


# Namespaces where an unqualified key ("budget/general": "budget's 35k now") means the one thing of
# that kind the subject has, when there is exactly one.
GENERAL_KEYS = {"budget": "general"}


def _sole_specific(fact: ExtractedFact, current: dict[tuple[str, str], CurrentFact]) -> CurrentFact | None:
    """The one current budget a budget statement under another key changes, when one of the two
    keys is the unqualified one or the amount is the same (key fragmentation: "our wedding budget is 30k" … "budget's 35k now",
    "去日本玩的预算是两万" … "日本旅行经费调整到两万五" are one budget, not two)."""
    general = GENERAL_KEYS.get(fact.namespace)
    if general is None or (fact.namespace, fact.key) in current:
        return None
    same = [c for (ns, _), c in current.items() if ns == fact.namespace]
    if len(same) == 1 and general in (fact.key, same[0].key):
        return same[0]
    # The same amount said under another purpose is the budget restated ("rent budget 3000" … "for the
    # flat, 3000 a month at most, that hasn't changed").
    equal = [c for c in same if normalise_value(c.value) == normalise_value(fact.value)]
    return equal[0] if len(equal) == 1 and fact.operation in ("assert", "confirm") else None


def _similar_current(fact: ExtractedFact, current: dict[tuple[str, str], CurrentFact]) -> CurrentFact | None:
    """A current fact of the same value-keyed namespace whose object (the key) reads alike:
    "preference/hiking" and "preference/hiking_trips" are one thing. Keys are compared, never
    values: a value is a polarity ("like") that any two preferences may share."""
    if fact.namespace not in VALUE_KEYED_NAMESPACES:
        return None
    scored = [(similarity(fact.key.replace("_", " "), c.key.replace("_", " ")), c.key, c)
              for (ns, _), c in current.items() if ns == fact.namespace]
    best = max(scored, default=None, key=lambda t: (t[0], t[1]))
    return best[2] if best and best[0] >= SIMILARITY_THRESHOLD else None


def _end_or_correct(index: int, fact: ExtractedFact, existing: CurrentFact | None) -> FactDecision | None:
    """An explicit "end" closes the current value (if it is the one ended, or none is named);
    an explicit "correct" voids it. An inferred end or correction changes nothing: an inference
    never overrides what the user said."""
    if existing is None or fact.claim_type == "inference":
        return None
    if fact.operation == "end":
        ended, current = normalise_value(fact.value), normalise_value(existing.value)
        if ended and ended not in current and current not in ended \
                and similarity(fact.value, existing.value) < SIMILARITY_THRESHOLD:
            return None  # "no longer in Paris" while the current city is Berlin: nothing to end
        return FactDecision(action="end", namespace=existing.namespace, key=existing.key, value=existing.value,
                            expected_version=existing.version, fact_index=index,
                            reason=f"no longer true: {existing.value!r} ended")
    if not fact.value.strip():
        # No value under this key was ever true ("it's Mochi, not Mocha": the key was misspelt).
        return FactDecision(action="end", namespace=existing.namespace, key=existing.key, value=existing.value,
                            expected_version=existing.version, fact_index=index, voided=True,
                            reason=f"voided: {existing.key!r} was never {existing.value!r}")
    if normalise_value(fact.value) == normalise_value(existing.value):
        return None  # "correcting" to the same value: a restatement, handled as one
    return FactDecision(action="correct", namespace=existing.namespace, key=existing.key, value=fact.value,
                        expected_version=existing.version, fact_index=index,
                        reason=f"corrected: {existing.value!r} was never true, {fact.value!r} is")


def decide(extracted: list[ExtractedFact], current: dict[tuple[str, str], CurrentFact],
           candidates: dict[tuple[str, str, str], Candidate] | None = None,
           ended: dict[tuple[str, str], int] | None = None,
           needs_confirmation: Callable[[str, str], bool] | None = None,
           needs_corroboration: Callable[[str, str], bool] | None = None,
           received_at: Mapping[str, datetime] | None = None) -> list[FactDecision]:
    """One decision per extracted fact, in order; later facts see earlier decisions. `ended`:
    the versions of facts that exist but have no current value (ended earlier), which a new
    value of the same key must expect. `needs_confirmation(namespace, key)`: a key whose value
    never changes silently (the tenant's write policy): a new value waits as a candidate.
    `needs_corroboration(namespace, key)`: a key whose value, first or new, is taken only when said
    twice (in two messages, or again in a later session): said once, it waits as a candidate.
    `received_at`: the arrival of each evidence message (message id → `arrival`), read from the
    store by the caller; a fact none of whose messages is in it ranks by its own time."""
    candidates = candidates or {}
    received_at = received_at or {}
    ended = dict(ended or {})
    decisions: list[FactDecision] = []
    state = dict(current)
    for index, fact in enumerate(extracted):
        received = _received(fact, received_at)
        if (sole := _sole_specific(fact, state)) is not None:
            fact = fact.model_copy(update={"key": sole.key})
        if fact.operation in ("end", "correct"):
            exact = state.get((fact.namespace, fact.key))
            decision = _end_or_correct(index, fact, exact or (_similar_current(fact, state)
                                                                if fact.operation == "end" else None))
            if decision is not None:
                decisions.append(decision)
                slot = (decision.namespace, decision.key)
                prior = state.pop(slot)
                if decision.action == "end":
                    ended[slot] = prior.version + 1
                else:
                    state[slot] = CurrentFact(decision.namespace, decision.key, fact.value, prior.version + 1,
                                              fact.claim_type, fact.confidence, len(fact.evidence_message_ids),
                                              prior.observed_at, received or prior.received_at)
                continue
            if fact.operation == "end" or not fact.value.strip():
                continue  # nothing current to end or void (a correction falls through: a value to assert)
        existing = state.get((fact.namespace, fact.key)) or _similar_current(fact, state)
        namespace, key = (existing.namespace, existing.key) if existing else (fact.namespace, fact.key)
        expected = existing.version if existing else ended.get((fact.namespace, fact.key), 0)
        low = fact.claim_type == "inference" or fact.confidence < MIN_CURRENT_CONFIDENCE
        polarity = normalise_value(fact.value) in POLARITIES
        held = candidates.get((fact.namespace, fact.key, normalise_value(fact.value)))
        once = bool(needs_corroboration and needs_corroboration(fact.namespace, fact.key)
                    and len(fact.evidence_message_ids) < 2 and fact.claim_type == "explicit")
        promoted_from: list[str] = []
        action: FactAction
        if existing and normalise_value(existing.value) == normalise_value(fact.value):
            action, reason = "confirm", "restated: evidence added to the current fact"
        elif existing and existing.key != fact.key and not polarity:
            action, reason = "confirm", f"restated as {fact.value!r}: similar to {existing.value!r}"
        elif once and held is not None:
            promoted_from = list(held.evidence_message_ids)
            action = "promote" if existing is None else "supersede"
            reason = "said again in a later session: corroborated"
        elif once:
            action, reason = "candidate", "said once: waits until it is said again or confirmed"
        elif low and held is not None:
            promoted_from = list(held.evidence_message_ids)
            action = "promote" if existing is None else "supersede"
            reason = "candidate corroborated in a later session"
        elif low:
            action, reason = "candidate", ("model inference" if fact.claim_type == "inference"
                                           else f"confidence {fact.confidence:.2f} below {MIN_CURRENT_CONFIDENCE}")
        elif existing is None:
            action, reason = "create", "no current fact for this key"
        elif fact.claim_type == "inference" and (existing.claim_type == "explicit"
                                                  or fact.namespace in SAFETY_NAMESPACES):
            action, reason = "candidate", "hard rule: an inference never overrides an explicit statement or a safety constraint"
        else:
            newer = is_newer(fact, received, existing)
            new = support(fact.claim_type, fact.confidence, len(fact.evidence_message_ids), newer)
            old = support(existing.claim_type, existing.confidence, existing.evidence_count, not newer)
            if new >= old:
                action, reason = "supersede", (f"{fact.value!r} replaces {existing.value!r} "
                                               f"(support {new:.2f} ≥ {old:.2f})")
            else:
                action, reason = "candidate", f"weaker than the current {existing.value!r} ({new:.2f} < {old:.2f})"
        if action == "supersede" and existing and needs_confirmation and needs_confirmation(namespace, key):
            action, reason = "candidate", ("sensitive key: the new value waits for confirmation "
                                           "(agent-memory facts --confirm)")
        if action != "confirm" and not (polarity and existing):
            # (A change of polarity stays on the key of the preference it changes.)
            namespace, key = fact.namespace, fact.key
        decisions.append(FactDecision(action=action, namespace=namespace, key=key, value=fact.value,
                                      expected_version=expected if action != "candidate" else 0, reason=reason,
                                      fact_index=index, promoted_candidate_evidence=promoted_from))
        if action != "candidate":
            ended.pop((namespace, key), None)
            kept = existing.value if action == "confirm" and existing else fact.value
            evidence = (existing.evidence_count if existing else 0) + len(fact.evidence_message_ids)
            newest = received  # a confirmation keeps the current value's evidence too: the newer of the two
            if action == "confirm" and existing and existing.received_at is not None:
                newest = max(existing.received_at, received or existing.received_at)
            state[(namespace, key)] = CurrentFact(namespace, key, kept, expected + 1, fact.claim_type,
                                                  fact.confidence, evidence, fact.observed_at, newest)
    return decisions
