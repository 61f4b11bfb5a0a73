"""Relations as an extractor gives them, made storable: the one check the offline extractor's and a
model's relations both pass through before they are recorded.

A relation is kept only when both ends name someone or something the same result knows: its
source and target fold (agent_memory.core.entities.fold) to the name or an alias of one of the
result's entities, or to one of the speakers; an "end" may leave the target empty ("I left my job":
whatever is current). Each end is then written as the entity's own name, so the store resolves it
the way it resolves the entity. A relation of a name to itself, of a type outside RELATION_TYPES
or with an operation other than "assert"/"end" is dropped; the role is lower case, trimmed and
bounded; the same relation found twice (same source, type, role, target and operation after
folding) is kept once, citing the evidence of both; at most RELATIONS_MAX are kept, in the order
found.

`SUBJECT` names the subject when a message of theirs gives no speaker name: "my sister Mia" said by
an unnamed user is ("subject", family, "Mia").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from agent_memory.core.entities import fold
from agent_memory.core.models import (
    ENTITY_NAME_MAX,
    RELATION_ROLE_MAX,
    RELATION_TYPES,
    ExtractedEntity,
    ExtractedRelation,
)

__all__ = ["RELATIONS_MAX", "SUBJECT", "RelationDraft", "clean_role", "kept_relations", "with_subject_entity"]

SUBJECT = "subject"
# Relations one result may hold: a session states a handful; more is a model repeating itself.
RELATIONS_MAX = 32


class RelationLike(Protocol):
    """What a relation candidate offers: an ExtractedRelation or a RelationDraft."""

    @property
    def source(self) -> str: ...
    @property
    def relation(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def operation(self) -> str: ...
    @property
    def evidence_message_ids(self) -> Sequence[str]: ...
    @property
    def observed_at(self) -> datetime: ...


@dataclass(frozen=True)
class RelationDraft:
    """A relation as found, before the check: any strings, any role."""

    source: str
    relation: str
    target: str
    evidence_message_ids: Sequence[str]
    observed_at: datetime
    role: str = ""
    operation: str = "assert"


def clean_role(role: str) -> str:
    """A role as stored: lower case, spaces collapsed, at most RELATION_ROLE_MAX characters."""
    return " ".join(role.split()).casefold()[:RELATION_ROLE_MAX].strip()


def _names(entities: Iterable[ExtractedEntity], speaker_names: Iterable[str]) -> dict[str, str]:
    """Folded name or alias -> the name a relation end is written as. Speakers and entity names
    come before aliases: an alias never hides another entity's own name."""
    names: dict[str, str] = {}
    entities = list(entities)
    for speaker in speaker_names:
        speaker = " ".join(speaker.split())[:ENTITY_NAME_MAX].strip()
        if speaker:
            names.setdefault(fold(speaker), speaker)
    for entity in entities:
        names.setdefault(fold(entity.name), entity.name)
    for entity in entities:
        for alias in entity.aliases:
            names.setdefault(fold(alias), entity.name)
    return names


def kept_relations(relations: Iterable[RelationLike], entities: Iterable[ExtractedEntity],
                   speaker_names: Iterable[str], *, message_ids: Sequence[str] | None = None,
                   limit: int = RELATIONS_MAX) -> list[ExtractedRelation]:
    """The relations whose ends are the result's entities or speakers, as storable records (see the
    module docstring). With `message_ids`, evidence outside them is dropped (a relation left without
    any is dropped) and the rest is put in message order."""
    names = _names(entities, speaker_names)
    position = {m: i for i, m in enumerate(message_ids)} if message_ids is not None else None
    kept: dict[tuple[str, str, str, str, str], ExtractedRelation] = {}
    for relation in relations:
        if relation.relation not in RELATION_TYPES or relation.operation not in ("assert", "end"):
            continue
        source = names.get(fold(relation.source))
        target = names.get(fold(relation.target)) if relation.target.strip() else ""
        if source is None or target is None or (not target and relation.operation != "end"):
            continue
        if fold(source) == fold(target):
            continue
        ids = list(dict.fromkeys(i.strip() for i in relation.evidence_message_ids if i.strip()))
        if position is not None:
            ids = sorted((i for i in ids if i in position), key=position.__getitem__)
        if not ids:
            continue
        role = clean_role(relation.role)
        key = (fold(source), relation.relation, role, fold(target), relation.operation)
        if key in kept:
            earlier = kept[key]
            merged = list(dict.fromkeys([*earlier.evidence_message_ids, *ids]))
            if position is not None:
                merged.sort(key=position.__getitem__)
            kept[key] = earlier.model_copy(update={"evidence_message_ids": merged})
            continue
        if len(kept) >= limit:
            continue
        kept[key] = ExtractedRelation.model_validate({
            "source": source, "relation": relation.relation, "target": target, "role": role,
            "operation": relation.operation, "evidence_message_ids": ids, "observed_at": relation.observed_at})
    return list(kept.values())


def with_subject_entity(entities: list[ExtractedEntity], relations: Sequence[ExtractedRelation]) -> list[ExtractedEntity]:
    """The entities plus the subject as a person named SUBJECT when a relation names the subject so
    and no entity of the result carries that name: "my sister Mia" said by an unnamed user is an
    edge from the subject, which needs an entity to start from."""
    names = {fold(name) for entity in entities for name in (entity.name, *entity.aliases)}
    evidence = [i for r in relations if SUBJECT in (fold(r.source), fold(r.target)) for i in r.evidence_message_ids]
    if not evidence or SUBJECT in names:
        return entities
    return [*entities, ExtractedEntity(name=SUBJECT, entity_type="person", evidence_message_ids=list(dict.fromkeys(evidence)))]
