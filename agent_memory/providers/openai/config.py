"""The configuration of an OpenAI-compatible server (endpoint, models, prices, the output's bounds)
and the client built from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from openai import AsyncOpenAI

from agent_memory.core import contract
from agent_memory.core.errors import InvalidInput
from agent_memory.core.settings import Settings
from agent_memory.providers.base import EMBEDDING_DIMENSIONS
from agent_memory.providers.openai.usage import TokenPrices

ResponseFormat = Literal["json_schema", "json_object", "none"]


# A call's client timeout fits twice in a provider activity (contract.PROVIDER_STEP): a second chunk, or a
# retry that first waits out a dead attempt's claim (operations.CLAIM_LEASE), still finishes in it.
MAX_TIMEOUT_SECONDS = contract.PROVIDER_STEP.start_to_close.total_seconds() / 2


@dataclass(frozen=True)
class OpenAICompatibleConfig:
    base_url: str  # e.g. https://api.openai.com/v1, http://vllm:8000/v1, http://ollama:11434/v1
    api_key: str  # any non-empty string for servers without authentication
    chat_model: str
    embedding_model: str
    timeout_seconds: float = 60.0  # per call; a small local model on a busy machine needs 300 (workers/local_model.py)
    input_price_per_1k: float = 0.0  # USD per 1000 prompt tokens of the chat model
    output_price_per_1k: float = 0.0  # USD per 1000 completion tokens of the chat model
    embedding_price_per_1k: float = 0.0  # USD per 1000 input tokens of the embedding model
    # "json_schema": strict structured output (OpenAI, vLLM, Ollama >= 0.5); "json_object" or
    # "none" for servers without it (the schema is then spelled out in the prompt).
    response_format: ResponseFormat = "json_schema"
    send_dimensions: bool = True  # False for embedding servers that reject the `dimensions` parameter
    # The stored width (AGENT_MEMORY_EMBEDDING_DIMENSIONS); a change is a model change: re-embedding.
    embedding_dimensions: int = EMBEDDING_DIMENSIONS
    temperature: float | None = 0.0  # None: not sent (models that only accept their default)
    max_tokens: int | None = None  # None: not sent (the server's default); small local models need >= 600
    # None: not sent. A small model decoding greedily under a grammar repeats itself inside a string
    # until max_tokens; a penalty on repeated tokens ends the loop.
    frequency_penalty: float | None = None
    # Facts one extraction call may return, sentences one summary may have, ids one fact, entity or
    # sentence may cite, entities and relations one extraction call may return (None: the schemas'
    # bounds, 10, 6, 4, 12 and 8): a small model under a grammar fills every array to its bound,
    # spending ~175 tokens a fact, ~75 an entity and ~70 a relation (SmolLM2's tokens, measured), so
    # the bounds' worst case must fit max_tokens or the JSON is cut off.
    max_facts: int | None = None
    max_sentences: int | None = None
    max_citations: int | None = None
    max_entities: int | None = None
    max_relations: int | None = None
    # Cited ids as an enum of the chunk's message ids: a small model under a grammar otherwise makes
    # ids up, and may loop inside one until max_tokens. Off by default: remote APIs limit enum sizes.
    cite_from_enum: bool = False
    # An embedding server without the `dimensions` parameter whose model is wider than the store
    # (a local llama-server): keep the first EMBEDDING_DIMENSIONS values, renormalised to unit length.
    truncate_dimensions: bool = False
    # The chat model's context window in tokens (None: unbounded): a longer conversation is sent in
    # consecutive chunks that each fit, and the extracted facts are merged.
    context_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("base_url", "chat_model", "embedding_model"):
            if not getattr(self, name):
                raise InvalidInput(f"OpenAICompatibleConfig.{name} is required")
        if not (self.timeout_seconds > 0):
            raise InvalidInput("OpenAICompatibleConfig.timeout_seconds must be positive")
        if self.timeout_seconds > MAX_TIMEOUT_SECONDS:  # the activity would time out before the client does
            raise InvalidInput(f"OpenAICompatibleConfig.timeout_seconds must be at most {MAX_TIMEOUT_SECONDS:.0f} "
                               "(half the provider activity's start-to-close timeout, contract.PROVIDER_STEP)")
        if self.response_format not in ("json_schema", "json_object", "none"):
            raise InvalidInput(f"unknown response_format {self.response_format!r}")

    @property
    def chat_prices(self) -> TokenPrices:
        return TokenPrices(self.input_price_per_1k, self.output_price_per_1k)

    @property
    def embedding_prices(self) -> TokenPrices:
        return TokenPrices(self.embedding_price_per_1k, 0.0)

    def __repr__(self) -> str:  # never print the key
        return (f"OpenAICompatibleConfig(base_url={self.base_url!r}, chat_model={self.chat_model!r}, "
                f"embedding_model={self.embedding_model!r}, timeout_seconds={self.timeout_seconds})")

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAICompatibleConfig:
        """From the deployment's settings (an unset model is refused like an empty one)."""
        return cls(
            base_url=settings.openai_base_url or "https://api.openai.com/v1",
            api_key=settings.openai_api_key or "not-needed",
            chat_model=settings.chat_model or "",
            embedding_model=settings.embedding_model or "",
            timeout_seconds=settings.provider_timeout_seconds,
            input_price_per_1k=settings.input_price_per_1k,
            output_price_per_1k=settings.output_price_per_1k,
            embedding_price_per_1k=getattr(settings, "embedding_price_per_1k", 0.0),
            embedding_dimensions=getattr(settings, "embedding_dimensions", EMBEDDING_DIMENSIONS),
        )

    def client(self) -> AsyncOpenAI:
        # Temporal's retry policy owns retries: the client must never retry on its own.
        return AsyncOpenAI(base_url=self.base_url, api_key=self.api_key or "not-needed", max_retries=0,
                           timeout=self.timeout_seconds)
