"""Heuristic importance: a session scored 1-10 from life events, first-person facts (read by the
rule extractor), preferences and constraints, strong emotion and length."""

from __future__ import annotations

import re

from agent_memory.core.models import ImportanceResult, Message
from agent_memory.providers.base import estimate_tokens
from agent_memory.providers.offline.extractor import _extract_facts
from agent_memory.providers.offline.sentence import _prepare

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
