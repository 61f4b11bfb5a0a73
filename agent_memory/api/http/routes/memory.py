"""A subject's memory: its facts, entities and relations, recall, an assembled context and a built
prompt (`read`), the agent's fixes — correcting a fact, forgetting and restoring a memory (`write`) — and its export
(`read`). A change is audited with the key: a write key's as the agent's, an erase key's as the
operator's."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field, computed_field

from agent_memory.api.http.auth import ReadKey, WriteKey
from agent_memory.api.http.deps import ClientDep, subject
from agent_memory.api.http.openapi import BODY_LIMIT, MemoryId, SubjectId, keyed
from agent_memory.api.limits import (
    BUDGET_MAX_TOKENS,
    BUDGET_MIN_TOKENS,
    EVIDENCE_MAX_IDS,
    FACT_NAME_MAX_CHARS,
    FACT_TTL_MAX_SECONDS,
    FACT_TTL_MIN_SECONDS,
    FACT_VALUE_MAX_CHARS,
    QUERY_MAX_CHARS,
    REASON_MAX_CHARS,
    RECALL_LIMIT_DEFAULT,
    RECALL_LIMIT_MAX,
    RECALL_LIMIT_MIN,
)
from agent_memory.core.models import (
    IDENTIFIER_MAX_CHARS,
    IDENTIFIER_RULE,
    IDENTIFIER_SCHEMA_PATTERN,
    NAME_SCHEMA_PATTERN,
    PRINTABLE_SCHEMA_PATTERN,
    SESSION_ID_MAX_CHARS,
    STORABLE_SCHEMA_PATTERN,
    CommitOutcome,
    FactRow,
    IsoDatetime,
    Metadata,
    check_identifier,
)
from agent_memory.lifecycle.export import SubjectExport
from agent_memory.lifecycle.forgetting import ForgetResult, RestoreResult
from agent_memory.memory.categories import CATEGORIES_MAX
from agent_memory.memory.entities import EntityView
from agent_memory.memory.filters import (
    NAMESPACE_MAX_CHARS,
    NAMESPACES_MAX,
    SPEAKER_FILTER,
    SPEAKER_MAX_CHARS,
    MemoryFilter,
    MemoryKind,
    memory_filter,
)
from agent_memory.memory.relations import RelationView
from agent_memory.recall.context import AssembledContext
from agent_memory.recall.prompt import BuiltPrompt, ChatMessage
from agent_memory.recall.recall import RecallResult
from agent_memory.security.api_keys import audited_actor

router = APIRouter(tags=["memory"])


class QueryRequest(BaseModel):
    query: str = Field(min_length=1, max_length=QUERY_MAX_CHARS, json_schema_extra={"pattern": STORABLE_SCHEMA_PATTERN})
    limit: int = Field(default=RECALL_LIMIT_DEFAULT, ge=RECALL_LIMIT_MIN, le=RECALL_LIMIT_MAX)
    budget: int | None = Field(default=None, ge=BUDGET_MIN_TOKENS, le=BUDGET_MAX_TOKENS)
    as_of: IsoDatetime | None = Field(default=None, description="read memory as it was at this ISO 8601 time")
    # The live session the context is read in: its task-local facts join the profile.
    session_id: Annotated[str, Field(json_schema_extra={"pattern": PRINTABLE_SCHEMA_PATTERN})] | None = Field(
        default=None, min_length=1, max_length=SESSION_ID_MAX_CHARS)


ScopeField = Annotated[str | None, Field(min_length=1, max_length=IDENTIFIER_MAX_CHARS,
                                          pattern=IDENTIFIER_SCHEMA_PATTERN)]
CategoryField = Annotated[str, Field(min_length=1, max_length=IDENTIFIER_MAX_CHARS, pattern=IDENTIFIER_SCHEMA_PATTERN)]
CategoryQuery = Annotated[list[CategoryField] | None, Query(
    description="only memories in these categories of the tenant (repeatable; GET /v1/categories)")]


AgentQuery = Annotated[str | None, Query(min_length=1, max_length=IDENTIFIER_MAX_CHARS, pattern=IDENTIFIER_SCHEMA_PATTERN,
                                         description="only memories citing a message of this agent")]
AppQuery = Annotated[str | None, Query(min_length=1, max_length=IDENTIFIER_MAX_CHARS, pattern=IDENTIFIER_SCHEMA_PATTERN,
                                       description="only memories citing a message of this app")]
RunQuery = Annotated[str | None, Query(min_length=1, max_length=IDENTIFIER_MAX_CHARS, pattern=IDENTIFIER_SCHEMA_PATTERN,
                                       description="only memories citing a message of this run")]
SpeakerQuery = Annotated[str | None, Query(min_length=1, max_length=SPEAKER_MAX_CHARS, description=SPEAKER_FILTER,
                                           json_schema_extra={"pattern": NAME_SCHEMA_PATTERN})]
NamespaceField = Annotated[str, Field(min_length=1, max_length=NAMESPACE_MAX_CHARS)]
NamespaceQuery = Annotated[list[NamespaceField] | None, Query(description="only these namespaces (repeatable)")]


class FilteredQuery(QueryRequest):
    kinds: list[MemoryKind] | None = Field(default=None, min_length=1, description="only these kinds of memory")
    namespaces: list[NamespaceField] | None = Field(
        default=None, min_length=1, max_length=NAMESPACES_MAX, description="only facts in these namespaces")
    since: IsoDatetime | None = Field(default=None, description="only what became true or happened from then on")
    until: IsoDatetime | None = Field(default=None, description="only what became true or happened until then")
    metadata: Metadata | None = Field(
        default=None, min_length=1, description="only memories citing a message whose metadata holds these pairs")
    categories: list[CategoryField] | None = Field(
        default=None, min_length=1, max_length=CATEGORIES_MAX,
        description="only memories in one of these categories of the tenant (GET /v1/categories)")
    agent_id: ScopeField = Field(default=None, description="only memories citing a message of this agent")
    app_id: ScopeField = Field(default=None, description="only memories citing a message of this app")
    run_id: ScopeField = Field(default=None, description="only memories citing a message of this run")
    speaker: Annotated[str, Field(json_schema_extra={"pattern": NAME_SCHEMA_PATTERN})] | None = Field(
        default=None, min_length=1, max_length=SPEAKER_MAX_CHARS, description=SPEAKER_FILTER)
    explain: bool = Field(default=False, description=(
        "also why each memory is there: recall adds `explanations` (rank, vector rank and similarity, staleness "
        "term); context adds each item's `explanation` (its routes' ranks and scores, the fused score, relevance, "
        "time decay, importance, access and staleness terms) and `below_budget`, the best candidates that did "
        "not fit. Without it neither key is in the response"))

    @property
    def filters(self) -> MemoryFilter:
        return memory_filter(kinds=self.kinds, namespaces=self.namespaces, categories=self.categories,
                             since=self.since, until=self.until, metadata=self.metadata, agent_id=self.agent_id,
                             app_id=self.app_id, run_id=self.run_id, speaker=self.speaker)


class PromptRequest(BaseModel):
    session_id: str = Field(description=f"the session: {IDENTIFIER_RULE}", json_schema_extra={
        "maxLength": IDENTIFIER_MAX_CHARS, "pattern": IDENTIFIER_SCHEMA_PATTERN})
    input: str = Field(min_length=1, max_length=20000, json_schema_extra={"pattern": STORABLE_SCHEMA_PATTERN})
    system: Annotated[str, Field(json_schema_extra={"pattern": STORABLE_SCHEMA_PATTERN})] | None = Field(
        default=None, max_length=20000)
    budget: int | None = Field(default=None, ge=BUDGET_MIN_TOKENS, le=BUDGET_MAX_TOKENS)


class ForgetRequest(BaseModel):
    reason: Annotated[str, Field(json_schema_extra={"pattern": STORABLE_SCHEMA_PATTERN})] | None = Field(
        default=None, max_length=REASON_MAX_CHARS)


class FactWrite(BaseModel):
    model_config = ConfigDict(extra="forbid")

    value: str = Field(min_length=1, max_length=FACT_VALUE_MAX_CHARS, description="the right value",
                       json_schema_extra={"pattern": STORABLE_SCHEMA_PATTERN})
    expected_version: int = Field(ge=0, description="the fact's `version` as a read returned it; 0 for a new fact")
    evidence_message_ids: list[str] = Field(min_length=1, max_length=EVIDENCE_MAX_IDS,
                                            description="ids of the subject's messages that say it")
    observed_at: IsoDatetime | None = Field(default=None, description="when it became true; default: now")
    expires_at: IsoDatetime | None = Field(
        default=None, description="when it stops holding (ISO 8601, after observed_at): no read returns it after "
                                  "that; give this or ttl_seconds, or neither for a fact that holds until it changes")
    ttl_seconds: int | None = Field(default=None, ge=FACT_TTL_MIN_SECONDS, le=FACT_TTL_MAX_SECONDS,
                                    description="how long it holds from observed_at, in seconds (a minute to ten "
                                                "years); instead of expires_at")
    metadata: Metadata = Field(
        default_factory=dict,
        description="what the agent or app knows about the fact besides its value (a source, a ticket): stored "
                    "on the version written, read back by the metadata filter")


FactName = Annotated[str, Path(min_length=1, max_length=FACT_NAME_MAX_CHARS)]


class PromptAnswer(BuiltPrompt):
    """A built prompt as the API answers it: its blocks, and their messages in one list."""

    @computed_field(description="every block's messages in order: what an OpenAI-style chat API takes")  # type: ignore[prop-decorator]
    @property
    def messages(self) -> list[ChatMessage]:
        return super().messages


@router.get("/v1/subjects/{subject_id}/facts", summary="A subject's facts", responses=keyed(404, 422))
async def facts(subject_id: SubjectId, api_key: ReadKey, client: ClientDep, as_of: IsoDatetime | None = None,
                history: bool = False, candidates: bool = False,
                namespace: NamespaceQuery = None,
                since: IsoDatetime | None = None, until: IsoDatetime | None = None, category: CategoryQuery = None,
                agent_id: AgentQuery = None, app_id: AppQuery = None, run_id: RunQuery = None,
                speaker: SpeakerQuery = None) -> list[FactRow]:
    """The subject's current facts (`read`); with `as_of` (an ISO 8601 time) the facts as they were
    then, with `history` every version, with `candidates` the facts not yet confirmed; `namespace`
    (repeatable), `since` and `until` keep the facts of those namespaces that became true in that
    range. Each says when it was last confirmed (`last_confirmed_at`) and what wrote it
    (`extracted_by`)."""
    filters = memory_filter(namespaces=namespace, categories=category, since=since, until=until, agent_id=agent_id,
                            app_id=app_id, run_id=run_id, speaker=speaker)
    rows = await client.facts(api_key.tenant_id, subject(subject_id), as_of=as_of, history=history,
                              candidates=candidates, filters=filters)
    return rows


@router.get("/v1/subjects/{subject_id}/entities", summary="A subject's entities", responses=keyed(422))
async def entities(subject_id: SubjectId, api_key: ReadKey, client: ClientDep) -> list[EntityView]:
    """The people, pets, places, organisations, events and things the subject's sessions mention
    (`read`), each with its names and the messages that mention it, the first mentioned first."""
    return await client.entities(api_key.tenant_id, subject(subject_id))


@router.get("/v1/subjects/{subject_id}/relations", summary="A subject's relations between entities",
            responses=keyed(422))
async def relations(subject_id: SubjectId, api_key: ReadKey, client: ClientDep,
                    history: bool = False) -> list[RelationView]:
    """The edges between the subject's entities that hold now (`read`), by the entities' names, each
    with its evidence; with `history` every interval, the ended ones with their `valid_to`."""
    return await client.relations(api_key.tenant_id, subject(subject_id), history=history)


@router.post("/v1/subjects/{subject_id}/recall", summary="Recall memory for a query",
             description="The memories most relevant to a query, as of now or `as_of` (`read`), narrowed to "
                         "`kinds` (fact, episode), fact `namespaces` and what became true or happened between "
                         f"`since` and `until`. {BODY_LIMIT}",
             responses=keyed(404, body=True))
async def recall(subject_id: SubjectId, body: FilteredQuery, api_key: ReadKey, client: ClientDep) -> RecallResult:
    return await client.recall(api_key.tenant_id, subject(subject_id), body.query, limit=body.limit,
                               as_of=body.as_of, filters=body.filters, explain=body.explain)


@router.post("/v1/subjects/{subject_id}/context", summary="The cited context for a query",
             description="The subject's memory assembled into a cited context within a token budget "
                         "(`read`); with `session_id`, that live session's task-local facts join the "
                         "profile; `kinds` (fact: the profile, episode: past sessions and notes), fact "
                         f"`namespaces`, `since` and `until` narrow it. {BODY_LIMIT}",
             responses=keyed(404, body=True))
async def context(subject_id: SubjectId, body: FilteredQuery, api_key: ReadKey,
                  client: ClientDep) -> AssembledContext:
    return await client.context(api_key.tenant_id, subject(subject_id), body.query, as_of=body.as_of,
                                token_budget=body.budget, session_id=body.session_id, filters=body.filters,
                                explain=body.explain)


@router.post("/v1/subjects/{subject_id}/prompt", summary="Build a prompt",
             description="A prompt for the next turn of a session: its blocks and its chat messages, the "
                         f"subject's memory within a token budget (`read`). {BODY_LIMIT}",
             responses=keyed(body=True))
async def prompt(subject_id: SubjectId, body: PromptRequest, api_key: ReadKey, client: ClientDep) -> PromptAnswer:
    check_identifier("session", body.session_id)
    kwargs: dict[str, Any] = {"token_budget": body.budget}
    if body.system is not None:
        kwargs["system"] = body.system
    built = await client.build_prompt(api_key.tenant_id, subject(subject_id), body.session_id, body.input,
                                      **kwargs)
    return PromptAnswer.model_validate(built, from_attributes=True)


@router.put("/v1/subjects/{subject_id}/facts/{namespace}/{key}", summary="Correct or add a fact",
            description="Set the fact at namespace/key to a new value from now, citing the subject's messages "
                        "that say it (`write`); the old value stays in the history. With `expires_at` or "
                        "`ttl_seconds` the fact is temporary: no read returns it after its end, and the memory "
                        "sweep forgets it under the tenant's retention. Conditional on "
                        "`expected_version` (409 when the fact changed since it was read); under the tenant's "
                        f"write policy and the subject's consents (403 when it withholds the fact). {BODY_LIMIT}",
            responses=keyed(409, body=True))
async def write_fact(subject_id: SubjectId, namespace: FactName, key: FactName, body: FactWrite,
                     api_key: WriteKey, client: ClientDep) -> CommitOutcome:
    return await client.write_fact(api_key.tenant_id, subject(subject_id), namespace, key, body.value,
                                      expected_version=body.expected_version,
                                      evidence_message_ids=body.evidence_message_ids, observed_at=body.observed_at,
                                      expires_at=body.expires_at, ttl_seconds=body.ttl_seconds,
                                      actor=audited_actor(api_key), actor_id=f"api-key:{api_key.key_id}",
                                      metadata=body.metadata)


@router.post("/v1/subjects/{subject_id}/memories/{memory_id}/forget", summary="Forget a memory",
             description="Forget one memory at once: every read stops returning it; it can be restored "
                         f"within the grace period, then it is swept from every store (`write`); forgetting it "
                         f"again answers the same forget. {BODY_LIMIT}",
             responses=keyed(404, 409, body=True))
async def forget(subject_id: SubjectId, memory_id: MemoryId, body: ForgetRequest, api_key: WriteKey,
                 client: ClientDep) -> ForgetResult:
    return await client.forget(api_key.tenant_id, subject(subject_id), memory_id, reason=body.reason,
                               actor=audited_actor(api_key), actor_id=f"api-key:{api_key.key_id}")


@router.post("/v1/subjects/{subject_id}/memories/{memory_id}/restore", summary="Restore a forgotten memory",
             description=f"Undo a forget within the grace period (`write`). {BODY_LIMIT}",
             responses=keyed(404, 409, body=True))
async def restore(subject_id: SubjectId, memory_id: MemoryId, body: ForgetRequest, api_key: WriteKey,
                  client: ClientDep) -> RestoreResult:
    return await client.restore(api_key.tenant_id, subject(subject_id), memory_id, reason=body.reason,
                                actor=audited_actor(api_key), actor_id=f"api-key:{api_key.key_id}")


@router.get("/v1/subjects/{subject_id}/export", summary="Export a subject's memory", responses=keyed(404, 422))
async def export(subject_id: SubjectId, api_key: ReadKey, client: ClientDep,
                 kind: Annotated[list[MemoryKind] | None, Query(description="only these kinds (repeatable)")] = None,
                 namespace: NamespaceQuery = None,
                 since: IsoDatetime | None = None, until: IsoDatetime | None = None, category: CategoryQuery = None,
                 agent_id: AgentQuery = None, app_id: AppQuery = None, run_id: RunQuery = None,
                 speaker: SpeakerQuery = None) -> SubjectExport:
    """Everything the tenant holds about the subject (`read`): the right of access. `kind`
    (fact, episode: episodes and notes), `namespace` (both repeatable), `since`, `until` and the
    scope (`agent_id`, `app_id`, `run_id` of the cited messages) narrow its facts, episodes and
    notes; entities, relations and tool calls stay whole."""
    filters = memory_filter(kinds=kind, namespaces=namespace, categories=category, since=since, until=until,
                            agent_id=agent_id, app_id=app_id, run_id=run_id, speaker=speaker)
    return await client.admin.export(api_key.tenant_id, subject(subject_id), filters=filters)
