"""What ordinary sentences become, through the real pipeline (offline extractor, consolidation
workflow, commit, projections), in English and in Chinese: coordinated items, changes from one value
to another, corrections by contrast across sessions, several states in one session, and third
parties; the store rebuilds equal from its log after each."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_memory.memory.memory_store import list_facts
from agent_memory.memory.relations import list_relations
from agent_memory.projection.rebuild import rebuild_subject
from agent_memory.store.db import tenant_transaction
from tests.sessions import session


async def _consolidate(client, tenant: str, subject: str, *sessions) -> None:
    for s in sessions:
        await client.append_messages(tenant, subject, s)
        await client.consolidation_result(await client.end_session(tenant, subject, s.session_id))


async def _current(services, tenant: str, subject: str, as_of: datetime | None = None) -> set[tuple[str, str]]:
    rows = await list_facts(services.pool, services.keyring, tenant, subject, as_of=as_of)
    return {(f"{f.namespace}/{f.key}", f.value) for f in rows}


async def _history(services, tenant: str, subject: str, key: str) -> list[tuple[str, datetime, datetime | None]]:
    rows = await list_facts(services.pool, services.keyring, tenant, subject, include_history=True)
    return sorted(((f.value, f.valid_from, f.valid_to) for f in rows if f"{f.namespace}/{f.key}" == key),
                  key=lambda row: row[1])


async def _rebuilt_equal(services, tenant: str, subject: str) -> bool:
    return (await rebuild_subject(services.pool, services.keyring, tenant, subject)).equal


@pytest.mark.parametrize(("text", "expected"), [
    ("I'm allergic to peanuts and shellfish, so no satay for me.",
     {("diet/allergy_peanuts", "peanuts"), ("diet/allergy_shellfish", "shellfish")}),
    ("I speak Spanish, French and a little German.",
     {("language/spanish", "Spanish"), ("language/french", "French"), ("language/german", "German")}),
    ("我对花生和虾过敏，点外卖要注意。", {("diet/allergy_花生", "花生"), ("diet/allergy_虾", "虾")}),
    ("平时喜欢喝茶和咖啡。", {("preference/茶", "like"), ("preference/咖啡", "like")}),
], ids=["allergies-en", "languages-en", "allergies-zh", "likes-zh"])
async def test_each_coordinated_item_is_a_fact_citing_the_same_message(text, expected, client, services, tenant,
                                                                     running_worker):
    s = session("s1", "2024-03-01T09:00:00Z", text)
    async with running_worker():
        await _consolidate(client, tenant, "lin", s)
    rows = await list_facts(services.pool, services.keyring, tenant, "lin")
    assert {(f"{f.namespace}/{f.key}", f.value) for f in rows} == expected
    assert {tuple(f.evidence_message_ids) for f in rows} == {("s1:1",)}
    assert await _rebuilt_equal(services, tenant, "lin")


@pytest.mark.parametrize(("first", "change", "old", "new"), [
    ("I live in Berlin.", "Big news: we moved from Berlin to Lisbon last week!", "Berlin", "Lisbon"),
    ("我住在杭州。", "上个月从杭州搬到了深圳，还在适应。", "杭州", "深圳"),
], ids=["en", "zh"])
async def test_a_change_from_one_value_to_another_closes_the_old_and_opens_the_new(
        first, change, old, new, client, services, tenant, running_worker):
    s1 = session("s1", "2024-03-01T09:00:00Z", first)
    s2 = session("s2", "2024-05-20T09:00:00Z", change)
    async with running_worker():
        await _consolidate(client, tenant, "lin", s1, s2)
    history = await _history(services, tenant, "lin", "location/home_city")
    assert [value for value, _, _ in history] == [old, new]
    (_, _, closed), (_, opened, current) = history
    assert closed == opened and current is None and opened < s2.messages[0].created_at  # dated by "last week"
    assert ("location/home_city", old) in await _current(services, tenant, "lin", datetime(2024, 3, 15, tzinfo=UTC))
    assert await _rebuilt_equal(services, tenant, "lin")


@pytest.mark.parametrize(("first", "correction", "wrong", "right"), [
    ("I work at Initech, mostly on billing.", "Correction from last time: it's Globex, not Initech.", "Initech", "Globex"),
    ("I work at Initech, mostly on billing.", "Sorry, I'm at Globex not Initech, I mix them up.", "Initech", "Globex"),
    ("我在腾讯上班，最近特别忙。", "更正一下，我在网易，不在腾讯。", "腾讯", "网易"),
    ("我在腾讯上班，最近特别忙。", "说错了，不是腾讯，是网易。", "腾讯", "网易"),
], ids=["en", "en-word-order", "zh", "zh-word-order"])
async def test_a_correction_by_contrast_in_a_later_session_voids_the_wrong_value(
        first, correction, wrong, right, client, services, tenant, running_worker):
    s1 = session("s1", "2024-03-01T09:00:00Z", first)
    s2 = session("s2", "2024-03-10T09:00:00Z", correction)
    async with running_worker():
        await _consolidate(client, tenant, "lin", s1, s2)
    assert ("work/employer", right) in await _current(services, tenant, "lin")
    # The wrong value was never true: not even between the two sessions.
    between = await _current(services, tenant, "lin", datetime(2024, 3, 5, tzinfo=UTC))
    assert ("work/employer", wrong) not in between and ("work/employer", right) in between
    assert await _rebuilt_equal(services, tenant, "lin")


@pytest.mark.parametrize(("lines", "states"), [
    (("My name's Wang Li and I live in Shanghai.", "Later that year I moved to Beijing for the new job."),
     ["Shanghai", "Beijing"]),
    (("我叫王丽，住在上海。", "后来我搬到了北京。"), ["上海", "北京"]),
    (("I used to live in Paris but now I live in Rome.",), ["Paris", "Rome"]),
    (("以前住在成都，后来搬到了重庆。",), ["成都", "重庆"]),
], ids=["en-two-messages", "zh-two-messages", "en-one-message", "zh-one-message"])
async def test_several_states_in_one_session_keep_their_order_and_the_last_is_current(
        lines, states, client, services, tenant, running_worker):
    s = session("s1", "2024-03-01T09:00:00Z", *lines)
    async with running_worker():
        await _consolidate(client, tenant, "lin", s)
    history = await _history(services, tenant, "lin", "location/home_city")
    assert [value for value, _, _ in history] == states
    assert all(valid_to is not None and valid_from < valid_to for _, valid_from, valid_to in history[:-1])
    assert history[-1][2] is None
    # Each message keeps its own time: the second state starts when its message was written.
    assert history[-1][1] == s.messages[-1].created_at
    assert await _rebuilt_equal(services, tenant, "lin")


@pytest.mark.parametrize(("text", "own", "edges"), [
    ("My sister Mia works at Deutsche Bank and my brother Tom lives in Paris; I live in Lyon.",
     {("location/home_city", "Lyon")},
     {("subject", "family", "mia"), ("mia", "works_at", "deutsche bank"), ("subject", "family", "tom"),
      ("tom", "lives_in", "paris")}),
    ("弟弟张磊在青岛，我在北京。", {("location/home_city", "北京")},
     {("subject", "family", "张磊"), ("张磊", "lives_in", "青岛")}),
    ("老公老陈在中石化上班，天天加班。", {("relationship/status", "married")},
     {("subject", "partner", "老陈"), ("老陈", "works_at", "中石化")}),
], ids=["en", "zh-city", "zh-employer"])
async def test_what_the_subject_says_of_other_people_is_theirs(text, own, edges, services, client, tenant,
                                                               running_worker):
    s = session("s1", "2024-03-01T09:00:00Z", text)
    s = s.model_copy(update={"messages": [m.model_copy(update={"speaker": "User"}) for m in s.messages]})
    async with running_worker():
        await _consolidate(client, tenant, "lin", s)
    assert await _current(services, tenant, "lin") == own  # their city and employer are not the subject's
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT memory_id, name, aliases FROM entities WHERE tenant_id = %s AND subject_id = %s",
                                 (tenant, "lin"))
        names = {memory_id: {name.casefold(), *(a.casefold() for a in aliases)} for memory_id, name, aliases in
                 await cur.fetchall()}
        held = [(names[r.source_entity_id], r.relation, names[r.target_entity_id])
                for r in await list_relations(conn, tenant, "lin")]
    for source, relation, target in edges:
        assert any(source in s_names and relation == kind and target in t_names for s_names, kind, t_names in held), \
            (source, relation, target, held)
    assert await _rebuilt_equal(services, tenant, "lin")


async def test_an_entity_is_seen_when_the_messages_that_mention_it_were_written(client, services, tenant,
                                                                                running_worker):
    s = session("s1", "2024-03-01T09:00:00Z", "My sister Mia is visiting.", "We cooked dinner.",
                "Mia loved the risotto.", "Then we watched a film.")
    async with running_worker():
        await _consolidate(client, tenant, "lin", s)
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT first_seen_at, last_seen_at FROM entities "
                                 "WHERE tenant_id = %s AND subject_id = %s AND (name = 'Mia' OR 'Mia' = ANY(aliases))",
                                 (tenant, "lin"))
        first_seen, last_seen = await cur.fetchone()
    t0 = datetime(2024, 3, 1, 9, tzinfo=UTC)
    assert (first_seen, last_seen) == (t0, t0 + timedelta(minutes=2))
    assert await _rebuilt_equal(services, tenant, "lin")
