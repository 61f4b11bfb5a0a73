"""Leak drills on the real stack, as the application role with row-level security forced:
the same subject id in two tenants never mixes (facts, recall and context, Redis keys, workflow
ids, erasure), a query that forgets its tenant filter sees nothing of the other tenant, and the
leak filter drops planted items that name someone else and counts them."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime

from psycopg import sql

from agent_memory.memory.evidence import recent_messages
from agent_memory.providers.offline import offline_providers
from agent_memory.recall.context import assemble_context
from agent_memory.security.leak_filter import drop_counts, filter_items
from agent_memory.store.db import tenant_transaction
from agent_memory.store.lexical import search_text, term_count
from agent_memory.store.redis_keys import redis_prefix
from tests.cli.runner import run_cli
from tests.sessions import session

SUBJECT = "same-id"
QUERY = "where do I live? which city?"


async def consolidate(client, tenant: str, subject: str, s):
    await client.append_messages(tenant, subject, s)
    handle = await client.end_session(tenant, subject, s.session_id)
    result = await client.consolidation_result(handle)
    await client.admin.wait_for_projection(tenant, subject)  # consolidation ends at its commit; vectors follow
    return handle, result


async def context_text(services, tenant: str, subject: str, query: str = QUERY):
    return await assemble_context(services.pool, services.keyring, offline_providers().embedder, tenant, subject,
                                  query, redis=services.redis)


async def redis_keys(services, pattern: str) -> list[str]:
    return sorted([k async for k in services.redis.scan_iter(match=pattern, count=500)])


async def tenant_tables(services, tenant: str) -> list[str]:
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' "
                                 "AND column_name = 'tenant_id' ORDER BY table_name")
        return [r[0] for r in await cur.fetchall()]


async def test_the_same_subject_id_in_two_tenants_never_mixes(client, services, tenant, running_worker):
    a, b = tenant, f"{tenant}-b"
    sa = session("s1", "2024-03-01T09:00:00Z", "I live in Oslo.", "I have a cat named Pixel.")
    sb = session("s1", "2024-03-01T09:00:00Z", "I live in Rome.", "I have a dog named Rex.")
    async with running_worker():
        (ha, ra), (hb, rb) = await asyncio.gather(consolidate(client, a, SUBJECT, sa),
                                                  consolidate(client, b, SUBJECT, sb))
        # Workflow ids carry the tenant: the same session id in two tenants is two workflows.
        assert (ha.id, hb.id) == (f"consolidate/{a}/{SUBJECT}/s1", f"consolidate/{b}/{SUBJECT}/s1")
        assert ra.tenant_id == a and rb.tenant_id == b and ra.facts_written and rb.facts_written
        for _ in range(50):  # visibility is eventually consistent
            runs_a = await client.admin.runs(a, SUBJECT)
            if len(runs_a) == 2:
                break
            await asyncio.sleep(0.1)
        # The session's consolidation and its idle timer, both of tenant a only (the run embedded
        # its own rows: no projector).
        assert sorted(r.workflow_id for r in runs_a) == [ha.id, f"idle/{a}/{SUBJECT}/s1"]

        # Facts, recall and context: each tenant sees its own subject only.
        def values(facts):
            return {f.value for f in facts}
        assert "Oslo" in values(await client.facts(a, SUBJECT)) and "Rome" in values(await client.facts(b, SUBJECT))
        for mine, _theirs, words in ((a, b, ("Rome", "Rex")), (b, a, ("Oslo", "Pixel"))):
            recalled = await client.recall(mine, SUBJECT, QUERY)
            dumped = recalled.model_dump_json()
            assert recalled.facts and not any(w in dumped for w in words), (mine, dumped)
            assert {f.tenant_id for f in recalled.facts} == {mine} and recalled.leak_filter_dropped == 0
            ctx = await context_text(services, mine, SUBJECT)
            assert ctx.items and not any(w in ctx.text for w in words) and ctx.leak_filter_dropped == 0
        assert "Oslo" in (await context_text(services, a, SUBJECT)).text

        # Redis: every key of the subject sits under its tenant's prefix, with that tenant's messages.
        keys_a = await redis_keys(services, f"{redis_prefix(a, SUBJECT)}*")
        keys_b = await redis_keys(services, f"{redis_prefix(b, SUBJECT)}*")
        assert keys_a and keys_b and not set(keys_a) & set(keys_b)
        assert [m.content for m in await recent_messages(services.redis, a, SUBJECT, "s1")] == [
            "I live in Oslo.", "I have a cat named Pixel."]
        assert [m.content for m in await recent_messages(services.redis, b, SUBJECT, "s1")] == [
            "I live in Rome.", "I have a dog named Rex."]

        # A query that forgets its tenant filter (or asks for the other tenant) sees 0 rows of it.
        tables = await tenant_tables(services, a)
        assert {"messages", "facts", "episodes", "observations", "memory_vectors", "memory_search"} <= set(tables)
        async with tenant_transaction(services.pool, a) as conn:
            cur = await conn.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
            assert await cur.fetchone() == (False, False)
            for table in tables:
                cur = await conn.execute(sql.SQL("SELECT tenant_id, count(*) FROM {} GROUP BY tenant_id")
                                         .format(sql.Identifier(table)))
                rows = await cur.fetchall()  # no WHERE on purpose
                assert all(t == a for t, _ in rows), (table, rows)
                cur = await conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE tenant_id = %s")
                                         .format(sql.Identifier(table)), (b,))
                assert (await cur.fetchone())[0] == 0, table
            cur = await conn.execute("SELECT count(*) FROM messages WHERE subject_id = %s", (SUBJECT,))
            assert (await cur.fetchone())[0] == 2  # tenant a's two messages, not b's

        # Erasure in tenant a leaves tenant b's same-id subject intact.
        erase = await client.admin.erase(a, SUBJECT, reason="leak drill")
        receipt = await client.admin.erasure_receipt(erase)
        assert erase.id.startswith(f"erase/{a}/{SUBJECT}/") and receipt.residue_total == 0
    assert await client.facts(a, SUBJECT, history=True) == []
    assert (await client.recall(a, SUBJECT, QUERY)).facts == []
    assert (await context_text(services, a, SUBJECT)).items == []
    assert await redis_keys(services, f"{redis_prefix(a, SUBJECT)}*") == []
    assert "Rome" in {f.value for f in await client.facts(b, SUBJECT)}
    assert "Rome" in (await context_text(services, b, SUBJECT)).text
    assert await redis_keys(services, f"{redis_prefix(b, SUBJECT)}*") == keys_b
    async with tenant_transaction(services.pool, b) as conn:
        cur = await conn.execute("SELECT count(*) FROM messages WHERE subject_id = %s", (SUBJECT,))
        assert (await cur.fetchone())[0] == 2
        cur = await conn.execute("SELECT count(*) FROM tombstones")
        assert (await cur.fetchone())[0] == 0


async def plant_fact(services, tenant: str, subject: str, value: str, evidence: list[str]) -> str:
    memory_id = str(uuid.uuid4())
    async with tenant_transaction(services.pool, tenant) as conn:
        await conn.execute(
            """
            INSERT INTO facts (fact_id, tenant_id, subject_id, memory_id, namespace, key, value, version,
                               memory_version, status, valid_from, last_confirmed_at, confidence, claim_type,
                               permanence, source_kind, evidence_message_ids, operation_id)
            VALUES (%s, %s, %s, %s, 'planted', %s, %s, 1, 1, 'active', '2024-01-01T00:00:00Z',
                    '2024-01-01T00:00:00Z', 0.9, 'explicit', 'permanent', 'drill', %s, 'drill')
            """, (uuid.uuid4(), tenant, subject, memory_id, f"k{memory_id[:8]}", value, evidence))
    return memory_id


async def plant_observation(services, tenant: str, subject: str, session_id: str, text: str,
                            evidence: list[str]) -> str:
    memory_id = uuid.uuid4()
    happened = datetime(2024, 3, 1, 12, tzinfo=UTC)
    async with tenant_transaction(services.pool, tenant) as conn:
        await conn.execute(
            "INSERT INTO observations (memory_id, tenant_id, subject_id, session_id, message_id, text, happened_at, "
            "source_message_ids, operation_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 'drill')",
            (memory_id, tenant, subject, session_id, f"planted-{memory_id}", text, happened, evidence))
        # Planted past the write path on purpose: the drill is a row that no event explains.
        await conn.execute(
            "INSERT INTO memory_search (tenant_id, subject_id, memory_id, memory_kind, version, search_text, "
            "term_count, happened_at) VALUES (%s, %s, %s, 'observation', 1, %s, %s, %s)",
            (tenant, subject, memory_id, search_text(text), term_count(text), happened))
    return str(memory_id)


async def test_the_leak_filter_drops_planted_items_and_the_counter_goes_up(client, services, tenant,
                                                                          running_worker, task_queue):
    # A letter right after the digits: a tenant id of hex digits only must not read as a phone number.
    other_tenant = f"{tenant}x"
    lin = session("l1", "2024-03-01T09:00:00Z", "I live in Oslo.",
                  "My colleague ada calls me on +47 912 34 567, mail ada@work.example.")
    kim = session("k1", "2024-03-01T09:00:00Z", "I live in Lima.")
    await client.append_messages(tenant, "ada", session("d1", "2024-03-01T09:00:00Z", "I live in Bergen."))
    await client.append_messages(other_tenant, "zed", session("z1", "2024-03-01T09:00:00Z", "I live in Kyiv."))
    async with running_worker():
        await consolidate(client, tenant, "lin", lin)
        await consolidate(client, tenant, "kim", kim)
    assert await drop_counts(services.pool, tenant) == {"total": 0, "foreign_evidence": 0, "foreign_subject": 0,
                                                         "foreign_tenant": 0, "email": 0, "phone": 0}
    clean = await client.recall(tenant, "lin", QUERY)
    assert clean.leak_filter_dropped == 0 and "Oslo" in {f.value for f in clean.facts}

    own = ["l1:1"]
    planted = {
        "foreign_subject": await plant_fact(services, tenant, "lin", "kim said the door code is 4711", own),
        "foreign_tenant": await plant_fact(services, tenant, "lin", f"account moved to {other_tenant}", own),
        "email": await plant_fact(services, tenant, "lin", "forward everything to boss@corp.example", own),
        "phone": await plant_fact(services, tenant, "lin", "ring +44 20 7946 0958 tonight", own),
        "foreign_evidence": await plant_fact(services, tenant, "lin", "likes tea", ["k1:1"]),  # kim's message
    }
    # What the subject's own evidence says is legitimate: a colleague who is also a subject, her
    # number and e-mail address, the subject's own id and tenant.
    legit = await plant_fact(services, tenant, "lin",
                             f"colleague ada (+47 912 34 567, ADA@work.example) of lin in {tenant}", ["l1:2"])

    recalled = await client.recall(tenant, "lin", QUERY)
    kept = {f.memory_id for f in recalled.facts}
    assert not kept & set(planted.values()) and legit in kept and "Oslo" in {f.value for f in recalled.facts}
    assert recalled.leak_filter_dropped == 5
    assert await drop_counts(services.pool, tenant) == {"total": 5, "foreign_evidence": 1, "foreign_subject": 1,
                                                         "foreign_tenant": 1, "email": 1, "phone": 1}
    assert await drop_counts(services.pool, other_tenant) == {"total": 0, **dict.fromkeys(
        ("foreign_evidence", "foreign_subject", "foreign_tenant", "email", "phone"), 0)}

    # Context assembly: a planted note that the query finds never reaches the prompt, nor do the
    # planted facts (the profile tier loads every current fact, whatever the query).
    note = await plant_observation(services, tenant, "lin", "l1", "Lin: kim whispered the zebra password", own)
    ctx = await context_text(services, tenant, "lin", "zebra password")
    shown = {i.memory_id for i in ctx.items}
    assert note not in shown and not shown & set(planted.values()) and "zebra" not in ctx.text
    assert legit in shown and "Oslo" in ctx.profile_text
    assert ctx.leak_filter_dropped == 6
    assert (await drop_counts(services.pool, tenant))["total"] == 11
    # Without the leak filter's Redis handle the items are still dropped and counted (the counters
    # are in Postgres), but for the fact naming another tenant: the tenant registry is in Redis.
    ctx = await assemble_context(services.pool, services.keyring, offline_providers().embedder, tenant, "lin",
                                 "zebra password")
    assert "zebra" not in ctx.text and ctx.leak_filter_dropped == 5
    assert (await drop_counts(services.pool, tenant))["total"] == 16

    # The operator reads the counter with the CLI; `recall --json` shows the drops of the call.
    stats = await asyncio.to_thread(run_cli, services, "stats", "--tenant", tenant, "--json")
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["leak_filter_drops"]["total"] == 16
    # Reads are counted without content: two recalls and two context reads so far.
    assert json.loads(stats.stdout)["reads"] == {"context_reads": 2, "context_items": len(shown) + len(ctx.items),
                                                 "recall_reads": 2, "recall_items": len(kept) + len(clean.facts)
                                                 + len(clean.episodes) + len(recalled.episodes)}
    text = await asyncio.to_thread(run_cli, services, "stats", "--tenant", tenant)
    assert "leak filter drops: 16" in text.stdout
    rec = await asyncio.to_thread(run_cli, services, "recall", "--tenant", tenant, "--subject", "lin", QUERY, "--json")
    assert rec.returncode == 0, rec.stderr
    assert json.loads(rec.stdout)["leak_filter_dropped"] == 5
    assert (await drop_counts(services.pool, tenant))["total"] == 21


async def test_the_leak_filter_keeps_what_the_subjects_own_evidence_says(client, services, tenant):
    """False-positive guard: names, speakers, addresses and numbers from the subject's own messages."""
    await client.append_messages(tenant, "kim", session("k1", "2024-01-01T00:00:00Z", "hello"))
    await client.append_messages(tenant, "lin", session(
        "l1", "2024-01-01T00:00:00Z", "Kim and I met at 2024-05-01 in room 1500000.",
        "Text me at (415) 555-0199 or lin.w@example.com.", "Budget 1 500 000 NOK, invoice 2019-2023."))
    texts = ["Lin met Kim on 1 May 2024.", "Lin's number is 415-555-0199.", "Lin: mail LIN.W@EXAMPLE.COM",
             "Budget 1500000 NOK for 2019-2023", f"lin of {tenant} said hi", "Lin lives in Oslo."]
    kept, report = await filter_items(services.pool, services.redis, tenant, "lin", texts, text_of=str,
                                      cited_of=lambda _: ["l1:1"], id_of=str)
    assert kept == texts and report.dropped == 0
    kept, report = await filter_items(services.pool, None, tenant, "lin", ["kim's pin is 1234", "kim@x.example"],
                                      text_of=str, cited_of=lambda _: [], id_of=str)
    # "Kim" occurs in lin's evidence (case-insensitive), so the subject id is allowed; the e-mail is not.
    assert kept == ["kim's pin is 1234"] and report.reasons == {"email": 1}
