"""What a reader narrows a search or a listing to: the kinds of memory, fact namespaces
(location, diet, work, ...), the tenant's own categories (agent_memory.memory.categories), a time
range, and the metadata, the scope (agent, app, run) and the speaker of the messages a memory
cites. One model for every surface, so a filter refused on one is refused on all."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Literal, TypeVar

import psycopg
from psycopg import sql
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent_memory.core.errors import Forbidden, InvalidInput
from agent_memory.core.models import (
    METADATA_MAX_KEYS,
    SCOPE_FIELDS,
    FactRow,
    MetadataValue,
    check_identifier,
    check_metadata,
    is_printable_name,
    validated,
)
from agent_memory.memory.categories import CATEGORIES_MAX, categories_named
from agent_memory.store.db import key_limits

T = TypeVar("T")

MemoryKind = Literal["fact", "episode"]
NAMESPACE_MAX_CHARS = 64
NAMESPACES_MAX = 50
SPEAKER_MAX_CHARS = 200  # as Message.speaker
SPEAKER_FILTER = ("only memories citing a message said by this speaker (a message's `speaker`, case aside): what one "
                  "person said when several speak under one account")


class MemoryFilter(BaseModel):
    """Kinds of memory (recall, context), fact namespaces, a time range — when a fact became true
    (`valid_from`) or an episode happened, within [since, until] — pairs the metadata of a cited
    message must hold, the agent, app and run a cited message belongs to, and who said it (the
    speaker). Unset: no narrowing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kinds: frozenset[MemoryKind] | None = Field(default=None, min_length=1)
    namespaces: frozenset[str] | None = Field(default=None, min_length=1, max_length=NAMESPACES_MAX)
    # The tenant's categories (by name) a memory must be in, one of them at least.
    categories: frozenset[str] | None = Field(default=None, min_length=1, max_length=CATEGORIES_MAX)
    since: datetime | None = None
    until: datetime | None = None
    # Pairs a cited message's metadata must hold: a memory is kept when one of its messages does.
    metadata: dict[str, MetadataValue] | None = Field(default=None, min_length=1, max_length=METADATA_MAX_KEYS)
    # The scope a cited message must have (Message.agent_id, app_id, run_id): all of those given.
    agent_id: str | None = None
    app_id: str | None = None
    run_id: str | None = None
    # The speaker a cited message must have (Message.speaker, case and surrounding spaces aside): what
    # one person said when several speak under one account.
    speaker: str | None = Field(default=None, min_length=1, max_length=SPEAKER_MAX_CHARS)

    @model_validator(mode="after")
    def _check(self) -> MemoryFilter:
        if self.speaker is not None and not is_printable_name(self.speaker):
            raise InvalidInput("speaker is invalid: give a speaker's name as the messages carry it, e.g. Mia")
        for name in self.namespaces or ():
            if not 1 <= len(name) <= NAMESPACE_MAX_CHARS:
                raise InvalidInput(f"namespace {name[:40]!r} is invalid: use 1 to {NAMESPACE_MAX_CHARS} characters, "
                                   "as facts name it (e.g. location)")
        if self.metadata is not None:
            check_metadata("metadata", self.metadata)
        for name, value in self.scope.items():
            check_identifier(name, value)
        for name in self.categories or ():
            check_identifier("categories", name)
        for name, at in (("since", self.since), ("until", self.until)):
            if at is not None and at.tzinfo is None:
                raise InvalidInput(f"{name} has no UTC offset: write it as ISO 8601 with one, e.g. 2024-05-01T00:00:00Z")
        if self.since is not None and self.until is not None and self.since > self.until:
            raise InvalidInput("since is after until: the time range is empty; swap them")
        return self

    def held_by(self, metadata: dict[str, MetadataValue]) -> bool:
        """Whether a memory's own metadata satisfies the filter's message narrowing: it holds the
        filter's pairs, and the filter names no scope or speaker (a memory's own metadata has none)."""
        return self.metadata is not None and not self.scope and self.speaker is None and all(
            k in metadata and metadata[k] == v for k, v in self.metadata.items())

    def within_key_limits(self) -> MemoryFilter:
        """The filter as the current request's key may read: a key limited to an app keeps the
        memories citing that app's messages (asking for another app is refused)."""
        app = key_limits().app_id
        if app is None or self.app_id == app:
            return self
        if self.app_id is not None:
            raise Forbidden(f"app_id: this key reads app {app!r} only, not {self.app_id!r}")
        return self.model_copy(update={"app_id": app})

    def wants(self, kind: MemoryKind) -> bool:
        return self.kinds is None or kind in self.kinds

    def in_range(self, at: datetime) -> bool:
        return (self.since is None or at >= self.since) and (self.until is None or at <= self.until)

    @property
    def scope(self) -> dict[str, str]:
        return {name: value for name in SCOPE_FIELDS if (value := getattr(self, name)) is not None}

    def narrows_content(self) -> bool:
        """Whether it keeps only some memories by what they cite or say (metadata, scope, speaker, categories)."""
        return self.narrows_messages() or self.categories is not None

    def narrows_messages(self) -> bool:
        """Whether it keeps only the memories citing certain messages (by metadata, scope or speaker)."""
        return self.metadata is not None or bool(self.scope) or self.speaker is not None

    def narrows_time(self) -> bool:
        return self.since is not None or self.until is not None

    def fact_matches(self, fact: FactRow) -> bool:
        return (self.wants("fact") and (self.namespaces is None or fact.namespace in self.namespaces)
                and self.in_range(fact.valid_from))


NO_FILTER = MemoryFilter()


async def matching_messages(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                            filters: MemoryFilter) -> set[str]:
    """The ids of the subject's messages whose metadata holds every pair of the filter's and whose
    scope and speaker are the filter's."""
    clauses: list[sql.Composable] = [sql.SQL("tenant_id = %s"), sql.SQL("subject_id = %s"),
                                     sql.SQL("metadata @> %s::jsonb")]
    params: list[object] = [tenant_id, subject_id, json.dumps(filters.metadata or {})]
    for name, value in filters.scope.items():
        clauses.append(sql.SQL("{} = %s").format(sql.Identifier(name)))
        params.append(value)
    if filters.speaker is not None:
        clauses.append(sql.SQL("lower(btrim(speaker)) = lower(btrim(%s))"))  # one case folding, the database's
        params.append(filters.speaker)
    cur = await conn.execute(sql.SQL("SELECT message_id FROM messages WHERE {}").format(sql.SQL(" AND ").join(clauses)),
                             params)
    return {row[0] for row in await cur.fetchall()}


async def matching_items(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, filters: MemoryFilter,
                         items: list[T], cited_of: Callable[[T], Iterable[str]], text_of: Callable[[T], str],
                         namespace_of: Callable[[T], str] | None = None,
                         metadata_of: Callable[[T], dict[str, MetadataValue]] | None = None) -> list[T]:
    """`items` narrowed to those citing a message the filter's metadata and scope match (or, for
    a fact, whose own metadata, `metadata_of`, holds the filter's pairs), and in one of its
    categories (`namespace_of` gives a fact's namespace); all of them when the filter names none
    of these."""
    if filters.narrows_messages():
        matching = await matching_messages(conn, tenant_id, subject_id, filters)
        items = [item for item in items if matching.intersection(cited_of(item))
                 or (metadata_of is not None and filters.held_by(metadata_of(item)))]
    if filters.categories is not None:
        categories = await categories_named(conn, tenant_id, filters.categories)
        items = [item for item in items if any(
            c.holds_fact(namespace_of(item), text_of(item)) if namespace_of else c.holds_text(text_of(item))
            for c in categories)]
    return items


def memory_filter(**fields: object) -> MemoryFilter:
    """A MemoryFilter from a surface's arguments; a bad one is InvalidInput naming the field."""
    return validated(MemoryFilter, {k: v for k, v in fields.items() if v is not None})
