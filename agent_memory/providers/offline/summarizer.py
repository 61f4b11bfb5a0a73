"""Extractive summaries: the most salient sentences, verbatim, within a token cap, plus the
observations (agent_memory.providers.notes)."""

from __future__ import annotations

import math
import re
from collections import Counter

from agent_memory.core.models import Message, SummaryResult, SummarySentence
from agent_memory.providers.base import SUMMARY_TOKEN_CAP, estimate_tokens
from agent_memory.providers.hashing import _CJK_RUN, _LATIN_WORD, _STOPWORDS
from agent_memory.providers.notes import write_observations

_CJK = "\u3400-\u9fff\uf900-\ufaff"
_TRAILING_IMAGE_TAGS = re.compile(r"(?:\s*\[image:[^\]]*\])+\s*$")


_SUMMARY_SPLIT = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")


def _terms(text: str) -> set[str]:
    lower = text.lower()
    words = {w for w in _LATIN_WORD.findall(_CJK_RUN.sub(" ", lower))
             if len(w) >= 3 and w not in _STOPWORDS and "'" not in w}  # contractions are function words
    bigrams = {run[i:i + 2] for run in _CJK_RUN.findall(lower) for i in range(len(run) - 1)}
    return words | bigrams


def _salience(text: str, doc_freq: Counter[str], role: str) -> float:
    terms = _terms(text)
    # Summed in a fixed order: a set iterates in a per-process order and float addition is not
    # associative, so a near tie would otherwise break differently in another worker.
    score = sum(math.log1p(doc_freq[t]) for t in sorted(terms)) / math.sqrt(max(1, len(terms)))
    if re.search(r"\b(?:I|I'm|I've|my|me)\b|我", text):
        score += 1.0
    score += 0.5 * min(3, len(re.findall(r"(?<=\s)[A-Z][a-z]+", text)))  # capitalised, not sentence-initial
    if re.search(r"\d|[一二三四五六七八九十]月|星期|周[一二三四五六日]", text):
        score += 0.7
    if role == "user":
        score += 0.3
    if len(terms) < 2:
        score -= 1.5  # "ok", "Thanks!" carry nothing
    if text.rstrip().endswith(("?", "？")):
        score -= 0.5
    return score


def _truncate(prefix: str, text: str, cap: int) -> str:
    """Longest prefix of text, cut at a word boundary (or between CJK characters), that fits."""
    cjk = re.compile(f"[{_CJK}]")
    cuts = [i for i in range(1, len(text) + 1)
            if i == len(text) or text[i].isspace() or cjk.match(text[i - 1]) or cjk.match(text[i])]
    best = ""
    for i in cuts:
        piece = text[:i].rstrip()
        if estimate_tokens(prefix + piece) > cap:
            break
        best = piece
    if not best:  # one unbroken token longer than the cap (a URL): cut between characters
        for i in range(1, len(text) + 1):
            if estimate_tokens(prefix + text[:i]) > cap:
                break
            best = text[:i]
    return best.rstrip()


class ExtractiveSummarizer:
    name = "extractive-summarizer"
    runs_in_worker = True  # computed in this process: its steps run as local activities
    version = "4"  # 2: observations; 3: with the question they answer; 4: greetings no longer hide statements

    async def summarize(self, messages: list[Message], *, token_cap: int = SUMMARY_TOKEN_CAP) -> SummaryResult:
        candidates: list[tuple[int, str, str, Message]] = []  # (order, prefix, sentence, message)
        for message in messages:
            # Only trailing image tags are dropped, so every sentence stays a verbatim substring.
            content = _TRAILING_IMAGE_TAGS.sub("", message.content)
            prefix = f"{message.speaker}: " if message.speaker else ""
            for sentence in _SUMMARY_SPLIT.split(content):
                sentence = sentence.strip()
                if re.search(r"\w", sentence):
                    candidates.append((len(candidates), prefix, sentence, message))
        if not candidates or token_cap <= 0:
            return SummaryResult(provider=self.name, sentences=[], token_count=0,
                                 observations=write_observations(messages))
        doc_freq: Counter[str] = Counter(t for _, _, s, _ in candidates for t in _terms(s))
        # "ok", "Thanks!", "It's fine." would only pad the cap; keep them out unless nothing else exists.
        pool = [c for c in candidates if len(_terms(c[2])) >= 2] or candidates
        ranked = sorted(pool, key=lambda c: (-_salience(c[2], doc_freq, c[3].role), c[0]))

        def joined(chosen: list[tuple[int, str, str, Message]]) -> str:
            return " ".join(p + s for _, p, s, _ in sorted(chosen, key=lambda c: c[0]))

        chosen: list[tuple[int, str, str, Message]] = []
        for candidate in ranked:  # greedy by salience; re-estimate the whole text, the estimate is not additive
            if estimate_tokens(joined([*chosen, candidate])) <= token_cap:
                chosen.append(candidate)
        if not chosen:
            order, prefix, sentence, message = ranked[0]
            piece = _truncate(prefix, sentence, token_cap)
            if not piece:
                prefix = ""  # a speaker name is dispensable, the words are not
                piece = _truncate(prefix, sentence, token_cap)
            if piece:
                chosen = [(order, prefix, piece, message)]
        chosen.sort(key=lambda c: c[0])
        sentences = [SummarySentence(text=p + s, source_message_ids=[m.message_id]) for _, p, s, m in chosen]
        return SummaryResult(provider=self.name, sentences=sentences, token_count=estimate_tokens(joined(chosen)),
                             observations=write_observations(messages))
