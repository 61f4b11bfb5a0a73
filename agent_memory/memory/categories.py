"""A tenant's categories of memory: its own names for what its memories are about ("billing",
"travel", "health"), each defined by the words that mark it and the fact namespaces it takes in.

A fact is in a category when its namespace is one of the category's or its text holds one of the
category's words; an episode or a note when its text holds one of the words. Words match whole
and in any case, a word's plural too ("invoice" matches "Invoices"); a Chinese word matches as a
substring (Chinese has no spaces between words). The rule is deterministic and explainable: what a
category holds can be read off its definition, on every surface and in every rebuild. The filters
of recall, the context, the facts listing and the export keep the memories of given categories
(agent_memory.memory.filters); a category that does not exist is refused by name.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

import psycopg
from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent_memory.core.errors import InvalidInput, NotFound
from agent_memory.core.models import (
    IDENTIFIER_MAX_CHARS,
    IDENTIFIER_SCHEMA_PATTERN,
    check_identifier,
    storable_text,
    validated,
)
from agent_memory.store.db import joined_tenant_transaction, tenant_transaction

CATEGORIES_MAX = 50  # per tenant
WORDS_MAX = 50  # per category
WORD_MAX_CHARS = 64
DESCRIPTION_MAX_CHARS = 500
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


class CategoryNotFoundError(NotFound):
    """The tenant has no category of that name."""


class Category(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=IDENTIFIER_MAX_CHARS, pattern=IDENTIFIER_SCHEMA_PATTERN,
                      description="the category's name, as filters give it (e.g. billing)")
    description: str = Field(default="", max_length=DESCRIPTION_MAX_CHARS,
                             description="what the category is about, for people reading the list")
    words: list[str] = Field(default_factory=list, max_length=WORDS_MAX,
                             description="a memory whose text holds one of these words is in the category")
    namespaces: list[str] = Field(default_factory=list, max_length=WORDS_MAX,
                                  description="every fact of these namespaces is in the category")

    @field_validator("name")
    @classmethod
    def _identifier(cls, v: str) -> str:
        return check_identifier("name", v)

    @field_validator("description")
    @classmethod
    def _storable(cls, v: str) -> str:
        return storable_text(v)

    @field_validator("words", "namespaces")
    @classmethod
    def _short_terms(cls, v: list[str]) -> list[str]:
        cleaned = [storable_text(term.strip()) for term in v]
        for index, term in enumerate(cleaned):
            if not 1 <= len(term) <= WORD_MAX_CHARS or any(c in term for c in "\n\r\t"):
                raise InvalidInput(f"[{index}]: use 1 to {WORD_MAX_CHARS} characters on one line")
        return list(dict.fromkeys(cleaned))

    @model_validator(mode="after")
    def _holds_something(self) -> Category:
        if not self.words and not self.namespaces:
            raise InvalidInput(f"words: category {self.name!r} has neither words nor namespaces: give it at least "
                               "one, or nothing is ever in it")
        return self

    def holds_text(self, text: str) -> bool:
        return bool(_pattern(tuple(self.words)).search(text.lower()))

    def holds_fact(self, namespace: str, text: str) -> bool:
        return namespace in self.namespaces or self.holds_text(text)


def category(**fields: object) -> Category:
    """A Category from a surface's arguments; a bad one is InvalidInput naming the field."""
    return validated(Category, fields)


@functools.lru_cache(maxsize=512)
def _pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    """Matches any of `words` (never, for none): Latin words whole and in the plural, CJK ones as
    substrings."""
    if not words:
        return re.compile(r"(?!)")
    parts = [re.escape(w.lower()) if _CJK.search(w) else rf"(?<!\w){re.escape(w.lower())}(?:s|es)?(?!\w)"
             for w in sorted(words, key=lambda w: (-len(w), w))]
    return re.compile("|".join(parts))


async def put_category(pool: AsyncConnectionPool, tenant_id: str, category: Category) -> Category:
    """Create the tenant's category or replace its definition."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute("SELECT count(*) FROM memory_categories WHERE tenant_id = %s AND name <> %s",
                                 (tenant_id, category.name))
        row = await cur.fetchone()
        if row is not None and row[0] >= CATEGORIES_MAX:
            raise InvalidInput(f"name: tenant {tenant_id!r} has {CATEGORIES_MAX} categories, the most there may be; "
                               "remove one first")
        await conn.execute(
            "INSERT INTO memory_categories (tenant_id, name, description, words, namespaces) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tenant_id, name) DO UPDATE SET "
            "description = excluded.description, words = excluded.words, namespaces = excluded.namespaces, "
            "updated_at = now()",
            (tenant_id, category.name, category.description, category.words, category.namespaces))
    return category


async def list_categories(pool: AsyncConnectionPool, tenant_id: str,
                          conn: psycopg.AsyncConnection | None = None) -> list[Category]:
    async with joined_tenant_transaction(pool, tenant_id, conn) as c, c.cursor(row_factory=class_row(Category)) as cur:
        await cur.execute("SELECT name, description, words, namespaces FROM memory_categories "
                          "WHERE tenant_id = %s ORDER BY name", (tenant_id,))
        return await cur.fetchall()


async def remove_category(pool: AsyncConnectionPool, tenant_id: str, name: str) -> bool:
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute("DELETE FROM memory_categories WHERE tenant_id = %s AND name = %s", (tenant_id, name))
        return cur.rowcount > 0


async def categories_named(conn: psycopg.AsyncConnection, tenant_id: str, names: Iterable[str]) -> list[Category]:
    """The tenant's categories of these names; a name the tenant has no category of is refused."""
    wanted = sorted(set(names))
    async with conn.cursor(row_factory=class_row(Category)) as cur:
        await cur.execute("SELECT name, description, words, namespaces FROM memory_categories "
                          "WHERE tenant_id = %s AND name = ANY(%s) ORDER BY name", (tenant_id, wanted))
        found = await cur.fetchall()
    missing = sorted(set(wanted) - {c.name for c in found})
    if missing:
        raise NotFound(f"categories: no category {', '.join(map(repr, missing))} in this tenant: define it "
                           "first (agent-memory categories set, or PUT /v1/categories/{name})")
    return found
