"""A subject's sessions: append messages (`write`), end a session, which starts its consolidation
run (`write`), and a run's status (`read`; an erasure's run needs `erase`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from agent_memory.api.http.auth import ReadKey, WriteKey
from agent_memory.api.http.deps import ClientDep, subject
from agent_memory.api.http.openapi import BODY_LIMIT, SessionId, SubjectId, WorkflowId, keyed
from agent_memory.api.limits import APPEND_MESSAGES_MAX
from agent_memory.core import contract
from agent_memory.core.errors import Forbidden, NotFound
from agent_memory.core.models import IsoDatetime, Session, check_identifier, validated
from agent_memory.core.models import Message as ChatMessage
from agent_memory.memory.evidence import AppendResult
from agent_memory.security.api_keys import allows

router = APIRouter(tags=["sessions"])


class AppendRequest(BaseModel):
    started_at: IsoDatetime | None = Field(default=None, description="when the session started, an ISO 8601 time")
    messages: list[ChatMessage] = Field(min_length=1, max_length=APPEND_MESSAGES_MAX, description=(
        "the messages, each at its own turn_index (the same message may be sent twice)"))
    expected_parent: str | None = Field(default=None, description="the last message id you saw ('' for none)")


class EndedSession(BaseModel):
    workflow_id: str
    ui_url: str


class RunStatus(BaseModel):
    workflow_id: str
    status: str
    result: dict[str, Any] | None = None


@router.post("/v1/subjects/{subject_id}/sessions/{session_id}/messages", summary="Append a session's messages",
             description="Append messages to a session, idempotent by message id (`write`); "
                         "`expected_parent` guards concurrent writers: 409 when the session moved on. "
                         f"{BODY_LIMIT}",
             responses=keyed(409, body=True))
async def append(subject_id: SubjectId, session_id: SessionId, body: AppendRequest, api_key: WriteKey,
                 client: ClientDep) -> AppendResult:
    check_identifier("session", session_id)
    session = validated(Session, {"session_id": session_id, "started_at": body.started_at,
                                  "messages": body.messages})
    return await client.append_messages(api_key.tenant_id, subject(subject_id), session,
                                        expected_parent=body.expected_parent)


@router.post("/v1/subjects/{subject_id}/sessions/{session_id}/end", summary="End a session",
             responses=keyed(404, 409, 422))
async def end(subject_id: SubjectId, session_id: SessionId, api_key: WriteKey, client: ClientDep) -> EndedSession:
    """The session-end hook (`write`): starts the session's consolidation run, or answers the one
    already running; its workflow id and a link to it in the Temporal UI."""
    handle = await client.end_session(api_key.tenant_id, subject(subject_id), session_id)
    return EndedSession(workflow_id=handle.id, ui_url=client.services.settings.workflow_url(handle.id))


@router.get("/v1/runs/{workflow_id:path}", summary="A run's status", responses=keyed(404))
async def run(workflow_id: WorkflowId, api_key: ReadKey, client: ClientDep) -> RunStatus:
    """A run of the key's tenant (`read`; an erasure's run needs `erase`): its status and, once
    completed, its result."""
    if contract.workflow_id_tenant(workflow_id) != api_key.tenant_id:
        raise NotFound(f"no run {workflow_id!r} of this key's tenant")
    if workflow_id.startswith("erase/") and not allows(api_key.scope, "erase"):
        raise Forbidden(f"this key's scope is {api_key.scope!r}; an erasure's run needs 'erase'")
    handle = client.services.temporal.get_workflow_handle(workflow_id)
    try:
        status = (await handle.describe()).status
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise NotFound(f"no run {workflow_id!r} of this key's tenant") from None
        raise
    result = await handle.result() if status == WorkflowExecutionStatus.COMPLETED else None
    return RunStatus(workflow_id=workflow_id, status=status.name.lower() if status else "unknown",
                     result=result if isinstance(result, dict) else None)
