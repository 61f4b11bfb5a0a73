"""Relations between entities on the real stack: edges a session states are resolved to the
subject's entities at commit and kept as bi-temporal intervals through the event log — a
single-valued relation that moves closes its old edge, many-valued edges coexist, an end closes
— read one hop from an entity, rebuilt equal from the log, exported, forgotten and restored with
their entities, erased with zero residue and invisible to another tenant; in English and Chinese."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest

from agent_memory.core.models import (
    ConflictPlan,
    EntityType,
    ExtractedEntity,
    ExtractedRelation,
    ExtractionResult,
    ImportanceResult,
    Session,
    SummaryResult,
)
from agent_memory.core.operation_keys import CommitKey
from agent_memory.lifecycle.export import export_subject
from agent_memory.lifecycle.forgetting import forget_memory, restore_memory
from agent_memory.memory.memory_store import commit_consolidation
from agent_memory.memory.relations import current_edges
from agent_memory.projection.rebuild import rebuild_subject
from agent_memory.store.db import tenant_transaction
from tests.sessions import session


@dataclass(frozen=True)
class Names:
    speaker: str
    old_city: str
    new_city: str
    employer: str
    sister: str
    friend: str
    new_friend: str
    stranger: str  # named in an edge but never as an entity
    lines: tuple[str, str, str]  # one message per session


ENGLISH = Names("Lin", "Shanghai", "Suzhou", "Acme", "Mia", "Tom", "Kai", "Zed",
                ("I live in Shanghai and work at Acme; my sister Mia and my friend Tom visit often, Zed too.",
                 "We moved to Suzhou! My new friend Kai showed us around.",
                 "I quit my job at Acme."))
CHINESE = Names("林", "上海", "苏州", "阿克米公司", "小美", "小王", "小李", "老赵",
                ("我住在上海，在阿克米公司上班；我妹妹小美和朋友小王常来，老赵也来。",
                 "我们搬到苏州了！新朋友小李带我们转了转。",
                 "我从阿克米公司辞职了。"))


def _sessions(n: Names) -> list[Session]:
    return [session(f"s{i + 1}", f"2024-03-{1 + 7 * i:02d}T09:00:00Z", line) for i, line in enumerate(n.lines)]


def _entity(name: str, kind: EntityType, s: Session) -> ExtractedEntity:
    return ExtractedEntity(name=name, entity_type=kind, evidence_message_ids=[s.messages[0].message_id])


def _edge(source: str, relation: str, target: str, s: Session, *, role: str = "",
          operation: str = "assert") -> ExtractedRelation:
    return ExtractedRelation.model_validate({
        "source": source, "relation": relation, "target": target, "role": role, "operation": operation,
        "evidence_message_ids": [s.messages[0].message_id], "observed_at": s.messages[0].created_at})


def _extraction(n: Names, i: int, s: Session) -> tuple[list[ExtractedEntity], list[ExtractedRelation]]:
    """What an extractor reports for session i (0-based)."""
    if i == 0:
        return ([_entity(n.speaker, "person", s), _entity(n.old_city, "place", s),
                 _entity(n.employer, "organisation", s), _entity(n.sister, "person", s),
                 _entity(n.friend, "person", s)],
                [_edge(n.speaker, "lives_in", n.old_city, s), _edge(n.speaker, "works_at", n.employer, s),
                 _edge(n.speaker, "family", n.sister, s, role="sister"), _edge(n.speaker, "friend", n.friend, s),
                 _edge(n.speaker, "friend", n.stranger, s)])
    if i == 1:
        return ([_entity(n.speaker, "person", s), _entity(n.new_city, "place", s), _entity(n.new_friend, "person", s)],
                [_edge(n.speaker, "lives_in", n.new_city, s), _edge(n.speaker, "friend", n.new_friend, s),
                 # Said again: the edge holds already.
                 _edge(n.speaker, "family", n.sister, s, role="sister")])
    return [_entity(n.speaker, "person", s)], [_edge(n.speaker, "works_at", "", s, operation="end")]


async def _commit(services, tenant: str, subject: str, s: Session, entities: list[ExtractedEntity],
                  relations: list[ExtractedRelation], attempt: str = "1"):
    extraction = ExtractionResult(provider="test", extractor="written-out", extractor_version="1", facts=[],
                                  entities=entities, relations=relations)
    request = {"session": s.session_id, "attempt": attempt,
               "relations": [r.model_dump(mode="json") for r in relations]}
    return await commit_consolidation(
        services.pool, services.keyring, tenant_id=tenant, subject_id=subject, session_id=s.session_id,
        key=CommitKey.for_request(s.session_id, request), request=request, extraction=extraction,
        plan=ConflictPlan(decisions=[]), importance=ImportanceResult(importance=3),
        summary=SummaryResult(sentences=[], token_count=0), happened_at=s.messages[-1].created_at)


async def _edges(services, tenant: str, subject: str) -> list[tuple]:
    """Every interval: (source name, relation, role, target name, valid_from, valid_to)."""
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute(
            "SELECT s.name, r.relation, r.role, t.name, r.valid_from, r.valid_to FROM relations r "
            "JOIN entities s ON s.tenant_id = r.tenant_id AND s.memory_id = r.source_entity_id "
            "JOIN entities t ON t.tenant_id = r.tenant_id AND t.memory_id = r.target_entity_id "
            "WHERE r.tenant_id = %s AND r.subject_id = %s ORDER BY r.valid_from, r.relation, t.name",
            (tenant, subject))
        return await cur.fetchall()


async def _entity_ids(services, tenant: str, subject: str) -> dict[str, object]:
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT name, memory_id FROM entities WHERE tenant_id = %s AND subject_id = %s",
                                 (tenant, subject))
        return {name: memory_id for name, memory_id in await cur.fetchall()}


async def _hop(services, tenant: str, subject: str, entity_id) -> set[tuple]:
    async with tenant_transaction(services.pool, tenant) as conn:
        return {(e.relation, e.role, e.other_name, e.outgoing)
                for e in await current_edges(conn, tenant, subject, [entity_id])}


async def _count(services, tenant: str, table: str, subject: str) -> int:
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute(f"SELECT count(*) FROM {table} WHERE tenant_id = %s AND subject_id = %s",
                                 (tenant, subject))
        row = await cur.fetchone()
        return int(row[0]) if row else 0


async def _events(services, tenant: str, subject: str) -> int:
    return await _count(services, tenant, "memory_events", subject)


@pytest.mark.parametrize("n", [ENGLISH, CHINESE], ids=["english", "chinese"])
async def test_relations_are_held_over_time_rebuilt_forgotten_with_their_entities_and_erased(
        n, client, services, tenant, running_worker):
    subject = "lin"
    s1, s2, s3 = _sessions(n)
    for s in (s1, s2, s3):
        await client.append_messages(tenant, subject, s)

    # Four edges; the one naming no entity of the subject is left out.
    first = await _commit(services, tenant, subject, s1, *_extraction(n, 0, s1))
    assert (first.entities_noted, first.relations_noted) == (5, 4)
    t1, t2, t3 = (s.messages[0].created_at for s in (s1, s2, s3))
    assert await _edges(services, tenant, subject) == [
        (n.speaker, "family", "sister", n.sister, t1, None), (n.speaker, "friend", "", n.friend, t1, None),
        (n.speaker, "lives_in", "", n.old_city, t1, None), (n.speaker, "works_at", "", n.employer, t1, None)]

    # A move closes the old city's edge where the new one starts; a second friend joins the first;
    # the sister said again changes nothing.
    moved = await _commit(services, tenant, subject, s2, *_extraction(n, 1, s2))
    assert moved.relations_noted == 3  # the old city closed, the new city and the new friend opened
    edges = await _edges(services, tenant, subject)
    assert (n.speaker, "lives_in", "", n.old_city, t1, t2) in edges
    assert (n.speaker, "lives_in", "", n.new_city, t2, None) in edges
    assert {e[3] for e in edges if e[1] == "friend" and e[5] is None} == {n.friend, n.new_friend}
    assert len(edges) == 6

    # The same commit replayed returns its outcome and appends nothing; the session consolidated
    # again (another operation) finds every edge in place.
    events = await _events(services, tenant, subject)
    assert await _commit(services, tenant, subject, s2, *_extraction(n, 1, s2)) == moved
    again = await _commit(services, tenant, subject, s2, *_extraction(n, 1, s2), attempt="2")
    assert (again.relations_noted, again.events_appended) == (0, 0)
    assert await _events(services, tenant, subject) == events

    # An end with no target closes whatever the relation holds now.
    ended = await _commit(services, tenant, subject, s3, *_extraction(n, 2, s3))
    assert ended.relations_noted == 1
    assert (n.speaker, "works_at", "", n.employer, t1, t3) in await _edges(services, tenant, subject)

    ids = await _entity_ids(services, tenant, subject)
    assert await _hop(services, tenant, subject, ids[n.speaker]) == {
        ("family", "sister", n.sister, True), ("friend", "", n.friend, True), ("friend", "", n.new_friend, True),
        ("lives_in", "", n.new_city, True)}
    assert await _hop(services, tenant, subject, ids[n.new_city]) == {("lives_in", "", n.speaker, False)}
    assert await _hop(services, tenant, subject, ids[n.old_city]) == set()

    rebuilt = await rebuild_subject(services.pool, services.keyring, tenant, subject)
    assert rebuilt.equal and rebuilt.rows_by_table["relations"] == 6
    export = await export_subject(services.pool, services.keyring, tenant, subject, grace=timedelta(hours=1))
    assert sorted((r.relation, r.target_name, r.valid_to is None) for r in export.relations) == sorted(
        [("family", n.sister, True), ("friend", n.friend, True), ("friend", n.new_friend, True),
         ("lives_in", n.old_city, False), ("lives_in", n.new_city, True), ("works_at", n.employer, False)])

    # Forgetting an entity forgets its edges at once; restoring it brings them back.
    forgot = await forget_memory(services.pool, services.keyring, tenant_id=tenant, subject_id=subject,
                                 memory_id=str(ids[n.friend]), reason="asked to")
    assert forgot.memory_kind == "entity"
    assert ("friend", "", n.friend, True) not in await _hop(services, tenant, subject, ids[n.speaker])
    assert await _count(services, tenant, "relations", subject) == 5
    assert (await rebuild_subject(services.pool, services.keyring, tenant, subject)).equal
    await restore_memory(services.pool, services.keyring, tenant_id=tenant, subject_id=subject,
                         memory_id=str(ids[n.friend]), reason="restored")
    assert ("friend", "", n.friend, True) in await _hop(services, tenant, subject, ids[n.speaker])
    assert await _count(services, tenant, "relations", subject) == 6
    assert (await rebuild_subject(services.pool, services.keyring, tenant, subject)).equal

    # Another tenant sees none of the subject's edges, even without naming the tenant.
    async with tenant_transaction(services.pool, f"{tenant}-other") as conn:
        cur = await conn.execute("SELECT count(*) FROM relations")
        assert (await cur.fetchone())[0] == 0
        assert await current_edges(conn, tenant, subject, list(ids.values())) == []

    async with running_worker():
        receipt = await client.admin.erasure_receipt(await client.admin.erase(tenant, subject, reason="user request"))
    assert receipt.residue_total == 0 and receipt.key_shredded
    assert receipt.removed["relations"] == 6
    for table in ("relations", "entities"):
        assert await _count(services, tenant, table, subject) == 0


async def test_a_late_older_statement_does_not_undo_a_newer_move(client, services, tenant):
    """Sessions consolidated out of order: the older city does not replace the newer one."""
    newer = session("s2", "2024-05-01T09:00:00Z", "We live in Suzhou now.")
    older = session("s1", "2024-03-01T09:00:00Z", "We live in Shanghai.")
    for s in (newer, older):
        await client.append_messages(tenant, "ana", s)
    await _commit(services, tenant, "ana", newer, [_entity("Ana", "person", newer), _entity("Suzhou", "place", newer)],
                  [_edge("Ana", "lives_in", "Suzhou", newer)])
    late = await _commit(services, tenant, "ana", older,
                         [_entity("Ana", "person", older), _entity("Shanghai", "place", older)],
                         [_edge("Ana", "lives_in", "Shanghai", older)])
    assert late.relations_noted == 0
    assert [(e[3], e[5]) for e in await _edges(services, tenant, "ana")] == [("Suzhou", None)]


async def test_an_edge_resolves_names_by_fold_and_by_the_type_the_session_gives_them(client, services, tenant):
    """A name two entities share resolves to the one the session's extraction types; case and
    spacing do not matter; an end naming an edge that does not hold changes nothing."""
    s = session("s1", "2024-03-01T09:00:00Z", "Jordan lives in Jordan and owns a cat.")
    await client.append_messages(tenant, "ana", s)
    outcome = await _commit(services, tenant, "ana", s,
                            [_entity("Jordan", "person", s), _entity("Jordan", "place", s)],
                            [_edge("JORDAN ", "lives_in", " jordan", s), _edge("Jordan", "friend", "Jordan", s),
                             _edge("Jordan", "works_at", "Jordan", s, operation="end")])
    # The person and the place share a name: lives_in expects a place; a friend is a person, and an
    # entity is not its own friend.
    assert outcome.relations_noted == 1
    ids = {(name, kind): memory_id for name, kind, memory_id in await _typed_ids(services, tenant, "ana")}
    assert await _hop(services, tenant, "ana", ids[("Jordan", "place")]) == {("lives_in", "", "Jordan", False)}


async def _typed_ids(services, tenant: str, subject: str) -> list[tuple]:
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT name, entity_type, memory_id FROM entities "
                                 "WHERE tenant_id = %s AND subject_id = %s", (tenant, subject))
        return await cur.fetchall()


PIPELINE = {
    "english": ((session("s1", "2024-03-01T09:00:00Z", "My sister Anna is visiting next week.",
                         "I live in Hangzhou with my dog Max."),
                 session("s2", "2024-05-01T09:00:00Z", "I moved to Suzhou last month.")),
                "sister", "Hangzhou", "Suzhou"),
    "chinese": ((session("s1", "2024-03-01T09:00:00Z", "我姐姐王丽下周来看我。", "我住在杭州。"),
                 session("s2", "2024-05-01T09:00:00Z", "我搬到苏州了。")),
                "姐姐", "杭州", "苏州"),
}


@pytest.mark.parametrize("lang", ["english", "chinese"])
async def test_consolidation_keeps_the_edges_the_offline_extractor_finds(lang, client, services, tenant,
                                                                       running_worker):
    """The real pipeline: the offline extractor's relations are resolved to the session's entities
    at commit; the move of the second session closes the first home and opens the new one."""
    sessions, relative, old_home, new_home = PIPELINE[lang]
    async with running_worker():
        for s in sessions:
            await client.append_messages(tenant, "lin", s)
            await client.consolidation_result(await client.end_session(tenant, "lin", s.session_id))
    intervals = {(source, relation, target): valid_to for source, relation, _, target, _, valid_to
                 in await _edges(services, tenant, "lin")}
    assert ("Lin", "family", relative) in intervals and intervals[("Lin", "family", relative)] is None
    assert intervals[("Lin", "lives_in", old_home)] == sessions[1].messages[0].created_at  # closed by the move
    assert intervals[("Lin", "lives_in", new_home)] is None
    hop = await _hop(services, tenant, "lin", (await _entity_ids(services, tenant, "lin"))["Lin"])
    assert {(relation, other) for relation, _, other, outgoing in hop if outgoing} >= {
        ("family", relative), ("lives_in", new_home)}
    assert ("lives_in", old_home) not in {(relation, other) for relation, _, other, _ in hop}
    assert (await rebuild_subject(services.pool, services.keyring, tenant, "lin")).equal
