"""Scopes on messages: the agent, app and run a message belongs to are stored with it, part of its
body, exported, erased with it, and read back by the recall, context, facts and export filters
(client and HTTP); a bad scope id is refused naming the field."""

from __future__ import annotations

import pytest

from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import Message, Session
from agent_memory.memory.evidence import MessageConflictError, content_digest
from agent_memory.memory.filters import memory_filter
from agent_memory.security.api_keys import create_key
from agent_memory.store.db import tenant_transaction
from tests.api.test_http_api import api, bearer
from tests.sessions import session


def _scoped(s: Session, **scope) -> Session:
    return s.model_copy(update={"messages": [m.model_copy(update=scope) for m in s.messages]})


# Four messages each: a shorter session gets no episode (the substance gate), and both episodes are
# recalled and exported below. The questions added state no fact: each session's facts cite its
# first message only, its episode any of its own messages.
SUPPORT = _scoped(session("s1", "2024-04-01T09:00:00Z", "I live in Bergen.",
                          ("assistant", "Is the parcel going to that address?"),
                          "Does the courier deliver there on Saturdays?",
                          ("assistant", "Which day suits you best for the delivery?")),
                  agent_id="support", app_id="helpdesk", run_id="ticket-4711")
TRAVEL = _scoped(session("t1", "2024-04-02T09:00:00Z", "We went sailing on Sunday.", ("assistant", "Was the sea calm?"),
                         "Is October too late in the season for another trip?",
                         ("assistant", "How many people were on the boat?")), agent_id="travel", app_id="helpdesk")


@pytest.mark.parametrize("field", ["agent_id", "app_id", "run_id"])
@pytest.mark.parametrize("value", ["", "has space", "-leading", "x" * 65, "line\nbreak"])
def test_a_bad_scope_id_is_refused_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        Message(message_id="m1", turn_index=0, role="user", content="hi", created_at="2024-01-01T00:00:00Z",
                **{field: value})
    with pytest.raises(InvalidInput, match=field):
        memory_filter(**{field: value})


def test_a_message_without_a_scope_keeps_its_digest():
    plain = session("p1", "2024-01-01T00:00:00Z", "hi").messages[0]
    assert content_digest(plain) == content_digest(plain.model_copy(update={"agent_id": None}))
    assert content_digest(plain) != content_digest(plain.model_copy(update={"agent_id": "support"}))
    assert content_digest(plain.model_copy(update={"agent_id": "a"})) != content_digest(
        plain.model_copy(update={"app_id": "a"}))


async def test_scopes_are_stored_exported_and_narrow_recall_context_facts_and_export(client, services, tenant,
                                                                                     running_worker):
    async with running_worker():
        for s in (SUPPORT, TRAVEL):
            await client.append_messages(tenant, "lin", s)
            await client.consolidation_result(await client.end_session(tenant, "lin", s.session_id))
    with pytest.raises(MessageConflictError):  # the same message in another scope is another body
        await client.append_messages(tenant, "lin", _scoped(SUPPORT, agent_id="sales"))
    assert (await client.append_messages(tenant, "lin", SUPPORT)).duplicates == 4

    support = memory_filter(agent_id="support")
    facts = await client.facts(tenant, "lin", filters=support)
    assert facts and all(f.evidence_message_ids == ["s1:1"] for f in facts)
    assert await client.facts(tenant, "lin", filters=memory_filter(agent_id="travel", run_id="ticket-4711")) == []
    found = await client.recall(tenant, "lin", "sailing", filters=memory_filter(agent_id="travel"))
    assert [e.session_id for e in found.episodes] == ["t1"] and found.facts == []
    in_run = await client.context(tenant, "lin", "where does she live?", filters=memory_filter(run_id="ticket-4711"))
    cited = {m for i in in_run.items for m in i.cited_message_ids}
    assert in_run.items and "s1:1" in cited and cited <= {m.message_id for m in SUPPORT.messages}
    both = await client.context(tenant, "lin", "where does she live? sailing", filters=memory_filter(app_id="helpdesk"))
    cited = {m for i in both.items for m in i.cited_message_ids}
    assert {"s1:1", "t1:1"} <= cited <= {m.message_id for s in (SUPPORT, TRAVEL) for m in s.messages}

    reader = (await create_key(services.pool, tenant, "read")).token
    async with api(client) as http:
        answered = await http.post("/v1/subjects/lin/recall", headers=bearer(reader), json={
            "query": "sailing", "agent_id": "travel"})
        assert answered.status_code == 200, answered.text
        assert [e["session_id"] for e in answered.json()["episodes"]] == ["t1"]
        listed = await http.get("/v1/subjects/lin/facts", headers=bearer(reader), params={"agent_id": "travel"})
        assert listed.status_code == 200 and listed.json() == []
        exported = await http.get("/v1/subjects/lin/export", headers=bearer(reader), params={"run_id": "ticket-4711"})
        assert exported.status_code == 200, exported.text
        assert {e["session_id"] for e in exported.json()["episodes"]} == {"s1"}
        for where, request in (("agent_id", http.post("/v1/subjects/lin/context", headers=bearer(reader),
                                                      json={"query": "x", "agent_id": "no spaces please"})),
                               ("run_id", http.get("/v1/subjects/lin/facts", headers=bearer(reader),
                                                   params={"run_id": "-x"}))):
            refused = await request
            assert refused.status_code == 422 and where in refused.text, refused.text

    exported_all = await client.admin.export(tenant, "lin")
    scopes = {m.message_id: (m.agent_id, m.app_id, m.run_id) for m in exported_all.cited_messages}
    assert {"s1:1", "t1:1"} <= set(scopes)
    assert all(scope == (("support", "helpdesk", "ticket-4711") if mid.startswith("s1:") else ("travel", "helpdesk", None))
               for mid, scope in scopes.items()), scopes
    async with running_worker():
        receipt = await client.admin.erasure_receipt(await client.admin.erase(tenant, "lin", reason="user request"))
    assert receipt.residue_total == 0
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM messages WHERE tenant_id = %s AND agent_id IS NOT NULL",
                                 (tenant,))
        assert (await cur.fetchone()) == (0,)


async def test_a_key_limited_to_an_app_writes_its_messages_and_reads_the_memories_citing_them(
        client, services, tenant, running_worker):
    async with running_worker():
        for s in (SUPPORT, _scoped(session("o1", "2024-04-03T09:00:00Z", "I am allergic to peanuts."),
                                   app_id="other-app")):
            await client.append_messages(tenant, "lin", s)
            await client.consolidation_result(await client.end_session(tenant, "lin", s.session_id))
    reader = (await create_key(services.pool, tenant, "read", app_id="helpdesk")).token
    writer = (await create_key(services.pool, tenant, "write", app_id="helpdesk")).token
    async with api(client) as http:
        context = await http.post("/v1/subjects/lin/context", headers=bearer(reader),
                                  json={"query": "where does she live? peanuts allergy"})
        assert context.status_code == 200, context.text
        cited = {m for i in context.json()["items"] for m in i["cited_message_ids"]}
        assert "s1:1" in cited and all(m.startswith("s1:") for m in cited), cited
        facts = await http.get("/v1/subjects/lin/facts", headers=bearer(reader))
        assert facts.json() and all(f["evidence_message_ids"] == ["s1:1"] for f in facts.json())
        other = await http.post("/v1/subjects/lin/recall", headers=bearer(reader),
                                json={"query": "peanuts", "app_id": "other-app"})
        assert other.status_code == 403 and "app_id" in other.text, other.text
        message = {"message_id": "h2:1", "turn_index": 0, "role": "user", "content": "Thanks!",
                   "created_at": "2024-04-04T09:00:00Z"}
        refused = await http.post("/v1/subjects/lin/sessions/h2/messages", headers=bearer(writer),
                                  json={"messages": [{**message, "app_id": "other-app"}]})
        assert refused.status_code == 403 and "messages[0].app_id" in refused.text, refused.text
        stamped = await http.post("/v1/subjects/lin/sessions/h2/messages", headers=bearer(writer),
                                  json={"messages": [message]})
        assert stamped.status_code == 200, stamped.text
    whole = await client.context(tenant, "lin", "where does she live? peanuts allergy")
    assert {"s1:1", "o1:1"} <= {m for i in whole.items for m in i.cited_message_ids}  # a tenant-wide reader
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT app_id FROM messages WHERE session_id = 'h2'")
        assert await cur.fetchall() == [("helpdesk",)]
