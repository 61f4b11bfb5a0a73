"""Provider interfaces. The offline providers implement them today; the OpenAI-compatible
provider implements the same protocols, so activities never know which one they call."""

from __future__ import annotations

import re
from typing import Protocol

from agent_memory.core.models import (
    EmbeddingResult,
    ExtractionResult,
    ImportanceResult,
    KnownFact,
    Message,
    SummaryResult,
)

# One dimension per deployment: the pgvector column and its HNSW index are typed with it, and
# remote embedders are asked for this many dimensions.
EMBEDDING_DIMENSIONS = 384
SUMMARY_TOKEN_CAP = 160


class FactExtractor(Protocol):
    name: str
    version: str

    async def extract(self, messages: list[Message], *, subject_role: str = "user",
                      current_facts: list[KnownFact] | None = None) -> ExtractionResult:
        """Facts the subject states about themselves, each citing its evidence message ids, as
        operations (`ExtractedFact.operation`) on the subject's `current_facts`. An extractor may
        ignore the current facts; it must accept them."""


class ImportanceScorer(Protocol):
    name: str
    version: str

    async def score(self, messages: list[Message]) -> ImportanceResult: ...


class Summarizer(Protocol):
    name: str
    version: str

    async def summarize(self, messages: list[Message], *, token_cap: int = SUMMARY_TOKEN_CAP) -> SummaryResult: ...


class Embedder(Protocol):
    name: str
    version: str
    dimensions: int

    async def embed(self, texts: list[str]) -> EmbeddingResult: ...


def runs_in_worker(provider: object) -> bool:
    """Whether a provider computes in the worker's own process, with no network call (the offline
    extractor, scorer and summarizer; the hashing and e5 embedders): the workflows run its steps
    as local activities, one marker event each instead of a task round trip through the server. A
    provider that does not say so (a remote API, a wrapper) is treated as remote: its steps are
    ordinary activities, retried, heartbeated and timed out by the server."""
    return getattr(provider, "runs_in_worker", False) is True


_CJK_CHAR = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def estimate_tokens(text: str) -> int:
    """CJK characters count one token each, other characters a quarter (the bench's rule)."""
    # Counted by a regex, and not at all in ASCII text: a context packs ~250 items per query, and a
    # loop over each character was ~8% of the assembly's Python time.
    cjk = 0 if text.isascii() else len(_CJK_CHAR.findall(text))
    return cjk + (len(text) - cjk + 3) // 4
