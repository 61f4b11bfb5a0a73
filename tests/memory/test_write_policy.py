"""Consent and authorization at write time, on the real stack: namespaces a tenant
does not store never reach the facts table, consent-only namespaces are stored under a consent
(named on the event), sensitive keys never change silently, and every event says who wrote it."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest

from agent_memory.core.models import ConflictPlan, ExtractedFact, ExtractionResult, ImportanceResult, SummaryResult
from agent_memory.core.operation_keys import CommitKey
from agent_memory.memory.conflicts import decide
from agent_memory.memory.corrections import WriteRefusedError
from agent_memory.memory.memory_store import (
    commit_consolidation,
    current_candidates,
    current_facts,
    ended_fact_versions,
)
from agent_memory.memory.write_policy import DEFAULT_WRITE_POLICY, WritePolicy
from agent_memory.store.db import tenant_transaction
from tests.cli.runner import run_cli
from tests.sessions import session

SUBJECT = "ines"


def said(namespace: str, key: str, value: str, day: int, message_id: str) -> ExtractedFact:
    return ExtractedFact(namespace=namespace, key=key, value=value, claim_type="explicit", confidence=0.9,
                         evidence_message_ids=[message_id], observed_at=datetime(2024, 3, day, 9, tzinfo=UTC))


async def commit(services, tenant: str, session_id: str, *facts: ExtractedFact):
    """check_conflicts + commit_consolidation as the workflow runs them (with the write policy)."""
    async with tenant_transaction(services.pool, tenant) as conn:
        current = await current_facts(conn, tenant, SUBJECT)
        held = await current_candidates(conn, tenant, SUBJECT)
        ended = await ended_fact_versions(conn, tenant, SUBJECT)
        cur = await conn.execute("SELECT policy FROM write_policies WHERE tenant_id = %s", (tenant,))
        row = await cur.fetchone()
    policy = WritePolicy.model_validate(row[0]) if row else DEFAULT_WRITE_POLICY
    extraction = ExtractionResult(provider="test", extractor="written-out", extractor_version="1", facts=list(facts))
    plan = ConflictPlan(decisions=decide(extraction.facts, current, held, ended,
                                         needs_confirmation=policy.needs_confirmation,
                                         needs_corroboration=policy.needs_corroboration))
    request = {"session": session_id, "facts": [f.model_dump(mode="json") for f in facts]}
    return await commit_consolidation(
        services.pool, services.keyring, tenant_id=tenant, subject_id=SUBJECT, session_id=session_id,
        key=CommitKey.for_request(session_id, request), request=request, extraction=extraction, plan=plan,
        importance=ImportanceResult(importance=3), summary=SummaryResult(sentences=[], token_count=0),
        happened_at=facts[0].observed_at)


async def current(client, tenant: str) -> dict[str, str]:
    return {f"{f.namespace}/{f.key}": f.value for f in await client.facts(tenant, SUBJECT)}


async def event_rows(services, tenant: str, namespace: str) -> list[tuple]:
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT actor, actor_id, consent_id FROM memory_events WHERE tenant_id = %s "
                                 "AND namespace = %s ORDER BY recorded_at, aggregate_version", (tenant, namespace))
        return await cur.fetchall()


async def test_a_namespace_the_tenant_does_not_store_never_reaches_the_facts_table(client, services, tenant):
    await client.admin.set_write_policy(tenant, WritePolicy(stored_namespaces=["location", "pet"]))
    outcome = await commit(services, tenant, "s1", said("location", "home_city", "Lisbon", 1, "s1:1"),
                           said("politics", "party", "Greens", 1, "s1:2"))
    assert outcome.withheld == {"namespace_not_allowed": 1} and outcome.facts_written == 1
    assert await current(client, tenant) == {"location/home_city": "Lisbon"}
    assert await event_rows(services, tenant, "politics") == []  # not in the event log either
    assert await client.admin.withheld_counts(tenant) == {"namespace_not_allowed": 1}
    with pytest.raises(WriteRefusedError, match="not stored in this tenant"):
        await client.write_fact(tenant, SUBJECT, "politics", "party", "Greens", expected_version=0,
                                evidence_message_ids=["s1:2"])
    assert await client.admin.withheld_counts(tenant) == {"namespace_not_allowed": 1}


async def test_a_consent_only_namespace_is_stored_under_the_subjects_consent(client, services, tenant):
    await client.admin.set_write_policy(tenant, WritePolicy(consent_namespaces=["health"]))
    first = await commit(services, tenant, "h1", said("health", "allergy", "peanuts", 1, "h1:1"))
    assert first.withheld == {"no_consent": 1} and "health/allergy" not in await current(client, tenant)
    await client.admin.grant_consent(tenant, SUBJECT, "health", "form-2024-17")
    second = await commit(services, tenant, "h2", said("health", "allergy", "peanuts", 2, "h2:1"))
    assert second.withheld == {} and (await current(client, tenant))["health/allergy"] == "peanuts"
    assert await event_rows(services, tenant, "health") == [("consolidation", None, "form-2024-17")]
    assert await client.admin.revoke_consent(tenant, SUBJECT, "health")
    third = await commit(services, tenant, "h3", said("health", "condition", "asthma", 3, "h3:1"))
    assert third.withheld == {"no_consent": 1}
    [consent] = await client.admin.consents(tenant, SUBJECT)
    assert consent.consent_id == "form-2024-17" and consent.revoked_at is not None
    assert await client.admin.withheld_counts(tenant) == {"no_consent": 2}


async def test_a_sensitive_key_waits_for_confirmation_and_live_writes_name_their_actor(client, services, tenant):
    await commit(services, tenant, "a1", said("location", "delivery_address", "1 Main St", 1, "a1:1"))
    assert (await current(client, tenant))["location/delivery_address"] == "1 Main St"  # a first value is stored
    outcome = await commit(services, tenant, "a2", said("location", "delivery_address", "9 Oak Ave", 2, "a2:1"))
    assert outcome.facts_written == 1  # held as a candidate, not current
    assert (await current(client, tenant))["location/delivery_address"] == "1 Main St"
    [candidate] = [f for f in await client.facts(tenant, SUBJECT, candidates=True) if f.status == "candidate"]
    assert candidate.value == "9 Oak Ave"
    confirmed = await client.admin.confirm_fact(tenant, SUBJECT, candidate.memory_id, actor_id="lin-app")
    assert await client.admin.confirm_fact(tenant, SUBJECT, candidate.memory_id, actor_id="lin-app") == confirmed
    assert (await current(client, tenant))["location/delivery_address"] == "9 Oak Ave"
    assert {f.status for f in await client.facts(tenant, SUBJECT, candidates=True, history=True)
            if f.memory_id == candidate.memory_id} == {"promoted"}
    # An ordinary key still changes on its own.
    await commit(services, tenant, "a3", said("location", "home_city", "Porto", 3, "a3:1"))
    await commit(services, tenant, "a4", said("location", "home_city", "Braga", 4, "a4:1"))
    assert (await current(client, tenant))["location/home_city"] == "Braga"
    # Who wrote each event: the consolidation, the user's confirmation, an agent's live write.
    await client.write_fact(tenant, SUBJECT, "work", "employer", "Acme", expected_version=0,
                            evidence_message_ids=["a4:1"], actor="agent", actor_id="assistant-7")
    assert await event_rows(services, tenant, "work") == [("agent", "assistant-7", None)]
    actors = {(a, i) for a, i, _ in await event_rows(services, tenant, "location")}
    assert ("consolidation", None) in actors and ("user", "lin-app") in actors


async def test_a_key_that_needs_corroboration_waits_until_it_is_said_again(client, services, tenant, running_worker):
    await client.admin.set_write_policy(tenant, WritePolicy(corroborate_keys=["diet/allergy_*"]))
    async with running_worker():
        first = session("c1", "2024-03-01T09:00:00Z", "I'm allergic to peanuts.", "I live in Oslo.")
        await client.append_messages(tenant, SUBJECT, first)
        await client.consolidation_result(await client.end_session(tenant, SUBJECT, "c1"))
        # Said once: a candidate, while a key the policy does not name is stored at once.
        assert await current(client, tenant) == {"location/home_city": "Oslo"}
        [held] = [f for f in await client.facts(tenant, SUBJECT, candidates=True) if f.status == "candidate"]
        assert (held.namespace, held.key, held.value) == ("diet", "allergy_peanuts", "peanuts")
        again = session("c2", "2024-03-09T09:00:00Z", "Remember, I'm allergic to peanuts.")
        await client.append_messages(tenant, SUBJECT, again)
        await client.consolidation_result(await client.end_session(tenant, SUBJECT, "c2"))
    # Said again in a later session: promoted, citing both statements.
    facts = {f"{f.namespace}/{f.key}": f for f in await client.facts(tenant, SUBJECT)}
    assert facts["diet/allergy_peanuts"].value == "peanuts"
    assert set(facts["diet/allergy_peanuts"].evidence_message_ids) == {"c1:1", "c2:1"}
    # Said in two messages of one session: taken at once.
    await commit(services, tenant, "c3", ExtractedFact(
        namespace="diet", key="allergy_shellfish", value="shellfish", claim_type="explicit", confidence=0.9,
        evidence_message_ids=["c3:1", "c3:2"], observed_at=datetime(2024, 3, 12, 9, tzinfo=UTC)))
    assert (await current(client, tenant))["diet/allergy_shellfish"] == "shellfish"


async def test_the_consolidation_result_reports_what_the_gate_withheld(client, services, tenant, running_worker):
    await client.admin.set_write_policy(tenant, WritePolicy(stored_namespaces=["pet"]))
    async with running_worker():
        s = session("w1", "2024-03-01T09:00:00Z", "I live in Oslo.", "I have a dog named Rex.")
        await client.append_messages(tenant, SUBJECT, s)
        result = await client.consolidation_result(await client.end_session(tenant, SUBJECT, "w1"))
    assert result.withheld.get("namespace_not_allowed", 0) >= 1
    assert {f.namespace for f in await client.facts(tenant, SUBJECT)} <= {"pet"}


async def test_the_write_policy_and_consent_commands(services, tenant, task_queue, running_worker):
    shown = run_cli(services, "write-policy", "show", "--tenant", tenant, "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout) == DEFAULT_WRITE_POLICY.model_dump(), shown.stderr
    changed = run_cli(services, "write-policy", "set", "--tenant", tenant, "consent_namespaces=health,biometrics",
                      "stored_namespaces=none", "--json")
    assert changed.returncode == 0, changed.stderr
    assert json.loads(changed.stdout)["consent_namespaces"] == ["health", "biometrics"]
    bad = run_cli(services, "write-policy", "set", "--tenant", tenant, "consent=health")
    assert bad.returncode == 2 and "consent=health" in bad.stderr and "Traceback" not in bad.stderr
    granted = run_cli(services, "consent", "grant", "--tenant", tenant, "--subject", SUBJECT, "--namespace",
                      "health", "--consent-id", "form-1")
    assert granted.returncode == 0, granted.stderr
    listed = run_cli(services, "consent", "list", "--tenant", tenant, "--subject", SUBJECT, "--json")
    assert [c["consent_id"] for c in json.loads(listed.stdout)] == ["form-1"]
    bad_id = run_cli(services, "consent", "grant", "--tenant", tenant, "--subject", SUBJECT, "--namespace",
                     "health", "--consent-id", "form 1")
    assert bad_id.returncode == 2 and "consent id" in bad_id.stderr
    bad_confirm = run_cli(services, "facts", "--tenant", tenant, "--subject", SUBJECT, "--confirm", "nope")
    assert bad_confirm.returncode == 2 and "not a UUID" in bad_confirm.stderr
    async with running_worker():
        revoked = await asyncio.to_thread(run_cli, services, "consent", "revoke", "--tenant", tenant, "--subject",
                                          SUBJECT, "--namespace", "health")
    assert revoked.returncode == 0 and "revoked" in revoked.stdout
    stats = run_cli(services, "stats", "--tenant", tenant)
    assert "write gate withheld: nothing" in stats.stdout
    assert run_cli(services, "write-policy", "reset", "--tenant", tenant).returncode == 0


async def test_a_revoked_consent_refuses_a_confirmation_but_lets_a_retraction_through(client, services, tenant):
    await client.admin.set_write_policy(tenant, WritePolicy(consent_namespaces=["health"],
                                                      confirm_keys=["health/*"]))
    await client.admin.grant_consent(tenant, SUBJECT, "health", "form-9")
    await commit(services, tenant, "r1", said("health", "medication", "ibuprofen", 1, "r1:1"))
    await commit(services, tenant, "r2", said("health", "medication", "aspirin", 2, "r2:1"))  # waits: a confirm key
    [candidate] = [f for f in await client.facts(tenant, SUBJECT, candidates=True) if f.status == "candidate"]
    assert await client.admin.revoke_consent(tenant, SUBJECT, "health")
    with pytest.raises(WriteRefusedError, match="consent"):
        await client.admin.confirm_fact(tenant, SUBJECT, candidate.memory_id)
    ended = ExtractedFact(namespace="health", key="medication", value="ibuprofen", operation="end",
                          claim_type="explicit", confidence=0.9, evidence_message_ids=["r3:1"],
                          observed_at=datetime(2024, 3, 3, 9, tzinfo=UTC))
    outcome = await commit(services, tenant, "r3", ended)
    assert outcome.withheld == {} and "health/medication" not in await current(client, tenant)
