"""The offline providers presented as remote ones: they compute the same answers, but do not say
they run in the worker's process, so a consolidation calls them as it calls a model (ordinary
activities on the model queue) — the production route, without a model server."""

from __future__ import annotations

from typing import Any, cast

from agent_memory.providers.offline import OfflineProviders, offline_providers


class _Remote:
    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.runs_in_worker = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def remote_model_providers() -> OfflineProviders:
    """The extractor, scorer and summarizer as a remote model's; the embedder stays in the worker."""
    p = offline_providers()
    return OfflineProviders(cast(Any, _Remote(p.extractor)), cast(Any, _Remote(p.scorer)),
                            cast(Any, _Remote(p.summarizer)), p.embedder)
