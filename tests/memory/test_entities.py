"""Entity memory on the real stack: the people, pets and places a subject's sessions mention are
noted through the event log, resolved across sessions by name and alias, rebuilt equal from the
log, exported with their mentions, forgotten and restored, and erased with zero residue — in
English and in Chinese."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

import pytest

from agent_memory.core.models import (
    ConflictPlan,
    ExtractedEntity,
    ExtractionResult,
    ImportanceResult,
    Session,
    SummaryResult,
)
from agent_memory.core.operation_keys import CommitKey
from agent_memory.lifecycle.export import export_subject
from agent_memory.lifecycle.forgetting import forget_memory, restore_memory
from agent_memory.memory.memory_store import commit_consolidation
from agent_memory.projection.rebuild import rebuild_subject
from agent_memory.store.db import tenant_transaction
from tests.sessions import session


@dataclass(frozen=True)
class Language:
    """Three sessions: the first names a person and a pet, the second calls the person by another
    name and gives the full one as an alias, the third uses only the other name."""

    sessions: tuple[Session, Session, Session]
    person: str
    nickname: str
    pet: str


ENGLISH = Language(
    (session("s1", "2024-03-01T09:00:00Z", "Melanie came over with her dog Max.", "Melanie loves hiking."),
     session("s2", "2024-03-08T09:00:00Z", "Mel, that is Melanie, called me today."),
     session("s3", "2024-03-15T09:00:00Z", "Had lunch with Mel.")),
    person="Melanie", nickname="Mel", pet="Max")
CHINESE = Language(
    (session("s1", "2024-03-01T09:00:00Z", "妈妈带着她的猫咪咪来了。", "妈妈喜欢爬山。"),
     session("s2", "2024-03-08T09:00:00Z", "我妈今天给我打电话了。"),
     session("s3", "2024-03-15T09:00:00Z", "和我妈一起吃了午饭。")),
    person="妈妈", nickname="我妈", pet="咪咪")


def _entities(lang: Language, n: int) -> list[ExtractedEntity]:
    """What an extractor reports for session n (0-based), with its message ids."""
    ids = [m.message_id for m in lang.sessions[n].messages]
    if n == 0:
        return [ExtractedEntity(name=lang.person, entity_type="person", evidence_message_ids=ids),
                ExtractedEntity(name=lang.pet, entity_type="pet", evidence_message_ids=ids[:1])]
    if n == 1:
        return [ExtractedEntity(name=lang.nickname, entity_type="person", aliases=[lang.person],
                                evidence_message_ids=ids)]
    return [ExtractedEntity(name=lang.nickname, entity_type="person", evidence_message_ids=ids)]


async def _commit(services, tenant: str, subject: str, s: Session, entities: list[ExtractedEntity],
                  attempt: str = "1"):
    extraction = ExtractionResult(provider="test", extractor="written-out", extractor_version="1", facts=[],
                                  entities=entities)
    request = {"session": s.session_id, "attempt": attempt,
               "entities": [e.model_dump(mode="json") for e in entities]}
    return await commit_consolidation(
        services.pool, services.keyring, tenant_id=tenant, subject_id=subject, session_id=s.session_id,
        key=CommitKey.for_request(s.session_id, request), request=request, extraction=extraction,
        plan=ConflictPlan(decisions=[]), importance=ImportanceResult(importance=3),
        summary=SummaryResult(sentences=[], token_count=0), happened_at=s.messages[-1].created_at)


async def _rows(services, tenant: str, subject: str) -> tuple[list[tuple], list[tuple]]:
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT memory_id, name, entity_type, aliases, version FROM entities "
                                 "WHERE tenant_id = %s AND subject_id = %s ORDER BY first_seen_at, entity_type",
                                 (tenant, subject))
        entities = await cur.fetchall()
        cur = await conn.execute("SELECT memory_id, message_id, session_id FROM entity_mentions "
                                 "WHERE tenant_id = %s AND subject_id = %s ORDER BY message_id", (tenant, subject))
        return entities, await cur.fetchall()


async def _count(services, tenant: str, table: str, subject: str) -> int:
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute(f"SELECT count(*) FROM {table} WHERE tenant_id = %s AND subject_id = %s",
                                 (tenant, subject))
        row = await cur.fetchone()
        return int(row[0]) if row else 0


@pytest.mark.parametrize("lang", [ENGLISH, CHINESE], ids=["english", "chinese"])
async def test_entities_are_resolved_across_sessions_rebuilt_forgotten_restored_and_erased(
        lang, client, services, tenant, running_worker):
    subject = "lin"
    for s in lang.sessions:
        await client.append_messages(tenant, subject, s)
    noted = [(await _commit(services, tenant, subject, s, _entities(lang, n))).entities_noted
             for n, s in enumerate(lang.sessions)]
    assert noted == [2, 1, 1]

    entities, mentions = await _rows(services, tenant, subject)
    # One person under its first name, the other name its alias; one pet. Versions: one per session.
    assert [(name, kind, aliases, version) for _, name, kind, aliases, version in entities] == [
        (lang.person, "person", [lang.nickname], 3), (lang.pet, "pet", [], 1)]
    person_id, pet_id = entities[0][0], entities[1][0]
    all_ids = sorted(m.message_id for s in lang.sessions for m in s.messages)
    assert sorted(m for mid, m, _ in mentions if mid == person_id) == all_ids
    assert [(m, sid) for mid, m, sid in mentions if mid == pet_id] == [("s1:1", "s1")]

    # A session consolidated again records nothing it already recorded.
    again = await _commit(services, tenant, subject, lang.sessions[2], _entities(lang, 2), attempt="2")
    assert again.entities_noted == 0 and again.events_appended == 0

    rebuilt = await rebuild_subject(services.pool, services.keyring, tenant, subject)
    assert rebuilt.equal and rebuilt.rows_by_table["entities"] == 2
    assert rebuilt.rows_by_table["entity_mentions"] == len(all_ids) + 1

    export = await export_subject(services.pool, services.keyring, tenant, subject, grace=timedelta(hours=1))
    person = next(e for e in export.entities if e.entity_type == "person")
    assert (person.name, person.aliases, sorted(person.mentioned_in)) == (lang.person, [lang.nickname], all_ids)
    assert {m.message_id for m in export.cited_messages} == set(all_ids)

    # Forgotten: gone at once, and a later mention is held back until the restore.
    forgot = await forget_memory(services.pool, services.keyring, tenant_id=tenant, subject_id=subject,
                                 memory_id=str(pet_id), reason="asked to")
    assert forgot.memory_kind == "entity"
    entities, mentions = await _rows(services, tenant, subject)
    assert [e[0] for e in entities] == [person_id] and all(mid != pet_id for mid, _, _ in mentions)
    later = session("s4", "2024-03-22T09:00:00Z", f"{lang.pet}!")
    await client.append_messages(tenant, subject, later)
    held = await _commit(services, tenant, subject, later,
                         [ExtractedEntity(name=lang.pet, entity_type="pet", evidence_message_ids=["s4:1"])])
    assert held.entities_noted == 0
    assert (await rebuild_subject(services.pool, services.keyring, tenant, subject)).equal
    await restore_memory(services.pool, services.keyring, tenant_id=tenant, subject_id=subject,
                         memory_id=str(pet_id), reason="restored")
    entities, _ = await _rows(services, tenant, subject)
    assert {e[0] for e in entities} == {person_id, pet_id}
    assert (await rebuild_subject(services.pool, services.keyring, tenant, subject)).equal

    async with running_worker():
        receipt = await client.admin.erasure_receipt(await client.admin.erase(tenant, subject, reason="user request"))
    assert receipt.residue_total == 0 and receipt.key_shredded
    assert receipt.removed["facts"] >= 0 and receipt.removed["entities"] == 2
    assert receipt.removed["entity_mentions"] == len(all_ids) + 1
    for table in ("entities", "entity_mentions"):
        assert await _count(services, tenant, table, subject) == 0


async def test_an_entity_is_matched_by_type_and_any_of_its_names_only(client, services, tenant):
    """Another type under the same name is another entity; names match whatever their case and
    spacing."""
    s = session("s1", "2024-03-01T09:00:00Z", "Jordan drove to Jordan.", "JORDAN  loved it.")
    await client.append_messages(tenant, "ana", s)
    outcome = await _commit(services, tenant, "ana", s, [
        ExtractedEntity(name="Jordan", entity_type="person", evidence_message_ids=["s1:1"]),
        ExtractedEntity(name="Jordan", entity_type="place", evidence_message_ids=["s1:1"]),
        ExtractedEntity(name="JORDAN ", entity_type="person", aliases=["Jordan  "], evidence_message_ids=["s1:2"])])
    assert outcome.entities_noted == 2
    entities, mentions = await _rows(services, tenant, "ana")
    assert sorted((kind, name) for _, name, kind, _, _ in entities) == [("person", "Jordan"), ("place", "Jordan")]
    person = next(e[0] for e in entities if e[2] == "person")
    assert sorted(m for mid, m, _ in mentions if mid == person) == ["s1:1", "s1:2"]
    assert all(isinstance(e[0], uuid.UUID) for e in entities)


CONSOLIDATED = {
    "english": ((session("s1", "2024-03-01T09:00:00Z", "My sister Anna is visiting next week.",
                         "Anna loves hiking, we will go to Hangzhou.", ("assistant", "That sounds lovely!"),
                         "My dog Max is coming too."),
                 session("s2", "2024-03-08T09:00:00Z", "My sister called me from Hangzhou yesterday.")),
                ("sister", ["Anna"]), "Hangzhou", "Max"),
    "chinese": ((session("s1", "2024-03-01T09:00:00Z", "我姐王丽下周来杭州。", "我家的狗叫豆豆。"),
                 session("s2", "2024-03-08T09:00:00Z", "我姐昨天从杭州给我打电话了。")),
                ("姐姐", ["我姐", "王丽"]), "杭州", "豆豆"),
}


@pytest.mark.parametrize("lang", ["english", "chinese"])
async def test_consolidation_notes_the_entities_the_offline_extractor_finds(lang, client, services, tenant,
                                                                          running_worker):
    """The real pipeline: the offline extractor reads every message, the commit resolves the
    second session's "my sister" to the first session's sister, whose name joined her aliases."""
    sessions, (relative, aliases), place, pet = CONSOLIDATED[lang]
    async with running_worker():
        for s in sessions:
            await client.append_messages(tenant, "lin", s)
            await client.consolidation_result(await client.end_session(tenant, "lin", s.session_id))
    entities, mentions = await _rows(services, tenant, "lin")
    by_name = {name: (memory_id, kind, sorted(names)) for memory_id, name, kind, names, _ in entities}
    assert by_name[relative][1:] == ("person", sorted(aliases))
    assert by_name[place][1] == "place" and by_name[pet][1] == "pet"
    sessions_of = {name: sorted({sid for mid, _, sid in mentions if mid == memory_id})
                   for name, (memory_id, _, _) in by_name.items()}
    assert sessions_of[relative] == sessions_of[place] == ["s1", "s2"] and sessions_of[pet] == ["s1"]
    assert (await rebuild_subject(services.pool, services.keyring, tenant, "lin")).equal
