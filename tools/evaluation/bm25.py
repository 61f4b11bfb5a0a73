"""Okapi BM25 over short documents (chat messages), the retrieval baseline of the evaluations.

Pure functions only: no I/O, no services.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from agent_memory.providers.base import estimate_tokens

K1 = 1.5
B = 0.75

# The same CJK ranges estimate_tokens counts as one token each.
_CJK = "\u3400-\u9fff\uf900-\ufaff"
_WORD = re.compile(r"\w+")
_RUNS = re.compile(rf"[{_CJK}]+|[^{_CJK}]+")
_CJK_RUN = re.compile(rf"[{_CJK}]")


def tokenize(text: str) -> list[str]:
    """Lowercase `\\w+` words after NFKC; a run of CJK characters becomes its character bigrams
    (a single CJK character stays a unigram)."""
    tokens: list[str] = []
    for word in _WORD.findall(unicodedata.normalize("NFKC", text).lower()):
        for run in _RUNS.findall(word):
            if _CJK_RUN.match(run):
                tokens.extend([run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)])
            else:
                tokens.append(run)
    return tokens


class BM25:
    """Okapi BM25 with the non-negative idf log(1 + (N - df + 0.5) / (df + 0.5)) (Lucene's)."""

    def __init__(self, documents: Sequence[Sequence[str]], *, k1: float = K1, b: float = B):
        self.k1 = k1
        self.b = b
        self.term_freqs = [Counter(doc) for doc in documents]
        self.lengths = [len(doc) for doc in documents]
        self.n = len(documents)
        self.avgdl = (sum(self.lengths) / self.n) if self.n else 0.0
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for i, tf in enumerate(self.term_freqs):
            for term, f in tf.items():
                self.postings.setdefault(term, []).append((i, f))
        self.idf = {term: math.log(1 + (self.n - len(p) + 0.5) / (len(p) + 0.5)) for term, p in self.postings.items()}

    def scores(self, query: Sequence[str]) -> list[float]:
        """One score per document; a query term repeated counts once per occurrence (Okapi's sum)."""
        out = [0.0] * self.n
        if not self.n or not self.avgdl:
            return out
        for term in query:
            if term not in self.postings:
                continue
            idf = self.idf[term]
            for i, f in self.postings[term]:
                norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avgdl)
                out[i] += idf * f * (self.k1 + 1) / (f + norm)
        return out

    def rank(self, query: Sequence[str]) -> list[tuple[int, float]]:
        """(document index, score) of the documents sharing a term with the query, best first;
        ties keep document order."""
        scored = [(i, s) for i, s in enumerate(self.scores(query)) if s > 0]
        return sorted(scored, key=lambda pair: (-pair[1], pair[0]))


@dataclass(frozen=True)
class Packed:
    indices: list[int]  # the packed documents, in rank order
    text: str  # their texts joined by newlines
    tokens: int  # the budget used: estimate_tokens(text) + 1 per document


def pack_ranked(texts: Sequence[str], ranked: Sequence[int], budget: int) -> Packed:
    """Greedy in rank order: take each document that still fits (estimate_tokens + 1 for the
    newline), so one long message never blocks the shorter ones after it."""
    chosen: list[int] = []
    used = 0
    for i in ranked:
        cost = estimate_tokens(texts[i]) + 1
        if used + cost <= budget:
            chosen.append(i)
            used += cost
    return Packed(indices=chosen, text="\n".join(texts[i] for i in chosen), tokens=used)
