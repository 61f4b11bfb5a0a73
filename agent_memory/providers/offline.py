"""Deterministic offline providers: rule-based fact extraction, heuristic importance,
extractive summaries and feature-hashing embeddings.

They let the system run (and be tested) without a model endpoint. Everything is pure stdlib:
no network, no randomness and no built-in hash() (it is salted per process), so a replayed
activity gets byte-identical results in any worker.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from agent_memory.models import (
    ImportanceResult,
    Message,
    SummaryResult,
    SummarySentence,
)
from agent_memory.providers.base import SUMMARY_TOKEN_CAP, Embedder, estimate_tokens
from agent_memory.providers.embedders import local_embedder
from agent_memory.providers.hashing import _CJK_RUN, _LATIN_WORD, _STOPWORDS, HashingEmbedder
from agent_memory.providers.notes import write_observations
from agent_memory.providers.offline_rules import RuleFactExtractor, _extract_facts, _prepare

_CJK = "\u3400-\u9fff\uf900-\ufaff"
_TRAILING_IMAGE_TAGS = re.compile(r"(?:\s*\[image:[^\]]*\])+\s*$")

# Fact extraction lives in offline_rules; the scorer below reuses it.
__all__ = [
    "ExtractiveSummarizer",
    "HashingEmbedder",
    "HeuristicImportanceScorer",
    "OfflineProviders",
    "RuleFactExtractor",
    "offline_providers",
]


_LIFE_EVENT = re.compile(
    r"\b(?:moved|moving|relocat\w*|married|engaged|wedding|divorc\w*|new job|hired|promot\w*|fired|laid off|"
    r"quit my job|retired|born|pregnan\w*|gave birth|died|passed away|funeral|diagnos\w*|surgery|hospital\w*|"
    r"graduat\w*|accident|broke up|job offer|offer letter|accepted (?:an|the|their) offer|got the job|lost my job|"
    r"(?:start(?:ed|ing)?|begin|began) (?:a|my) new (?:job|role|position)|proposed to (?:me|her|him)|bought (?:a|our|my) (?:house|home|flat)|"
    r"bereave\w*|lost my (?:grand)?(?:mother|father|mom|mum|dad|ma|pa|wife|husband|son|daughter|brother|sister|"
    r"grandma|grandpa|best friend))\b|奔丧|丧事|离世|逝世|病逝|"
    r"搬家|搬到|搬去|结婚|订婚|离婚|新工作|换工作|找到工作|升职|辞职|被裁|裁员|退休|出生|入职|跳槽|录取|拿到了?[^,，。]{0,8}offer|"
    r"求婚|买房|怀孕|去世|过世|葬礼|确诊|诊断|手术|住院|毕业|分手|车祸", re.I)
_CONSTRAINT = re.compile(r"\b(?:allerg\w*|budget|must|deadline|can't afford)\b|预算|过敏|必须|不能", re.I)
_EMOTION = re.compile(r"\b(?:excited|thrilled|devastated|heartbroken|scared|anxious|worried|grateful|proud)\b|"
                      r"激动|难过|伤心|害怕|焦虑|担心|感激|骄傲", re.I)


class HeuristicImportanceScorer:
    name = "heuristic-importance"
    runs_in_worker = True  # computed in this process: its steps run as local activities
    version = "3"

    async def score(self, messages: list[Message]) -> ImportanceResult:
        text = "\n".join(_prepare(m.content) for m in messages if m.content.strip())
        if not text.strip():
            return ImportanceResult(provider=self.name, importance=1, rationale="no content")
        score, signals = 3, ["base 3"]
        events = sorted({e.lower() for e in _LIFE_EVENT.findall(text)})
        if events:
            points = min(5, 2 + len(events))
            score += points
            signals.append(f"life events {', '.join(events)} (+{points})")
        facts = _extract_facts(messages, "user")
        if facts:
            points = 1 if len(facts) < 3 else 2
            score += points
            signals.append(f"{len(facts)} first-person facts (+{points})")
        if any(f.namespace in {"preference", "dislike", "diet", "budget"} for f in facts) or _CONSTRAINT.search(text):
            score += 1
            signals.append("preference or constraint (+1)")
        if _EMOTION.search(text):
            score += 1
            signals.append("strong emotion (+1)")
        tokens = estimate_tokens(text)
        if tokens > 150:
            points = 1 if tokens <= 600 else 2
            score += points
            signals.append(f"length {tokens} tokens (+{points})")
        return ImportanceResult(provider=self.name, importance=max(1, min(10, score)), rationale="; ".join(signals))


_SUMMARY_SPLIT = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")


def _terms(text: str) -> set[str]:
    lower = text.lower()
    words = {w for w in _LATIN_WORD.findall(_CJK_RUN.sub(" ", lower))
             if len(w) >= 3 and w not in _STOPWORDS and "'" not in w}  # contractions are function words
    bigrams = {run[i:i + 2] for run in _CJK_RUN.findall(lower) for i in range(len(run) - 1)}
    return words | bigrams


def _salience(text: str, doc_freq: Counter[str], role: str) -> float:
    terms = _terms(text)
    score = sum(math.log1p(doc_freq[t]) for t in terms) / math.sqrt(max(1, len(terms)))
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


@dataclass(frozen=True)
class OfflineProviders:
    extractor: RuleFactExtractor
    scorer: HeuristicImportanceScorer
    summarizer: ExtractiveSummarizer
    embedder: Embedder


def offline_providers() -> OfflineProviders:
    """The offline bundle, with the default offline embedder (agent_memory.providers.embedders)."""
    embedder = local_embedder(None)
    assert embedder is not None  # offline: always a local embedder
    return OfflineProviders(RuleFactExtractor(), HeuristicImportanceScorer(), ExtractiveSummarizer(), embedder)
