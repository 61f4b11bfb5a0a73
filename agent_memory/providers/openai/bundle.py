"""The four OpenAI-compatible providers on one shared client."""

from __future__ import annotations

from dataclasses import dataclass

from openai import AsyncOpenAI

from agent_memory.providers.base import Embedder, FactExtractor, ImportanceScorer, Summarizer
from agent_memory.providers.openai.config import OpenAICompatibleConfig
from agent_memory.providers.openai.embedder import OpenAICompatibleEmbedder
from agent_memory.providers.openai.extractor import OpenAICompatibleExtractor
from agent_memory.providers.openai.importance import OpenAICompatibleImportanceScorer
from agent_memory.providers.openai.summarizer import OpenAICompatibleSummarizer


@dataclass(frozen=True)
class ProviderBundle:
    """Same field names as offline.OfflineProviders, typed by the protocols."""

    extractor: FactExtractor
    scorer: ImportanceScorer
    summarizer: Summarizer
    embedder: Embedder
    client: AsyncOpenAI | None = None

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.close()


def openai_providers(config: OpenAICompatibleConfig, client: AsyncOpenAI | None = None) -> ProviderBundle:
    """The four providers on one shared client (one connection pool)."""
    shared = client or config.client()
    return ProviderBundle(OpenAICompatibleExtractor(config, shared), OpenAICompatibleImportanceScorer(config, shared),
                          OpenAICompatibleSummarizer(config, shared), OpenAICompatibleEmbedder(config, shared),
                          client=shared)
