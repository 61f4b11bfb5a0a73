"""The providers a deployment runs, from its settings: AGENT_MEMORY_PROVIDER picks the offline
bundle (default) or the OpenAI-compatible one, and AGENT_MEMORY_EMBEDDER the embedder
(agent_memory.providers.embedders)."""

from __future__ import annotations

import dataclasses

from agent_memory.core.errors import InvalidInput
from agent_memory.core.settings import Settings
from agent_memory.providers.embedders import local_embedder
from agent_memory.providers.offline import OfflineProviders, offline_providers
from agent_memory.providers.openai.bundle import ProviderBundle, openai_providers
from agent_memory.providers.openai.config import OpenAICompatibleConfig


def providers_for(settings: Settings) -> OfflineProviders | ProviderBundle:
    """The provider bundle the settings select: offline (default) or openai-compatible, with the
    embedder AGENT_MEMORY_EMBEDDER names (agent_memory.providers.embedders) in place of the
    bundle's own when it names one."""
    kind = (getattr(settings, "provider", None) or "offline").strip().lower()
    embedder = local_embedder(getattr(settings, "embedder", None), provider=kind)
    bundle: OfflineProviders | ProviderBundle
    if kind == "offline":
        bundle = offline_providers()
    elif kind in ("openai", "openai-compatible", "openai_compatible"):
        bundle = openai_providers(OpenAICompatibleConfig.from_settings(settings))
    else:
        raise InvalidInput(f"unknown provider {kind!r}: use 'offline' or 'openai-compatible'")
    return dataclasses.replace(bundle, embedder=embedder) if embedder is not None else bundle
