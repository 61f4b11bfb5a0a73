"""The agent's side-effecting tool calls made once: claim a call key before the call (`write`),
record its result after (`write`), read a call's record (`read`). A call is its claimant's: the
agent or app its key is limited to (the tenant, for a key limited to neither); a key of another
agent, app, or of the tenant gets 404 for it (and 409 for a claim of its call key). See
agent_memory/memory/tool_calls.py for what each answer means."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from agent_memory.api.http.auth import ReadKey, WriteKey
from agent_memory.api.http.deps import ClientDep, subject
from agent_memory.api.http.openapi import BODY_LIMIT, IDENTIFIER_SCHEMA_PATTERN, SubjectId, keyed
from agent_memory.core.models import IDENTIFIER_RULE, NAME_SCHEMA_PATTERN
from agent_memory.memory.tool_calls import (
    LEASE_DEFAULT_SECONDS,
    LEASE_MAX_SECONDS,
    LEASE_MIN_SECONDS,
    TOOL_CALL_JSON_MAX_BYTES,
    TOOL_NAME_MAX_CHARS,
    ToolCall,
)
from agent_memory.security.api_keys import key_identity

router = APIRouter(tags=["tool-calls"])

CallKey = Annotated[str, Path(description=f"the agent's key for one call, the same for every retry of it: "
                                          f"{IDENTIFIER_RULE}",
                              json_schema_extra={"pattern": IDENTIFIER_SCHEMA_PATTERN})]


class ToolCallClaim(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool: str = Field(min_length=1, max_length=TOOL_NAME_MAX_CHARS, description="the tool's name, e.g. send_email",
                      json_schema_extra={"pattern": NAME_SCHEMA_PATTERN})
    request: JsonValue = Field(description=f"the call's arguments as JSON (at most {TOOL_CALL_JSON_MAX_BYTES} "
                                           "bytes): a retry must send the same; only a keyed digest is kept")
    lease_seconds: int = Field(default=LEASE_DEFAULT_SECONDS, ge=LEASE_MIN_SECONDS, le=LEASE_MAX_SECONDS,
                               description="how long the claim holds the call: longer than the call can take")


class ToolCallRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    attempt: int = Field(ge=1, description="the attempt number the claim returned")
    result: JsonValue = Field(description=f"what the call returned, as JSON (at most {TOOL_CALL_JSON_MAX_BYTES} "
                                          "bytes); encrypted under the subject's key")
    outcome: Literal["completed", "failed"] = Field(
        default="completed", description="completed: the result is final and every retry gets it back; "
                                         "failed: the next claim makes the call again")


@router.post("/v1/subjects/{subject_id}/tool-calls/{call_key}/claim", summary="Claim a tool call before making it",
             description="Claim the call key before a side-effecting call (`write`). `state` says what to do: "
                         "`claimed` — make the call, then record it with the returned `attempt`; `in_flight` — "
                         "another attempt holds it until `lease_expires_at`, ask again later; `completed` — "
                         "the call was made, `result` is what it returned: do not make it again. A used key "
                         "with a different request is refused (409), so is the call key of another agent, app or "
                         f"key of the tenant: a call is its claimant's. {BODY_LIMIT}",
             responses=keyed(409, body=True))
async def claim_tool_call(subject_id: SubjectId, call_key: CallKey, body: ToolCallClaim, api_key: WriteKey,
                          client: ClientDep) -> ToolCall:
    return await client.claim_tool_call(api_key.tenant_id, subject(subject_id), call_key, body.tool, body.request,
                                        lease_seconds=body.lease_seconds, actor_id=f"api-key:{api_key.key_id}",
                                        claimed_as=key_identity(api_key))


@router.post("/v1/subjects/{subject_id}/tool-calls/{call_key}/result", summary="Record a tool call's result",
             description="Record what the claimed call returned (`write`), under the claim's `attempt`: an "
                         "attempt whose lease ran out and was taken over is refused (409), so is another "
                         "result for a recorded attempt; the same record again answers the same. 404 when "
                         f"the call key has no claim of this key's agent or app. {BODY_LIMIT}",
             responses=keyed(404, 409, body=True))
async def record_tool_call(subject_id: SubjectId, call_key: CallKey, body: ToolCallRecord, api_key: WriteKey,
                           client: ClientDep) -> ToolCall:
    return await client.record_tool_call(api_key.tenant_id, subject(subject_id), call_key, attempt=body.attempt,
                                         result=body.result, outcome=body.outcome, claimed_as=key_identity(api_key))


@router.get("/v1/subjects/{subject_id}/tool-calls/{call_key}", summary="A tool call's record",
            responses=keyed(404, 422))
async def read_tool_call(subject_id: SubjectId, call_key: CallKey, api_key: ReadKey, client: ClientDep) -> ToolCall:
    """The call's state, attempt, lease and, once recorded, its result (`read`); 404 when the key
    was never claimed, its record expired under the tenant's retention, or a key of another agent
    or app claimed it."""
    return await client.tool_call(api_key.tenant_id, subject(subject_id), call_key, claimed_as=key_identity(api_key))
