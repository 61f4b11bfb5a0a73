"""Deterministic offline providers: rule-based fact extraction, heuristic importance,
extractive summaries and feature-hashing embeddings.

They let the system run (and be tested) without a model endpoint. Everything is pure stdlib:
no network, no randomness and no built-in hash() (it is salted per process), so a replayed
activity gets byte-identical results in any worker.
"""

from agent_memory.providers.hashing import HashingEmbedder
from agent_memory.providers.offline.extractor import RuleFactExtractor
from agent_memory.providers.offline.importance import HeuristicImportanceScorer
from agent_memory.providers.offline.providers import OfflineProviders, offline_providers
from agent_memory.providers.offline.summarizer import ExtractiveSummarizer

__all__ = [
    "ExtractiveSummarizer",
    "HashingEmbedder",
    "HeuristicImportanceScorer",
    "OfflineProviders",
    "RuleFactExtractor",
    "offline_providers",
]
