"""A tenant's categories of memory: defined by words and fact namespaces, read back by the
recall, context, facts and export filters on every surface; an unknown category is refused by
name, a tenant sees only its own categories."""

from __future__ import annotations

import pytest

from agent_memory.core.errors import NotFound
from agent_memory.memory.categories import Category, CategoryNotFoundError
from agent_memory.memory.filters import memory_filter
from agent_memory.security.api_keys import create_key
from tests.api.test_http_api import api, bearer
from tests.sessions import session

OUTDOORS = Category(name="outdoors", description="time outside", words=["sailing", "hike", "徒步"])
HOME = Category(name="home", namespaces=["location"])
# Four messages each: a shorter session gets no episode (the substance gate), and the episodes are
# narrowed by category below. Each session's added turns stay within its own category.
SESSIONS = (session("s1", "2024-04-01T09:00:00Z", "I live in Bergen.",
                    ("assistant", "Which part of the city is your flat in?"), "Is it far from the airport?",
                    ("assistant", "Do you take the light rail often?")),
            session("s2", "2024-04-02T09:00:00Z", "We went sailing on Sunday and it was windy.",
                    ("assistant", "Was the boat hard to handle?"), "Is it always that windy in April?",
                    ("assistant", "Did anyone get seasick?")),
            session("s3", "2024-04-03T09:00:00Z", "The dentist appointment took an hour.",
                    ("assistant", "Was it a check-up or a filling?"), "Is a numb jaw normal for a whole afternoon?",
                    ("assistant", "Did they give you anything for the pain?")))


@pytest.mark.parametrize("fields, named", [
    ({"name": "empty"}, "neither words nor namespaces"),
    ({"name": "no spaces", "words": ["x"]}, "name"),
    ({"name": "long", "words": ["x" * 65]}, "words"),
    ({"name": "lines", "words": ["a\nb"]}, "words"),
    ({"name": "nul", "words": ["x"], "description": "a\x00b"}, "NUL"),
])
def test_a_bad_category_is_refused_naming_the_field(fields, named):
    with pytest.raises(ValueError, match=named):
        Category(**fields)


def test_a_category_holds_whole_words_in_any_case_and_plural_and_its_namespaces():
    assert OUTDOORS.holds_text("Two HIKES and a sail") and OUTDOORS.holds_text("Sailing!")
    assert not OUTDOORS.holds_text("hiker's guide") and not OUTDOORS.holds_text("unsailing")
    assert OUTDOORS.holds_text("周末去徒步了") and not OUTDOORS.holds_text("周末在家")
    assert HOME.holds_fact("location", "lives in Bergen") and not HOME.holds_fact("work", "works at Equinor")


async def test_categories_narrow_recall_context_facts_and_export_on_every_surface(client, services, tenant,
                                                                                  running_worker):
    async with running_worker():
        for s in SESSIONS:
            await client.append_messages(tenant, "lin", s)
            await client.consolidation_result(await client.end_session(tenant, "lin", s.session_id))
    for category in (OUTDOORS, HOME):
        await client.admin.put_category(tenant, category)
    assert [c.name for c in await client.admin.categories(tenant)] == ["home", "outdoors"]
    assert await client.admin.categories(tenant + "-b") == []  # another tenant's list is its own

    homes = await client.facts(tenant, "lin", filters=memory_filter(categories=["home"]))
    assert homes and all(f.namespace == "location" for f in homes)
    found = await client.recall(tenant, "lin", "what did we do", filters=memory_filter(categories=["outdoors"]))
    assert [e.session_id for e in found.episodes] == ["s2"] and found.facts == []
    context = await client.context(tenant, "lin", "Bergen sailing dentist",
                                   filters=memory_filter(categories=["outdoors", "home"]))
    cited = {m for i in context.items for m in i.cited_message_ids}
    assert "s2:1" in cited and "s1:1" in cited and "s3:1" not in cited
    exported = await client.admin.export(tenant, "lin", filters=memory_filter(categories=["outdoors"]))
    assert {e.session_id for e in exported.episodes} == {"s2"} and exported.facts == []
    with pytest.raises(NotFound, match="categories: no category 'gardening'"):
        await client.context(tenant, "lin", "x", filters=memory_filter(categories=["gardening"]))

    writer = (await create_key(services.pool, tenant, "write")).token
    reader = (await create_key(services.pool, tenant, "read")).token
    async with api(client) as http:
        put = await http.put("/v1/categories/health", headers=bearer(writer),
                             json={"words": ["dentist", "doctor"], "description": "appointments"})
        assert put.status_code == 200 and put.json()["words"] == ["dentist", "doctor"], put.text
        assert (await http.put("/v1/categories/health", headers=bearer(reader), json={"words": ["x"]})).status_code == 403
        for body, field in (({}, "neither words nor namespaces"), ({"words": ["x"], "colour": "red"}, "colour")):
            refused = await http.put("/v1/categories/empty", headers=bearer(writer), json=body)
            assert refused.status_code == 422 and field in refused.text, refused.text
        listed = await http.get("/v1/categories", headers=bearer(reader))
        assert [c["name"] for c in listed.json()] == ["health", "home", "outdoors"]
        answered = await http.post("/v1/subjects/lin/recall", headers=bearer(reader),
                                   json={"query": "appointment", "categories": ["health"]})
        assert [e["session_id"] for e in answered.json()["episodes"]] == ["s3"], answered.text
        facts = await http.get("/v1/subjects/lin/facts", headers=bearer(reader), params={"category": "nope"})
        assert facts.status_code == 404 and "no category 'nope'" in facts.text
        removed = await http.delete("/v1/categories/health", headers=bearer(writer))
        assert removed.status_code == 200
        again = await http.delete("/v1/categories/health", headers=bearer(writer))
        assert again.status_code == 404 and again.headers["content-type"] == "application/problem+json"
    with pytest.raises(CategoryNotFoundError):
        await client.admin.remove_category(tenant, "health")


async def test_categories_narrow_the_mcp_reads(client, services, tenant, task_queue):
    from mcp.client import Client

    from tests.api.test_mcp_server import payload, server

    await client.append_messages(tenant, "lin", SESSIONS[0])
    for namespace, key, value in (("location", "home_city", "Bergen"), ("work", "employer", "Equinor")):
        await client.write_fact(tenant, "lin", namespace, key, value, expected_version=0,
                                evidence_message_ids=["s1:1"])
    await client.admin.put_category(tenant, HOME)
    reader = (await create_key(services.pool, tenant, "read")).token
    async with Client(server(services, task_queue, reader)) as mcp:
        listed = payload(await mcp.call_tool("facts", {"subject": "lin", "categories": ["home"]}))
        assert [f["value"] for f in listed] == ["Bergen"]
        unknown = await mcp.call_tool("recall", {"subject": "lin", "query": "x", "categories": ["nope"]})
        assert unknown.is_error and "no category 'nope'" in unknown.content[0].text
