"""A subject's memory: its facts, recall, an assembled context and a built prompt (`read`),
forgetting and restoring a memory (`erase`), and its export (`read`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from agent_memory.api.http.auth import EraseKey, ReadKey
from agent_memory.api.http.deps import ClientDep, subject
from agent_memory.api.http.openapi import BODY_LIMIT, MemoryId, SubjectId, keyed
from agent_memory.api.limits import (
    BUDGET_MAX_TOKENS,
    BUDGET_MIN_TOKENS,
    QUERY_MAX_CHARS,
    REASON_MAX_CHARS,
    RECALL_LIMIT_DEFAULT,
    RECALL_LIMIT_MAX,
    RECALL_LIMIT_MIN,
)
from agent_memory.core.models import IsoDatetime, check_identifier

router = APIRouter()


class QueryRequest(BaseModel):
    query: str = Field(min_length=1, max_length=QUERY_MAX_CHARS)
    limit: int = Field(default=RECALL_LIMIT_DEFAULT, ge=RECALL_LIMIT_MIN, le=RECALL_LIMIT_MAX)
    budget: int | None = Field(default=None, ge=BUDGET_MIN_TOKENS, le=BUDGET_MAX_TOKENS)
    as_of: IsoDatetime | None = Field(default=None, description="read memory as it was at this ISO 8601 time")
    # The live session the context is read in: its task-local facts join the profile.
    session_id: str | None = None


class PromptRequest(BaseModel):
    session_id: str
    input: str = Field(min_length=1, max_length=20000)
    system: str | None = Field(default=None, max_length=20000)
    budget: int | None = Field(default=None, ge=BUDGET_MIN_TOKENS, le=BUDGET_MAX_TOKENS)


class ForgetRequest(BaseModel):
    reason: str | None = Field(default=None, max_length=REASON_MAX_CHARS)


@router.get("/v1/subjects/{subject_id}/facts", summary="A subject's facts", responses=keyed(422))
async def facts(subject_id: SubjectId, api_key: ReadKey, client: ClientDep, as_of: IsoDatetime | None = None,
                history: bool = False, candidates: bool = False) -> list[dict[str, Any]]:
    """The subject's current facts (`read`); with `as_of` (an ISO 8601 time) the facts as they were
    then, with `history` every version, with `candidates` the facts not yet confirmed."""
    rows = await client.facts(api_key.tenant_id, subject(subject_id), as_of=as_of, history=history,
                              candidates=candidates)
    return [r.model_dump(mode="json") for r in rows]


@router.post("/v1/subjects/{subject_id}/recall", summary="Recall memory for a query",
             description=f"The memories most relevant to a query, as of now or `as_of` (`read`). {BODY_LIMIT}",
             responses=keyed(body=True))
async def recall(subject_id: SubjectId, body: QueryRequest, api_key: ReadKey, client: ClientDep) -> dict[str, Any]:
    found = await client.recall(api_key.tenant_id, subject(subject_id), body.query, limit=body.limit,
                                as_of=body.as_of)
    return found.model_dump(mode="json")


@router.post("/v1/subjects/{subject_id}/context", summary="The cited context for a query",
             description="The subject's memory assembled into a cited context within a token budget "
                         "(`read`); with `session_id`, that live session's task-local facts join the "
                         f"profile. {BODY_LIMIT}",
             responses=keyed(body=True))
async def context(subject_id: SubjectId, body: QueryRequest, api_key: ReadKey, client: ClientDep) -> dict[str, Any]:
    assembled = await client.context(api_key.tenant_id, subject(subject_id), body.query, as_of=body.as_of,
                                     token_budget=body.budget, session_id=body.session_id)
    return {**assembled.model_dump(mode="json"), "text": assembled.text}


@router.post("/v1/subjects/{subject_id}/prompt", summary="Build a prompt",
             description="A prompt for the next turn of a session: its blocks and its chat messages, the "
                         f"subject's memory within a token budget (`read`). {BODY_LIMIT}",
             responses=keyed(body=True))
async def prompt(subject_id: SubjectId, body: PromptRequest, api_key: ReadKey, client: ClientDep) -> dict[str, Any]:
    check_identifier("session", body.session_id)
    kwargs: dict[str, Any] = {"token_budget": body.budget}
    if body.system is not None:
        kwargs["system"] = body.system
    built = await client.build_prompt(api_key.tenant_id, subject(subject_id), body.session_id, body.input,
                                      **kwargs)
    return {**built.model_dump(mode="json"), "messages": built.chat_messages()}


@router.post("/v1/subjects/{subject_id}/memories/{memory_id}/forget", summary="Forget a memory",
             description="Forget one memory at once: every read stops returning it; it can be restored "
                         f"within the grace period, then it is swept from every store (`erase`); forgetting it "
                         f"again answers the same forget. {BODY_LIMIT}",
             responses=keyed(404, body=True))
async def forget(subject_id: SubjectId, memory_id: MemoryId, body: ForgetRequest, api_key: EraseKey,
                 client: ClientDep) -> dict[str, Any]:
    done = await client.forget(api_key.tenant_id, subject(subject_id), memory_id, reason=body.reason,
                               actor_id=f"api-key:{api_key.key_id}")
    return done.model_dump(mode="json")


@router.post("/v1/subjects/{subject_id}/memories/{memory_id}/restore", summary="Restore a forgotten memory",
             description=f"Undo a forget within the grace period (`erase`). {BODY_LIMIT}",
             responses=keyed(404, 409, body=True))
async def restore(subject_id: SubjectId, memory_id: MemoryId, body: ForgetRequest, api_key: EraseKey,
                  client: ClientDep) -> dict[str, Any]:
    done = await client.restore(api_key.tenant_id, subject(subject_id), memory_id, reason=body.reason,
                                actor_id=f"api-key:{api_key.key_id}")
    return done.model_dump(mode="json")


@router.get("/v1/subjects/{subject_id}/export", summary="Export a subject's memory", responses=keyed(422))
async def export(subject_id: SubjectId, api_key: ReadKey, client: ClientDep) -> dict[str, Any]:
    """Everything the tenant holds about the subject (`read`): the right of access."""
    return (await client.export(api_key.tenant_id, subject(subject_id))).model_dump(mode="json")
