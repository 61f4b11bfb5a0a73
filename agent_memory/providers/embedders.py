"""Which embedder a deployment runs: AGENT_MEMORY_EMBEDDER.

- `hashing`: character n-grams hashed into 384 dimensions (agent_memory.providers.offline);
  near-lexical, instant, no model.
- `e5-small`: multilingual-e5-small, 4-bit, in process (agent_memory.providers.e5); semantic,
  English and Chinese, ~100 texts/s on one core.
- `remote`: the openai-compatible provider's embedding model (AGENT_MEMORY_EMBEDDING_MODEL).

Unset: the offline provider uses `OFFLINE_DEFAULT`, the openai-compatible one its remote model.
Every vector row stores the model id, and recall only compares vectors of the model it embeds the
query with: switching embedders is a re-embedding (`agent-memory rebuild --force` re-projects),
never a silent mix of vector spaces.
"""

from __future__ import annotations

from agent_memory.core.errors import InvalidInput
from agent_memory.providers.base import Embedder

EMBEDDERS = ("hashing", "e5-small", "remote")
# Measured side by side on locomo-dev (docs/recall.md, "Embedders"): e5-small lifts evidence fraction and
# answer coverage over hashing at about a fifth of the ingest throughput.
OFFLINE_DEFAULT = "e5-small"


def local_embedder(name: str | None, *, provider: str = "offline") -> Embedder | None:
    """The embedder `name` selects; None: the provider bundle's own (remote) embedder."""
    offline = provider.strip().lower() == "offline"
    choice = (name or "").strip().lower() or (OFFLINE_DEFAULT if offline else "remote")
    if choice == "hashing":
        from agent_memory.providers.hashing import HashingEmbedder

        return HashingEmbedder()
    if choice == "e5-small":
        from agent_memory.providers.e5 import E5SmallEmbedder

        return E5SmallEmbedder()
    if choice == "remote" and not offline:
        return None
    if choice == "remote":
        raise InvalidInput("AGENT_MEMORY_EMBEDDER=remote needs AGENT_MEMORY_PROVIDER=openai-compatible; "
                           "offline, use 'hashing' or 'e5-small'")
    raise InvalidInput(f"AGENT_MEMORY_EMBEDDER={name!r} is not an embedder: use one of {', '.join(EMBEDDERS)}")
