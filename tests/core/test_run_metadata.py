"""Runs read without the payload key: every start carries a static summary and details in clear
(ids only), and a finished consolidation's current details give its counts; inputs and results
stay ciphertext, and a clear text never stands in for an input."""

from __future__ import annotations

import json
import re

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.exceptions import ApplicationError

from agent_memory.core.models import ConsolidationInput, Session
from agent_memory.core.run_metadata import PublicText, progress_details, run_details, run_summary
from agent_memory.security.payload_codec import ENCODING, PUBLIC_FIELD, EncryptionCodec, StrictPayloadConverter
from tests.api.test_http_api import MESSAGES


async def test_a_started_run_is_summarized_in_clear_and_its_result_in_counts(client, services, tenant,
                                                                            running_worker):
    await client.append_messages(tenant, "lin", Session(session_id="s3", messages=MESSAGES))
    handle = await client.end_session(tenant, "lin", "s3")
    async with running_worker():
        result = await client.consolidation_result(handle)
        metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    described = await handle.describe()
    assert await described.static_summary() == f"consolidate {tenant}/lin/s3"
    details = await described.static_details()
    assert details is not None and f"tenant: {tenant}" in details and "session: s3" in details
    assert re.fullmatch(f"{result.facts_written} facts, {int(result.episode_written)} episode, "
                        rf"\d+ conflict checks, {result.vectors_upserted} vectors", metadata.current_details)
    # In the history: the summary in clear, the input as ciphertext.
    started = (await handle.fetch_history()).events[0].workflow_execution_started_event_attributes
    summary = (await handle.fetch_history()).events[0].user_metadata.summary
    assert summary.metadata["encoding"] == b"json/plain" and summary.metadata[PUBLIC_FIELD] == b"1"
    assert json.loads(summary.data) == f"consolidate {tenant}/lin/s3"
    assert started.input.payloads[0].metadata["encoding"] == ENCODING
    assert "Oslo" not in details and "Oslo" not in metadata.current_details


async def test_a_clear_text_is_read_only_where_a_text_is_expected():
    converter = StrictPayloadConverter()
    codec = EncryptionCodec([b"k" * 32])
    [written] = converter.to_payloads([PublicText("consolidate acme/lin/s3")])
    assert (await codec.encode([written])) == [written]  # left in clear
    [read] = await codec.decode([written])
    assert converter.from_payloads([read]) == ["consolidate acme/lin/s3"]
    with pytest.raises(ApplicationError, match="clear text where ConsolidationInput"):
        converter.from_payloads([read], [ConsolidationInput])


def test_summaries_and_details_name_ids_and_counts_only():
    assert run_summary("erase/acme/lin/req-1") == "erase acme/lin/req-1"
    assert run_details("rebuild/acme/*/r1", "RebuildWorkflow").splitlines() == [
        "**RebuildWorkflow**", "tenant: acme", "subject: *", "request: r1"]
    assert run_details("key-rotation/manual-x", "KeyRotationWorkflow").endswith("workflow id: key-rotation/manual-x")
    from agent_memory.core.models import ErasureProgress

    assert progress_details(ErasureProgress(step="erase facts", stores_done=["facts", "episodes"])) == (
        "**erase facts**\nstores done: 2")


async def test_runs_shows_each_run_decoded(client, services, tenant, running_worker, task_queue):
    import asyncio

    from tests.cli.runner import run_cli

    await client.append_messages(tenant, "lin", Session(session_id="s4", messages=MESSAGES))
    handle = await client.end_session(tenant, "lin", "s4")
    async with running_worker():
        result = await client.consolidation_result(handle)
    listed = await asyncio.to_thread(run_cli, services, "runs", "--tenant", tenant, "--json", task_queue=task_queue)
    assert listed.returncode == 0, listed.stderr
    [run] = [r for r in json.loads(listed.stdout) if r["workflow_id"] == handle.id]
    assert run["summary"] == f"consolidate {tenant}/lin/s4" and run["unreadable"] is None
    assert run["input"]["subject_id"] == "lin" and run["input"]["session_id"] == "s4"
    assert run["result"]["facts_written"] == result.facts_written
    text = await asyncio.to_thread(run_cli, services, "runs", "--tenant", tenant, task_queue=task_queue)
    assert f"summary consolidate {tenant}/lin/s4" in text.stdout and '"facts_written":' in text.stdout


async def test_the_consolidation_an_idle_timer_starts_is_summarized_too(services, tenant, task_queue, running_worker):
    import asyncio
    from datetime import timedelta

    from agent_memory.api.client import MemoryClient, idle_workflow_id
    from agent_memory.providers.offline import offline_providers

    client = MemoryClient(services, offline_providers().embedder, task_queue=task_queue,
                          idle_timeout=timedelta(seconds=1))
    async with running_worker():
        await client.append_messages(tenant, "lin", Session(session_id="s5", messages=MESSAGES))
        idle = services.temporal.get_workflow_handle(idle_workflow_id(tenant, "lin", "s5"))
        outcome = await asyncio.wait_for(idle.result(), timeout=30)
        child = services.temporal.get_workflow_handle(outcome["consolidation_workflow_id"])
        await asyncio.wait_for(child.result(), timeout=60)
    assert await (await idle.describe()).static_summary() == f"idle {tenant}/lin/s5"
    described = await child.describe()
    assert await described.static_summary() == f"consolidate {tenant}/lin/s5"
    assert "**ConsolidationWorkflow**" in (await described.static_details() or "")
