"""The chat providers' call: a conversation cut into chunks that fit the model's context window,
and one structured-output completion per chunk, parsed into its response model."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam
from pydantic import BaseModel

from agent_memory.core.models import Message
from agent_memory.providers.base import estimate_tokens
from agent_memory.providers.errors import ProviderOutputInvalid
from agent_memory.providers.openai.config import OpenAICompatibleConfig
from agent_memory.providers.openai.parsing import M, extract_json, validated
from agent_memory.providers.openai.prompts import DATA_NOTE, PROMPT_VERSION, render_transcript
from agent_memory.providers.openai.provider import OpenAICompatibleProvider, safe_model_name
from agent_memory.providers.openai.schema import strict_json_schema
from agent_memory.providers.openai.usage import Usage

log = logging.getLogger(__name__)


# Share of the context window (less the output budget) a chunk's prompt may fill by the estimate:
# estimate_tokens counts 4 characters a token, but a small model's tokenizer spends more on JSON
# punctuation, ids and ISO times, and the chat template adds its own.
CHUNK_FILL = 0.5


class ChatProvider(OpenAICompatibleProvider):
    def __init__(self, config: OpenAICompatibleConfig, client: AsyncOpenAI | None = None):
        super().__init__(config, client)
        self.version = f"{PROMPT_VERSION}-{safe_model_name(config.chat_model)}"

    def _chunks(self, system: str, messages: list[Message], response_model: type[BaseModel],
                preamble: str | None = None) -> list[list[Message]]:
        """Consecutive runs of messages whose prompt fits the model's context window (one run
        when the window is unbounded); a single message longer than a chunk is a chunk alone.
        `preamble` (the current facts) is sent with every chunk and counts as framing."""
        cfg = self.config
        if not cfg.context_tokens or len(messages) <= 1:
            return [messages]
        framing = estimate_tokens(f"{system}\n\n{DATA_NOTE}\nConversation:\n")
        if preamble:
            framing += estimate_tokens(preamble) + 8  # its own chat message: the template's tokens around it
        if cfg.response_format != "json_schema":  # the schema is spelled out in the prompt
            framing += estimate_tokens(json.dumps(strict_json_schema(response_model), ensure_ascii=False))
        budget = max(int((cfg.context_tokens - (cfg.max_tokens or 0)) * CHUNK_FILL) - framing, 1)
        chunks: list[list[Message]] = []
        current: list[Message] = []
        used = 0
        for message in messages:
            size = estimate_tokens(render_transcript([message])) + 1
            if current and used + size > budget:
                chunks.append(current)
                current, used = [], 0
            current.append(message)
            used += size
        chunks.append(current)
        return chunks

    def _data_budget(self, share: float) -> int | None:
        """Tokens (by estimate) a share of one chunk's prompt may take; None when the window is
        unbounded."""
        cfg = self.config
        if not cfg.context_tokens:
            return None
        return max(int((cfg.context_tokens - (cfg.max_tokens or 0)) * CHUNK_FILL * share), 0)

    async def _complete(self, system: str, transcript: str, response_model: type[M],
                        schema_name: str, schema: dict | None = None, preamble: str | None = None,
                        salvage: Callable[[str], M | None] | None = None,
                        output_tokens: int | None = None) -> tuple[M, Usage]:
        """One structured call. `salvage` reads an output cut off at max_tokens: what it returns is
        kept (None: the cut output is invalid, as without it). `output_tokens` is what the answer
        can use at most: it lowers a configured max_tokens (the rest would be paid for, waited
        for and dropped), and is not sent when max_tokens is not (a reasoning model's thinking
        counts against it)."""
        cfg = self.config
        schema = schema or strict_json_schema(response_model)
        system = f"{system}\n\n{DATA_NOTE}"
        kwargs: dict[str, Any] = {}
        if cfg.response_format == "json_schema":
            kwargs["response_format"] = {"type": "json_schema",
                                         "json_schema": {"name": schema_name, "strict": True, "schema": schema}}
        else:
            system += "\nThe JSON object must match this JSON schema:\n" + json.dumps(schema, ensure_ascii=False)
            if cfg.response_format == "json_object":
                kwargs["response_format"] = {"type": "json_object"}
        if cfg.temperature is not None:
            kwargs["temperature"] = cfg.temperature
        if cfg.max_tokens is not None:
            kwargs["max_tokens"] = min(cfg.max_tokens, output_tokens or cfg.max_tokens)
        if cfg.frequency_penalty is not None:
            kwargs["frequency_penalty"] = cfg.frequency_penalty
        chat: list[ChatCompletionMessageParam] = [{"role": "system", "content": system}]
        if preamble:  # data before the conversation, in its own message: the conversation stays the last one
            chat.append({"role": "user", "content": preamble})
        chat.append({"role": "user", "content": f"Conversation:\n{transcript}"})
        raw = await self._call(lambda: self._client.chat.completions.with_raw_response.create(
            model=cfg.chat_model,
            messages=chat,
            **kwargs))
        completion = raw.parse()
        usage = self._usage(cfg.chat_model, raw, getattr(completion, "id", None), completion.usage, cfg.chat_prices)
        if not completion.choices:
            raise ProviderOutputInvalid("", ["the response has no choices"])
        choice = completion.choices[0]
        refusal = getattr(choice.message, "refusal", None)
        if refusal:
            raise ProviderOutputInvalid(refusal, ["the model refused the task"])
        content = choice.message.content
        # A non-conforming server may send a number or a list: that is invalid output, not a crash.
        text = content if isinstance(content, str) else ("" if content is None else json.dumps(content, default=str))
        try:
            return validated(text, extract_json(text), response_model), usage
        except ProviderOutputInvalid as exc:
            # (A cut-off object may still hold a parseable fragment: the cause is the cut, say so.)
            if choice.finish_reason == "length":
                if salvage is not None and (kept := salvage(text)) is not None:
                    log.warning("%s output cut off at max_tokens: its complete part is kept", self.task)
                    return kept, usage
                raise ProviderOutputInvalid(exc.raw_text, [*exc.errors, "output truncated (finish_reason=length)"]
                                            ) from None
            raise
