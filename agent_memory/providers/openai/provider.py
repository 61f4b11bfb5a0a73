"""What every OpenAI-compatible provider shares: its client (shared or its own), the mapping of
the client's failures onto agent_memory.providers.errors, and the usage of each call."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from openai import AsyncOpenAI, OpenAIError

from agent_memory.providers.errors import classify_openai_error
from agent_memory.providers.openai.config import OpenAICompatibleConfig
from agent_memory.providers.openai.usage import TokenPrices, Usage, estimate_cost

log = logging.getLogger(__name__)

PROVIDER_PREFIX = "openai-compatible"


def safe_model_name(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model)[:80]


class OpenAICompatibleProvider:
    task = "task"
    runs_in_worker = False  # a network call: its steps are ordinary activities, heartbeated by the server

    def __init__(self, config: OpenAICompatibleConfig, client: AsyncOpenAI | None = None):
        self.config = config
        self._client = client or config.client()
        self._owns_client = client is None
        self.name = f"{PROVIDER_PREFIX}-{self.task}"

    @property
    def model_label(self) -> str:
        """The model this provider calls, as its results' `provider` names it (the metrics' label)."""
        return f"{PROVIDER_PREFIX}:{self.config.chat_model}"

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.close()

    async def _call(self, request: Callable[[], Awaitable[Any]]) -> Any:
        try:
            return await request()
        except OpenAIError as exc:
            mapped = classify_openai_error(exc)
            if mapped is exc:
                raise
            raise mapped from exc

    def _usage(self, model: str, raw: Any, body_id: str | None, usage: Any, prices: TokenPrices) -> Usage:
        input_tokens = int(getattr(usage, "prompt_tokens", 0) or 0) if usage is not None else 0
        output_tokens = int(getattr(usage, "completion_tokens", 0) or 0) if usage is not None else 0
        request_id = raw.headers.get("x-request-id") or body_id or None
        cost = estimate_cost({"input_tokens": input_tokens, "output_tokens": output_tokens}, prices)
        provider = f"{PROVIDER_PREFIX}:{model}"
        log.info("provider call %s task=%s request_id=%s input_tokens=%d output_tokens=%d cost_usd=%.6f",
                 provider, self.task, request_id, input_tokens, output_tokens, cost)
        return Usage(provider, request_id, input_tokens, output_tokens, cost)
