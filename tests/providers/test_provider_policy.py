"""Data minimization toward remote providers: a consolidation through the OpenAI-compatible
providers against a real local HTTP server that speaks the chat-completions and embeddings API
and records every request it receives (a recorded peer), on the real Temporal and Postgres.
The identifiers of the session never reach the peer; the stored facts and summary carry them;
the operation records count what was redacted, by kind. The tenant's policy is set from the CLI."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from agent_memory.api.client import MemoryClient
from agent_memory.providers.base import EMBEDDING_DIMENSIONS
from agent_memory.providers.openai.bundle import openai_providers
from agent_memory.providers.openai.config import OpenAICompatibleConfig
from agent_memory.providers.policy import (
    REDACT_KINDS,
    ProviderPolicy,
    Redactor,
    iban_valid,
    luhn_valid,
    parse_kinds,
)
from agent_memory.store.db import tenant_transaction
from tests.cli.runner import run_cli
from tests.providers.openai_server import FakeOpenAIServer, chat_completion, embeddings
from tests.sessions import session

EMAIL = "lin.wei@example.com"
PHONE = "+47 912 34 567"
CARD = "4111 1111 1111 1111"
IBAN = "GB82 WEST 1234 5698 7654 32"
IDENTIFIERS = (EMAIL, PHONE, CARD, IBAN, "4111111111111111", "GB82WEST12345698765432", "91234567")

# Four messages: a shorter session gets no episode (the substance gate), and its summary is checked.
S = session("s-pii", "2024-03-01T09:00:00Z", "Hi, my name is Lin Wei.",
            f"Write to me at {EMAIL} or call {PHONE}.",
            f"Refunds go to card {CARD} or to IBAN {IBAN}.",
            ("assistant", "Which of the two should the refund for the broken kettle go to?"))
# What a model answers with whatever stands for the e-mail address in what it was sent.
_SEEN_EMAIL = re.compile(r"\[EMAIL_\d+\]|[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


def route(req):
    if req.path.endswith("embeddings"):
        return embeddings([[1.0] + [0.0] * (EMBEDDING_DIMENSIONS - 1) for _ in req.body["input"]])
    name = req.body["response_format"]["json_schema"]["name"]
    lines = [json.loads(line) for line in req.body["messages"][-1]["content"].splitlines()[1:]]
    said = next(line for line in lines if _SEEN_EMAIL.search(line["text"]))
    email = _SEEN_EMAIL.search(said["text"]).group(0)
    if name == "fact_extraction":
        return chat_completion(json.dumps({"facts": [{
            "namespace": "contact", "key": "email", "value": email, "claim_type": "explicit",
            "permanence": "permanent", "valid_until": None, "confidence": 0.95,
            "evidence_message_ids": [said["id"]], "observed_at": said["time"]}],
            "entities": [{"name": "Lin Wei", "entity_type": "person", "aliases": [email],
                          "evidence_message_ids": [said["id"]]}]}))
    if name == "importance":
        return chat_completion(json.dumps({"importance": 5, "rationale": f"contact details ({email})"}))
    return chat_completion(json.dumps({"sentences": [{"text": f"Lin Wei can be reached at {email}.",
                                                      "source_message_ids": [said["id"]]}]}))


def test_identifiers_are_found_by_their_checksums_and_put_back():
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert iban_valid(IBAN) and not iban_valid("GB82 WEST 1234 5698 7654 33")
    redactor = Redactor(["email", "phone", "card", "iban"])
    text = (f"{EMAIL}, {PHONE}, {CARD}, {IBAN}; not a card 4111 1111 1111 1112, not an IBAN "
            f"GB82WEST1234, a date 2024-05-01, an order 123456, again {EMAIL}")
    sent = redactor.redact(text)
    assert sent.startswith("[EMAIL_1], [PHONE_1], [CARD_1], [IBAN_1]; ") and sent.endswith("again [EMAIL_1]")
    assert "4111 1111 1111 1112" in sent and "GB82WEST1234" in sent and "2024-05-01" in sent and "123456" in sent
    assert redactor.counts == {"email": 2, "phone": 1, "card": 1, "iban": 1}
    assert redactor.restore(sent) == text
    only_email = Redactor(["email"])
    assert only_email.redact(f"{EMAIL} {PHONE}") == f"[EMAIL_1] {PHONE}"
    with pytest.raises(ValueError, match="--redact: unknown kind 'ssn'"):
        parse_kinds("email,ssn")


@pytest.mark.parametrize("text", [
    f"card {CARD} 12/27 cvc 123",  # a card number and its expiry date, as people write them
    f"12 x {CARD}", f"{CARD} 3 times", f"card {CARD.replace(' ', '-')}-0427",
    f"card{CARD}", f"{CARD}x", f"IBAN{IBAN}", f"x{IBAN}", f"{IBAN}X", f"IBAN{IBAN.replace(' ', '')}AB",
    f"IBAN AB12{IBAN.replace(' ', '')}",
])
def test_a_card_or_iban_next_to_other_digits_or_letters_is_still_redacted(text):
    """The number is found inside a longer run of digit groups or against a word: a remote
    model's answer written as `IBAN[IBAN_1]` or `[CARD_1]4` is restored into memory and later
    embedded by the remote embedder, which must not be sent the value it was never shown."""
    redactor = Redactor(REDACT_KINDS)
    sent = redactor.redact(text)
    compact = re.sub(r"[ -]", "", sent)
    assert "[CARD_1]" in sent or "[IBAN_1]" in sent, sent
    assert not any(i in sent or i.replace(" ", "") in compact for i in (CARD, IBAN)), sent
    assert redactor.restore(sent) == text
    # What a restored answer with a placeholder glued to a word is redacted into.
    again = Redactor(REDACT_KINDS)
    assert again.redact(redactor.restore(f"x{sent}x")) == f"x{sent}x"


async def test_a_remote_model_never_sees_the_identifiers_and_memory_keeps_them(client, services, tenant,
                                                                                running_worker):
    with FakeOpenAIServer() as server:
        server.responder = route
        bundle = openai_providers(OpenAICompatibleConfig(base_url=server.base_url, api_key="k",
                                                         chat_model="test-chat", embedding_model="test-embed",
                                                         timeout_seconds=5))
        async with running_worker(providers=bundle):
            await client.append_messages(tenant, "lin", S)
            result = await client.consolidation_result(await client.end_session(tenant, "lin", S.session_id))
        # A query embedded by the remote embedder on the read path is redacted too.
        recalled = await MemoryClient(services, bundle.embedder).recall(tenant, "lin", f"who writes from {EMAIL}?")
        assert recalled.facts
        await bundle.aclose()
        assert "[EMAIL_1]" in json.dumps(server.requests[-1].body)
        received = [json.dumps(r.body, ensure_ascii=False) for r in server.requests]
    assert result.facts_written == 1 and result.episode_written
    # The peer got chat and embedding calls, and none of them held an identifier.
    assert {r.path for r in server.requests} == {"/v1/chat/completions", "/v1/embeddings"}
    assert any("[EMAIL_1]" in body and "[CARD_1]" in body and "[IBAN_1]" in body and "[PHONE_1]" in body
               for body in received)
    leaked = [i for i in IDENTIFIERS for body in received if i in body]
    assert not leaked, leaked
    # Memory holds the values: the fact, the episode's summary.
    assert [(f.key, f.value) for f in await client.facts(tenant, "lin")] == [("email", EMAIL)]
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT summary FROM episodes WHERE tenant_id = %s", (tenant,))
        assert [row[0] for row in await cur.fetchall()] == [f"Lin Wei can be reached at {EMAIL}."]
        cur = await conn.execute("SELECT kind, result->'redacted' FROM operations WHERE tenant_id = %s "
                                 "AND kind IN ('extract', 'summary', 'importance') ORDER BY kind", (tenant,))
        counted = await cur.fetchall()
        cur = await conn.execute("SELECT result->'entities' FROM operations WHERE tenant_id = %s AND kind = 'extract'",
                                 (tenant,))
        entities = [row[0] for row in await cur.fetchall()]
        cur = await conn.execute("SELECT result::text FROM operations WHERE tenant_id = %s", (tenant,))
        records = [row[0] for row in await cur.fetchall()]
    # The extraction's entities carry the value where the model wrote its placeholder.
    assert [[(e["name"], e["aliases"]) for e in found] for found in entities] == [[("Lin Wei", [EMAIL])]]
    # Counts by kind on every model call's record; no record holds a placeholder's value map.
    assert counted and all(c == {"email": 1, "phone": 1, "card": 1, "iban": 1} for _, c in counted), counted
    assert not any("[EMAIL_1]" in r for r in records)


def glued_route(req):
    """A model that writes placeholders against words: `IBAN[IBAN_1]`, `card[CARD_1]`."""
    if req.path.endswith("embeddings"):
        return embeddings([[1.0] + [0.0] * (EMBEDDING_DIMENSIONS - 1) for _ in req.body["input"]])
    name = req.body["response_format"]["json_schema"]["name"]
    lines = [json.loads(line) for line in req.body["messages"][-1]["content"].splitlines()[1:]]
    said = next(line for line in lines if "IBAN" in line["text"])
    iban = re.search(r"\[IBAN_\d+\]|[A-Z]{2}\d{2}[ A-Z0-9]{11,}\d", said["text"]).group(0)
    card = re.search(r"\[CARD_\d+\]|\d{4} \d{4} \d{4} \d{4}", said["text"]).group(0)
    if name == "fact_extraction":
        return chat_completion(json.dumps({"facts": [{
            "namespace": "finance", "key": "refund_account", "value": f"IBAN{iban}", "claim_type": "explicit",
            "permanence": "permanent", "valid_until": None, "confidence": 0.9,
            "evidence_message_ids": [said["id"]], "observed_at": said["time"]}]}))
    if name == "importance":
        return chat_completion(json.dumps({"importance": 5, "rationale": "refund details"}))
    return chat_completion(json.dumps({"sentences": [{"text": f"Refunds go to card{card}.",
                                                      "source_message_ids": [said["id"]]}]}))


async def test_an_answer_with_a_placeholder_against_a_word_is_not_sent_back_as_a_value(
        client, services, tenant, running_worker):
    """Memory keeps what the model wrote with the values put back (`IBANGB82 WEST ...`); the
    remote embedder that later embeds that fact and summary is sent placeholders, not values."""
    with FakeOpenAIServer() as server:
        server.responder = glued_route
        bundle = openai_providers(OpenAICompatibleConfig(base_url=server.base_url, api_key="k",
                                                         chat_model="test-chat", embedding_model="test-embed",
                                                         timeout_seconds=5))
        async with running_worker(providers=bundle):
            await client.append_messages(tenant, "lin", S)
            result = await client.consolidation_result(await client.end_session(tenant, "lin", S.session_id))
            await client.admin.wait_for_projection(tenant, "lin", timeout=60)
        await bundle.aclose()
        embedded = [json.dumps(r.body, ensure_ascii=False) for r in server.requests if r.path.endswith("embeddings")]
    assert result.facts_written == 1 and result.episode_written
    assert [(f.key, f.value) for f in await client.facts(tenant, "lin")] == [("refund_account", f"IBAN{IBAN}")]
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT summary FROM episodes WHERE tenant_id = %s", (tenant,))
        assert [row[0] for row in await cur.fetchall()] == [f"Refunds go to card{CARD}."]
    leaked = [i for i in (*IDENTIFIERS, "GB82", "4111") for body in embedded if i in body]  # not even a part
    assert not leaked, leaked
    assert any("IBAN[IBAN_1]" in body for body in embedded) and any("card[CARD_1]" in body for body in embedded)


async def test_the_policy_is_set_per_tenant_from_the_cli_and_applies_to_the_next_call(
        client, services, tenant, running_worker):
    shown = await asyncio.to_thread(run_cli, services, "provider-policy", "show", "--tenant", tenant, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == {"redact": ["email", "phone", "card", "iban"], "exclude_namespaces": []}
    changed = await asyncio.to_thread(run_cli, services, "provider-policy", "set", "--tenant", tenant,
                                      "--redact", "card,iban", "--exclude-namespace", "health", "--json")
    assert changed.returncode == 0, changed.stderr
    assert json.loads(changed.stdout) == {"redact": ["card", "iban"], "exclude_namespaces": ["health"]}
    assert await client.admin.get_provider_policy(tenant) == ProviderPolicy(redact=["card", "iban"],
                                                                  exclude_namespaces=["health"])
    bad = await asyncio.to_thread(run_cli, services, "provider-policy", "set", "--tenant", tenant, "--redact", "ssn")
    assert bad.returncode == 2 and "unknown kind 'ssn'" in bad.stderr
    # Another tenant still has the default (the table is tenant-scoped).
    assert (await client.admin.get_provider_policy(f"{tenant}-other")).redact == ["email", "phone", "card", "iban"]
    # A current fact of the excluded namespace, which the extractor would otherwise be shown.
    await client.write_fact(tenant, "lin", "health", "allergy", "peanuts", expected_version=0,
                            evidence_message_ids=["s-pii:1"])
    await client.write_fact(tenant, "lin", "location", "home_city", "Hangzhou", expected_version=0,
                            evidence_message_ids=["s-pii:1"])
    with FakeOpenAIServer() as server:
        server.responder = route
        bundle = openai_providers(OpenAICompatibleConfig(base_url=server.base_url, api_key="k",
                                                         chat_model="test-chat", embedding_model="test-embed",
                                                         timeout_seconds=5))
        async with running_worker(providers=bundle):
            await client.append_messages(tenant, "lin", S)
            await client.consolidation_result(await client.end_session(tenant, "lin", S.session_id))
        await bundle.aclose()
        received = " ".join(json.dumps(r.body, ensure_ascii=False) for r in server.requests)
    # The tenant let e-mail and phone through, and nothing else.
    assert EMAIL in received and CARD not in received and IBAN not in received and "[CARD_1]" in received
    assert "Hangzhou" in received and "peanuts" not in received  # the excluded namespace's fact stayed home
    reset = await asyncio.to_thread(run_cli, services, "provider-policy", "reset", "--tenant", tenant)
    assert reset.returncode == 0 and "redact = email, phone, card, iban" in reset.stdout
