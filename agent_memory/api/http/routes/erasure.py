"""A subject's erasure (`erase`): start the erasure run, and read a request's status and receipt."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from agent_memory.api.http.auth import EraseKey
from agent_memory.api.http.deps import ClientDep, subject
from agent_memory.api.http.openapi import BODY_LIMIT, RequestId, SubjectId, keyed
from agent_memory.api.limits import REASON_MAX_CHARS
from agent_memory.core.models import (
    IDENTIFIER_MAX_CHARS,
    IDENTIFIER_RULE,
    IDENTIFIER_SCHEMA_PATTERN,
    NOT_BLANK_SCHEMA_PATTERN,
    ErasureStatus,
)

router = APIRouter(tags=["erasure"])


class ErasureRequest(BaseModel):
    reason: str = Field(min_length=1, max_length=REASON_MAX_CHARS, description="why the subject is erased (a ticket "
                        "reference is best)", json_schema_extra={"pattern": NOT_BLANK_SCHEMA_PATTERN})
    request_id: str | None = Field(default=None, description=f"the erasure request's id: {IDENTIFIER_RULE}",
                                   json_schema_extra={"maxLength": IDENTIFIER_MAX_CHARS,
                                                      "pattern": IDENTIFIER_SCHEMA_PATTERN})
    block_future_writes: bool = False


class ErasureStarted(BaseModel):
    workflow_id: str
    ui_url: str


@router.post("/v1/subjects/{subject_id}/erasure", summary="Erase a subject",
             description="Start the erasure of everything the tenant holds about the subject (`erase`); "
                         "with `block_future_writes`, later writes for the subject are refused. Its workflow "
                         f"id and a link to it in the Temporal UI. {BODY_LIMIT}",
             responses=keyed(404, 409, body=True))
async def erase(subject_id: SubjectId, body: ErasureRequest, api_key: EraseKey, client: ClientDep) -> ErasureStarted:
    handle = await client.admin.erase(api_key.tenant_id, subject(subject_id), body.reason, body.request_id,
                                block_future_writes=body.block_future_writes)
    return ErasureStarted(workflow_id=handle.id, ui_url=client.services.settings.workflow_url(handle.id))


@router.get("/v1/erasures/{request_id}", summary="An erasure's status and receipt", responses=keyed(404, 422))
async def erasure(request_id: RequestId, api_key: EraseKey, client: ClientDep) -> ErasureStatus:
    """An erasure request of the key's tenant (`erase`): its receipt, whether the shred is
    irreversible yet, and whether it was compacted."""
    return await client.admin.erasure_status(api_key.tenant_id, request_id)
