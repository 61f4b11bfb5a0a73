"""Each fact says when its value was last confirmed and what wrote it, on the real stack: a later
session restating the fact moves `last_confirmed_at` to the restatement, the rule extractor (or a
direct write) is named with its version in `extracted_by`, and a rebuild from the event log
reproduces both (a corrupted time is found by the digest and repaired)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import psycopg

from agent_memory.projection.rebuild import projection_digest
from agent_memory.providers.offline.extractor import RuleFactExtractor
from tests.cli.runner import run_cli
from tests.sessions import session

SUBJECT = "mei"
FIRST = session("c-1", "2024-03-01T09:00:00Z", "I live in Hangzhou.")
# The restatement is the session's second message: said at 18:01.
AGAIN = session("c-2", "2024-05-10T18:00:00Z", "Hi again.", "I live in Hangzhou.")


async def _consolidate(client, tenant, *sessions):
    for s in sessions:
        await client.append_messages(tenant, SUBJECT, s)
        result = await client.consolidation_result(await client.end_session(tenant, SUBJECT, s.session_id))
        assert result.refused_reason is None
    await client.admin.wait_for_projection(tenant, SUBJECT)


async def _home(client, tenant):
    [home] = [f for f in await client.facts(tenant, SUBJECT) if f.key == "home_city"]
    return home


async def test_a_restatement_moves_last_confirmed_and_a_rebuild_reproduces_it(client, services, tenant,
                                                                              running_worker):
    async with running_worker():
        await _consolidate(client, tenant, FIRST)
        first = await _home(client, tenant)
        said_at = datetime(2024, 3, 1, 9, tzinfo=UTC)
        assert first.value == "Hangzhou" and first.valid_from == first.last_confirmed_at == said_at
        assert first.extracted_by == f"{RuleFactExtractor.name}/{RuleFactExtractor.version}"
        assert first.extracted_by.startswith("rule-extractor/")

        await _consolidate(client, tenant, AGAIN)
        home = await _home(client, tenant)
        assert "c-2:2" in home.evidence_message_ids and home.fact_id == first.fact_id  # confirmed, not reopened
        assert home.valid_from == said_at  # still true since the first statement
        assert home.last_confirmed_at == datetime(2024, 5, 10, 18, 1, tzinfo=UTC)
        assert home.extracted_by == first.extracted_by
        context = await client.context(tenant, SUBJECT, "where does Mei live?")
        [item] = [i for i in context.items if i.kind == "fact" and i.memory_id == home.memory_id]
        assert item.last_confirmed_at == home.last_confirmed_at and "2024-05-10" not in context.text
        listed = await asyncio.to_thread(run_cli, services, "facts", "--tenant", tenant, "--subject", SUBJECT,
                                         "--json")
        assert listed.returncode == 0, listed.stderr
        [row] = [f for f in json.loads(listed.stdout) if f["key"] == "home_city"]
        assert (row["last_confirmed_at"], row["extracted_by"]) == ("2024-05-10T18:01:00Z", home.extracted_by)

        # A value an agent writes directly names its writer, not an extractor.
        written_at = datetime(2024, 6, 1, 8, tzinfo=UTC)
        await client.write_fact(tenant, SUBJECT, "preference", "drink", "oolong tea", expected_version=0,
                                evidence_message_ids=["c-2:1"], observed_at=written_at, actor="agent")
        await client.admin.wait_for_projection(tenant, SUBJECT)
        [tea] = [f for f in await client.facts(tenant, SUBJECT) if f.key == "drink"]
        assert (tea.extracted_by, tea.last_confirmed_at) == ("live-write:agent", written_at)

        digest = await projection_digest(services.pool, tenant, SUBJECT)
        rebuilt = await client.admin.rebuild_result(await client.admin.rebuild(tenant, SUBJECT))
        [entry] = rebuilt.subjects
        assert entry.equal and not entry.repaired and entry.rebuilt_digest == digest
        assert await _home(client, tenant) == home

        # The time is part of the projection: corrupted, the digest sees it and a rebuild puts it back.
        async with await psycopg.AsyncConnection.connect(services.settings.database_admin_url) as conn:
            cur = await conn.execute("UPDATE facts SET last_confirmed_at = valid_from, extracted_by = 'other/0' "
                                     "WHERE tenant_id = %s AND fact_id = %s", (tenant, home.fact_id))
            assert cur.rowcount == 1
            await conn.commit()
        assert await projection_digest(services.pool, tenant, SUBJECT) != digest
        repaired = await client.admin.rebuild_result(await client.admin.rebuild(tenant, SUBJECT))
        assert repaired.subjects[0].repaired and repaired.subjects[0].tables_differing == ["facts"]
        assert await _home(client, tenant) == home
        assert await projection_digest(services.pool, tenant, SUBJECT) == digest
