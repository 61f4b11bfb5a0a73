"""Providers backed by any OpenAI-compatible HTTP API (OpenAI, vLLM, Ollama, LiteLLM, ...).

They implement the protocols of `base` with the `openai` package:

- chat completions with structured output (a strict JSON schema derived from a pydantic response
  model per task), parsed tolerantly (```json fences, chatter around the JSON, <think> blocks);
- citations checked against the input: a fact citing an unknown message id is dropped, an entity
  or a summary sentence keeps only known ids and is dropped when none is left;
- embeddings of exactly EMBEDDING_DIMENSIONS floats;
- no client-side retries (max_retries=0): failures are classified into the exceptions of
  `errors` and Temporal's retry policy decides; a Retry-After hint travels on the exception;
- usage recorded on the result: provider, provider request id, input and output tokens, and a
  cost estimate from optional per-1k-token prices (`estimate_cost`).
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import itertools
import json
import logging
import math
import re
import struct
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple, TypeVar

from openai import AsyncOpenAI, OpenAIError
from openai.types.chat import ChatCompletionMessageParam
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from agent_memory.core import contract
from agent_memory.core.entities import merged_entities
from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import (
    ENTITY_TYPES,
    RELATION_TYPES,
    ClaimType,
    EmbeddingResult,
    EntityType,
    ExtractedEntity,
    ExtractedFact,
    ExtractedRelation,
    ExtractionResult,
    FactOperation,
    ImportanceResult,
    KnownFact,
    Message,
    Permanence,
    ProviderResult,
    SummaryResult,
    SummarySentence,
    storable_text,
)
from agent_memory.core.relations import SUBJECT, RelationDraft, kept_relations
from agent_memory.core.seat import holds_seat, session_holder, speaker_key
from agent_memory.providers.base import (
    EMBEDDING_DIMENSIONS,
    SUMMARY_TOKEN_CAP,
    Embedder,
    FactExtractor,
    ImportanceScorer,
    Summarizer,
    estimate_tokens,
)
from agent_memory.providers.errors import (
    ProviderOutputInvalid,
    ProviderPermanentError,
    ProviderRetryableError,
    classify_openai_error,
)
from agent_memory.providers.openai.prompts import (
    DATA_NOTE,
    EXTRACTION_PROMPT,
    FACTS_TOKEN_BUDGET,
    IMPORTANCE_PROMPT,
    PROMPT_VERSION,
    SUMMARY_PROMPT,
    render_current_facts,
    render_holder,
    render_transcript,
)

__all__ = [
    "OpenAICompatibleConfig",
    "OpenAICompatibleEmbedder",
    "OpenAICompatibleExtractor",
    "OpenAICompatibleImportanceScorer",
    "OpenAICompatibleSummarizer",
    "ProviderBundle",
    "ProviderOutputInvalid",
    "ProviderPermanentError",
    "ProviderRetryableError",
    "TokenPrices",
    "estimate_cost",
    "extract_json",
    "openai_providers",
    "providers_for",
    "strict_json_schema",
]

log = logging.getLogger(__name__)

PROVIDER_PREFIX = "openai-compatible"
# The embedder's own version (no prompt): a new prompt must not re-embed every memory. It was
# PROMPT_VERSION "1" when both were one.
EMBEDDER_VERSION = "1"
ResponseFormat = Literal["json_schema", "json_object", "none"]
M = TypeVar("M", bound=BaseModel)
R = TypeVar("R", bound=ProviderResult)


# --- configuration and cost ---------------------------------------------------------------------


class TokenPrices(NamedTuple):
    input_per_1k: float = 0.0
    output_per_1k: float = 0.0


# A call's client timeout fits twice in a provider activity (contract.PROVIDER_STEP): a second chunk, or a
# retry that first waits out a dead attempt's claim (operations.CLAIM_LEASE), still finishes in it.
MAX_TIMEOUT_SECONDS = contract.PROVIDER_STEP.start_to_close.total_seconds() / 2


@dataclass(frozen=True)
class OpenAICompatibleConfig:
    base_url: str  # e.g. https://api.openai.com/v1, http://vllm:8000/v1, http://ollama:11434/v1
    api_key: str  # any non-empty string for servers without authentication
    chat_model: str
    embedding_model: str
    timeout_seconds: float = 60.0  # per call; a small local model on a busy machine needs 300 (workers/local_model.py)
    input_price_per_1k: float = 0.0  # USD per 1000 prompt tokens of the chat model
    output_price_per_1k: float = 0.0  # USD per 1000 completion tokens of the chat model
    embedding_price_per_1k: float = 0.0  # USD per 1000 input tokens of the embedding model
    # "json_schema": strict structured output (OpenAI, vLLM, Ollama >= 0.5); "json_object" or
    # "none" for servers without it (the schema is then spelled out in the prompt).
    response_format: ResponseFormat = "json_schema"
    send_dimensions: bool = True  # False for embedding servers that reject the `dimensions` parameter
    # The stored width (AGENT_MEMORY_EMBEDDING_DIMENSIONS); a change is a model change: re-embedding.
    embedding_dimensions: int = EMBEDDING_DIMENSIONS
    temperature: float | None = 0.0  # None: not sent (models that only accept their default)
    max_tokens: int | None = None  # None: not sent (the server's default); small local models need >= 600
    # None: not sent. A small model decoding greedily under a grammar repeats itself inside a string
    # until max_tokens; a penalty on repeated tokens ends the loop.
    frequency_penalty: float | None = None
    # Facts one extraction call may return, sentences one summary may have, ids one fact, entity or
    # sentence may cite, entities and relations one extraction call may return (None: the schemas'
    # bounds, 10, 6, 4, 12 and 8): a small model under a grammar fills every array to its bound,
    # spending ~175 tokens a fact, ~75 an entity and ~70 a relation (SmolLM2's tokens, measured), so
    # the bounds' worst case must fit max_tokens or the JSON is cut off.
    max_facts: int | None = None
    max_sentences: int | None = None
    max_citations: int | None = None
    max_entities: int | None = None
    max_relations: int | None = None
    # Cited ids as an enum of the chunk's message ids: a small model under a grammar otherwise makes
    # ids up, and may loop inside one until max_tokens. Off by default: remote APIs limit enum sizes.
    cite_from_enum: bool = False
    # An embedding server without the `dimensions` parameter whose model is wider than the store
    # (a local llama-server): keep the first EMBEDDING_DIMENSIONS values, renormalised to unit length.
    truncate_dimensions: bool = False
    # The chat model's context window in tokens (None: unbounded): a longer conversation is sent in
    # consecutive chunks that each fit, and the extracted facts are merged.
    context_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("base_url", "chat_model", "embedding_model"):
            if not getattr(self, name):
                raise InvalidInput(f"OpenAICompatibleConfig.{name} is required")
        if not (self.timeout_seconds > 0):
            raise InvalidInput("OpenAICompatibleConfig.timeout_seconds must be positive")
        if self.timeout_seconds > MAX_TIMEOUT_SECONDS:  # the activity would time out before the client does
            raise InvalidInput(f"OpenAICompatibleConfig.timeout_seconds must be at most {MAX_TIMEOUT_SECONDS:.0f} "
                               "(half the provider activity's start-to-close timeout, contract.PROVIDER_STEP)")
        if self.response_format not in ("json_schema", "json_object", "none"):
            raise InvalidInput(f"unknown response_format {self.response_format!r}")

    @property
    def chat_prices(self) -> TokenPrices:
        return TokenPrices(self.input_price_per_1k, self.output_price_per_1k)

    @property
    def embedding_prices(self) -> TokenPrices:
        return TokenPrices(self.embedding_price_per_1k, 0.0)

    def __repr__(self) -> str:  # never print the key
        return (f"OpenAICompatibleConfig(base_url={self.base_url!r}, chat_model={self.chat_model!r}, "
                f"embedding_model={self.embedding_model!r}, timeout_seconds={self.timeout_seconds})")

    @classmethod
    def from_settings(cls, settings: Any) -> OpenAICompatibleConfig:
        """From agent_memory.core.settings.Settings once it carries the provider fields (see report)."""
        return cls(
            base_url=settings.openai_base_url or "https://api.openai.com/v1",
            api_key=settings.openai_api_key or "not-needed",
            chat_model=settings.chat_model,
            embedding_model=settings.embedding_model,
            timeout_seconds=settings.provider_timeout_seconds,
            input_price_per_1k=settings.input_price_per_1k,
            output_price_per_1k=settings.output_price_per_1k,
            embedding_price_per_1k=getattr(settings, "embedding_price_per_1k", 0.0),
            embedding_dimensions=getattr(settings, "embedding_dimensions", EMBEDDING_DIMENSIONS),
        )

    def client(self) -> AsyncOpenAI:
        # Temporal's retry policy owns retries: the client must never retry on its own.
        return AsyncOpenAI(base_url=self.base_url, api_key=self.api_key or "not-needed", max_retries=0,
                           timeout=self.timeout_seconds)


def estimate_cost(usage: Any, prices: TokenPrices | tuple[float, float]) -> float:
    """USD for a call's usage: an openai usage object (prompt/completion tokens), a ProviderResult
    (input/output tokens), a mapping with either naming, or None (no usage reported: 0)."""
    if usage is None:
        return 0.0

    def tokens(*names: str) -> int:
        for name in names:
            value = usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)
            if isinstance(value, (int, float)) and value > 0:
                return int(value)
        return 0

    input_per_1k, output_per_1k = prices
    cost = (tokens("input_tokens", "prompt_tokens") * input_per_1k
            + tokens("output_tokens", "completion_tokens") * output_per_1k) / 1000.0
    return round(cost, 10)


# --- structured output ---------------------------------------------------------------------------


# Every array in a response schema is bounded: a small model under a grammar otherwise keeps
# appending items until max_tokens and the JSON is cut off. (No maxLength on strings: it makes
# grammar-constrained decoding an order of magnitude slower.)
MAX_ITEMS = 16


def strict_json_schema(model: type[BaseModel]) -> dict:
    """The model's JSON schema in the strict subset: every object closed and every property
    required (optional values are nullable instead), no defaults, every array bounded."""

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            # Names in "properties" and "$defs" are names, not keywords (a property may be called "default").
            node = {k: ({name: fix(sub) for name, sub in v.items()} if k in ("properties", "$defs") else fix(v))
                    for k, v in node.items() if k != "default"}
            types = node.get("type")
            if types == "object" or "properties" in node:
                node["additionalProperties"] = False
                node["required"] = list(node.get("properties", {}))
            # Any array, however nested ($defs, anyOf, a nullable ["array", "null"] type, items of items).
            if types == "array" or (isinstance(types, list) and "array" in types) or "items" in node \
                    or "prefixItems" in node:
                node.setdefault("maxItems", MAX_ITEMS)
            return node
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node

    return fix(model.model_json_schema())


_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript)?[ \t]*\r?\n?(.*?)```", re.S)


def _balanced_end(text: str, start: int) -> int | None:
    """Index just past the JSON object/array opening at `start`, honouring strings and escapes."""
    stack: list[str] = []
    in_string = escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return None
            if not stack:
                return i + 1
    return None


MAX_JSON_STARTS = 16


def extract_json(text: str) -> Any:
    """The JSON payload of a model's reply: the whole text, else the first ```json fence, else the
    first balanced object/array that parses. Raises ProviderOutputInvalid(raw_text, errors)."""
    raw = text or ""
    body = _THINK.sub("", raw).strip()
    if not body:
        raise ProviderOutputInvalid(raw, ["empty output"])
    candidates = [body] + [m.group(1).strip() for m in _FENCE.finditer(body)]
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
            pass
    # Only the first few openings are tried: scanning from every "{" is quadratic in the length.
    for match in itertools.islice(re.finditer(r"[{\[]", body), MAX_JSON_STARTS):
        end = _balanced_end(body, match.start())
        if end is None:
            continue
        try:
            return json.loads(body[match.start():end])
        except (ValueError, RecursionError):
            continue
    raise ProviderOutputInvalid(raw, ["no parseable JSON object or array in the output"])


def _unstorable(payload: Any) -> str | None:
    """The first string Postgres could not store (NUL, lone surrogate), as a reason."""
    if isinstance(payload, str):
        try:
            storable_text(payload)
        except ValueError as exc:
            return str(exc)
    elif isinstance(payload, dict):
        return next((r for v in [*payload.keys(), *payload.values()] if (r := _unstorable(v))), None)
    elif isinstance(payload, list):
        return next((r for v in payload if (r := _unstorable(v))), None)
    return None


def _validate(raw: str, payload: Any, model: type[M]) -> M:
    if reason := _unstorable(payload):  # refuse before anything is recorded, not half-way
        raise ProviderOutputInvalid(raw, [f"a value {reason}"])
    fields = list(model.model_fields)
    # A bare list where {"facts": [...]} was asked: the first field's, when the others may be left out.
    if isinstance(payload, list) and fields and not any(model.model_fields[f].is_required() for f in fields[1:]):
        payload = {fields[0]: payload}
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        # loc and msg only: the offending input values may repeat the transcript
        errors = [f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors()]
        raise ProviderOutputInvalid(raw, errors) from None


CONFIDENCE_STEPS: list[JsonValue] = [round(i / 10, 1) for i in range(11)]
ENTITY_TYPE_NAMES: list[JsonValue] = list(ENTITY_TYPES)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore")


class FactOut(_Strict):
    # Before the value: what the statement does decides which value is meant (an end names the
    # value that ended). Defaulted so a server without strict output may leave it out.
    operation: FactOperation = Field(default="assert", description=(
        "assert: a new fact or a new value; confirm: restates a current fact; end: a current fact is no longer "
        "true; correct: an earlier value was never true"))
    namespace: str = Field(description="one of: profile, location, travel, work, relationship, diet, preference, "
                                       "budget, pet (another short lowercase word only if none fits)")
    key: str = Field(description="snake_case key: name, home_city, trip_city, employer, job, status, restriction, "
                                 "spicy, allergy_<food>, the object of a preference, the budget's purpose, the pet's "
                                 "name")
    value: str = Field(description="the value, short, in the language of the conversation; for end the value that "
                                   "ended; for correct the right value")
    claim_type: ClaimType = Field(description="explicit: the subject said it; inference: concluded from what was said")
    permanence: Permanence
    valid_until: datetime | None = Field(description="ISO 8601 end of a temporary fact, resolved from the message "
                                                     "time; null when unknown or permanent")
    # In tenths in the schema: a grammar-constrained server (llama.cpp) enforces an enum, not a range.
    confidence: float = Field(ge=0.0, le=1.0, json_schema_extra={"enum": CONFIDENCE_STEPS})
    evidence_message_ids: list[str] = Field(min_length=1, json_schema_extra={"maxItems": 4},
                                            description="ids of the messages that state the fact")
    observed_at: datetime | None = Field(description="ISO 8601 time of the evidence message")


class EntityOut(_Strict):
    name: str = Field(description="the fullest form of the name the conversation uses, as written")
    # Any string parses (one the model got wrong is dropped, not the answer); the schema offers the types.
    entity_type: str = Field(json_schema_extra={"enum": ENTITY_TYPE_NAMES})
    # Defaulted so a server without strict output may leave it out.
    aliases: list[str] = Field(default_factory=list, json_schema_extra={"maxItems": 4},
                               description="other forms the conversation uses for the same one")
    # Not required by the parse either: an entity without known evidence is dropped, not the answer.
    evidence_message_ids: list[str] = Field(json_schema_extra={"minItems": 1, "maxItems": 4},
                                            description="ids of the messages that mention it")


RELATION_TYPE_NAMES: list[JsonValue] = list(RELATION_TYPES)


class RelationOut(_Strict):
    source: str = Field(description='an entity\'s name, or the speaker\'s name ("subject" when the speaker has none)')
    # Any string parses (one the model got wrong is dropped, not the answer); the schema offers the types.
    relation: str = Field(json_schema_extra={"enum": RELATION_TYPE_NAMES})
    target: str = Field(description="an entity's name; \"\" only to end whatever is current")
    # Defaulted so a server without strict output may leave them out.
    role: str = Field(default="", description="the role within the type, in English: sister, mother, husband, "
                                              "manager; \"\" when none")
    operation: str = Field(default="assert", json_schema_extra={"enum": ["assert", "end"]})
    evidence_message_ids: list[str] = Field(json_schema_extra={"minItems": 1, "maxItems": 4},
                                            description="ids of the messages that state it")


class ExtractionOut(_Strict):
    facts: list[FactOut] = Field(json_schema_extra={"maxItems": 10})
    # Defaulted so a server without strict output may answer with the facts alone.
    entities: list[EntityOut] = Field(default_factory=list, json_schema_extra={"maxItems": 12})
    relations: list[RelationOut] = Field(default_factory=list, json_schema_extra={"maxItems": 8})


class ImportanceOut(_Strict):
    importance: int = Field(ge=1, le=10)
    rationale: str


class SentenceOut(_Strict):
    # The citations first: a model decodes in the schema's order, so a sentence cut off inside its
    # text at max_tokens still names its evidence, and the text's complete sentences can be kept.
    source_message_ids: list[str] = Field(min_length=1, json_schema_extra={"maxItems": 4})
    text: str


class SummaryOut(_Strict):
    sentences: list[SentenceOut] = Field(json_schema_extra={"maxItems": 6})


# --- shared call machinery ---------------------------------------------------------------------


def _safe(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model)[:80]


def _with_cost(result_type: type[R], cost: float, **fields: Any) -> R:
    # Forward compatible: ProviderResult gains `cost_usd` (see the report); until then it is logged.
    if "cost_usd" in result_type.model_fields:
        fields["cost_usd"] = cost
    return result_type(**fields)


def _aligned(value: datetime | None, reference: datetime) -> datetime | None:
    """A model-given time with the reference's awareness (naive times are read in its zone)."""
    if value is None:
        return None
    if reference.tzinfo is not None and value.tzinfo is None:
        return value.replace(tzinfo=reference.tzinfo)
    if reference.tzinfo is None and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


class _Usage(NamedTuple):
    provider: str
    request_id: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: float


class _OpenAICompatibleBase:
    task = "task"
    runs_in_worker = False  # a network call: its steps are ordinary activities, heartbeated by the server

    def __init__(self, config: OpenAICompatibleConfig, client: AsyncOpenAI | None = None):
        self.config = config
        self._client = client or config.client()
        self._owns_client = client is None
        self.name = f"{PROVIDER_PREFIX}-{self.task}"

    @property
    def model_label(self) -> str:
        """The model this provider calls, as its results' `provider` names it (the metrics' label)."""
        return f"{PROVIDER_PREFIX}:{self.config.chat_model}"

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.close()

    async def _call(self, request: Callable[[], Awaitable[Any]]) -> Any:
        try:
            return await request()
        except OpenAIError as exc:
            mapped = classify_openai_error(exc)
            if mapped is exc:
                raise
            raise mapped from exc

    def _usage(self, model: str, raw: Any, body_id: str | None, usage: Any, prices: TokenPrices) -> _Usage:
        input_tokens = int(getattr(usage, "prompt_tokens", 0) or 0) if usage is not None else 0
        output_tokens = int(getattr(usage, "completion_tokens", 0) or 0) if usage is not None else 0
        request_id = raw.headers.get("x-request-id") or body_id or None
        cost = estimate_cost({"input_tokens": input_tokens, "output_tokens": output_tokens}, prices)
        provider = f"{PROVIDER_PREFIX}:{model}"
        log.info("provider call %s task=%s request_id=%s input_tokens=%d output_tokens=%d cost_usd=%.6f",
                 provider, self.task, request_id, input_tokens, output_tokens, cost)
        return _Usage(provider, request_id, input_tokens, output_tokens, cost)


def _merged(usages: list[_Usage]) -> _Usage:
    """The usage of a task sent in chunks: tokens and cost summed, the first call's request id."""
    return _Usage(usages[0].provider, next((u.request_id for u in usages if u.request_id), None),
                  sum(u.input_tokens for u in usages), sum(u.output_tokens for u in usages),
                  round(sum(u.cost_usd for u in usages), 10))


# Share of the context window (less the output budget) a chunk's prompt may fill by the estimate:
# estimate_tokens counts 4 characters a token, but a small model's tokenizer spends more on JSON
# punctuation, ids and ISO times, and the chat template adds its own.
CHUNK_FILL = 0.5


class _ChatProvider(_OpenAICompatibleBase):
    def __init__(self, config: OpenAICompatibleConfig, client: AsyncOpenAI | None = None):
        super().__init__(config, client)
        self.version = f"{PROMPT_VERSION}-{_safe(config.chat_model)}"

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
                        output_tokens: int | None = None) -> tuple[M, _Usage]:
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
            return _validate(text, extract_json(text), response_model), usage
        except ProviderOutputInvalid as exc:
            # (A cut-off object may still hold a parseable fragment: the cause is the cut, say so.)
            if choice.finish_reason == "length":
                if salvage is not None and (kept := salvage(text)) is not None:
                    log.warning("%s output cut off at max_tokens: its complete part is kept", self.task)
                    return kept, usage
                raise ProviderOutputInvalid(exc.raw_text, [*exc.errors, "output truncated (finish_reason=length)"]
                                            ) from None
            raise


# --- the four providers ---------------------------------------------------------------------------


# The entity types as a model may spell them (American English, plural).
_ENTITY_TYPE_SPELLINGS: dict[str, EntityType] = {
    **{t: t for t in ENTITY_TYPES}, **{f"{t}s": t for t in ENTITY_TYPES}, "people": "person",
    "organization": "organisation", "organizations": "organisation"}


class OpenAICompatibleExtractor(_ChatProvider):
    task = "extractor"

    async def extract(self, messages: list[Message], *, subject_role: str = "user",
                      current_facts: list[KnownFact] | None = None) -> ExtractionResult:
        system = EXTRACTION_PROMPT.format(role=subject_role)
        schema = _bounded(strict_json_schema(ExtractionOut), facts=self.config.max_facts,
                          entities=self.config.max_entities, relations=self.config.max_relations,
                          evidence_message_ids=self.config.max_citations)
        # The facts take at most a quarter of a chunk's prompt in a small window, the rest stays the conversation's.
        window = self._data_budget(0.25)
        known = render_current_facts(current_facts, token_budget=min(FACTS_TOKEN_BUDGET, window)
                                     if window is not None else FACTS_TOKEN_BUDGET)
        # A shared seat (agent_memory.core.seat): the model is told whose statements are facts.
        holder = session_holder(messages, subject_role, current_facts)
        known += render_holder(next((m.speaker for m in messages if m.speaker and speaker_key(m) == holder), None))
        found: list[FactOut] = []
        mentioned: list[EntityOut] = []
        related: list[RelationOut] = []
        usages: list[_Usage] = []
        for chunk in self._chunks(system, messages, ExtractionOut, known):  # one chunk unless the session is long
            out, chunk_usage = await self._complete(
                system, render_transcript(chunk), ExtractionOut, "fact_extraction",
                _cited(schema, "evidence_message_ids", chunk, self.config.cite_from_enum), preamble=known)
            found.extend(out.facts)
            mentioned.extend(out.entities)
            related.extend(out.relations)
            usages.append(chunk_usage)
        usage = _merged(usages)
        facts = self._checked_facts(found, messages, subject_role, holder)
        entities = self._checked_entities(mentioned, messages)
        return _with_cost(ExtractionResult, usage.cost_usd, provider=usage.provider,
                          provider_request_id=usage.request_id, input_tokens=usage.input_tokens,
                          output_tokens=usage.output_tokens, extractor=self.name, extractor_version=self.version,
                          facts=facts, entities=entities,
                          relations=self._checked_relations(related, entities, messages))

    @staticmethod
    def _checked_relations(relations: list[RelationOut], entities: list[ExtractedEntity],
                           messages: list[Message]) -> list[ExtractedRelation]:
        """What the model related, through the same check as the offline extractor's relations
        (agent_memory.core.relations): both ends entities of this result or a speaker, known
        evidence only, each relation once. A relation is observed at its latest evidence message."""
        by_id = {m.message_id: m for m in messages}
        drafts: list[RelationDraft] = []
        for relation in relations:
            cited = [by_id[i.strip()] for i in relation.evidence_message_ids if i.strip() in by_id]
            if not cited:
                log.info("dropping an extracted relation citing unknown message ids")
                continue
            drafts.append(RelationDraft(
                source=relation.source, relation=re.sub(r"[\s-]+", "_", relation.relation.strip().casefold()),
                target=relation.target, role=relation.role, operation=relation.operation.strip().casefold(),
                evidence_message_ids=[m.message_id for m in cited],
                observed_at=max(m.created_at for m in cited)))
        speakers = [SUBJECT, *(m.speaker for m in messages if m.speaker)]
        return kept_relations(drafts, entities, speakers, message_ids=list(by_id))

    @staticmethod
    def _checked_entities(entities: list[EntityOut], messages: list[Message]) -> list[ExtractedEntity]:
        """What the model named, whoever said it, as storable entities: of a known type, citing only
        known messages (an entity left without any is dropped), names within the bounds, the same
        entity found in several chunks (or named two ways) merged into one."""
        typed: list[tuple[str, EntityType, list[str], list[str]]] = []
        for entity in entities:
            entity_type = _ENTITY_TYPE_SPELLINGS.get(entity.entity_type.strip().casefold())
            if entity_type is None:
                log.info("dropping an extracted entity of an unknown type")
                continue
            typed.append((entity.name, entity_type, entity.aliases, entity.evidence_message_ids))
        return merged_entities(typed, [m.message_id for m in messages])

    @staticmethod
    def _checked_facts(facts: list[FactOut], messages: list[Message], subject_role: str,
                       holder: str | None = None) -> list[ExtractedFact]:
        by_id = {m.message_id: m for m in messages}
        first, last = min(m.created_at for m in messages), max(m.created_at for m in messages)
        kept: list[ExtractedFact] = []
        seen: set[tuple[str, str, str, str]] = set()
        for fact in facts:
            ids = list(dict.fromkeys(i.strip() for i in fact.evidence_message_ids))
            if not ids or any(i not in by_id for i in ids):
                log.info("dropping an extracted fact citing unknown message ids")
                continue
            evidence = [by_id[i] for i in ids]
            if not any(m.role == subject_role and holds_seat(m, holder) for m in evidence):
                # Another speaker sharing the account is not the subject either.
                log.info("dropping an extracted fact without evidence from the subject")
                continue
            latest = max(evidence, key=lambda m: m.created_at).created_at
            observed = _aligned(fact.observed_at, latest)
            if observed is None or not (first <= observed <= last):
                observed = latest  # a time outside the conversation is not an observation time
            valid_until = _aligned(fact.valid_until, latest) if fact.permanence != "permanent" else None
            if valid_until is not None and valid_until <= observed:
                valid_until = None
            namespace = re.sub(r"\W+", "_", fact.namespace.strip().lower()).strip("_")
            key = re.sub(r"\W+", "_", fact.key.strip().lower()).strip("_")[:60]
            value = fact.value.strip()
            if fact.operation == "end":
                valid_until = None  # an end has no value that could last
            # An end may leave the value empty ("whatever is current"); any other operation needs one.
            if not namespace or not key or (not value and fact.operation != "end") \
                    or (fact.operation, namespace, key, value) in seen:
                continue  # empty, or said again in a later chunk
            seen.add((fact.operation, namespace, key, value))
            kept.append(ExtractedFact(namespace=namespace, key=key, value=value, operation=fact.operation,
                                      claim_type=fact.claim_type, permanence=fact.permanence,
                                      valid_until=valid_until, confidence=fact.confidence,
                                      evidence_message_ids=ids, observed_at=observed))
        return kept


class OpenAICompatibleImportanceScorer(_ChatProvider):
    task = "importance"

    async def score(self, messages: list[Message]) -> ImportanceResult:
        scored: list[tuple[ImportanceOut, _Usage]] = [
            await self._complete(IMPORTANCE_PROMPT, render_transcript(chunk), ImportanceOut, "importance",
                                 salvage=_score_before_the_cut, output_tokens=IMPORTANCE_OUTPUT_TOKENS)
            for chunk in self._chunks(IMPORTANCE_PROMPT, messages, ImportanceOut)]
        out = max((o for o, _ in scored), key=lambda o: o.importance)  # a session is as important as its peak
        usage = _merged([u for _, u in scored])
        return _with_cost(ImportanceResult, usage.cost_usd, provider=usage.provider,
                          provider_request_id=usage.request_id, input_tokens=usage.input_tokens,
                          output_tokens=usage.output_tokens, importance=out.importance,
                          rationale=out.rationale.strip())


# What an answer can use at most, in the model's tokens: importance is a score and one sentence;
# a summary's text is cut to its token cap (by estimate, ~4 characters a token: a tokenizer may
# spend twice that on digits or CJK), and each sentence adds its keys and its cited ids.
IMPORTANCE_OUTPUT_TOKENS = 256
SENTENCE_FRAMING_TOKENS = 64


def summary_output_tokens(token_cap: int, sentences: int) -> int:
    return 2 * token_cap + SENTENCE_FRAMING_TOKENS * sentences + 16


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


def _cited(schema: dict, prop: str, messages: list[Message], enabled: bool) -> dict:
    """The schema (a copy, when enabled) whose `prop` arrays may only hold these messages' ids."""
    if not enabled:
        return schema
    schema = copy.deepcopy(schema)
    for node in [schema, *schema.get("$defs", {}).values()]:
        if (cited := node.get("properties", {}).get(prop)) is not None:
            cited["items"] = {"type": "string", "enum": list(dict.fromkeys(m.message_id for m in messages))}
    return schema


def _bounded(schema: dict, **bounds: int | None) -> dict:
    """The schema with the maxItems of the named array properties (wherever defined) lowered to
    the given bounds; None leaves one as it is."""
    for node in [schema, *schema.get("$defs", {}).values()]:
        for name, prop in node.get("properties", {}).items():
            if bounds.get(name) is not None and "maxItems" in prop:
                prop["maxItems"] = min(prop["maxItems"], bounds[name])
    return schema


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


class OpenAICompatibleSummarizer(_ChatProvider):
    task = "summarizer"

    async def summarize(self, messages: list[Message], *, token_cap: int = SUMMARY_TOKEN_CAP) -> SummaryResult:
        schema = _bounded(strict_json_schema(SummaryOut), sentences=self.config.max_sentences,
                          source_message_ids=self.config.max_citations)
        sentences_bound = schema["properties"]["sentences"]["maxItems"]
        chunks = self._chunks(SUMMARY_PROMPT.format(cap=token_cap), messages, SummaryOut)
        chunk_cap = max(token_cap // len(chunks), 16)  # each chunk its share of the cap
        found: list[SentenceOut] = []
        usages: list[_Usage] = []
        for chunk in chunks:
            out, chunk_usage = await self._complete(
                SUMMARY_PROMPT.format(cap=chunk_cap if len(chunks) > 1 else token_cap), render_transcript(chunk),
                SummaryOut, "session_summary", _cited(schema, "source_message_ids", chunk, self.config.cite_from_enum),
                salvage=_sentences_before_the_cut,
                output_tokens=summary_output_tokens(chunk_cap if len(chunks) > 1 else token_cap, sentences_bound))
            found.extend(out.sentences)
            usages.append(chunk_usage)
        usage = _merged(usages)
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
        return _with_cost(SummaryResult, usage.cost_usd, provider=usage.provider,
                          provider_request_id=usage.request_id, input_tokens=usage.input_tokens,
                          output_tokens=usage.output_tokens, sentences=sentences,
                          token_count=estimate_tokens(text) if text else 0)


def _vector(embedding: Any, dimensions: int, index: int, errors: list[str], *,
            truncate: bool = False) -> list[float] | None:
    if isinstance(embedding, str):  # base64 float32 from a server that ignored encoding_format=float
        try:
            data = base64.b64decode(embedding)
            embedding = list(struct.unpack(f"<{len(data) // 4}f", data[: len(data) // 4 * 4]))
        except (ValueError, struct.error):
            errors.append(f"data.{index}.embedding: undecodable base64")
            return None
    if not isinstance(embedding, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                  for v in embedding):
        errors.append(f"data.{index}.embedding: not a list of numbers")
        return None
    if truncate and len(embedding) > dimensions:  # a wider model: its first dimensions, unit length again
        head = [float(v) for v in embedding[:dimensions]]
        norm = math.sqrt(sum(v * v for v in head))
        embedding = [v / norm for v in head] if norm > 0 and math.isfinite(norm) else head
    if len(embedding) != dimensions:
        errors.append(f"data.{index}.embedding: {len(embedding)} dimensions, expected {dimensions}")
        return None
    vector = [float(v) for v in embedding]
    if not all(math.isfinite(v) for v in vector):
        errors.append(f"data.{index}.embedding: non-finite values")
        return None
    return vector


class OpenAICompatibleEmbedder(_OpenAICompatibleBase):
    task = "embedder"
    dimensions = EMBEDDING_DIMENSIONS

    def __init__(self, config: OpenAICompatibleConfig, client: AsyncOpenAI | None = None):
        super().__init__(config, client)
        self.dimensions = config.embedding_dimensions
        self.version = f"{EMBEDDER_VERSION}-{_safe(config.embedding_model)}-{self.dimensions}"

    @property
    def model(self) -> str:
        return f"{self.config.embedding_model}-{self.dimensions}"

    @property
    def model_label(self) -> str:
        return f"{PROVIDER_PREFIX}:{self.config.embedding_model}"

    async def embed(self, texts: list[str]) -> EmbeddingResult:
        cfg = self.config
        model_label = self.model
        if not texts:
            return EmbeddingResult(provider=f"{PROVIDER_PREFIX}:{cfg.embedding_model}", model=model_label, vectors=[])
        kwargs: dict[str, Any] = {"dimensions": self.dimensions} if cfg.send_dimensions else {}
        raw = await self._call(lambda: self._client.embeddings.with_raw_response.create(
            model=cfg.embedding_model, input=list(texts), encoding_format="float", **kwargs))
        response = raw.parse()
        usage = self._usage(cfg.embedding_model, raw, None, response.usage, cfg.embedding_prices)
        rows = sorted(response.data or [], key=lambda d: d.index)
        errors: list[str] = []
        if len(rows) != len(texts) or [d.index for d in rows] != list(range(len(texts))):
            errors.append(f"data: {len(rows)} embeddings for {len(texts)} inputs")
        vectors = [_vector(d.embedding, self.dimensions, d.index, errors, truncate=cfg.truncate_dimensions)
                   for d in rows]
        if errors:
            raise ProviderOutputInvalid(raw.text[:20_000], errors)
        return _with_cost(EmbeddingResult, usage.cost_usd, provider=usage.provider,
                          provider_request_id=usage.request_id, input_tokens=usage.input_tokens, output_tokens=0,
                          model=model_label, vectors=vectors)


# --- the bundle -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProviderBundle:
    """Same field names as offline.OfflineProviders, typed by the protocols."""

    extractor: FactExtractor
    scorer: ImportanceScorer
    summarizer: Summarizer
    embedder: Embedder
    client: AsyncOpenAI | None = None

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.close()


def openai_providers(config: OpenAICompatibleConfig, client: AsyncOpenAI | None = None) -> ProviderBundle:
    """The four providers on one shared client (one connection pool)."""
    shared = client or config.client()
    return ProviderBundle(OpenAICompatibleExtractor(config, shared), OpenAICompatibleImportanceScorer(config, shared),
                          OpenAICompatibleSummarizer(config, shared), OpenAICompatibleEmbedder(config, shared),
                          client=shared)


def providers_for(settings: Any) -> Any:
    """The provider bundle the settings select: offline (default) or openai-compatible, with the
    embedder AGENT_MEMORY_EMBEDDER names (agent_memory.providers.embedders) in place of the
    bundle's own when it names one."""
    from agent_memory.providers.embedders import local_embedder

    kind = (getattr(settings, "provider", None) or "offline").strip().lower()
    embedder = local_embedder(getattr(settings, "embedder", None), provider=kind)
    if kind == "offline":
        from agent_memory.providers.offline import offline_providers

        bundle: Any = offline_providers()
    elif kind in ("openai", "openai-compatible", "openai_compatible"):
        bundle = openai_providers(OpenAICompatibleConfig.from_settings(settings))
    else:
        raise InvalidInput(f"unknown provider {kind!r}: use 'offline' or 'openai-compatible'")
    return dataclasses.replace(bundle, embedder=embedder) if embedder is not None else bundle
