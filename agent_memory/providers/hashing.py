"""The hashing embedder: character n-grams, words and CJK bigrams hashed into 384 dimensions.
Near-lexical, deterministic, instant; no model (AGENT_MEMORY_EMBEDDER=hashing)."""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections import Counter
from functools import lru_cache

from agent_memory.core.models import EmbeddingResult
from agent_memory.providers.base import EMBEDDING_DIMENSIONS

_CJK = "\u3400-\u9fff\uf900-\ufaff"
_STOPWORDS = frozenset(
    "a an the and or but if then so of to in on at by for with from as is am are was were be been being it its "
    "this that these those i me my we our you your he him his she her they them their what which who whom do does "
    "did have has had not no yes just very really too also can could would should will shall may might must about "
    "into over than there here when where why how all any some more most such only own same other out up down off "
    "again once ok okay oh yeah hi hello thanks thank well like get got go going know think".split())
_LATIN_WORD = re.compile(r"[^\W\d_][^\W_]*(?:'[^\W_]+)?|\d+")
_CJK_RUN = re.compile(f"[{_CJK}]+")


# Feature weights: whole words and CJK bigrams carry meaning; n-grams and single CJK characters
# add robustness to inflection and segmentation at a lower weight.
_WEIGHTS = {"w": 1.0, "g": 0.35, "b": 1.0, "u": 0.5}


@lru_cache(maxsize=65536)
def _slot(feature: str, dimensions: int) -> tuple[int, float]:
    h = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
    return h % dimensions, (1.0 if (h >> 63) & 1 == 0 else -1.0)


def _features(text: str) -> Counter[str]:
    lower = unicodedata.normalize("NFKC", text).lower()
    feats: Counter[str] = Counter()
    for run in _CJK_RUN.findall(lower):
        feats.update("u:" + ch for ch in run)
        feats.update("b:" + run[i:i + 2] for i in range(len(run) - 1))
    words = _LATIN_WORD.findall(_CJK_RUN.sub(" ", lower))
    content = [w for w in words if w not in _STOPWORDS] or words  # keep stopwords only if nothing else
    for word in content:
        feats["w:" + word] += 1
        padded = f"<{word}>"
        if len(word) > 2 and not word.isdigit():
            feats.update("g:" + padded[i:i + n] for n in (3, 4) for i in range(len(padded) - n + 1))
    return feats


class HashingEmbedder:
    name = "hashing-embedder"
    runs_in_worker = True  # computed in this process: its steps run as local activities
    version = "1"
    dimensions = EMBEDDING_DIMENSIONS

    @property
    def model(self) -> str:
        return f"{self.name}-v{self.version}-{self.dimensions}"

    def _vector(self, text: str) -> list[float]:
        vec = [0.0] * self.dimensions
        for feature, tf in sorted(_features(text).items()):  # sorted: identical float summation order
            index, sign = _slot(feature, self.dimensions)
            vec[index] += sign * _WEIGHTS[feature[0]] * (1.0 + math.log(tf))
        norm = math.sqrt(sum(v * v for v in vec))
        return [v / norm for v in vec] if norm > 0 else vec

    async def embed(self, texts: list[str]) -> EmbeddingResult:
        return EmbeddingResult(provider=self.name, model=self.model,
                               vectors=[self._vector(t) for t in texts])
