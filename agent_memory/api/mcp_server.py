"""The MCP server: memory as tools an agent calls, on the official MCP SDK.

Two transports, one set of tools:

- **stdio** (`agent-memory mcp`), the way an MCP host (a desktop agent, an IDE) launches a tool
  server. It carries one API key (`AGENT_MEMORY_API_KEY`, from `agent-memory keys create`).
- **streamable HTTP** at `/mcp` of the HTTP API (`agent-memory serve`, and `up`). Every request
  carries its own key, `Authorization: Bearer amk:...`, as on the REST routes: a request without
  a valid key gets 401 before it reaches the MCP session.

The key's tenant is the only tenant the tools can touch, and its scope decides what they may
do, as in the HTTP API: read for `recall`, `context` and `facts`; write for `remember` and
`end_session`; erase (the operator's scope) for `forget`. The key is verified again on every
tool call, so a key revoked while a session is open stops at once.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from agent_memory.api.client import MemoryClient
from agent_memory.api.outages import dependency_down
from agent_memory.api.user_errors import USER_ERRORS
from agent_memory.core.errors import ServiceUnavailable, new_error_id
from agent_memory.core.models import Message, Session, check_identifier
from agent_memory.memory.evidence import NO_PARENT
from agent_memory.security.api_keys import ApiKey, KeyScope, verify_key
from agent_memory.store.db import tenant_transaction

T = TypeVar("T")

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Long-term memory of the people you talk to. Call `context` with the user's message before you "
    "answer, and cite what you use. Call `remember` with each turn of the conversation, and "
    "`end_session` when the conversation is over: its facts, summary and notes are consolidated "
    "then. `facts` lists what is known now, and `recall` finds facts and past sessions.")


class Turn(BaseModel):
    role: Literal["user", "assistant"]
    content: str = Field(min_length=1, max_length=100_000)
    message_id: str | None = Field(default=None, description="your id of the message, which makes a retry a "
                                                               "duplicate; default: its position in the session")
    created_at: datetime | None = None




def _answers(tool: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    @functools.wraps(tool)
    async def answered(*args: Any, **kwargs: Any) -> T:
        try:
            return await tool(*args, **kwargs)
        except ToolError:
            raise
        except USER_ERRORS as exc:  # the caller can fix it: the message
            raise ToolError(str(exc)) from None
        except ServiceUnavailable as exc:
            log.warning("tool %s: a service is unavailable: %s", tool.__name__, exc)
            raise ToolError("a service the memory server needs is unavailable: retry later") from None
        except Exception as exc:
            if (dependency := dependency_down(exc)) is not None:  # an outage: say which, no traceback
                log.warning("tool %s: %s is unavailable: %s", tool.__name__, dependency, exc)
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


def build_mcp_server(client: MemoryClient, token: str | None = None) -> MCPServer:
    """The tools. With `token` (stdio) every call uses that key; without (streamable HTTP) each
    call uses the key its HTTP request carries."""
    server = MCPServer(name="agent-memory", instructions=INSTRUCTIONS, version="1")

    async def need(ctx: Context, scope: KeyScope) -> ApiKey:
        presented = token if token is not None else bearer_token(ctx.headers)
        if presented is None:
            raise ToolError("no API key: send `Authorization: Bearer amk:...` (agent-memory keys create)")
        # Checked on every call: a key revoked (or narrowed) while the server runs stops at once.
        return await verify_key(client.services.pool, presented, scope)

    @server.tool(description="Append turns of a conversation (idempotent by message id).")
    @_answers
    async def remember(subject: str, session: str, turns: list[Turn], ctx: Context) -> dict[str, Any]:
        tenant = (await need(ctx, "write")).tenant_id
        check_identifier("subject", subject)
        check_identifier("session", session)
        given = [t.message_id for t in turns if t.message_id]
        async with tenant_transaction(client.services.pool, tenant) as conn:
            cur = await conn.execute(
                "SELECT coalesce(max(turn_index) + 1, 0), "
                "(SELECT message_id FROM messages WHERE tenant_id = %(t)s AND subject_id = %(u)s "
                " AND session_id = %(s)s ORDER BY turn_index DESC, created_at DESC, message_id DESC LIMIT 1), "
                "coalesce(array_agg(message_id) FILTER (WHERE message_id = ANY(%(given)s)), '{}') "
                "FROM messages WHERE tenant_id = %(t)s AND subject_id = %(u)s AND session_id = %(s)s",
                {"t": tenant, "u": subject, "s": session, "given": given})
            row = await cur.fetchone()
        start, parent, stored = (int(row[0]), row[1], set(row[2])) if row else (0, None, set())
        now = datetime.now(UTC)
        # A turn whose id is stored already is a duplicate (a retry). A turn without an id is a new
        # message, named by its position, so "yes" said twice is two turns. The append expects
        # the session's last message as it was read: a concurrent `remember` conflicts instead of
        # taking the same positions.
        fresh = [t for t in turns if not (t.message_id and t.message_id in stored)]
        messages = [Message(message_id=t.message_id or f"{session}:{start + n}", turn_index=start + n, role=t.role,
                            content=t.content, created_at=t.created_at or now) for n, t in enumerate(fresh)]
        if not messages:
            return {"session_id": session, "inserted": 0, "duplicates": len(turns)}
        result = await client.append_messages(tenant, subject, Session(session_id=session, messages=messages),
                                              expected_parent=parent or NO_PARENT)
        return {**result.model_dump(mode="json"), "duplicates": result.duplicates + len(turns) - len(fresh)}

    @server.tool(description="The conversation is over: consolidate it into memory (returns the workflow id).")
    @_answers
    async def end_session(subject: str, session: str, ctx: Context) -> dict[str, Any]:
        tenant = (await need(ctx, "write")).tenant_id
        handle = await client.end_session(tenant, subject, session)
        return {"workflow_id": handle.id, "ui_url": client.services.settings.workflow_url(handle.id)}

    @server.tool(description="What to put in the prompt for this message: the profile and relevant past "
                             "sessions and notes, each with the ids of the messages it cites.")
    @_answers
    async def context(subject: str, query: str, ctx: Context, budget: int | None = None) -> dict[str, Any]:
        tenant = (await need(ctx, "read")).tenant_id
        assembled = await client.context(tenant, subject, query, token_budget=budget)
        return {"text": assembled.text, "items": [i.model_dump(mode="json") for i in assembled.items]}

    @server.tool(description="Current facts about the person, with validity and evidence.")
    @_answers
    async def facts(subject: str, ctx: Context) -> list[dict[str, Any]]:
        tenant = (await need(ctx, "read")).tenant_id
        return [f.model_dump(mode="json") for f in await client.facts(tenant, subject)]

    @server.tool(description="Facts and the past sessions nearest a query.")
    @_answers
    async def recall(subject: str, query: str, ctx: Context, limit: int = 5) -> dict[str, Any]:
        tenant = (await need(ctx, "read")).tenant_id
        return (await client.recall(tenant, subject, query, limit=limit)).model_dump(mode="json")

    @server.tool(description="Operator only: forget one memory now (restorable within the grace period).")
    @_answers
    async def forget(subject: str, memory_id: str, ctx: Context, reason: str | None = None) -> dict[str, Any]:
        key = await need(ctx, "erase")
        tenant = key.tenant_id
        done = await client.forget(tenant, subject, memory_id, reason=reason, actor_id=f"mcp:{key.key_id}")
        return done.model_dump(mode="json")

    return server
