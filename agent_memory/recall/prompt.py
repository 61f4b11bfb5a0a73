"""Prompt assembly: system → structured memory (profile, then recalled episodes and notes, each
item citing its messages) → the live session's recent turns → the user's input, as OpenAI-style
chat messages with the cited item ids and the token count of every block.

Recent turns come from working memory (Redis) and fall back to the messages table (the evidence,
always complete) when Redis lost them or trimmed the session's start. When they exceed the
policy's `recent_tokens`, the last `recent_turns` turns stay verbatim and the older ones roll into
a running summary, cached in working memory until more turns roll over.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Literal

from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel
from redis.asyncio import Redis

from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import Message, check_identifier, check_session_id
from agent_memory.memory.evidence import WORKING_MEMORY_TTL_SECONDS, recent_messages
from agent_memory.providers.base import Embedder, Summarizer, estimate_tokens
from agent_memory.providers.metering import metered
from agent_memory.providers.offline import ExtractiveSummarizer
from agent_memory.recall.context import MESSAGE_OVERHEAD, AssembledContext, assemble_context, truncate_tokens
from agent_memory.recall.recall_policy import RecallPolicy
from agent_memory.security.keyring import KeyRing
from agent_memory.store.redis_keys import redis_prefix, register
from agent_memory.store.scope import Mode, subject_scope

log = logging.getLogger(__name__)

DEFAULT_SYSTEM = ("You are a helpful assistant with long-term memory of this user. Use the memory below when it "
                  "is relevant; each item cites the messages it comes from. If the user says something that "
                  "contradicts memory, believe the user.")
SUMMARY_HEADER = "Earlier in this session (summary):"
BlockName = Literal["system", "profile", "episodic", "recent", "input"]
RecentSource = Literal["redis", "messages", "none"]


class ChatMessage(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: str


class PromptBlock(BaseModel):
    name: BlockName
    tokens: int
    budget: int | None = None  # None: the block has no budget (system, input)
    messages: list[ChatMessage]
    item_ids: list[str] = []  # memory ids (profile, episodic) or message ids (recent) it carries, in order
    citations: dict[str, list[str]] = {}  # memory id → the messages it cites (profile, episodic)
    cited_message_ids: list[str] = []


class BuiltPrompt(BaseModel):
    tenant_id: str
    subject_id: str
    session_id: str
    as_of: datetime | None
    blocks: list[PromptBlock]  # system, profile, episodic, recent, input: empty blocks included
    cited_item_ids: list[str]
    tokens: int
    recent_source: RecentSource
    summarized_turns: int  # older turns of the live session carried by the running summary
    leak_filter_dropped: int = 0

    @property
    def messages(self) -> list[ChatMessage]:
        return [m for block in self.blocks for m in block.messages]

    def chat_messages(self) -> list[dict[str, str]]:
        """What an OpenAI-style chat API takes."""
        return [m.model_dump() for m in self.messages]


def message_tokens(content: str) -> int:
    return estimate_tokens(content) + MESSAGE_OVERHEAD


def _chat_role(message: Message) -> Literal["user", "assistant"]:
    return "assistant" if message.role == "assistant" else "user"


def _turn_text(message: Message) -> str:
    return message.content + (f" [image: {message.image_caption}]" if message.image_caption else "")


class _Recent(BaseModel):
    messages: list[Message]
    source: RecentSource


async def _session_messages(pool: AsyncConnectionPool, keyring: KeyRing, redis: Redis | None, tenant_id: str,
                            subject_id: str, session_id: str, as_of: datetime | None) -> _Recent:
    """The live session's messages, in turn order, recorded by `as_of`: working memory when it
    holds the session from its first turn, else the messages table. Session ids are per subject:
    another subject's session of the same id is not this one. An erased subject has none."""
    async with subject_scope(pool, keyring, tenant_id, subject_id, Mode.READ) as scope:
        if scope.erased:
            return _Recent(messages=[], source="none")
        # Another agent's private session is no session of a reader limited to an agent (the
        # session row is visible to every reader of the tenant; its messages, in Redis too, are not).
        cur = await scope.conn.execute(
            "SELECT 1 FROM sessions WHERE tenant_id = %s AND subject_id = %s AND session_id = %s "
            "AND (private_to IS NULL OR coalesce(current_setting('app.agent_id', true), '') IN ('', private_to))",
            (tenant_id, subject_id, session_id))
        if await cur.fetchone() is None:
            return _Recent(messages=[], source="none")  # a new session of this subject: nothing said yet
        cached = await recent_messages(redis, tenant_id, subject_id, session_id) if redis is not None else []
        if cached and cached[0].turn_index == 0:
            source: RecentSource = "redis"
            messages = cached
        else:  # Redis lost or trimmed the session: the evidence has all of it
            async with scope.conn.cursor(row_factory=class_row(Message)) as mcur:
                await mcur.execute(
                    "SELECT message_id, turn_index, role, speaker, content, image_caption, created_at FROM messages "
                    "WHERE tenant_id = %s AND subject_id = %s AND session_id = %s "
                    "ORDER BY turn_index, created_at, message_id", (tenant_id, subject_id, session_id))
                messages = await mcur.fetchall()
            source = "messages"
    if as_of is not None:
        messages = [m for m in messages if m.created_at <= as_of]
    return _Recent(messages=messages, source=source if messages else "none")


def _summary_key(tenant_id: str, subject_id: str, session_id: str) -> str:
    # Under the subject's prefix and in its registry: erasure deletes it with the working memory.
    return f"{redis_prefix(tenant_id, subject_id)}wm-summary:{session_id}"


async def running_summary(redis: Redis | None, summarizer: Summarizer, tenant_id: str, subject_id: str,
                          session_id: str, older: list[Message], token_cap: int) -> str:
    """A summary of the turns that rolled out of the verbatim window, cached in working memory
    by the last turn it covers. A summarizer failure falls back to the extractive summarizer:
    the prompt is still built."""
    key = _summary_key(tenant_id, subject_id, session_id)
    through = older[-1].message_id
    if redis is not None:
        cached = await redis.get(key)
        if cached:
            entry = json.loads(cached)
            if entry.get("through") == through and entry.get("cap") == token_cap:
                return str(entry["text"])
    try:
        text = (await metered(tenant_id, summarizer, "summarize",
                              summarizer.summarize(older, token_cap=token_cap))).text
    except Exception as exc:  # any provider failure: the offline summary stands in
        log.warning("running summary by %s failed (%s); using the extractive summary",
                    type(summarizer).__name__, type(exc).__name__)
        text = (await ExtractiveSummarizer().summarize(older, token_cap=token_cap)).text
    if estimate_tokens(text) > token_cap:  # a model may overrun its cap; the budget holds regardless
        text = truncate_tokens(text, token_cap)
    if redis is not None:
        async with redis.pipeline(transaction=True) as pipe:
            pipe.set(key, json.dumps({"through": through, "cap": token_cap, "text": text}),
                     ex=WORKING_MEMORY_TTL_SECONDS)
            register(pipe, tenant_id, subject_id, key, WORKING_MEMORY_TTL_SECONDS)
            await pipe.execute()
    return text


def split_recent(messages: list[Message], policy: RecallPolicy) -> tuple[list[Message], list[Message], int]:
    """(older turns to summarise, turns kept verbatim, tokens left for the summary). Everything
    is verbatim when it fits; otherwise the last `recent_turns` turns that fit beside a summary
    of at least a quarter of the budget (at least the last turn)."""
    budget = policy.recent_tokens
    costs = [message_tokens(_turn_text(m)) for m in messages]
    if sum(costs) <= budget:
        return [], messages, 0
    reserve = budget // 4 + MESSAGE_OVERHEAD + estimate_tokens(SUMMARY_HEADER)
    keep, used = 0, 0
    for cost in reversed(costs):
        if keep >= policy.recent_turns or (keep and used + cost > budget - reserve):
            break
        keep, used = keep + 1, used + cost
    older, verbatim = messages[:-keep], messages[-keep:]
    return older, verbatim, max(0, budget - used - MESSAGE_OVERHEAD - estimate_tokens(SUMMARY_HEADER) - 1)


async def build_prompt(pool: AsyncConnectionPool, keyring: KeyRing, redis: Redis | None, embedder: Embedder,
                       tenant_id: str, subject_id: str, session_id: str, user_input: str, *,
                       system: str = DEFAULT_SYSTEM, as_of: datetime | None = None,
                       token_budget: int | None = None, policy: RecallPolicy | None = None,
                       summarizer: Summarizer | None = None) -> BuiltPrompt:
    check_identifier("tenant", tenant_id)
    check_identifier("subject", subject_id)
    check_session_id(session_id)
    if not user_input.strip():
        raise InvalidInput("user_input is empty: pass the user's new message")
    recent = await _session_messages(pool, keyring, redis, tenant_id, subject_id, session_id, as_of)
    context: AssembledContext = await assemble_context(pool, keyring, embedder, tenant_id, subject_id, user_input,
                                                       as_of=as_of, token_budget=token_budget, policy=policy,
                                                       session_id=session_id, redis=redis)
    assert context.policy is not None
    turns = recent.messages
    if turns and turns[-1].role == "user" and turns[-1].content.strip() == user_input.strip():
        turns = turns[:-1]  # the runtime appended the input before asking for the prompt
    older, verbatim, summary_cap = split_recent(turns, context.policy)
    recent_messages_out: list[ChatMessage] = []
    if older:
        summary = await running_summary(redis, summarizer or ExtractiveSummarizer(), tenant_id, subject_id,
                                        session_id, older, summary_cap)
        recent_messages_out.append(ChatMessage(role="system", content=f"{SUMMARY_HEADER} {summary}"))
    recent_messages_out += [ChatMessage(role=_chat_role(m), content=_turn_text(m)) for m in verbatim]

    def block(name: BlockName, messages: list[ChatMessage], budget: int | None = None, **ids) -> PromptBlock:
        return PromptBlock(name=name, messages=messages, budget=budget,
                           tokens=sum(message_tokens(m.content) for m in messages), **ids)

    def memory(text: str) -> list[ChatMessage]:
        return [ChatMessage(role="system", content=text)] if text else []

    profile, episodic = context.profile_items, context.episodic_items
    blocks = [
        block("system", [ChatMessage(role="system", content=system)]),
        block("profile", memory(context.profile_text), context.profile_budget,
              item_ids=[i.memory_id for i in profile], citations={i.memory_id: i.cited_message_ids for i in profile},
              cited_message_ids=sorted({m for i in profile for m in i.cited_message_ids})),
        block("episodic", memory(context.episodic_text), context.episodic_budget,
              item_ids=[i.memory_id for i in episodic],
              citations={i.memory_id: i.cited_message_ids for i in episodic},
              cited_message_ids=sorted({m for i in episodic for m in i.cited_message_ids})),
        block("recent", recent_messages_out, context.policy.recent_tokens,
              item_ids=[m.message_id for m in [*older, *verbatim]]),
        block("input", [ChatMessage(role="user", content=user_input)]),
    ]
    return BuiltPrompt(tenant_id=tenant_id, subject_id=subject_id, session_id=session_id, as_of=as_of, blocks=blocks,
                       cited_item_ids=[i.memory_id for i in context.items], tokens=sum(b.tokens for b in blocks),
                       recent_source=recent.source, summarized_turns=len(older),
                       leak_filter_dropped=context.leak_filter_dropped)
