"""A tenant's categories of memory (agent_memory/memory/categories.py): list them (`read`), define
or redefine one and remove one (`write`). The filters of recall, the context, the facts listing
and the export take their names (`categories`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict, Field

from agent_memory.api.http.auth import ReadKey, WriteKey
from agent_memory.api.http.deps import ClientDep
from agent_memory.api.http.openapi import BODY_LIMIT, IDENTIFIER_SCHEMA_PATTERN, keyed
from agent_memory.core.models import IDENTIFIER_RULE, ONE_LINE_SCHEMA_PATTERN
from agent_memory.memory.categories import DESCRIPTION_MAX_CHARS, WORD_MAX_CHARS, WORDS_MAX, Category, category

router = APIRouter(tags=["categories"])

CategoryName = Annotated[str, Path(description=f"the category's name: {IDENTIFIER_RULE}",
                                   json_schema_extra={"pattern": IDENTIFIER_SCHEMA_PATTERN})]
Term = Annotated[str, Field(min_length=1, max_length=WORD_MAX_CHARS, json_schema_extra={"pattern": ONE_LINE_SCHEMA_PATTERN})]


class RemovedCategory(BaseModel):
    removed: str = Field(description="the removed category's name")


class CategoryDefinition(BaseModel):
    # A category with neither words nor namespaces would hold nothing: the document says so.
    model_config = ConfigDict(extra="forbid", json_schema_extra={"anyOf": [
        {"required": ["words"], "properties": {"words": {"minItems": 1}}},
        {"required": ["namespaces"], "properties": {"namespaces": {"minItems": 1}}}]})

    description: str = Field(default="", max_length=DESCRIPTION_MAX_CHARS,
                             description="what the category is about, for people reading the list")
    words: list[Term] = Field(default_factory=list, max_length=WORDS_MAX,
                              description="a memory whose text holds one of these words (whole, any case, "
                                          "plurals too; Chinese as a substring) is in the category")
    namespaces: list[Term] = Field(default_factory=list, max_length=WORDS_MAX,
                                   description="every fact of these namespaces is in the category")


@router.get("/v1/categories", summary="The tenant's categories of memory", responses=keyed())
async def categories(api_key: ReadKey, client: ClientDep) -> list[Category]:
    """The categories the key's tenant defined (`read`), by name, each with its words and namespaces."""
    return await client.admin.categories(api_key.tenant_id)


@router.put("/v1/categories/{name}", summary="Define a category of memory",
            description="Define the category `name` of the key's tenant, or replace its definition (`write`): "
                        "a memory whose text holds one of its `words`, or a fact of one of its `namespaces`, is "
                        "in it. At least one word or namespace; at most 50 categories a tenant. "
                        f"{BODY_LIMIT}", responses=keyed(body=True))
async def put_category(name: CategoryName, body: CategoryDefinition, api_key: WriteKey,
                       client: ClientDep) -> Category:
    return await client.admin.put_category(api_key.tenant_id, category(name=name, **body.model_dump()))


@router.delete("/v1/categories/{name}", summary="Remove a category of memory", responses=keyed(404, 422))
async def remove_category(name: CategoryName, api_key: WriteKey, client: ClientDep) -> RemovedCategory:
    """Remove the category (`write`); the memories stay as they are. 404 when the tenant has none of that name."""
    await client.admin.remove_category(api_key.tenant_id, name)
    return RemovedCategory(removed=name)
