"""Focusing a note on the query (agent_memory.recall.context.focus): the sentences that share a word
with the query, and the one after each. The shortcut that skips sentences without a word starting
with a query term must keep exactly what stemming every sentence keeps."""

from __future__ import annotations

import random

from agent_memory.recall.context import _SENTENCE, _terms, focus

WORDS = ("paint", "painting", "painted", "paints", "sunset", "sunsets", "garden", "gardening", "Lisbon", "hike",
         "hiking", "hiked", "the", "of", "was", "dog", "dogs", "cat", "café", "naïve", "über", "北京", "北京大学",
         "photo", "e-mail", "x", "is", "ring", "rings", "bed", "beds")
ENDS = (".", "!", "?", "。", "")


def plain_focus(body: str, query_terms: set[str], speaker_terms: set[str]) -> str:
    """The definition: stem every sentence and keep those sharing a term with the query."""
    sentences = [x for x in _SENTENCE.split(body) if x.strip()]
    if len(sentences) <= 1:
        return body
    wanted = query_terms - speaker_terms
    hits = [i for i, x in enumerate(sentences) if _terms(x) & wanted] or [0]
    keep = sorted({j for i in hits for j in (i, i + 1) if j < len(sentences)})
    return " ".join(sentences[j] for j in keep)


def test_focus_keeps_the_matching_sentence_and_the_next():
    body = "We went out. She painted a sunset. It was orange. Then we ate."
    assert focus(body, _terms("what did she paint?"), set()) == "She painted a sunset. It was orange."
    # No sentence matches: the first one stays (and the one after it).
    assert focus(body, _terms("which city?"), set()) == "We went out. She painted a sunset."
    # The speaker's own name is no match.
    assert focus("Mel said hi. Mel went home. We ate. Bye.", _terms("Mel"), _terms("Mel")) == (
        "Mel said hi. Mel went home.")


def test_focus_keeps_what_stemming_every_sentence_keeps():
    rng = random.Random(13)
    for _ in range(3000):
        body = " ".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) + rng.choice(ENDS)
                        for _ in range(rng.randint(1, 5)))
        if rng.random() < 0.1:
            body += " [photo: a dog on a beach]"
        query = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 4)))
        speaker = rng.choice(WORDS)
        assert focus(body, _terms(query), _terms(speaker)) == plain_focus(body, _terms(query), _terms(speaker)), (
            body, query, speaker)
