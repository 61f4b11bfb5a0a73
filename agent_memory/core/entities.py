"""Entities as an extractor gives them, made storable: names within the bounds of
`ExtractedEntity`, and the same entity found more than once (in several chunks of a long
session, or named two ways) kept as one.

Two mentions are the same entity when they have the same type and share a name or alias,
compared casefolded ("Mel" and "mel", "Melanie" named with the alias "Mel"). The merged entity
is named by the longest name it was given (the fullest form the session uses), keeps the other
names as aliases, and cites the evidence of both, in message order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agent_memory.core.models import ENTITY_ALIASES_MAX, ENTITY_NAME_MAX, EntityType, ExtractedEntity

__all__ = ["entity_names", "merged_entities"]


def fold(name: str) -> str:
    """The form entity names are matched in: case and surrounding or repeated spaces do not matter."""
    return " ".join(name.split()).casefold()


def _clipped(name: str) -> str:
    return " ".join(name.split())[:ENTITY_NAME_MAX].strip()


def entity_names(name: str, aliases: Iterable[str]) -> tuple[str, list[str]] | None:
    """The name and aliases within the bounds: whitespace collapsed, each cut to ENTITY_NAME_MAX
    characters, an alias equal to the name or to an earlier alias (casefolded) left out, at most
    ENTITY_ALIASES_MAX aliases. None when the name is empty."""
    name = _clipped(name)
    if not name:
        return None
    seen = {name.casefold()}
    kept: list[str] = []
    for alias in aliases:
        alias = _clipped(alias)
        if alias and alias.casefold() not in seen:
            seen.add(alias.casefold())
            kept.append(alias)
    return name, kept[:ENTITY_ALIASES_MAX]


@dataclass
class _Found:
    entity_type: EntityType
    names: list[str]  # the names given, in the order found
    aliases: list[str]
    ids: set[str]

    def keys(self) -> set[str]:
        return {n.casefold() for n in (*self.names, *self.aliases)}


def merged_entities(entities: Iterable[tuple[str, EntityType, Sequence[str], Sequence[str]]],
                    message_order: Sequence[str]) -> list[ExtractedEntity]:
    """(name, type, aliases, evidence ids) found in any order, as ExtractedEntity: ids not in
    `message_order` dropped, an entity left without evidence dropped, names bounded, and the same
    entity found twice merged (in the order each was first found). A merged entity is named by the
    longest of the names it was given (the first of them on a tie); the other names are aliases."""
    position = {message_id: i for i, message_id in enumerate(message_order)}
    found: list[_Found] = []
    for name, entity_type, aliases, evidence in entities:
        ids = {i.strip() for i in evidence} & position.keys()
        named = entity_names(name, aliases)
        if named is None or not ids:
            continue
        mention = _Found(entity_type, [named[0]], named[1], ids)
        same = [f for f in found if f.entity_type == entity_type and f.keys() & mention.keys()]
        if not same:
            found.append(mention)
            continue
        for other in [*same[1:], mention]:  # a mention that names two entities found apart joins them
            same[0].names.extend(other.names)
            same[0].aliases.extend(other.aliases)
            same[0].ids.update(other.ids)
            if other is not mention:
                found.remove(other)
    kept: list[ExtractedEntity] = []
    for entity in found:
        fullest = max(entity.names, key=len)
        name, aliases = entity_names(fullest, [*entity.names, *entity.aliases]) or (fullest, [])
        kept.append(ExtractedEntity(name=name, entity_type=entity.entity_type, aliases=aliases,
                                    evidence_message_ids=sorted(entity.ids, key=position.__getitem__)))
    return kept
