"""Conflict checks: decide, for each extracted fact, what it does to the current facts.

Pure functions over plain data, so the decision is deterministic for the same inputs and can
be re-made when an optimistic version check fails at commit time.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from agent_memory.models import ExtractedFact, FactDecision

# Below this an explicit statement is kept as a candidate rather than a current fact.
MIN_CURRENT_CONFIDENCE = 0.5


@dataclass(frozen=True)
class CurrentFact:
    namespace: str
    key: str
    value: str
    version: int  # the aggregate's current version
    claim_type: str


def normalise_value(value: str) -> str:
    text = unicodedata.normalize("NFKC", value).casefold().strip()
    return " ".join(text.split()).rstrip(".!。！")


def decide(extracted: list[ExtractedFact], current: dict[tuple[str, str], CurrentFact]) -> list[FactDecision]:
    """One decision per extracted fact, in order; later facts see earlier decisions."""
    decisions: list[FactDecision] = []
    state = dict(current)
    for index, fact in enumerate(extracted):
        ident = (fact.namespace, fact.key)
        existing = state.get(ident)
        expected = existing.version if existing else 0
        if fact.claim_type == "inference" or fact.confidence < MIN_CURRENT_CONFIDENCE:
            action, reason = "candidate", (
                "model inference" if fact.claim_type == "inference" else f"confidence {fact.confidence:.2f} below "
                f"{MIN_CURRENT_CONFIDENCE}")
        elif existing is None:
            action, reason = "create", "no current fact for this key"
        elif normalise_value(existing.value) == normalise_value(fact.value):
            action, reason = "confirm", "restated: evidence added to the current fact"
        else:
            action, reason = "supersede", f"new value replaces {existing.value!r} (explicit statement, newer)"
        decisions.append(FactDecision(action=action, namespace=fact.namespace, key=fact.key, value=fact.value,
                                      expected_version=expected, reason=reason, fact_index=index))
        if action in ("create", "supersede", "confirm"):
            state[ident] = CurrentFact(fact.namespace, fact.key, fact.value, expected + 1, fact.claim_type)
    return decisions
