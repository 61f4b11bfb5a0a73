"""The MCP server: memory as tools an agent calls, on the official MCP SDK.

Two transports, one set of tools:

- **stdio** (`agent-memory mcp`), the way an MCP host (a desktop agent, an IDE) launches a tool
  server. It carries one API key (`AGENT_MEMORY_API_KEY`, from `agent-memory keys create`).
- **streamable HTTP** at `/mcp` of the HTTP API (`agent-memory serve`, and `up`). Every request
  carries its own key, `Authorization: Bearer amk:...`, as on the REST routes: a request without
  a valid key gets 401 before it reaches the MCP session.

The key's tenant is the only tenant the tools can touch, and its scope decides what they may
do, as in the HTTP API: read for `recall`, `context` and `facts`; write for `remember`,
`end_session` and the agent's own fixes, `correct`, `forget` and `restore` (a forget is restorable
within the grace period; erasing a whole person stays with the operator's erase scope); read for
the daily review's `stale_marks`, write for `resolve_mark` (keep or forget; `correct` resolves
the marks of the fact it corrects). The audit
records a write key's changes as the agent's, an erase key's as the operator's, with the key id.
The key is verified again on every tool call, so a key revoked while a session is open stops at
once.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field, JsonValue, ValidationError
from pydantic_core import ErrorDetails

from agent_memory.api.client import MemoryClient
from agent_memory.api.limits import (
    APPEND_MESSAGES_MAX,
    BUDGET_MAX_TOKENS,
    BUDGET_MIN_TOKENS,
    EVIDENCE_MAX_IDS,
    FACT_NAME_MAX_CHARS,
    FACT_TTL_MAX_SECONDS,
    FACT_TTL_MIN_SECONDS,
    FACT_VALUE_MAX_CHARS,
    MEMORY_ID_MAX_CHARS,
    QUERY_MAX_CHARS,
    REASON_MAX_CHARS,
    RECALL_LIMIT_DEFAULT,
    RECALL_LIMIT_MAX,
    RECALL_LIMIT_MIN,
)
from agent_memory.api.outages import SERVICE, count_unavailable, dependency_down
from agent_memory.api.user_errors import USER_ERRORS
from agent_memory.core.errors import Forbidden, ServiceUnavailable, new_error_id
from agent_memory.core.models import (
    IDENTIFIER_MAX_CHARS,
    IDENTIFIER_RULE,
    IDENTIFIER_SCHEMA_PATTERN,
    MESSAGE_CONTENT_MAX_CHARS,
    MESSAGE_ID_MAX_CHARS,
    METADATA_MAX_KEYS,
    SCOPE_DESCRIPTIONS,
    FactRow,
    Message,
    MetadataValue,
    Session,
    check_identifier,
)
from agent_memory.memory.categories import CATEGORIES_MAX
from agent_memory.memory.evidence import NO_PARENT
from agent_memory.memory.filters import (
    NAMESPACE_MAX_CHARS,
    NAMESPACES_MAX,
    SPEAKER_FILTER,
    SPEAKER_MAX_CHARS,
    MemoryKind,
    memory_filter,
)
from agent_memory.memory.tool_calls import (
    LEASE_DEFAULT_SECONDS,
    LEASE_MAX_SECONDS,
    LEASE_MIN_SECONDS,
    TOOL_NAME_MAX_CHARS,
)
from agent_memory.security.api_keys import ApiKey, ApiKeyError, KeyScope, audited_actor, key_identity, verify_key
from agent_memory.store.db import enter_key_limits, tenant_transaction
from agent_memory.telemetry.metrics import AUTH_FAILURES
from agent_memory.telemetry.record import count

T = TypeVar("T")

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Long-term memory of the people you talk to. Call `context` with the user's message before you "
    "answer, and cite what you use. Call `remember` with each turn of the conversation, and "
    "`end_session` when the conversation is over: its facts, summary and notes are consolidated "
    "then. `facts` lists what is known now, and `recall` finds facts and past sessions. When the "
    "person says a fact is wrong, `correct` it citing their message, or `forget` it (`restore` "
    "undoes that). Before a tool call with a side effect, `claim_tool_call`; after it, `record_tool_call`: "
    "a retried call is then made once.")

SubjectId = Annotated[str, Field(
    description=f"the person the memory is about, your id of them ({IDENTIFIER_RULE})",
    min_length=1, max_length=IDENTIFIER_MAX_CHARS, pattern=IDENTIFIER_SCHEMA_PATTERN)]
SessionId = Annotated[str, Field(
    description=f"your id of the conversation ({IDENTIFIER_RULE})",
    min_length=1, max_length=IDENTIFIER_MAX_CHARS, pattern=IDENTIFIER_SCHEMA_PATTERN)]
Query = Annotated[str, Field(description="what to look for: the user's message or a question about the person",
                             min_length=1, max_length=QUERY_MAX_CHARS)]

Explain = Annotated[bool, Field(description=(
    "also why each memory is there and in its place: its routes' ranks and scores and the terms of its score "
    "(context: each item's `explanation`, and `below_budget`, the best candidates that did not fit; recall: "
    "`explanations`)"))]
MemoryId = Annotated[str, Field(description="the memory's id, as `facts`, `recall` or `context` return it",
                                min_length=1, max_length=MEMORY_ID_MAX_CHARS)]
Namespaces = Annotated[list[Annotated[str, Field(min_length=1, max_length=NAMESPACE_MAX_CHARS)]] | None, Field(
    description="only facts in these namespaces (as `facts` names them, e.g. location)", min_length=1,
    max_length=NAMESPACES_MAX)]
Categories = Annotated[list[Annotated[str, Field(min_length=1, max_length=IDENTIFIER_MAX_CHARS,
                                                 pattern=IDENTIFIER_SCHEMA_PATTERN)]] | None, Field(
    description="only memories in one of these categories the app defined for its tenant (e.g. billing)",
    min_length=1, max_length=CATEGORIES_MAX)]
Kinds = Annotated[list[MemoryKind] | None, Field(
    description="only these kinds: fact (the profile), episode (past sessions and their notes)", min_length=1)]
MetadataFilter = Annotated[dict[str, MetadataValue] | None, Field(
    description="only memories citing a message whose metadata holds these pairs (as `remember` stored them)",
    min_length=1, max_length=METADATA_MAX_KEYS)]

# The scope of the turns `remember` stores; in a filter, the scope of the messages a memory cites.
AgentId = Annotated[str | None, Field(
    description=f"{SCOPE_DESCRIPTIONS['agent_id']} ({IDENTIFIER_RULE}); in a filter: only memories citing its "
                "messages", min_length=1, max_length=IDENTIFIER_MAX_CHARS, pattern=IDENTIFIER_SCHEMA_PATTERN)]
AppId = Annotated[str | None, Field(
    description=f"{SCOPE_DESCRIPTIONS['app_id']} ({IDENTIFIER_RULE}); in a filter: only memories citing its "
                "messages", min_length=1, max_length=IDENTIFIER_MAX_CHARS, pattern=IDENTIFIER_SCHEMA_PATTERN)]
RunId = Annotated[str | None, Field(
    description=f"{SCOPE_DESCRIPTIONS['run_id']} ({IDENTIFIER_RULE}); in a filter: only memories citing its "
                "messages", min_length=1, max_length=IDENTIFIER_MAX_CHARS, pattern=IDENTIFIER_SCHEMA_PATTERN)]
Speaker = Annotated[str | None, Field(description=SPEAKER_FILTER, min_length=1, max_length=SPEAKER_MAX_CHARS)]
Since = Annotated[datetime | None, Field(description="only what became true or happened from then on (ISO 8601)")]
Until = Annotated[datetime | None, Field(description="only what became true or happened until then (ISO 8601)")]
CallKey = Annotated[str, Field(
    description=f"your key for one tool call, the same on every retry of it ({IDENTIFIER_RULE})",
    min_length=1, max_length=IDENTIFIER_MAX_CHARS, pattern=IDENTIFIER_SCHEMA_PATTERN)]
Reason = Annotated[str | None, Field(description="why (the person asked, a ticket), recorded with the change",
                                     max_length=REASON_MAX_CHARS)]


class Turn(BaseModel):
    role: Literal["user", "assistant"] = Field(description="who said it: the person (user) or you (assistant)")
    content: str = Field(description="what was said", min_length=1, max_length=MESSAGE_CONTENT_MAX_CHARS)
    message_id: str | None = Field(
        default=None, min_length=1, max_length=MESSAGE_ID_MAX_CHARS,
        description="your id of the message, unique in the session; a turn whose id is stored already is a "
                    "duplicate. Without it the id is derived from the session, the turn and its place in the "
                    "call, so the same call sent again stores nothing twice")
    created_at: datetime | None = Field(default=None, description="when it was said (ISO 8601); default: now")
    metadata: dict[str, MetadataValue] = Field(
        default_factory=dict, max_length=METADATA_MAX_KEYS,
        description=f"what you know about the message besides its words (channel, app, ticket): up to "
                    f"{METADATA_MAX_KEYS} keys with a short string, number or boolean each")


def _bounds(schema: dict[str, Any], loc: Sequence[int | str]) -> dict[str, Any]:
    """The JSON schema keywords of the parameter at `loc` of a tool's input schema (its bounds),
    or {} where the schema does not say."""
    defs = schema.get("$defs", {})
    node: dict[str, Any] = schema

    def resolved(n: dict[str, Any]) -> dict[str, Any]:
        ref = n.get("$ref", "")
        return defs.get(ref.rsplit("/", 1)[-1], {}) if ref.startswith("#/$defs/") else n

    for part in loc:
        node = resolved(node)
        branches = [resolved(b) for b in node.get("anyOf", [])] or [node]
        step = next((b["items"] if isinstance(part, int) else b["properties"][part]
                     for b in branches if ("items" in b if isinstance(part, int) else part in b.get("properties", {}))),
                    None)
        if step is None:
            return {}
        node = step
    merged = dict(resolved(node))
    for branch in merged.get("anyOf", []):
        merged = {**resolved(branch), **merged}
    return merged


def _range(low: Any, high: Any, unit: str = "") -> str:
    if low is not None and high is not None:
        return f"between {low} and {high}{unit}"
    return f"at least {low}{unit}" if low is not None else f"at most {high}{unit}"


def describe_invalid(exc: ValidationError, schema: dict[str, Any] | None = None) -> str:
    """What is wrong with a tool's arguments and how to fix it, one clause per bad parameter,
    named by its path (`budget`, `turns.3.content`). With the tool's input schema, a bound is
    stated in full ("budget must be between 50 and 32000"). Never the rejected value: it is the
    caller's data, and may be 100,000 characters long."""
    return "; ".join(_describe(err, schema or {}) for err in exc.errors())


def _describe(err: ErrorDetails, schema: dict[str, Any]) -> str:
    loc = list(err["loc"])
    name = ".".join(str(p) for p in loc) or "the arguments"
    kind, ctx = err["type"], err.get("ctx", {})
    known = _bounds(schema, loc) if loc else {}
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        low = known.get("minimum", ctx.get("ge", ctx.get("gt")))
        high = known.get("maximum", ctx.get("le", ctx.get("lt")))
        return f"{name} must be {_range(low, high)}"
    if kind in ("string_too_short", "string_too_long"):
        low, high = known.get("minLength", ctx.get("min_length")), known.get("maxLength", ctx.get("max_length"))
        if kind == "string_too_short" and low == 1 and high is None:
            return f"{name} must not be empty"
        return f"{name} must be {_range(low, high, ' characters')} long"
    if kind in ("too_short", "too_long"):
        low, high = known.get("minItems", ctx.get("min_length")), known.get("maxItems", ctx.get("max_length"))
        hint = ": send a longer conversation in several calls" if name == "turns" and kind == "too_long" else ""
        return f"{name} must have {_range(low, high, ' items')}{hint}"
    if kind == "string_pattern_mismatch" and str(loc[-1]) in ("subject", "session"):
        return f"{name} must be {IDENTIFIER_RULE}"
    if kind == "missing":
        return f"{name} is required"
    return f"{name}: {err['msg'][:1].lower()}{err['msg'][1:]}"


class MemoryMCPServer(MCPServer):
    """The SDK's server, answering a call whose arguments break the tool's input schema with what
    to fix ("budget must be between 50 and 32000") instead of the validator's report."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            invalid = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(invalid, ValidationError):
                raise
            schema = next((t.input_schema for t in await self.list_tools() if t.name == name), None)
            raise ToolError(f"Error executing tool {name}: {describe_invalid(invalid, schema)}") from invalid


# What an agent reads of a fact: the value, where it sits, when it held and was last confirmed, its
# evidence and the version a correction names; the tenant and subject it asked for, and bookkeeping
# (ids of intervals, provenance, the model's confidence), stay out of its context window.
AGENT_FACT_FIELDS = ("memory_id", "namespace", "key", "value", "version", "valid_from", "last_confirmed_at",
                     "evidence_message_ids")
# Said only when they say something: an end, a status other than current, the review's marks, a
# task-local session, the writer's metadata.
AGENT_FACT_IF_SET = ("valid_to", "status", "stale_reasons", "task_session_id", "metadata")


def agent_fact(fact: FactRow) -> dict[str, Any]:
    """A fact as the `facts` tool answers it (AGENT_FACT_FIELDS, AGENT_FACT_IF_SET)."""
    row = fact.model_dump(mode="json")
    compact = {name: row[name] for name in AGENT_FACT_FIELDS}
    compact.update({name: row[name] for name in AGENT_FACT_IF_SET
                    if row[name] not in (None, [], {}) and not (name == "status" and row[name] == "active")})
    return compact


def compact_items(items: list[dict[str, Any]]) -> CallToolResult:
    """A list as a tool's answer: the items as structured content, and as text one compact JSON
    line each (the SDK would indent every item over several lines)."""
    text = "\n".join(json.dumps(item, ensure_ascii=False, separators=(",", ":")) for item in items)
    return CallToolResult(content=[TextContent(type="text", text=text)] if items else [],
                          structured_content={"result": items})


def _answers(tool: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    @functools.wraps(tool)
    async def answered(*args: Any, **kwargs: Any) -> T:
        try:
            return await tool(*args, **kwargs)
        except ToolError:
            raise
        except ValidationError as exc:  # a model built in the tool from the caller's data
            raise ToolError(describe_invalid(exc)) from None
        except USER_ERRORS as exc:  # the caller can fix it: the message
            raise ToolError(str(exc)) from None
        except ServiceUnavailable as exc:
            log.warning("tool %s: a service is unavailable: %s", tool.__name__, exc)
            count_unavailable(SERVICE)
            raise ToolError("a service the memory server needs is unavailable: retry later") from None
        except Exception as exc:
            if (dependency := dependency_down(exc)) is not None:  # an outage: say which, no traceback
                log.warning("tool %s: %s is unavailable: %s", tool.__name__, dependency, exc)
                count_unavailable(dependency)
                raise ToolError(f"{dependency} is unavailable to the memory server: retry in a few "
                                "seconds") from None
            # A bug: its traceback in the server's log under an id the caller sees.
            error_id = new_error_id()
            log.error("tool %s failed: internal error %s", tool.__name__, error_id, exc_info=exc)
            raise ToolError(f"internal error {error_id}: the call failed on the server; it is logged "
                            "there") from None
    return answered


def bearer_token(headers: Any) -> str | None:
    """The API key of an `Authorization: Bearer ...` header, or None."""
    value = (headers.get("authorization") if headers is not None else None) or ""
    scheme, _, token = value.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def derived_message_id(session: str, turn: Turn, position: int, after: str | None) -> str:
    """The id of a turn sent without one: a digest of the session, the turn's role and content,
    its position in the call and the message the call follows (`after`, None for a session's
    first call). The same call sent again after it was stored derives the same ids, so it is a
    duplicate; the same words said again later follow another message, so they are a new turn."""
    digest = hashlib.sha256(json.dumps([session, turn.role, turn.content, position, after or ""]).encode())
    return f"{session}:{digest.hexdigest()[:16]}"


def build_mcp_server(client: MemoryClient, token: str | None = None) -> MCPServer:
    """The tools. With `token` (stdio) every call uses that key; without (streamable HTTP) each
    call uses the key its HTTP request carries."""
    server = MemoryMCPServer(name="agent-memory", instructions=INSTRUCTIONS, version="1")

    async def need(ctx: Context, scope: KeyScope) -> ApiKey:
        presented = token if token is not None else bearer_token(ctx.headers)
        if presented is None:
            count(AUTH_FAILURES, reason="missing")
            raise ToolError("no API key: send `Authorization: Bearer amk:...` (agent-memory keys create)")
        # Checked on every call: a key revoked (or narrowed) while the server runs stops at once.
        try:
            key = await verify_key(client.services.pool, presented, scope)
        except ApiKeyError as exc:
            count(AUTH_FAILURES, reason=exc.reason)
            raise
        except Forbidden:
            count(AUTH_FAILURES, reason="scope")
            raise
        enter_key_limits(key.agent_id, key.app_id)  # the rest of the call acts within the key's limits
        return key

    @server.tool(description=(
        "Store turns of a conversation with the person (needs a write key). Send each turn as it "
        f"happens, or up to {APPEND_MESSAGES_MAX} turns in one call. Safe to retry: a turn whose "
        "message_id is stored already, or a call sent again unchanged without ids, stores nothing twice. "
        "Nothing is learned from the turns until `end_session` (or the session's idle timeout). "
        "`agent_id`, `app_id` and `run_id` say which agent, app and run the turns belong to."))
    @_answers
    async def remember(
            subject: SubjectId, session: SessionId,
            turns: Annotated[list[Turn], Field(
                description=f"the turns in the order they were said, 1 to {APPEND_MESSAGES_MAX} per call",
                min_length=1, max_length=APPEND_MESSAGES_MAX)],
            ctx: Context, agent_id: AgentId = None, app_id: AppId = None, run_id: RunId = None) -> dict[str, Any]:
        tenant = (await need(ctx, "write")).tenant_id
        check_identifier("subject", subject)
        check_identifier("session", session)
        given = [t.message_id for t in turns if t.message_id]
        scope = {"t": tenant, "u": subject, "s": session, "given": given, "n": len(turns) + 1}
        async with tenant_transaction(client.services.pool, tenant) as conn:
            cur = await conn.execute(
                "SELECT coalesce(max(turn_index) + 1, 0), "
                "coalesce(array_agg(message_id) FILTER (WHERE message_id = ANY(%(given)s)), '{}') "
                "FROM messages WHERE tenant_id = %(t)s AND subject_id = %(u)s AND session_id = %(s)s", scope)
            row = await cur.fetchone()
            cur = await conn.execute(
                "SELECT message_id FROM messages WHERE tenant_id = %(t)s AND subject_id = %(u)s "
                "AND session_id = %(s)s ORDER BY turn_index DESC, created_at DESC, message_id DESC LIMIT %(n)s", scope)
            latest = [r[0] for r in reversed(await cur.fetchall())]  # the session's last messages, oldest first
        start, stored = (int(row[0]), set(row[1])) if row else (0, set())
        parent = latest[-1] if latest else None
        # The same call sent again (its answer lost) finds its turns as the session's last
        # messages, under the ids they were given after the message before them.
        if len(latest) >= len(turns):
            before = latest[-len(turns) - 1] if len(latest) > len(turns) else None
            again = [t.message_id or derived_message_id(session, t, n, before) for n, t in enumerate(turns)]
            if latest[-len(turns):] == again:
                return {"session_id": session, "inserted": 0, "duplicates": len(turns)}
        now = datetime.now(UTC)
        # A turn whose id is stored already is a duplicate (a retry). A turn without an id gets one
        # derived from what it says, its place in the call and the message the call follows, so
        # "yes" said twice is two turns. The append expects the session's last message as it was
        # read: a concurrent `remember` conflicts instead of taking the same positions.
        fresh = [(n, t) for n, t in enumerate(turns) if not (t.message_id and t.message_id in stored)]
        messages = [Message(message_id=t.message_id or derived_message_id(session, t, n, parent),
                            turn_index=start + i, role=t.role, content=t.content, created_at=t.created_at or now,
                            metadata=t.metadata, agent_id=agent_id, app_id=app_id, run_id=run_id)
                    for i, (n, t) in enumerate(fresh)]
        if not messages:
            return {"session_id": session, "inserted": 0, "duplicates": len(turns)}
        result = await client.append_messages(tenant, subject, Session(session_id=session, messages=messages),
                                              expected_parent=parent or NO_PARENT)
        return {**result.model_dump(mode="json"), "duplicates": result.duplicates + len(turns) - len(fresh)}

    @server.tool(description=(
        "The conversation is over: consolidate the session into memory (needs a write key). Its facts, "
        "summary and notes are extracted in a background run; returns the run's workflow id and UI link. "
        "Ending it again with nothing new said returns the same run."))
    @_answers
    async def end_session(subject: SubjectId, session: SessionId, ctx: Context) -> dict[str, Any]:
        tenant = (await need(ctx, "write")).tenant_id
        handle = await client.end_session(tenant, subject, session)
        return {"workflow_id": handle.id, "ui_url": client.services.settings.workflow_url(handle.id)}

    @server.tool(description=(
        "What to put in the prompt before you answer this message (needs a read key): the person's "
        "profile and the relevant past sessions and notes as text, and the items it is made of, each "
        "with the ids of the messages it cites. What a session taught is there once the session is "
        "consolidated (`end_session`). `kinds`, `namespaces`, the tenant's `categories`, `since`, `until`, "
        "`metadata`, the scope (`agent_id`, `app_id`, `run_id` of the cited messages) and the `speaker` who said "
        "them narrow it."))
    @_answers
    async def context(
            subject: SubjectId, query: Query, ctx: Context,
            budget: Annotated[int | None, Field(
                description=f"the most tokens the text may take, {BUDGET_MIN_TOKENS} to {BUDGET_MAX_TOKENS}; "
                            "default: the server's context budget",
                ge=BUDGET_MIN_TOKENS, le=BUDGET_MAX_TOKENS)] = None,
            session: Annotated[str | None, Field(
                description="the conversation you are in: facts that hold only for its task join the profile",
                min_length=1, max_length=IDENTIFIER_MAX_CHARS, pattern=IDENTIFIER_SCHEMA_PATTERN)] = None,
            kinds: Kinds = None, namespaces: Namespaces = None, since: Since = None, until: Until = None,
            metadata: MetadataFilter = None, agent_id: AgentId = None, app_id: AppId = None, run_id: RunId = None,
            categories: Categories = None, speaker: Speaker = None, explain: Explain = False,
    ) -> dict[str, Any]:
        tenant = (await need(ctx, "read")).tenant_id
        filters = memory_filter(kinds=kinds, namespaces=namespaces, since=since, until=until, metadata=metadata,
                                agent_id=agent_id, app_id=app_id, run_id=run_id, categories=categories,
                                speaker=speaker)
        assembled = await client.context(tenant, subject, query, token_budget=budget, session_id=session,
                                         filters=filters, explain=explain)
        answer: dict[str, Any] = {"text": assembled.text, "items": [i.model_dump(mode="json") for i in assembled.items]}
        if assembled.below_budget is not None:
            answer["below_budget"] = [i.model_dump(mode="json") for i in assembled.below_budget]
        return answer

    @server.tool(description=(
        "The facts known about the person now (needs a read key): each with its value, since when it "
        "holds, when it was last said again or confirmed (`last_confirmed_at`), what wrote it "
        "(`extracted_by`) and the ids of the messages it was learned from. Facts of a session appear once it is "
        "consolidated. `namespaces`, `since` and `until` keep the facts of those namespaces that became "
        "true in that range; `agent_id`, `app_id` and `run_id` those learned from that scope's messages, "
        "`speaker` those learned from what that speaker said."))
    @_answers
    async def facts(subject: SubjectId, ctx: Context, namespaces: Namespaces = None, since: Since = None,
                    until: Until = None, agent_id: AgentId = None, app_id: AppId = None,
                    run_id: RunId = None, categories: Categories = None,
                    speaker: Speaker = None) -> Annotated[CallToolResult, list[dict[str, Any]]]:
        tenant = (await need(ctx, "read")).tenant_id
        filters = memory_filter(namespaces=namespaces, since=since, until=until, agent_id=agent_id, app_id=app_id,
                                run_id=run_id, categories=categories, speaker=speaker)
        return compact_items([agent_fact(f) for f in await client.facts(tenant, subject, filters=filters)])

    @server.tool(description=(
        "The people, pets, places, organisations, events and things the person's sessions mention (needs "
        "a read key): each with its name, type, other names and the ids of the messages that mention it."))
    @_answers
    async def entities(subject: SubjectId, ctx: Context) -> list[dict[str, Any]]:
        tenant = (await need(ctx, "read")).tenant_id
        return [e.model_dump(mode="json") for e in await client.entities(tenant, subject)]

    @server.tool(description=(
        "How the entities the person's sessions mention are related now (needs a read key): each edge "
        "by the two entities' names (source_name, relation and role, target_name), since when it holds "
        "and the ids of the messages that say it."))
    @_answers
    async def relations(subject: SubjectId, ctx: Context) -> list[dict[str, Any]]:
        tenant = (await need(ctx, "read")).tenant_id
        return [r.model_dump(mode="json") for r in await client.relations(tenant, subject)]

    @server.tool(description=(
        "Search the person's memory (needs a read key): the facts and the past sessions nearest the "
        f"query, at most `limit` of each ({RECALL_LIMIT_MIN} to {RECALL_LIMIT_MAX}); narrowed to `kinds` "
        "(fact, episode), fact `namespaces`, what became true or happened between `since` and `until`, and "
        "what cites a message whose `metadata` holds given pairs, of a given `agent_id`, `app_id` or `run_id`, or "
        "said by a given `speaker` (one of several people speaking under one account)."))
    @_answers
    async def recall(
            subject: SubjectId, query: Query, ctx: Context,
            limit: Annotated[int, Field(
                description=f"the most results of each kind, {RECALL_LIMIT_MIN} to {RECALL_LIMIT_MAX}",
                ge=RECALL_LIMIT_MIN, le=RECALL_LIMIT_MAX)] = RECALL_LIMIT_DEFAULT,
            kinds: Kinds = None, namespaces: Namespaces = None, since: Since = None, until: Until = None,
            metadata: MetadataFilter = None, agent_id: AgentId = None, app_id: AppId = None,
            run_id: RunId = None, categories: Categories = None, speaker: Speaker = None,
            explain: Explain = False) -> dict[str, Any]:
        tenant = (await need(ctx, "read")).tenant_id
        filters = memory_filter(kinds=kinds, namespaces=namespaces, since=since, until=until, metadata=metadata,
                                agent_id=agent_id, app_id=app_id, run_id=run_id, categories=categories,
                                speaker=speaker)
        return (await client.recall(tenant, subject, query, limit=limit, filters=filters,
                                    explain=explain)).model_dump(mode="json")

    @server.tool(description=(
        "Correct a fact about the person (needs a write key): the new value replaces the current one "
        "from now, citing the messages in which the person said it; the old value stays in the history. "
        "Pass the version `facts` returned for it (0 for a fact not known yet): if the fact changed since, "
        "the call is refused and nothing is written. With `expires_at` or `ttl_seconds` (\"remember this "
        "for a week\") the fact holds only until then, and no answer returns it afterwards. Subject to the "
        "tenant's write policy and the person's consents, like what a session teaches."))
    @_answers
    async def correct(
            subject: SubjectId,
            namespace: Annotated[str, Field(description="the fact's namespace, as `facts` returns it (e.g. location)",
                                            min_length=1, max_length=FACT_NAME_MAX_CHARS)],
            key: Annotated[str, Field(description="the fact's key, as `facts` returns it (e.g. home_city)",
                                      min_length=1, max_length=FACT_NAME_MAX_CHARS)],
            value: Annotated[str, Field(description="the right value", min_length=1,
                                        max_length=FACT_VALUE_MAX_CHARS)],
            expected_version: Annotated[int, Field(description="the fact's version as `facts` returned it; 0 "
                                                               "for a new fact", ge=0)],
            evidence: Annotated[list[str], Field(
                description="ids of the person's messages that say it (store them with `remember` first)",
                min_length=1, max_length=EVIDENCE_MAX_IDS)],
            ctx: Context,
            expires_at: Annotated[datetime | None, Field(
                description="when it stops holding (ISO 8601, after now): forgotten by every answer then; give "
                            "this or ttl_seconds, or neither for a fact that holds until it changes")] = None,
            ttl_seconds: Annotated[int | None, Field(
                description="how long it holds from now, in seconds (\"remember this for a week\": 604800); "
                            "instead of expires_at", ge=FACT_TTL_MIN_SECONDS, le=FACT_TTL_MAX_SECONDS)] = None,
            metadata: Annotated[dict[str, MetadataValue] | None, Field(
                description="what you know about the fact besides its value (a source, a ticket): up to "
                            f"{METADATA_MAX_KEYS} keys with a short string, number or boolean each",
                max_length=METADATA_MAX_KEYS)] = None,
    ) -> dict[str, Any]:
        holder = await need(ctx, "write")
        check_identifier("subject", subject)
        outcome = await client.write_fact(holder.tenant_id, subject, namespace, key, value,
                                          expected_version=expected_version, evidence_message_ids=evidence,
                                          expires_at=expires_at, ttl_seconds=ttl_seconds,
                                          actor=audited_actor(holder), actor_id=f"mcp:{holder.key_id}",
                                          metadata=metadata)
        return outcome.model_dump(mode="json")

    @server.tool(description=(
        "Forget one memory (for example a wrong fact) now (needs a write key). It leaves every answer at "
        "once and can be restored with `restore` within the grace period; after that it is swept from "
        "every store. To erase a whole person, the operator uses the HTTP API's erasure."))
    @_answers
    async def forget(subject: SubjectId, memory_id: MemoryId, ctx: Context, reason: Reason = None) -> dict[str, Any]:
        holder = await need(ctx, "write")
        done = await client.forget(holder.tenant_id, subject, memory_id, reason=reason, actor=audited_actor(holder),
                                   actor_id=f"mcp:{holder.key_id}")
        return done.model_dump(mode="json")

    @server.tool(description=(
        "Undo a `forget` within the grace period (needs a write key): the memory is back in every answer."))
    @_answers
    async def restore(subject: SubjectId, memory_id: MemoryId, ctx: Context, reason: Reason = None) -> dict[str, Any]:
        holder = await need(ctx, "write")
        done = await client.restore(holder.tenant_id, subject, memory_id, reason=reason, actor=audited_actor(holder),
                                    actor_id=f"mcp:{holder.key_id}")
        return done.model_dump(mode="json")

    @server.tool(description=(
        "What the daily review marked in the person's memory as possibly stale (needs a read key): each mark "
        "with its id, the marked memory's id, the reason (stale: a fact past its shelf life not confirmed since; "
        "contradicted: later statements disagree; duplicate: a near-identical note; candidate_expiring) and the "
        "related memories' ids. Ask the person, then `resolve_mark` (keep or forget) or `correct` the fact."))
    @_answers
    async def stale_marks(subject: SubjectId, ctx: Context) -> list[dict[str, Any]]:
        tenant = (await need(ctx, "read")).tenant_id
        check_identifier("subject", subject)
        return [m.model_dump(mode="json") for m in await client.admin.stale_marks(tenant, subject_id=subject)]

    @server.tool(description=(
        "Resolve a mark of `stale_marks` (needs a write key): `keep` when the person says it still holds (the "
        "fact counts as confirmed), `forget` when it no longer does (restorable with `restore` within the "
        "grace period). To give the right value, `correct` the fact instead: that resolves its marks."))
    @_answers
    async def resolve_mark(
            subject: SubjectId,
            mark_id: Annotated[str, Field(description="the mark's id, as `stale_marks` returns it")],
            resolution: Annotated[Literal["keep", "forget"], Field(description="keep or forget")],
            ctx: Context, reason: Reason = None) -> dict[str, Any]:
        holder = await need(ctx, "write")
        check_identifier("subject", subject)
        done = await client.admin.resolve_stale_mark(holder.tenant_id, subject, mark_id, resolution,
                                               actor=audited_actor(holder), actor_id=f"mcp:{holder.key_id}",
                                               reason=reason)
        return done.model_dump(mode="json")

    @server.tool(description=(
        "Before a tool call with a side effect (an e-mail sent, an order placed), claim its call key "
        "(needs a write key); the same key and arguments on every retry. `state` says what to do: "
        "`claimed` — make the call, then `record_tool_call` with the returned `attempt`; `in_flight` — "
        "another attempt is making it, ask again after `lease_expires_at`; `completed` — it was made "
        "already and `result` is what it returned: do not make it again."))
    @_answers
    async def claim_tool_call(
            subject: SubjectId, call_key: CallKey,
            tool: Annotated[str, Field(description="the tool's name, e.g. send_email", min_length=1,
                                       max_length=TOOL_NAME_MAX_CHARS)],
            request: Annotated[JsonValue, Field(description="the call's arguments as JSON; a retry sends the same")],
            ctx: Context,
            lease_seconds: Annotated[int, Field(
                description="how long the claim holds the call, longer than the call can take",
                ge=LEASE_MIN_SECONDS, le=LEASE_MAX_SECONDS)] = LEASE_DEFAULT_SECONDS) -> dict[str, Any]:
        holder = await need(ctx, "write")
        check_identifier("subject", subject)
        call = await client.claim_tool_call(holder.tenant_id, subject, call_key, tool, request,
                                            lease_seconds=lease_seconds, actor_id=f"mcp:{holder.key_id}",
                                            claimed_as=key_identity(holder))
        return call.model_dump(mode="json")

    @server.tool(description=(
        "Record what a claimed tool call returned (needs a write key), with the claim's `attempt`. "
        "`completed`: every retry's claim gets this result back; `failed`: the next claim makes the call again."))
    @_answers
    async def record_tool_call(
            subject: SubjectId, call_key: CallKey,
            attempt: Annotated[int, Field(description="the attempt number the claim returned", ge=1)],
            result: Annotated[JsonValue, Field(description="what the call returned, as JSON")],
            ctx: Context,
            outcome: Annotated[Literal["completed", "failed"], Field(
                description="completed: the result is final; failed: the call may be made again")] = "completed",
    ) -> dict[str, Any]:
        holder = await need(ctx, "write")
        check_identifier("subject", subject)
        call = await client.record_tool_call(holder.tenant_id, subject, call_key, attempt=attempt, result=result,
                                             outcome=outcome, claimed_as=key_identity(holder))
        return call.model_dump(mode="json")

    return server
