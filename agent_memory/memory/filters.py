"""What a reader narrows a search or a listing to: the kinds of memory, fact namespaces (a
tenant's categories: location, diet, work, ...), a time range and the metadata of the messages a
memory cites. One model for every surface, so a filter refused on one is refused on all."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Literal, TypeVar

import psycopg
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import METADATA_MAX_KEYS, FactRow, MetadataValue, check_metadata

T = TypeVar("T")

MemoryKind = Literal["fact", "episode"]
NAMESPACE_MAX_CHARS = 64
NAMESPACES_MAX = 50


class MemoryFilter(BaseModel):
    """Kinds of memory (recall, context), fact namespaces, a time range — when a fact became true
    (`valid_from`) or an episode happened, within [since, until] — and pairs the metadata of a
    cited message must hold. Unset: no narrowing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kinds: frozenset[MemoryKind] | None = Field(default=None, min_length=1)
    namespaces: frozenset[str] | None = Field(default=None, min_length=1, max_length=NAMESPACES_MAX)
    since: datetime | None = None
    until: datetime | None = None
    # Pairs a cited message's metadata must hold: a memory is kept when one of its messages does.
    metadata: dict[str, MetadataValue] | None = Field(default=None, min_length=1, max_length=METADATA_MAX_KEYS)

    @model_validator(mode="after")
    def _check(self) -> MemoryFilter:
        for name in self.namespaces or ():
            if not 1 <= len(name) <= NAMESPACE_MAX_CHARS:
                raise InvalidInput(f"namespace {name[:40]!r} is invalid: use 1 to {NAMESPACE_MAX_CHARS} characters, "
                                   "as facts name it (e.g. location)")
        if self.metadata is not None:
            check_metadata("metadata", self.metadata)
        for name, at in (("since", self.since), ("until", self.until)):
            if at is not None and at.tzinfo is None:
                raise InvalidInput(f"{name} has no UTC offset: write it as ISO 8601 with one, e.g. 2024-05-01T00:00:00Z")
        if self.since is not None and self.until is not None and self.since > self.until:
            raise InvalidInput("since is after until: the time range is empty; swap them")
        return self

    def wants(self, kind: MemoryKind) -> bool:
        return self.kinds is None or kind in self.kinds

    def in_range(self, at: datetime) -> bool:
        return (self.since is None or at >= self.since) and (self.until is None or at <= self.until)

    def narrows_time(self) -> bool:
        return self.since is not None or self.until is not None

    def fact_matches(self, fact: FactRow) -> bool:
        return (self.wants("fact") and (self.namespaces is None or fact.namespace in self.namespaces)
                and self.in_range(fact.valid_from))


NO_FILTER = MemoryFilter()


async def messages_with_metadata(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                                 metadata: dict[str, MetadataValue]) -> set[str]:
    """The ids of the subject's messages whose metadata holds every pair of `metadata`."""
    cur = await conn.execute("SELECT message_id FROM messages WHERE tenant_id = %s AND subject_id = %s "
                             "AND metadata @> %s::jsonb", (tenant_id, subject_id, json.dumps(metadata)))
    return {row[0] for row in await cur.fetchall()}


async def cited_matching(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, filters: MemoryFilter,
                         items: list[T], cited_of: Callable[[T], Iterable[str]]) -> list[T]:
    """`items` narrowed to those citing a message whose metadata holds the filter's pairs (all of
    them when the filter names no metadata)."""
    if filters.metadata is None:
        return items
    matching = await messages_with_metadata(conn, tenant_id, subject_id, filters.metadata)
    return [item for item in items if matching.intersection(cited_of(item))]


def memory_filter(**fields: object) -> MemoryFilter:
    """A MemoryFilter from a surface's arguments; a bad one is InvalidInput naming the field."""
    try:
        return MemoryFilter.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        error = exc.errors()[0]
        reason = str(error.get("ctx", {}).get("error") or error["msg"])
        where = ".".join(str(part) for part in error["loc"])
        raise InvalidInput(f"{where}: {reason}" if where else reason) from None
