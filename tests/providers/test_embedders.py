"""Embedder selection (AGENT_MEMORY_EMBEDDER) and the in-process e5-small embedder."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from pydantic import ValidationError

from agent_memory.core.models import EmbeddingResult
from agent_memory.core.settings import Settings
from agent_memory.providers.base import EMBEDDING_DIMENSIONS
from agent_memory.providers.e5 import E5SmallEmbedder
from agent_memory.providers.embedders import OFFLINE_DEFAULT, local_embedder
from agent_memory.providers.factory import providers_for
from agent_memory.providers.hashing import HashingEmbedder
from agent_memory.recall.recall import embed_query


def test_the_setting_selects_the_embedder_and_a_bad_one_is_named():
    assert OFFLINE_DEFAULT == "e5-small" and isinstance(local_embedder(None), E5SmallEmbedder)
    assert isinstance(local_embedder("hashing"), HashingEmbedder)
    assert local_embedder(None, provider="openai-compatible") is None  # its remote model
    with pytest.raises(ValueError, match=r"AGENT_MEMORY_EMBEDDER='bert'.*hashing, e5-small, remote"):
        local_embedder("bert")
    with pytest.raises(ValueError, match="remote needs AGENT_MEMORY_PROVIDER=openai-compatible"):
        local_embedder("remote")
    hashing = Settings.from_env({"AGENT_MEMORY_HOME": "/tmp/x", "AGENT_MEMORY_EMBEDDER": "hashing"})
    assert isinstance(providers_for(hashing).embedder, HashingEmbedder)
    remote = Settings.from_env({"AGENT_MEMORY_HOME": "/tmp/x", "AGENT_MEMORY_PROVIDER": "openai-compatible",
                                "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "AGENT_MEMORY_CHAT_MODEL": "m",
                                "AGENT_MEMORY_EMBEDDING_MODEL": "e", "AGENT_MEMORY_EMBEDDER": "e5-small"})
    assert isinstance(providers_for(remote).embedder, E5SmallEmbedder)  # a local embedder beside a remote chat model


async def test_e5_embeds_passages_and_queries_into_one_space_across_languages():
    e5 = E5SmallEmbedder()
    passages = await e5.embed(["I adopted a beagle puppy last week.", "The quarterly budget review is on Monday.",
                               "我上周领养了一只小猎犬。"])
    assert passages.model == e5.model and len(passages.vectors) == 3
    assert all(len(v) == EMBEDDING_DIMENSIONS for v in passages.vectors)
    matrix = np.array(passages.vectors)
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-3)
    query = await embed_query(e5, "what kind of dog did I get?")  # the read path uses the query prefix
    scores = matrix @ np.array(query.vectors[0])
    assert scores[0] > scores[1] and scores[2] > scores[1]  # meaning, not shared words; Chinese too
    assert (await e5.embed([])).vectors == []
    again = await e5.embed(["I adopted a beagle puppy last week."])
    assert np.allclose(again.vectors[0], passages.vectors[0], atol=1e-5)  # deterministic


def test_a_recorded_embedding_is_packed_as_float32_and_older_records_still_read():
    """Recorded results hold float32 vectors as base64 (what pgvector stores, a third of the JSON
    list's size); a record written before as a list of numbers is read as it was."""
    live = EmbeddingResult(model="m", vectors=[[0.1, -0.25, 1e-3], [1.0]])
    recorded = live.model_dump(mode="json")
    assert list(recorded["vectors"]) == ["float32_base64"]
    as_float32 = [[struct.unpack("<f", struct.pack("<f", x))[0] for x in v] for v in live.vectors]
    assert EmbeddingResult.model_validate(recorded).vectors == as_float32
    assert EmbeddingResult.model_validate_json(live.model_dump_json()).vectors == as_float32
    assert EmbeddingResult.model_validate({**recorded, "vectors": [[0.5, 0.25]]}).vectors == [[0.5, 0.25]]
    with pytest.raises(ValidationError, match="multiple of 4"):
        EmbeddingResult.model_validate({**recorded, "vectors": {"float32_base64": ["AAA="]}})
