"""The offline bundle: rule-based fact extraction, heuristic importance, extractive summaries and
the default local embedder."""

from __future__ import annotations

from dataclasses import dataclass

from agent_memory.providers.base import Embedder
from agent_memory.providers.embedders import local_embedder
from agent_memory.providers.offline.extractor import RuleFactExtractor
from agent_memory.providers.offline.importance import HeuristicImportanceScorer
from agent_memory.providers.offline.summarizer import ExtractiveSummarizer


@dataclass(frozen=True)
class OfflineProviders:
    extractor: RuleFactExtractor
    scorer: HeuristicImportanceScorer
    summarizer: ExtractiveSummarizer
    embedder: Embedder


def offline_providers() -> OfflineProviders:
    """The offline bundle, with the default offline embedder (agent_memory.providers.embedders)."""
    embedder = local_embedder(None)
    assert embedder is not None  # offline: always a local embedder
    return OfflineProviders(RuleFactExtractor(), HeuristicImportanceScorer(), ExtractiveSummarizer(), embedder)
