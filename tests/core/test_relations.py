"""The check every extractor's relations pass through: both ends known to the same result (an
entity's name or alias, or a speaker), written as the entity's own name, each relation once, roles
clean, the count bounded. No server needed."""

from __future__ import annotations

from datetime import UTC, datetime

from agent_memory.core.models import RELATION_ROLE_MAX, ExtractedEntity, ExtractedRelation
from agent_memory.core.relations import RELATIONS_MAX, SUBJECT, RelationDraft, clean_role, kept_relations

AT = datetime(2024, 5, 8, 10, 0, tzinfo=UTC)
ENTITIES = [
    ExtractedEntity(name="sister", entity_type="person", aliases=["Mia"], evidence_message_ids=["m1"]),
    ExtractedEntity(name="Acme Labs", entity_type="organisation", aliases=["Acme"], evidence_message_ids=["m2"]),
    ExtractedEntity(name="Lisbon", entity_type="place", evidence_message_ids=["m2"]),
    ExtractedEntity(name="Caroline", entity_type="person", evidence_message_ids=["m1"]),
]


def draft(source: str, relation: str, target: str, role: str = "", operation: str = "assert",
          ids: tuple[str, ...] = ("m1",)) -> RelationDraft:
    return RelationDraft(source=source, relation=relation, target=target, role=role, operation=operation,
                         evidence_message_ids=list(ids), observed_at=AT)


def ends(relations: list[ExtractedRelation]) -> list[tuple[str, str, str, str, str]]:
    return [(r.source, r.relation, r.target, r.role, r.operation) for r in relations]


def test_ends_are_written_as_the_entitys_own_name_or_the_speaker():
    kept = kept_relations([draft("caroline", "family", "mia", " Older  SISTER "),
                           draft(SUBJECT, "works_at", "ACME"), draft(SUBJECT, "lives_in", " lisbon ")],
                          ENTITIES, [SUBJECT])
    assert ends(kept) == [("Caroline", "family", "sister", "older sister", "assert"),
                          ("subject", "works_at", "Acme Labs", "", "assert"),
                          ("subject", "lives_in", "Lisbon", "", "assert")]


def test_an_end_unknown_to_the_result_drops_the_relation():
    kept = kept_relations([draft(SUBJECT, "lives_in", "Paris"), draft("Tom", "partner", "Mia"),
                           draft(SUBJECT, "friend", "Jo")], ENTITIES, [SUBJECT])
    assert kept == []


def test_an_empty_target_only_ends_whatever_is_current():
    kept = kept_relations([draft(SUBJECT, "works_at", "", operation="end"), draft(SUBJECT, "works_at", "")],
                          ENTITIES, [SUBJECT])
    assert ends(kept) == [("subject", "works_at", "", "", "end")]


def test_unknown_types_operations_and_self_relations_are_dropped():
    kept = kept_relations([draft(SUBJECT, "enemy", "Mia"), draft(SUBJECT, "friend", "Mia", operation="confirm"),
                           draft("Mia", "family", "sister")], ENTITIES, [SUBJECT])
    assert kept == []


def test_the_same_relation_twice_is_kept_once_with_the_evidence_of_both():
    kept = kept_relations([draft(SUBJECT, "family", "Mia", "Sister", ids=("m2",)),
                           draft("SUBJECT", "family", "sister", "sister", ids=("m1", "m2")),
                           draft(SUBJECT, "family", "Mia", "sister", operation="end", ids=("m3",))],
                          ENTITIES, [SUBJECT], message_ids=["m1", "m2", "m3"])
    assert ends(kept) == [("subject", "family", "sister", "sister", "assert"),
                          ("subject", "family", "sister", "sister", "end")]
    assert kept[0].evidence_message_ids == ["m1", "m2"]  # message order


def test_evidence_outside_the_messages_is_dropped_and_a_relation_without_any_with_it():
    kept = kept_relations([draft(SUBJECT, "lives_in", "Lisbon", ids=("m9", " m2 ")),
                           draft(SUBJECT, "works_at", "Acme", ids=("m9",)), draft(SUBJECT, "friend", "Mia", ids=())],
                          ENTITIES, [SUBJECT], message_ids=["m1", "m2"])
    assert ends(kept) == [("subject", "lives_in", "Lisbon", "", "assert")]
    assert kept[0].evidence_message_ids == ["m2"]


def test_roles_are_clean_and_bounded_and_the_count_is_capped():
    assert clean_role("  Best\tFRIEND ") == "best friend"
    assert len(clean_role("x" * 200)) == RELATION_ROLE_MAX
    many = [draft(SUBJECT, "friend", "Mia", role=f"friend {i}") for i in range(RELATIONS_MAX + 5)]
    kept = kept_relations(many, ENTITIES, [SUBJECT])
    assert len(kept) == RELATIONS_MAX
    assert all(len(r.role) <= RELATION_ROLE_MAX for r in kept)


def test_an_alias_never_hides_another_entitys_own_name():
    entities = [ExtractedEntity(name="Max", entity_type="pet", evidence_message_ids=["m1"]),
                ExtractedEntity(name="brother", entity_type="person", aliases=["Max"], evidence_message_ids=["m1"])]
    kept = kept_relations([draft(SUBJECT, "owns", "max")], entities, [SUBJECT])
    assert ends(kept) == [("subject", "owns", "Max", "", "assert")]


def test_recorded_relations_pass_again_unchanged():
    first = kept_relations([draft("Caroline", "family", "Mia", "sister")], ENTITIES, [SUBJECT])
    assert kept_relations(first, ENTITIES, [SUBJECT]) == first
