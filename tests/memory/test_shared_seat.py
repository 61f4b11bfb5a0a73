"""The shared seat through the real pipeline (offline extractor, consolidation workflow, commit,
projections): two people speaking under one account. The account holder's profile, facts and
context hold only the holder's statements; the other person is an entity with their own edges, and
what no edge holds is counted as withheld; recall, context, facts and export read one person's
memories by the `speaker` filter on every surface (client, HTTP, CLI, MCP); the store rebuilds equal."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from mcp.client import Client

from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import Message, Session
from agent_memory.core.seat import ANOTHER_SPEAKER
from agent_memory.memory.filters import memory_filter
from agent_memory.projection.rebuild import rebuild_subject
from agent_memory.security.api_keys import create_key
from tests.api.test_http_api import api, bearer
from tests.api.test_mcp_server import payload, server
from tests.cli.runner import run_cli
from tests.sessions import session

START = datetime(2024, 5, 8, 10, tzinfo=UTC)
SEAT = Session(session_id="seat1", started_at=START, messages=[
    Message(message_id=f"seat1:{n + 1}", turn_index=n, role=role, speaker=speaker, content=text,
            created_at=START + timedelta(minutes=n))
    for n, (role, speaker, text) in enumerate([
        ("user", "Lin", "I live in Berlin and I'm vegetarian."),
        ("user", "Mia", "I'm allergic to peanuts. I work at Charité and I live in Porto."),
        ("assistant", "Assistant", "Noted, both of you!"),
        ("user", "Lin", "My dog Max hates the rain."),
    ])])
LIN = {"seat1:1", "seat1:4"}
MIA = {"seat1:2"}
# Lin alone, four messages so the session has an episode (the substance gate); the added turns state no fact.
ALONE = session("solo1", "2024-05-20T09:00:00Z", "We went sailing on the lake last Sunday.",
                ("assistant", "Was the water calm?"), "Is October too late in the season for another trip?",
                ("assistant", "How many people were on the boat?"))


async def test_the_holders_profile_holds_only_theirs_and_the_speaker_filter_reads_one_person(
        client, services, tenant, task_queue, running_worker):
    async with running_worker():
        results = []
        for s in (SEAT, ALONE):
            await client.append_messages(tenant, "lin", s)
            results.append(await client.consolidation_result(await client.end_session(tenant, "lin", s.session_id)))
    assert results[0].withheld == {ANOTHER_SPEAKER: 1}  # Mia's allergy: no edge holds it
    assert (await client.admin.withheld_counts(tenant))[ANOTHER_SPEAKER] == 1

    # The profile is Lin's: nothing Mia said is a fact of the subject.
    facts = await client.facts(tenant, "lin")
    assert {(f.namespace, f.key, f.value) for f in facts} == {
        ("location", "home_city", "Berlin"), ("diet", "restriction", "vegetarian"), ("pet", "max", "dog")}
    assert all(set(f.evidence_message_ids) <= LIN for f in facts)
    context = await client.context(tenant, "lin", "where does she live, what does she eat, any allergies, work?")
    profile = [i for i in context.items if i.tier == "profile"]
    assert profile and all(set(i.cited_message_ids) <= LIN for i in profile)
    assert not any(word in context.profile_text for word in ("peanut", "Charité", "Porto"))

    # Mia is a person of the subject's graph, with the edges her own statements give her.
    entities = {e.name: e.entity_type for e in await client.entities(tenant, "lin")}
    assert entities["Mia"] == entities["Lin"] == "person" and entities["Charité"] == "organisation"
    edges = {(r.source_name, r.relation, r.target_name) for r in await client.relations(tenant, "lin")}
    assert {("Mia", "works_at", "Charité"), ("Mia", "lives_in", "Porto"), ("Lin", "lives_in", "Berlin"),
            ("Lin", "owns", "Max")} <= edges
    assert not {e for e in edges if e[0] == "Lin" and e[2] in ("Charité", "Porto")}

    # One person's memories: what cites a message they said (case aside).
    mia = memory_filter(speaker="mia")
    assert await client.facts(tenant, "lin", filters=mia) == []
    recalled = await client.recall(tenant, "lin", "peanuts Charité Porto sailing", filters=mia)
    assert recalled.facts == [] and [e.session_id for e in recalled.episodes] == ["seat1"]
    assert all(set(e.source_message_ids) & MIA for e in recalled.episodes)
    hers = await client.context(tenant, "lin", "peanuts Charité Porto sailing", filters=mia)
    assert hers.items and all(set(i.cited_message_ids) & MIA for i in hers.items)
    lins = await client.recall(tenant, "lin", "sailing Berlin vegetarian", filters=memory_filter(speaker="Lin"))
    assert {f.key for f in lins.facts} == {"home_city", "restriction", "max"}
    assert {e.session_id for e in lins.episodes} == {"seat1", "solo1"}
    exported = await client.admin.export(tenant, "lin", filters=mia)
    assert exported.facts == [] and {e.session_id for e in exported.episodes} == {"seat1"}
    assert await client.facts(tenant, "lin", filters=memory_filter(speaker="Nobody")) == []
    with pytest.raises(InvalidInput, match="speaker"):
        memory_filter(speaker="   ")

    # The same filter over HTTP (body and query), the CLI and MCP.
    reader = (await create_key(services.pool, tenant, "read")).token
    async with api(client) as http:
        answered = await http.post("/v1/subjects/lin/recall", headers=bearer(reader), json={
            "query": "peanuts Charité Porto sailing", "speaker": "Mia"})
        assert answered.status_code == 200, answered.text
        assert answered.json()["facts"] == [] and [e["session_id"] for e in answered.json()["episodes"]] == ["seat1"]
        context_items = (await http.post("/v1/subjects/lin/context", headers=bearer(reader), json={
            "query": "sailing", "speaker": "Mia"})).json()["items"]
        assert context_items and all(set(i["cited_message_ids"]) & MIA for i in context_items)
        listed = await http.get("/v1/subjects/lin/facts", headers=bearer(reader), params={"speaker": "Lin"})
        assert listed.status_code == 200 and len(listed.json()) == 3
        exported_http = await http.get("/v1/subjects/lin/export", headers=bearer(reader), params={"speaker": "Mia"})
        assert exported_http.status_code == 200 and exported_http.json()["facts"] == []
        for request in (http.post("/v1/subjects/lin/recall", headers=bearer(reader), json={"query": "x", "speaker": ""}),
                        http.post("/v1/subjects/lin/context", headers=bearer(reader),
                                  json={"query": "x", "speaker": "tab\there"}),
                        http.get("/v1/subjects/lin/facts", headers=bearer(reader), params={"speaker": "x" * 201})):
            refused = await request
            assert refused.status_code == 422 and "speaker" in refused.text, refused.text
            assert refused.headers["content-type"].startswith("application/problem+json")
        document = (await http.get("/v1/openapi.json")).json()
        for path, method in (("/v1/subjects/{subject_id}/facts", "get"), ("/v1/subjects/{subject_id}/export", "get")):
            assert "speaker" in {p["name"] for p in document["paths"][path][method]["parameters"]}
        assert "speaker" in document["components"]["schemas"]["FilteredQuery"]["properties"]

    cli_facts = run_cli(services, "facts", "--tenant", tenant, "--subject", "lin", "--speaker", "Mia", "--json")
    assert cli_facts.returncode == 0 and json.loads(cli_facts.stdout) == [], cli_facts.stderr
    cli_recall = run_cli(services, "recall", "sailing", "--tenant", tenant, "--subject", "lin", "--speaker", "Lin",
                         "--json")
    assert cli_recall.returncode == 0, cli_recall.stderr
    assert {e["session_id"] for e in json.loads(cli_recall.stdout)["episodes"]} == {"seat1", "solo1"}
    refused_cli = run_cli(services, "context", "x", "--tenant", tenant, "--subject", "lin", "--speaker", " ")
    assert refused_cli.returncode != 0 and "speaker" in refused_cli.stderr
    stats = run_cli(services, "stats", "--tenant", tenant)
    assert "1 another_speaker" in stats.stdout, stats.stdout

    async with Client(server(services, task_queue, reader)) as mcp:
        hers_mcp = payload(await mcp.call_tool("recall", {"subject": "lin", "query": "sailing", "speaker": "Mia"}))
        assert hers_mcp["facts"] == [] and [e["session_id"] for e in hers_mcp["episodes"]] == ["seat1"]
        assert payload(await mcp.call_tool("facts", {"subject": "lin", "speaker": "Mia"})) == []

    assert (await rebuild_subject(services.pool, services.keyring, tenant, "lin")).equal


def _seat(session_id: str, start: datetime, *turns: tuple[str, str, str]) -> Session:
    return Session(session_id=session_id, started_at=start, messages=[
        Message(message_id=f"{session_id}:{n + 1}", turn_index=n, role=role, speaker=speaker, content=text,
                created_at=start + timedelta(minutes=n)) for n, (role, speaker, text) in enumerate(turns)])


async def test_in_chinese_the_holder_is_found_by_the_known_name_in_a_later_session(client, services, tenant,
                                                                                   running_worker):
    first = _seat("zh1", START, ("user", "林晓", "我叫林晓，住在杭州。"), ("assistant", "助手", "好的，林晓。"))
    # 米娅 speaks first here, but the subject's known name is 林晓: the session is 林晓's.
    shared = _seat("zh2", START + timedelta(days=3), ("user", "米娅", "我对花生过敏。我在华为公司上班，住在苏州。"),
                   ("user", "林晓", "我吃素。"), ("assistant", "助手", "记下了。"), ("assistant", "助手", "还有别的要记的吗？"))
    async with running_worker():
        results = []
        for s in (first, shared):
            await client.append_messages(tenant, "linxiao", s)
            results.append(await client.consolidation_result(
                await client.end_session(tenant, "linxiao", s.session_id)))
    assert results[1].withheld == {ANOTHER_SPEAKER: 1}
    facts = {(f.namespace, f.key, f.value) for f in await client.facts(tenant, "linxiao")}
    assert facts == {("profile", "name", "林晓"), ("location", "home_city", "杭州"),
                     ("diet", "restriction", "vegetarian")}
    edges = {(r.source_name, r.relation, r.target_name) for r in await client.relations(tenant, "linxiao")}
    assert {("米娅", "works_at", "华为公司"), ("米娅", "lives_in", "苏州"), ("林晓", "lives_in", "杭州")} <= edges
    hers = await client.recall(tenant, "linxiao", "花生 华为 苏州", filters=memory_filter(speaker="米娅"))
    assert hers.facts == [] and [e.session_id for e in hers.episodes] == ["zh2"]
    assert (await rebuild_subject(services.pool, services.keyring, tenant, "linxiao")).equal
