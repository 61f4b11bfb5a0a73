"""A session summarized by a chat model: sentences citing their messages (a sentence keeps only
known ids and is dropped when none is left), within a token cap, and the complete sentences kept
when the output was cut off at max_tokens."""

from __future__ import annotations

import itertools
import json
import re

from pydantic import ValidationError

from agent_memory.core.models import Message, SummaryResult, SummarySentence
from agent_memory.providers.base import SUMMARY_TOKEN_CAP, estimate_tokens
from agent_memory.providers.openai.chat import ChatProvider
from agent_memory.providers.openai.parsing import MAX_JSON_STARTS
from agent_memory.providers.openai.prompts import SUMMARY_PROMPT, render_transcript
from agent_memory.providers.openai.responses import SentenceOut, SummaryOut
from agent_memory.providers.openai.schema import bounded_schema, cited_schema, strict_json_schema
from agent_memory.providers.openai.usage import Usage, merged_usage, with_cost

# What an answer can use at most, in the model's tokens: a summary's text is cut to its token cap
# (by estimate, ~4 characters a token: a tokenizer may spend twice that on digits or CJK), and each
# sentence adds its keys and its cited ids.
SENTENCE_FRAMING_TOKENS = 64


def summary_output_tokens(token_cap: int, sentences: int) -> int:
    return 2 * token_cap + SENTENCE_FRAMING_TOKENS * sentences + 16


# The sentence being written when the output was cut: its citations, then the opening of its text.
_CITED_THEN_TEXT = re.compile(r'\{\s*"source_message_ids"\s*:\s*(\[[^\[\]]*\])\s*,\s*"text"\s*:\s*"')
# Where a sentence ends inside a JSON string's raw text: . ! ? before a space or an escaped line
# break (not a dot in "www.example.org"), or a CJK full stop.
_SENTENCE_END = re.compile(r'[.!?](?=\s|\\[nrt])|[。！？]')


def _sentences_before_the_cut(text: str) -> SummaryOut | None:
    """A summary cut off at max_tokens (a small model repeating itself inside a sentence): the
    sentence objects complete before the cut, and the complete sentences of the text that was
    being written, with its citations; None when nothing complete is left."""
    body = text.strip()
    if not re.match(r'\A\{\s*"sentences"\s*:\s*\[', body):
        return None
    kept: list[SentenceOut] = []
    rest = body
    # The last few closing braces only: parsing up to each is quadratic in the output's length.
    for end in itertools.islice(reversed([i for i, char in enumerate(body) if char == "}"]), MAX_JSON_STARTS):
        try:
            kept = SummaryOut.model_validate(json.loads(body[:end + 1] + "]}")).sentences
        except (ValueError, ValidationError):
            continue
        rest = body[end + 1:]
        break
    if (cut := _cut_sentence(rest)) is not None:
        kept.append(cut)
    return SummaryOut(sentences=kept) if kept else None


def _cut_sentence(rest: str) -> SentenceOut | None:
    """The sentence object the output ends in, when its citations are complete: its text up to
    the last sentence end before the cut."""
    opened = list(_CITED_THEN_TEXT.finditer(rest))
    if not opened:
        return None
    raw = rest[opened[-1].end():]
    try:  # the text closed and the cut came after it: the text is whole
        text, _ = json.JSONDecoder().raw_decode('"' + raw)
    except ValueError:
        ends = [m.end() for m in _SENTENCE_END.finditer(raw)]
        if not ends:
            return None
        try:
            text = json.loads('"' + raw[:ends[-1]] + '"')
        except ValueError:
            return None
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        return SentenceOut(source_message_ids=json.loads(opened[-1].group(1)), text=text.strip())
    except (ValueError, ValidationError):
        return None


def _fit(text: str, cap: int) -> str:
    """Longest word-boundary prefix of text within the token cap (characters if one word is too long)."""
    if estimate_tokens(text) <= cap:
        return text
    best = ""
    for match in re.finditer(r"\s+|$", text):
        piece = text[:match.start()].rstrip()
        if estimate_tokens(piece) > cap:
            break
        best = piece
    if not best:
        for i in range(1, len(text) + 1):
            if estimate_tokens(text[:i]) > cap:
                break
            best = text[:i]
    return best.rstrip()


class OpenAICompatibleSummarizer(ChatProvider):
    task = "summarizer"

    async def summarize(self, messages: list[Message], *, token_cap: int = SUMMARY_TOKEN_CAP) -> SummaryResult:
        schema = bounded_schema(strict_json_schema(SummaryOut), sentences=self.config.max_sentences,
                                source_message_ids=self.config.max_citations)
        sentences_bound = schema["properties"]["sentences"]["maxItems"]
        chunks = self._chunks(SUMMARY_PROMPT.format(cap=token_cap), messages, SummaryOut)
        chunk_cap = max(token_cap // len(chunks), 16)  # each chunk its share of the cap
        found: list[SentenceOut] = []
        usages: list[Usage] = []
        for chunk in chunks:
            out, chunk_usage = await self._complete(
                SUMMARY_PROMPT.format(cap=chunk_cap if len(chunks) > 1 else token_cap), render_transcript(chunk),
                SummaryOut, "session_summary",
                cited_schema(schema, "source_message_ids", chunk, self.config.cite_from_enum),
                salvage=_sentences_before_the_cut,
                output_tokens=summary_output_tokens(chunk_cap if len(chunks) > 1 else token_cap, sentences_bound))
            found.extend(out.sentences)
            usages.append(chunk_usage)
        usage = merged_usage(usages)
        known = {m.message_id for m in messages}
        sentences: list[SummarySentence] = []
        for sentence in found:
            ids = [i for i in dict.fromkeys(s.strip() for s in sentence.source_message_ids) if i in known]
            text = " ".join(sentence.text.split())
            if ids and text:
                sentences.append(SummarySentence(text=text, source_message_ids=ids))
        # Enforce the cap: drop trailing sentences, then cut a lone sentence that is still too long.
        while len(sentences) > 1 and estimate_tokens(" ".join(s.text for s in sentences)) > token_cap:
            sentences.pop()
        if sentences and estimate_tokens(sentences[0].text) > token_cap:
            cut = _fit(sentences[0].text, max(token_cap, 0))
            sentences = [SummarySentence(text=cut, source_message_ids=sentences[0].source_message_ids)] if cut else []
        text = " ".join(s.text for s in sentences)
        return with_cost(SummaryResult, usage.cost_usd, provider=usage.provider,
                         provider_request_id=usage.request_id, input_tokens=usage.input_tokens,
                         output_tokens=usage.output_tokens, sentences=sentences,
                         token_count=estimate_tokens(text) if text else 0)
