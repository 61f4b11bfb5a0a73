"""A client generated from the served OpenAPI document with openapi-python-client runs the
quickstart against the real server: append a session, end it, follow the run to its end, read the
facts, the cited context and a tool call's record, and read a refused call's problem — all through typed models the
generator made from the document, with no warning from it."""

from __future__ import annotations

import asyncio
import importlib
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import httpx

from agent_memory.api.http.server import serving
from agent_memory.security.api_keys import create_key

GENERATOR = Path(sys.executable).with_name("openapi-python-client")


def _generate(document: Path, into: Path) -> str:
    done = subprocess.run([str(GENERATOR), "generate", "--path", str(document), "--meta", "none",
                           "--output-path", str(into)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


async def test_a_client_generated_from_the_document_runs_the_quickstart(client, services, tenant, running_worker,
                                                                         tmp_path, monkeypatch):
    key = (await create_key(services.pool, tenant, "write")).token
    async with running_worker(), serving(client) as port:
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient() as http:
            document = tmp_path / "openapi.json"
            document.write_bytes((await http.get(f"{base}/v1/openapi.json")).content)
        report = await asyncio.to_thread(_generate, document, tmp_path / "memory_api")
        assert "warning" not in report.lower(), report  # every schema understood
        monkeypatch.syspath_prepend(str(tmp_path))
        generated = importlib.import_module("memory_api")
        append, end, run, facts, context, claim_tool_call = (
            importlib.import_module(f"memory_api.api.{name}") for name in (
                "sessions.append", "sessions.end", "sessions.run", "memory.facts", "memory.context",
                "tool_calls.claim_tool_call"))
        models = importlib.import_module("memory_api.models")

        api = generated.AuthenticatedClient(base_url=base, token=key)
        body = models.AppendRequest(messages=[models.Message(
            message_id="gen-1:1", turn_index=0, role=models.MessageRole.USER, content="I live in Oslo.",
            created_at=datetime(2024, 5, 1, 9, tzinfo=UTC))])
        appended = await append.asyncio_detailed(subject_id="lin", session_id="gen-1", client=api, body=body)
        assert appended.status_code == 200, appended.content
        assert isinstance(appended.parsed, models.AppendResult)
        assert (appended.parsed.inserted, appended.parsed.duplicates, appended.parsed.last_message_id) == (
            1, 0, "gen-1:1")
        ended = await end.asyncio(subject_id="lin", session_id="gen-1", client=api)
        assert isinstance(ended, models.EndedSession) and ended.workflow_id.startswith("consolidate/")
        for _ in range(300):
            status = await run.asyncio(workflow_id=ended.workflow_id, client=api)
            assert isinstance(status, models.RunStatus)
            if status.status != "running":
                break
            await asyncio.sleep(0.2)
        assert status.status == "completed", status
        listed = await facts.asyncio(subject_id="lin", client=api)
        assert "Oslo" in {fact.to_dict()["value"] for fact in listed}
        # Typed by the document: when each fact was last confirmed, and what wrote it.
        [oslo] = [fact for fact in listed if fact.value == "Oslo"]
        assert isinstance(oslo, models.FactRow) and oslo.last_confirmed_at == datetime(2024, 5, 1, 9, tzinfo=UTC)
        assert oslo.extracted_by.startswith("rule-extractor/")
        cited = await context.asyncio(subject_id="lin", client=api, body=models.FilteredQuery(query="where?"))
        assert isinstance(cited, models.AssembledContext) and "Oslo" in cited.text
        [item] = [i for i in cited.items if i.memory_id == oslo.memory_id]
        assert isinstance(item, models.ContextItem) and item.cited_message_ids == ["gen-1:1"]

        claim = models.ToolCallClaim(tool="send_email", request={"to": "lin@example.org"})
        claimed = await claim_tool_call.asyncio(subject_id="lin", call_key="welcome-1", client=api, body=claim)
        assert isinstance(claimed, models.ToolCall) and (claimed.state, claimed.attempt) == ("claimed", 1)

        refused = await facts.asyncio_detailed(subject_id="not valid", client=api)
        assert refused.status_code == 422 and isinstance(refused.parsed, models.Problem)
        assert "subject" in refused.parsed.detail
