"""Chinese word segmentation for the offline extractor (jieba, whose dictionary ships in its
wheel: nothing is downloaded).

The rules find where a value starts ("搬到" + …); the segmenter finds where it ends, so "合肥快一年了"
gives 合肥 and "健身房那种氛围" gives 健身房 without a list of words that may follow a value.
jieba's part-of-speech tags also say whether a word is a person's name (nr).

jieba builds a cache of its dictionary on first use; it goes to a directory private to the
user, never to a shared /tmp file.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_tokenizer: Any = None

# Tags of words a value may consist of: nouns of every kind, place and organisation names, person
# names, foreign words, abbreviations (j), and unknown words jieba's HMM found (x is punctuation).
NOUN_TAGS = frozenset({"n", "ns", "nr", "nrt", "nrfg", "nt", "nz", "ng", "nw", "j", "eng", "an", "vn", "s"})
PERSON_TAGS = frozenset({"nr", "nrfg", "nrt"})


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    path = Path(base) / "agent-memory" / "jieba"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def _posseg() -> Any:
    global _tokenizer
    with _lock:
        if _tokenizer is None:
            import jieba
            import jieba.posseg

            jieba.setLogLevel(logging.WARNING)
            jieba.dt.tmp_dir = str(_cache_dir())
            jieba.dt.initialize()
            _tokenizer = jieba.posseg.POSTokenizer(jieba.dt)
        return _tokenizer


@lru_cache(maxsize=4096)
def tagged(text: str) -> tuple[tuple[str, str], ...]:
    """(word, tag) pairs of the text; deterministic for a given jieba dictionary."""
    return tuple((pair.word, pair.flag) for pair in _posseg().cut(text))


# Tags of words that end a name: particles, modal words, adverbs, prepositions, conjunctions,
# pronouns, time words, numerals and measure words, adjectives, interjections.
FUNCTION_TAGS = frozenset({"ul", "uj", "uz", "ud", "ug", "uv", "y", "d", "p", "c", "r", "t", "m", "q", "mq", "f",
                           "e", "o", "zg", "a", "ad", "ag", "u"})


def leading_noun(value: str) -> str:
    """The name a captured value starts with: the value up to the first function word after at
    least two characters ("合肥快一年" -> 合肥, "健身房那种氛围" -> 健身房, "无锡啊不对" -> 无锡). Names
    jieba does not know stay whole ("米哈游了" -> 米哈游): only a function word cuts."""
    words = tagged(value)
    if not words or words[0][1] not in NOUN_TAGS | {"x", "nrt"}:
        return value  # not a noun to start with (饿了么 is a name jieba reads as a verb): leave it whole
    kept = ""
    for word, tag in words:
        if len(kept) >= 2 and tag in FUNCTION_TAGS:
            break
        kept += word
    return kept or value


def could_be_a_name(value: str) -> bool:
    """Whether a short value can be a pet's or a person's name: jieba tags names unreliably (可乐 is
    an adjective to it, 咪咪 an onomatopoeia), so only a time word, a verb, an adverb, a pronoun or a
    particle rules it out ("今天累", "讨厌", "老伴前年")."""
    return not any(tag in {"t", "v", "vd", "d", "p", "r", "ul", "uj", "y", "c"} for _, tag in tagged(value))


def names_a_person(text: str) -> bool:
    """Whether the text names a person (jieba's nr tags, minus its habit of reading 周三 or 月底 as names)."""
    return any(tag in PERSON_TAGS and 2 <= len(word) <= 3 and not re.search("[周月日年天号点]", word)
               for word, tag in tagged(text))


def is_place_word(value: str) -> bool:
    """Whether jieba reads the value as one place word (美国, 国外), not an organisation (华为, 腾讯)."""
    words = tagged(value)
    return len(words) == 1 and words[0][1] in {"ns", "s"}
