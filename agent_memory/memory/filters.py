"""What a reader narrows a search or a listing to: the kinds of memory, fact namespaces (a
tenant's categories: location, diet, work, ...) and a time range. One model for every surface, so
a filter refused on one is refused on all."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import FactRow

MemoryKind = Literal["fact", "episode"]
NAMESPACE_MAX_CHARS = 64
NAMESPACES_MAX = 50


class MemoryFilter(BaseModel):
    """Kinds of memory (recall), fact namespaces, and a time range: when a fact became true
    (`valid_from`) or an episode happened, within [since, until]. Unset: no narrowing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kinds: frozenset[MemoryKind] | None = Field(default=None, min_length=1)
    namespaces: frozenset[str] | None = Field(default=None, min_length=1, max_length=NAMESPACES_MAX)
    since: datetime | None = None
    until: datetime | None = None

    @model_validator(mode="after")
    def _check(self) -> MemoryFilter:
        for name in self.namespaces or ():
            if not 1 <= len(name) <= NAMESPACE_MAX_CHARS:
                raise InvalidInput(f"namespace {name[:40]!r} is invalid: use 1 to {NAMESPACE_MAX_CHARS} characters, "
                                   "as facts name it (e.g. location)")
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


def memory_filter(**fields: object) -> MemoryFilter:
    """A MemoryFilter from a surface's arguments; a bad one is InvalidInput naming the field."""
    try:
        return MemoryFilter.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        error = exc.errors()[0]
        reason = str(error.get("ctx", {}).get("error") or error["msg"])
        where = ".".join(str(part) for part in error["loc"])
        raise InvalidInput(f"{where}: {reason}" if where else reason) from None
