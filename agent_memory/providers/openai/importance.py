"""A session's importance scored by a chat model: the highest score of its chunks, and the score
kept when the rationale after it was cut off at max_tokens."""

from __future__ import annotations

import json
import re

from agent_memory.core.models import ImportanceResult, Message
from agent_memory.providers.openai.chat import ChatProvider
from agent_memory.providers.openai.prompts import IMPORTANCE_PROMPT, render_transcript
from agent_memory.providers.openai.responses import ImportanceOut
from agent_memory.providers.openai.usage import Usage, merged_usage, with_cost

# What an answer can use at most, in the model's tokens: importance is a score and one sentence.
IMPORTANCE_OUTPUT_TOKENS = 256


# The score, written first by the schema, and the rationale's opening up to where the output was cut.
_SCORE_THEN_RATIONALE = re.compile(r'\A\s*\{\s*"importance"\s*:\s*(\d{1,2})\s*,\s*"rationale"\s*:\s*"((?:[^"\\]|\\.)*)')
RATIONALE_KEPT_CHARS = 200


def _score_before_the_cut(text: str) -> ImportanceOut | None:
    """A small model may repeat itself inside the rationale until max_tokens: the score before it
    is complete, so it is kept with the rationale's first sentence (or RATIONALE_KEPT_CHARS)."""
    match = _SCORE_THEN_RATIONALE.match(text)
    if match is None or not 1 <= int(match.group(1)) <= 10:
        return None
    try:
        rationale = json.loads(f'"{match.group(2)}"')
    except ValueError:  # cut inside an escape sequence
        rationale = ""
    first = re.match(r"[^.!?。！？]*[.!?。！？]", rationale)
    return ImportanceOut(importance=int(match.group(1)),
                         rationale=(first.group(0) if first else rationale)[:RATIONALE_KEPT_CHARS])


class OpenAICompatibleImportanceScorer(ChatProvider):
    task = "importance"

    async def score(self, messages: list[Message]) -> ImportanceResult:
        scored: list[tuple[ImportanceOut, Usage]] = [
            await self._complete(IMPORTANCE_PROMPT, render_transcript(chunk), ImportanceOut, "importance",
                                 salvage=_score_before_the_cut, output_tokens=IMPORTANCE_OUTPUT_TOKENS)
            for chunk in self._chunks(IMPORTANCE_PROMPT, messages, ImportanceOut)]
        out = max((o for o, _ in scored), key=lambda o: o.importance)  # a session is as important as its peak
        usage = merged_usage([u for _, u in scored])
        return with_cost(ImportanceResult, usage.cost_usd, provider=usage.provider,
                         provider_request_id=usage.request_id, input_tokens=usage.input_tokens,
                         output_tokens=usage.output_tokens, importance=out.importance,
                         rationale=out.rationale.strip())
