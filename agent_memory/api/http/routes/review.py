"""The daily review's marks (docs/lifecycle.md, "Review"): listed with a read key, resolved — kept
or forgotten — with a write key, audited with the key like the agent's other fixes. A correction
(PUT .../facts/{namespace}/{key}) resolves the marks of the fact it corrects."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from agent_memory.api.http.auth import ReadKey, WriteKey
from agent_memory.api.http.deps import ClientDep, subject
from agent_memory.api.http.openapi import BODY_LIMIT, SubjectId, keyed
from agent_memory.api.limits import REASON_MAX_CHARS
from agent_memory.core.models import IDENTIFIER_MAX_CHARS, IDENTIFIER_SCHEMA_PATTERN, check_identifier
from agent_memory.lifecycle.review import ResolveResult
from agent_memory.memory.stale_marks import MARK_LIST_MAX, StaleMark
from agent_memory.security.api_keys import audited_actor

router = APIRouter(tags=["review"])

MarkId = Annotated[str, Path(description="the mark's UUID, as the listing names it (`mark_id`)",
                             json_schema_extra={"format": "uuid"})]


class ResolveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    resolution: Literal["keep", "forget"] = Field(description=(
        "keep: the value still holds (a marked fact counts as confirmed); forget: forget the marked memory "
        "(restorable in the grace period). To correct a fact, write its right value instead."))
    reason: str | None = Field(default=None, max_length=REASON_MAX_CHARS)


@router.get("/v1/stale-marks", summary="The review's marks",
            description="What the daily review marked as possibly stale and is still in force (a fact past its "
                        "shelf life, contradicted by later candidates, a near-duplicate note, a candidate close "
                        "to its expiry), newest first (`read`); `include_resolved` lists every mark. Ids, "
                        "reasons and times, never memory text.",
            responses=keyed(422))
async def stale_marks(api_key: ReadKey, client: ClientDep,
                      subject_id: Annotated[str | None, Query(
                          min_length=1, max_length=IDENTIFIER_MAX_CHARS, pattern=IDENTIFIER_SCHEMA_PATTERN,
                          description="only this subject's marks")] = None,
                      include_resolved: Annotated[bool, Query(description="list resolved marks too")] = False,
                      limit: Annotated[int, Query(ge=1, le=MARK_LIST_MAX)] = MARK_LIST_MAX) -> list[StaleMark]:
    if subject_id is not None:
        check_identifier("subject", subject_id)
    return await client.admin.stale_marks(api_key.tenant_id, subject_id=subject_id, include_resolved=include_resolved,
                                    limit=limit)


@router.post("/v1/subjects/{subject_id}/stale-marks/{mark_id}/resolve", summary="Resolve a mark",
             description="Keep the marked memory (a fact counts as confirmed: its `last_confirmed_at` moves) or "
                         "forget it, and close the mark (`write`); 409 when the mark is resolved already. "
                         f"{BODY_LIMIT}",
             responses=keyed(404, 409, body=True))
async def resolve_stale_mark(subject_id: SubjectId, mark_id: MarkId, body: ResolveRequest, api_key: WriteKey,
                             client: ClientDep) -> ResolveResult:
    return await client.admin.resolve_stale_mark(api_key.tenant_id, subject(subject_id), mark_id, body.resolution,
                                           actor=audited_actor(api_key), actor_id=f"api-key:{api_key.key_id}",
                                           reason=body.reason)
