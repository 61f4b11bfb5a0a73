"""Embeddings from an OpenAI-compatible server: exactly the stored number of floats per text
(base64 decoded, a wider model's vector truncated and renormalised when configured)."""

from __future__ import annotations

import base64
import math
import struct
from typing import Any

from openai import AsyncOpenAI

from agent_memory.core.models import EmbeddingResult
from agent_memory.providers.base import EMBEDDING_DIMENSIONS
from agent_memory.providers.errors import ProviderOutputInvalid
from agent_memory.providers.openai.config import OpenAICompatibleConfig
from agent_memory.providers.openai.provider import PROVIDER_PREFIX, OpenAICompatibleProvider, safe_model_name
from agent_memory.providers.openai.usage import with_cost

# The embedder's own version (no prompt): a new prompt must not re-embed every memory. It was
# PROMPT_VERSION "1" when both were one.
EMBEDDER_VERSION = "1"


def _vector(embedding: Any, dimensions: int, index: int, errors: list[str], *,
            truncate: bool = False) -> list[float] | None:
    if isinstance(embedding, str):  # base64 float32 from a server that ignored encoding_format=float
        try:
            data = base64.b64decode(embedding)
            embedding = list(struct.unpack(f"<{len(data) // 4}f", data[: len(data) // 4 * 4]))
        except (ValueError, struct.error):
            errors.append(f"data.{index}.embedding: undecodable base64")
            return None
    if not isinstance(embedding, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                  for v in embedding):
        errors.append(f"data.{index}.embedding: not a list of numbers")
        return None
    if truncate and len(embedding) > dimensions:  # a wider model: its first dimensions, unit length again
        head = [float(v) for v in embedding[:dimensions]]
        norm = math.sqrt(sum(v * v for v in head))
        embedding = [v / norm for v in head] if norm > 0 and math.isfinite(norm) else head
    if len(embedding) != dimensions:
        errors.append(f"data.{index}.embedding: {len(embedding)} dimensions, expected {dimensions}")
        return None
    vector = [float(v) for v in embedding]
    if not all(math.isfinite(v) for v in vector):
        errors.append(f"data.{index}.embedding: non-finite values")
        return None
    return vector


class OpenAICompatibleEmbedder(OpenAICompatibleProvider):
    task = "embedder"
    dimensions = EMBEDDING_DIMENSIONS

    def __init__(self, config: OpenAICompatibleConfig, client: AsyncOpenAI | None = None):
        super().__init__(config, client)
        self.dimensions = config.embedding_dimensions
        self.version = f"{EMBEDDER_VERSION}-{safe_model_name(config.embedding_model)}-{self.dimensions}"

    @property
    def model(self) -> str:
        return f"{self.config.embedding_model}-{self.dimensions}"

    @property
    def model_label(self) -> str:
        return f"{PROVIDER_PREFIX}:{self.config.embedding_model}"

    async def embed(self, texts: list[str]) -> EmbeddingResult:
        cfg = self.config
        model_label = self.model
        if not texts:
            return EmbeddingResult(provider=f"{PROVIDER_PREFIX}:{cfg.embedding_model}", model=model_label, vectors=[])
        kwargs: dict[str, Any] = {"dimensions": self.dimensions} if cfg.send_dimensions else {}
        raw = await self._call(lambda: self._client.embeddings.with_raw_response.create(
            model=cfg.embedding_model, input=list(texts), encoding_format="float", **kwargs))
        response = raw.parse()
        usage = self._usage(cfg.embedding_model, raw, None, response.usage, cfg.embedding_prices)
        rows = sorted(response.data or [], key=lambda d: d.index)
        errors: list[str] = []
        if len(rows) != len(texts) or [d.index for d in rows] != list(range(len(texts))):
            errors.append(f"data: {len(rows)} embeddings for {len(texts)} inputs")
        vectors = [_vector(d.embedding, self.dimensions, d.index, errors, truncate=cfg.truncate_dimensions)
                   for d in rows]
        if errors:
            raise ProviderOutputInvalid(raw.text[:20_000], errors)
        return with_cost(EmbeddingResult, usage.cost_usd, provider=usage.provider,
                         provider_request_id=usage.request_id, input_tokens=usage.input_tokens, output_tokens=0,
                         model=model_label, vectors=vectors)
