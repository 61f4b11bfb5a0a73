"""Mistakes a new user makes, each answered clearly instead of with silence, a
traceback or a database error; CLI runs against the session's real stack."""

from __future__ import annotations

import asyncio
import json
import math

from agent_memory.api.client import MemoryClient
from agent_memory.providers.hashing import HashingEmbedder
from agent_memory.providers.offline import OfflineProviders, offline_providers
from tests.cli.runner import invoke, run_cli
from tests.sessions import session
from workers.cli import build_parser


def test_recall_refuses_an_empty_query_and_a_limit_below_one(services, tenant):
    empty = run_cli(services, "recall", "--tenant", tenant, "--subject", "kim", "  ")
    assert empty.returncode == 2 and "query is empty" in empty.stderr and "Traceback" not in empty.stderr
    negative = run_cli(services, "recall", "--tenant", tenant, "--subject", "kim", "where?", "--limit", "-1")
    assert negative.returncode == 2 and "--limit -1 is below 1" in negative.stderr
    assert "psycopg" not in negative.stderr and "LIMIT" not in negative.stderr


async def test_a_query_without_features_recalls_no_nan_scores(services, tenant, task_queue, running_worker):
    client = MemoryClient(services, HashingEmbedder(), task_queue=task_queue)
    p = offline_providers()
    async with running_worker(providers=OfflineProviders(p.extractor, p.scorer, p.summarizer, HashingEmbedder())):
        await client.append_messages(tenant, "kim", session("n1", "2024-03-01T09:00:00Z", "I live in Oslo."))
        await client.consolidation_result(await client.end_session(tenant, "kim", "n1"))
        await client.admin.wait_for_projection(tenant, "kim")
    recalled = await client.recall(tenant, "kim", "?!?")
    assert all(not math.isnan(e.score) for e in recalled.episodes) and recalled.facts


async def test_facts_says_when_there_are_none_and_when_the_subject_was_erased(client, services, tenant,
                                                                             task_queue, running_worker):
    unknown = run_cli(services, "facts", "--tenant", tenant, "--subject", "nobody")
    assert unknown.returncode == 0 and f"no facts for subject nobody (tenant {tenant})" in unknown.stdout
    async with running_worker():
        await client.append_messages(tenant, "kim", session("e1", "2024-03-01T09:00:00Z", "I live in Oslo."))
        await client.admin.erasure_receipt(await client.admin.erase(tenant, "kim", reason="test"))
        erased = await asyncio.to_thread(run_cli, services, "facts", "--tenant", tenant, "--subject", "kim")
    assert erased.returncode == 0 and f"subject kim of tenant {tenant} was erased" in erased.stdout
    as_json = run_cli(services, "facts", "--tenant", tenant, "--subject", "kim", "--json")
    assert json.loads(as_json.stdout) == []


def test_ingest_help_describes_the_file_format(services):
    shown = run_cli(services, "ingest", "--help")
    assert shown.returncode == 0
    text = " ".join(shown.stdout.split())
    assert "one session per line" in text and '"message_id"' in text and "read as UTC" in text


async def test_as_of_without_a_timezone_is_utc_as_on_ingest(client, services, tenant, running_worker):
    async with running_worker():
        await client.append_messages(tenant, "kim", session("t1", "2024-03-01T09:00:00Z", "I live in Oslo."))
        await client.consolidation_result(await client.end_session(tenant, "kim", "t1"))
    naive = run_cli(services, "facts", "--tenant", tenant, "--subject", "kim", "--as-of", "2024-03-02T00:00:00",
                    "--json")
    aware = run_cli(services, "facts", "--tenant", tenant, "--subject", "kim", "--as-of", "2024-03-02T00:00:00Z",
                    "--json")
    assert naive.returncode == aware.returncode == 0, naive.stderr
    assert json.loads(naive.stdout) == json.loads(aware.stdout) != []


async def test_end_session_checks_the_session_and_its_owner_before_any_signal(client, services, tenant,
                                                                               task_queue, running_worker):
    await client.append_messages(tenant, "lin", session("o1", "2024-03-01T09:00:00Z", "I live in Oslo."))
    wrong = await asyncio.to_thread(run_cli, services, "end-session", "--tenant", tenant, "--subject", "kim",
                                    "--session", "o1", task_queue=task_queue)
    assert wrong.returncode == 2 and "no session 'o1' of subject 'kim'" in wrong.stderr
    # The owner's idle timer got no "end" signal from the refused call.
    idle = services.temporal.get_workflow_handle(f"idle/{tenant}/lin/o1")
    signals = [e.workflow_execution_signaled_event_attributes.signal_name
               async for e in idle.fetch_history_events() if e.HasField("workflow_execution_signaled_event_attributes")]
    assert "end" not in signals
    for bad in ("no such session", "x" * 500):
        refused = run_cli(services, "end-session", "--tenant", tenant, "--subject", "lin", "--session", bad)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    unknown = run_cli(services, "end-session", "--tenant", tenant, "--subject", "lin", "--session", "o9")
    assert unknown.returncode == 2 and "no session 'o9'" in unknown.stderr
    async with running_worker():
        done = await client.consolidation_result(await client.end_session(tenant, "lin", "o1"))
        assert done.refused_reason is None
        # Consolidated: another subject still gets nothing of it.
        again = await asyncio.to_thread(run_cli, services, "end-session", "--tenant", tenant, "--subject", "kim",
                                        "--session", "o1", "--wait", task_queue=task_queue)
        assert again.returncode == 2 and "Oslo" not in again.stdout + again.stderr
        await client.admin.erasure_receipt(await client.admin.erase(tenant, "lin", reason="test"))
        erased = await asyncio.to_thread(run_cli, services, "end-session", "--tenant", tenant, "--subject", "lin",
                                         "--session", "o1", "--wait", task_queue=task_queue)
    assert erased.returncode == 2 and "was erased" in erased.stderr


async def test_one_off_jobs_never_use_the_live_home_or_configured_services(services, tmp_path):
    from workers.runtime import scratch_settings, scratch_stack

    live = services.settings.with_services(home=tmp_path / "live")
    private = scratch_settings(live, tmp_path / "scratch")
    assert private.home == tmp_path / "scratch"
    assert (private.database_url, private.redis_url, private.temporal_address) == (None, None, None)
    assert private.embedder == live.embedder and private.provider == live.provider  # the providers stay
    async with scratch_stack(live, "test") as scratch:
        home = scratch.settings.home
        assert home != live.home and home != services.settings.home and home.exists()
        assert scratch.settings.database_url != services.settings.database_url
    assert not home.exists()  # removed afterwards


def test_the_default_home_is_per_user_and_a_missing_stack_says_where_it_looked(tmp_path, monkeypatch):
    from agent_memory.core.settings import ENV_VARS, Settings, default_home

    monkeypatch.chdir(tmp_path)  # the same home from any directory
    assert Settings.from_env({"XDG_DATA_HOME": "/srv/data"}).home.as_posix() == "/srv/data/agent-memory"
    assert Settings.from_env({}).home == default_home({}).resolve()
    empty = tmp_path / "no-stack-here"
    env: dict[str, str | None] = dict.fromkeys(ENV_VARS)
    env["AGENT_MEMORY_HOME"] = str(empty)
    out = invoke(build_parser(), ["facts", "--tenant", "t", "--subject", "s"], env)
    assert out.returncode == 1 and f"no agent-memory stack is running under {empty}" in out.stderr, out.stderr
    assert not (tmp_path / ".agent-memory").exists()  # nothing stray in the current directory


async def test_erasing_a_subject_with_no_data_needs_an_explicit_block(client, services, tenant, task_queue,
                                                                       running_worker):
    import pytest

    from agent_memory.memory.operations import SubjectErasedError

    mistyped = run_cli(services, "erase", "--tenant", tenant, "--subject", "kimm", "--reason", "typo")
    assert mistyped.returncode == 2 and "has no data" in mistyped.stderr and "--block-future-writes" in mistyped.stderr
    async with running_worker():
        blocked = await client.admin.erasure_receipt(await client.admin.erase(tenant, "kimm", "never store this id",
                                                                  block_future_writes=True))
        assert not blocked.data_found and blocked.residue_total == 0
        with pytest.raises(SubjectErasedError):
            await client.append_messages(tenant, "kimm", session("b1", "2024-03-01T09:00:00Z", "hello"))
        await client.append_messages(tenant, "kim", session("b2", "2024-03-01T09:00:00Z", "I live in Oslo."))
        real = await client.admin.erasure_receipt(await client.admin.erase(tenant, "kim", "art. 17"))
    assert real.data_found and real.model_dump()["data_found"] is True


async def test_subjects_and_sessions_list_what_exists_with_counts(client, services, tenant, running_worker):
    async with running_worker():
        # Four messages: a shorter session gets no episode, and l1's episode importance is listed below.
        await client.append_messages(tenant, "lin", session("l1", "2024-03-01T09:00:00Z", "I live in Oslo.",
                                                            ("assistant", "How do you like it?"),
                                                            "I work at the harbour office.",
                                                            ("assistant", "That sounds interesting.")))
        await client.consolidation_result(await client.end_session(tenant, "lin", "l1"))
        await client.append_messages(tenant, "lin", session("l2", "2024-03-02T09:00:00Z", "I like tea."))
        await client.append_messages(tenant, "kim", session("k1", "2024-03-01T09:00:00Z", "I live in Rome."))
        await client.admin.erasure_receipt(await client.admin.erase(tenant, "kim", reason="test"))
    out = run_cli(services, "subjects", "--tenant", tenant, "--json")
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    by_id = {row["subject_id"]: row for row in listed["subjects"]}
    assert set(by_id) == {"lin"} and listed["erased_subjects"] == 1  # an erased subject's id is not kept
    assert by_id["lin"]["sessions"] == 2 and by_id["lin"]["messages"] == 5 and by_id["lin"]["current_facts"] >= 1
    assert by_id["lin"]["last_consolidated_at"] is not None
    text = run_cli(services, "subjects", "--tenant", tenant).stdout
    assert "2 sessions, 5 messages" in text and "1 erased subject(s)" in text and "kim" not in text

    sessions = {row["session_id"]: row for row in
                json.loads(run_cli(services, "sessions", "--tenant", tenant, "--subject", "lin", "--json").stdout)}
    assert sessions["l1"]["last_consolidated_at"] is not None and sessions["l1"]["unconsolidated"] == 0
    assert sessions["l1"]["episode_importance"] is not None
    assert sessions["l2"]["last_consolidated_at"] is None and sessions["l2"]["unconsolidated"] == 1
    shown = run_cli(services, "sessions", "--tenant", tenant, "--subject", "lin").stdout
    assert "l2" in shown and "1 not consolidated yet" in shown
    erased = run_cli(services, "sessions", "--tenant", tenant, "--subject", "kim")
    assert erased.returncode == 0 and f"subject kim of tenant {tenant} was erased" in erased.stdout
    nobody = run_cli(services, "sessions", "--tenant", tenant, "--subject", "nobody")
    assert f"no sessions for subject nobody (tenant {tenant})" in nobody.stdout
    assert run_cli(services, "subjects", "--tenant", "empty-tenant").stdout.strip() == "no subjects in tenant empty-tenant"


async def test_stats_counters_are_durable_rows_in_postgres(client, services, tenant, running_worker):
    """Read and leak-filter counters live in Postgres (they survive any server restart), not in Redis."""
    from agent_memory.store.db import tenant_transaction

    async with running_worker():
        await client.append_messages(tenant, "kim", session("c1", "2024-03-01T09:00:00Z", "I live in Oslo."))
        await client.consolidation_result(await client.end_session(tenant, "kim", "c1"))
    await asyncio.gather(*(client.recall(tenant, "kim", "where?") for _ in range(5)))
    await client.context(tenant, "kim", "where?")
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT counter, sum(count) FROM operator_counters WHERE tenant_id = %s "
                                 "AND counter IN ('reads:recall', 'reads:context') GROUP BY counter", (tenant,))
        rows = dict(await cur.fetchall())
    assert rows == {"reads:recall": 5, "reads:context": 1}
    assert (await client.admin.read_counts(tenant))["recall_reads"] == 5
    assert not [key async for key in services.redis.scan_iter(match="am:metrics:*")]
