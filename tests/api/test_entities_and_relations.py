"""A subject's entities and relations as a reader sees them — through the Python client, over
HTTP with a read key and from the command line: each entity with its names and the messages that
mention it; the edges that hold now, or with `history` every interval; nothing of another tenant;
in English and Chinese."""

from __future__ import annotations

import json

import pytest

from agent_memory.security.api_keys import create_key
from tests.api.test_http_api import api, bearer
from tests.cli.runner import run_cli
from tests.memory.test_relations import CHINESE, ENGLISH, Names, _commit, _extraction, _sessions


@pytest.mark.parametrize("n", [ENGLISH, CHINESE], ids=["english", "chinese"])
async def test_entities_and_relations_are_listed_by_the_client_over_http_and_on_the_command_line(
        n: Names, client, services, tenant):
    sessions = _sessions(n)
    for i, s in enumerate(sessions):
        await client.append_messages(tenant, "lin", s)
        await _commit(services, tenant, "lin", s, *_extraction(n, i, s))

    entities = await client.entities(tenant, "lin")
    # The first session's five, by name, then the second session's two new ones.
    assert [e.name for e in entities] == [*sorted([n.speaker, n.old_city, n.employer, n.sister, n.friend]),
                                          *sorted([n.new_city, n.new_friend])]
    assert {e.entity_type for e in entities if e.name in (n.old_city, n.new_city)} == {"place"}
    speaker = next(e for e in entities if e.name == n.speaker)
    assert speaker.mentioned_in == [s.messages[0].message_id for s in sessions]  # each session mentioned them
    assert speaker.first_seen_at < speaker.last_seen_at

    now = await client.relations(tenant, "lin")
    assert sorted((r.source_name, r.relation, r.role, r.target_name) for r in now) == sorted(
        [(n.speaker, "family", "sister", n.sister), (n.speaker, "friend", "", n.friend),
         (n.speaker, "friend", "", n.new_friend), (n.speaker, "lives_in", "", n.new_city)])
    assert all(r.valid_to is None and r.evidence_message_ids for r in now)
    history = await client.relations(tenant, "lin", history=True)
    ended = {(r.relation, r.target_name) for r in history if r.valid_to is not None}
    assert ended == {("lives_in", n.old_city), ("works_at", n.employer)} and len(history) == 6

    reader = (await create_key(services.pool, tenant, "read")).token
    stranger = (await create_key(services.pool, f"{tenant}-other", "read")).token
    async with api(client) as http:
        listed = await http.get("/v1/subjects/lin/entities", headers=bearer(reader))
        assert listed.status_code == 200
        assert listed.json() == [e.model_dump(mode="json") for e in entities]
        edges = await http.get("/v1/subjects/lin/relations", headers=bearer(reader))
        assert edges.json() == [r.model_dump(mode="json") for r in now]
        every = await http.get("/v1/subjects/lin/relations", params={"history": "true"}, headers=bearer(reader))
        assert len(every.json()) == 6
        assert (await http.get("/v1/subjects/lin/entities")).status_code == 401
        # Another tenant's key reads its own tenant: the subject there has nothing.
        assert (await http.get("/v1/subjects/lin/entities", headers=bearer(stranger))).json() == []
        assert (await http.get("/v1/subjects/lin/relations", headers=bearer(stranger))).json() == []

    done = run_cli(services, "entities", "--tenant", tenant, "--subject", "lin", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [e.model_dump(mode="json") for e in entities]
    done = run_cli(services, "relations", "--tenant", tenant, "--subject", "lin", "--history")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 6
    assert any(line.startswith(f"{n.speaker} -[family (sister)]-> {n.sister}: since 2024-03-01") for line in lines)
    assert sum(" until " in line for line in lines) == 2
    empty = run_cli(services, "entities", "--tenant", tenant, "--subject", "nobody")
    assert empty.returncode == 0 and empty.stdout.strip() == f"no entities for subject nobody (tenant {tenant})"
