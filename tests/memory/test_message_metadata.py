"""Metadata on messages: stored with the message, part of its body (a re-send with other metadata
is a conflict, a message without any keeps its digest), exported, erased with the message, and
read back by the recall, context and facts filters; bad metadata is refused naming the key."""

from __future__ import annotations

import math

import pytest

from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import Message, Session
from agent_memory.memory.evidence import MessageConflictError, content_digest
from agent_memory.memory.filters import memory_filter
from agent_memory.security.api_keys import create_key
from agent_memory.store.db import tenant_transaction
from tests.api.test_http_api import api, bearer
from tests.sessions import session


def _tagged(s: Session, **metadata) -> Session:
    return s.model_copy(update={"messages": [m.model_copy(update={"metadata": metadata}) for m in s.messages]})


# Four messages each: a shorter session gets no episode (the substance gate), and both episodes are
# recalled below. The questions added state no fact: each session's facts cite its first message
# only, its episode any of its own messages.
EMAIL = _tagged(session("e1", "2024-04-01T09:00:00Z", "I live in Bergen.",
                        ("assistant", "Is the parcel going to that address?"),
                        "Does the courier deliver there on Saturdays?",
                        ("assistant", "Which day suits you best for the delivery?")), channel="email", ticket=4711)
CHAT = _tagged(session("c1", "2024-04-02T09:00:00Z", "We went sailing on Sunday.", ("assistant", "Was the sea calm?"),
                       "Is October too late in the season for another trip?",
                       ("assistant", "How many people were on the boat?")), channel="chat")


@pytest.mark.parametrize("metadata, named", [
    ({"bad key": "x"}, "metadata key 'bad key' is invalid"),
    ({"note": "x" * 257}, "metadata.note is invalid"),
    ({"ratio": math.inf}, "metadata.ratio is invalid: use a finite number"),
    ({f"k{n}": n for n in range(17)}, "metadata"),
])
def test_bad_metadata_is_refused_naming_the_key(metadata, named):
    with pytest.raises(ValueError, match=named):
        Message(message_id="m1", turn_index=0, role="user", content="hi", created_at="2024-01-01T00:00:00Z",
                metadata=metadata)
    with pytest.raises(InvalidInput, match=named.split(" ")[0]):
        memory_filter(metadata=metadata)


def test_a_message_without_metadata_keeps_its_digest():
    plain = session("p1", "2024-01-01T00:00:00Z", "hi").messages[0]
    assert content_digest(plain) == content_digest(plain.model_copy(update={"metadata": {}}))
    assert content_digest(plain) != content_digest(plain.model_copy(update={"metadata": {"channel": "sms"}}))


async def test_metadata_is_stored_exported_and_narrows_recall_context_and_facts(client, services, tenant,
                                                                                running_worker):
    async with running_worker():
        for s in (EMAIL, CHAT):
            await client.append_messages(tenant, "lin", s)
            await client.consolidation_result(await client.end_session(tenant, "lin", s.session_id))
    with pytest.raises(MessageConflictError):  # the same message with other metadata is another body
        await client.append_messages(tenant, "lin", _tagged(EMAIL, channel="sms"))
    assert (await client.append_messages(tenant, "lin", EMAIL)).duplicates == 4

    by_email = memory_filter(metadata={"channel": "email"})
    facts = await client.facts(tenant, "lin", filters=by_email)
    assert facts and all(f.evidence_message_ids == ["e1:1"] for f in facts)
    assert await client.facts(tenant, "lin", filters=memory_filter(metadata={"channel": "fax"})) == []
    found = await client.recall(tenant, "lin", "sailing", filters=memory_filter(metadata={"channel": "chat"}))
    assert [e.session_id for e in found.episodes] == ["c1"] and found.facts == []
    ticketed = await client.context(tenant, "lin", "where does she live?",
                                    filters=memory_filter(metadata={"ticket": 4711, "channel": "email"}))
    cited = {m for i in ticketed.items for m in i.cited_message_ids}
    assert ticketed.items and "e1:1" in cited and all(m.startswith("e1:") for m in cited), cited

    reader = (await create_key(services.pool, tenant, "read")).token
    async with api(client) as http:
        answered = await http.post("/v1/subjects/lin/recall", headers=bearer(reader), json={
            "query": "sailing", "metadata": {"channel": "chat"}})
        assert answered.status_code == 200, answered.text
        assert [e["session_id"] for e in answered.json()["episodes"]] == ["c1"]
        refused = await http.post("/v1/subjects/lin/recall", headers=bearer(reader), json={
            "query": "sailing", "metadata": {"bad key": 1}})
        assert refused.status_code == 422 and "metadata" in refused.text

    exported = await client.admin.export(tenant, "lin")
    metadata = {m.message_id: m.metadata for m in exported.cited_messages}
    assert {"e1:1", "c1:1"} <= set(metadata)
    assert all(value == ({"channel": "email", "ticket": 4711} if mid.startswith("e1:") else {"channel": "chat"})
               for mid, value in metadata.items()), metadata
    async with running_worker():
        receipt = await client.admin.erasure_receipt(await client.admin.erase(tenant, "lin", reason="user request"))
    assert receipt.residue_total == 0
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM messages WHERE tenant_id = %s AND metadata <> '{}'", (tenant,))
        assert (await cur.fetchone()) == (0,)


async def test_a_written_fact_carries_its_own_metadata_through_filters_export_and_rebuild(client, services, tenant):
    from agent_memory.projection.rebuild import rebuild_subject

    await client.append_messages(tenant, "lin", session("w1", "2024-05-01T09:00:00Z", "I moved to Tromsø."))
    await client.write_fact(tenant, "lin", "location", "home_city", "Tromsø", expected_version=0,
                            evidence_message_ids=["w1:1"], metadata={"source": "crm", "ticket": 88})
    with pytest.raises(InvalidInput, match="metadata key 'bad key'"):
        await client.write_fact(tenant, "lin", "work", "employer", "UiT", expected_version=0,
                                evidence_message_ids=["w1:1"], metadata={"bad key": 1})
    (fact,) = await client.facts(tenant, "lin")
    assert fact.metadata == {"source": "crm", "ticket": 88}
    assert [f.value for f in await client.facts(tenant, "lin", filters=memory_filter(metadata={"source": "crm"}))] == [
        "Tromsø"]
    assert await client.facts(tenant, "lin", filters=memory_filter(metadata={"source": "web"})) == []
    found = await client.recall(tenant, "lin", "where", filters=memory_filter(metadata={"ticket": 88}))
    assert [f.value for f in found.facts] == ["Tromsø"]
    assert [f.metadata for f in (await client.admin.export(tenant, "lin")).facts] == [{"source": "crm", "ticket": 88}]
    assert (await rebuild_subject(services.pool, services.keyring, tenant, "lin")).equal

    writer = (await create_key(services.pool, tenant, "write")).token
    async with api(client) as http:
        put = await http.put("/v1/subjects/lin/facts/location/home_city", headers=bearer(writer), json={
            "value": "Bodø", "expected_version": 1, "evidence_message_ids": ["w1:1"], "metadata": {"source": "app"}})
        assert put.status_code == 200, put.text
        bad = await http.put("/v1/subjects/lin/facts/work/employer", headers=bearer(writer), json={
            "value": "UiT", "expected_version": 0, "evidence_message_ids": ["w1:1"], "metadata": {"x": [1]}})
        assert bad.status_code == 422 and "metadata" in bad.text
    (current,) = await client.facts(tenant, "lin")
    assert (current.value, current.metadata) == ("Bodø", {"source": "app"})
