"""Search with filters: recall, the assembled context, the facts listing and the export narrowed to kinds of
memory, fact namespaces and a time range, on the real stack and over HTTP; a bad filter is
refused naming the field."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_memory.core.errors import InvalidInput
from agent_memory.memory.filters import MemoryFilter, memory_filter
from agent_memory.security.api_keys import create_key
from tests.api.test_http_api import api, bearer
from tests.sessions import session

# Four messages each: a shorter session gets no episode (the substance gate), and both episodes are
# filtered below. The questions added state no fact (the summer's facts are the written one only).
WINTER = session("f1", "2024-01-10T09:00:00Z", "I live in Oslo.", ("assistant", "Is there anything you don't eat?"),
                 "I am vegetarian.", ("assistant", "Do you eat fish or eggs?"))
SUMMER = session("f2", "2024-06-10T09:00:00Z", "We hiked to the fjord on Saturday, it was a long trip.",
                 ("assistant", "How long did the hike take?"), "Is the trail open in winter too?",
                 ("assistant", "Did you take the ferry back?"))
SPRING = datetime(2024, 3, 1, tzinfo=UTC)


@pytest.mark.parametrize("fields, named", [
    ({"since": datetime(2024, 5, 1, tzinfo=UTC), "until": SPRING}, "since is after until"),
    ({"since": datetime(2024, 5, 1)}, "since has no UTC offset"),
    ({"namespaces": ["x" * 65]}, "namespace"),
    ({"kinds": ["note"]}, "kinds"),
    ({"namespaces": []}, "namespaces"),
])
def test_a_bad_filter_is_refused_naming_the_field(fields, named):
    with pytest.raises(InvalidInput, match=named):
        memory_filter(**fields)


def test_an_unset_filter_narrows_nothing():
    unset = MemoryFilter()
    assert unset.wants("fact") and unset.wants("episode") and not unset.narrows_time()
    assert unset.in_range(datetime(1970, 1, 1, tzinfo=UTC))


async def test_recall_and_facts_are_narrowed_by_kind_namespace_and_time(client, services, tenant, running_worker):
    async with running_worker():
        for s in (WINTER, SUMMER):
            await client.append_messages(tenant, "lin", s)
            await client.consolidation_result(await client.end_session(tenant, "lin", s.session_id))
        await client.write_fact(tenant, "lin", "work", "employer", "Equinor", expected_version=0,
                                evidence_message_ids=["f2:1"], observed_at=datetime(2024, 6, 10, 9, tzinfo=UTC))
    everything = await client.recall(tenant, "lin", "where does she live and what did she do?", limit=5)
    namespaces = {f.namespace for f in everything.facts}
    assert {"location", "work"} <= namespaces and len(everything.episodes) == 2

    facts_only = await client.recall(tenant, "lin", "Oslo", filters=memory_filter(kinds=["fact"]))
    assert facts_only.facts and facts_only.episodes == []
    episodes_only = await client.recall(tenant, "lin", "Oslo", filters=memory_filter(kinds=["episode"]))
    assert episodes_only.facts == [] and episodes_only.episodes
    located = await client.recall(tenant, "lin", "Oslo", filters=memory_filter(namespaces=["location"]))
    assert {f.namespace for f in located.facts} == {"location"}
    since_spring = await client.recall(tenant, "lin", "trip", filters=memory_filter(since=SPRING))
    assert [e.session_id for e in since_spring.episodes] == ["f2"]
    assert {f.namespace for f in since_spring.facts} == {"work"}  # became true after the spring
    before_spring = await client.recall(tenant, "lin", "trip", filters=memory_filter(until=SPRING))
    assert [e.session_id for e in before_spring.episodes] == ["f1"] and "work" not in {
        f.namespace for f in before_spring.facts}

    listed = await client.facts(tenant, "lin", filters=memory_filter(namespaces=["work", "location"], since=SPRING))
    assert [(f.namespace, f.value) for f in listed] == [("work", "Equinor")]

    # The assembled context: the profile holds the kept namespaces' facts, the episodic tier the
    # sessions in range.
    whole = await client.context(tenant, "lin", "what did she do on the trip?")
    assert {i.session_id for i in whole.episodic_items} == {"f1", "f2"}
    profile = await client.context(tenant, "lin", "trip", filters=memory_filter(kinds=["fact"], namespaces=["work"]))
    assert [i.content for i in profile.items] == ["Equinor"] and profile.episodic_items == []
    summer = await client.context(tenant, "lin", "what did she do on the trip?",
                                  filters=memory_filter(kinds=["episode"], since=SPRING))
    assert summer.profile_items == [] and {i.session_id for i in summer.episodic_items} == {"f2"}

    # The export: its facts, episodes and notes narrowed (entities and relations stay whole, and
    # so do the messages they cite).
    exported = await client.admin.export(tenant, "lin", filters=memory_filter(namespaces=["work"], kinds=["fact"]))
    assert [f.value for f in exported.facts] == ["Equinor"] and exported.episodes == [] and exported.notes == []
    assert "f2:1" in {m.message_id for m in exported.cited_messages}
    recent = await client.admin.export(tenant, "lin", filters=memory_filter(since=SPRING))
    assert [e.session_id for e in recent.episodes] == ["f2"] and {f.namespace for f in recent.facts} == {"work"}

    reader = (await create_key(services.pool, tenant, "read")).token
    async with api(client) as http:
        work = await http.get("/v1/subjects/lin/facts", params={"namespace": ["work"]}, headers=bearer(reader))
        assert work.status_code == 200 and {f["namespace"] for f in work.json()} == {"work"}
        found = await http.post("/v1/subjects/lin/recall", headers=bearer(reader), json={
            "query": "trip", "kinds": ["episode"], "since": "2024-03-01T00:00:00Z"})
        assert found.status_code == 200, found.text
        assert ([e["session_id"] for e in found.json()["episodes"]], found.json()["facts"]) == (["f2"], [])
        narrowed = await http.post("/v1/subjects/lin/context", headers=bearer(reader), json={
            "query": "trip", "kinds": ["fact"], "namespaces": ["location"]})
        assert narrowed.status_code == 200, narrowed.text
        assert {i["kind"] for i in narrowed.json()["items"]} == {"fact"} and "Equinor" not in narrowed.json()["text"]
        summer = await http.get("/v1/subjects/lin/export", headers=bearer(reader),
                                params={"kind": ["episode"], "since": "2024-03-01T00:00:00Z"})
        assert summer.status_code == 200, summer.text
        assert ([e["session_id"] for e in summer.json()["episodes"]], summer.json()["facts"]) == (["f2"], [])
        empty = await http.get("/v1/subjects/lin/facts", headers=bearer(reader),
                               params={"since": "2024-05-01T00:00:00Z", "until": "2024-03-01T00:00:00Z"})
        assert empty.status_code == 422 and "since is after until" in empty.json()["detail"]
        unknown = await http.post("/v1/subjects/lin/recall", headers=bearer(reader),
                                  json={"query": "trip", "kinds": ["note"]})
        assert unknown.status_code == 422 and "kinds" in unknown.text
