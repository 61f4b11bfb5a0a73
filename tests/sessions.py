"""Small session builders for tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent_memory.core.models import (
    ConflictPlan,
    ExtractionResult,
    ImportanceResult,
    Message,
    Observation,
    Session,
    SummaryResult,
)
from agent_memory.core.operation_keys import CommitKey
from agent_memory.memory.memory_store import commit_consolidation


def session(session_id: str, start: str, *lines: str | tuple[str, str]) -> Session:
    """Lines are user messages, or (role, text) pairs; message ids are '{session_id}:{n}'."""
    t0 = datetime.fromisoformat(start.replace("Z", "+00:00")).astimezone(UTC)
    messages = []
    for i, line in enumerate(lines):
        role, text = line if isinstance(line, tuple) else ("user", line)
        messages.append(Message(message_id=f"{session_id}:{i + 1}", turn_index=i, role=role,
                                speaker="Lin" if role == "user" else "Assistant", content=text,
                                created_at=t0 + timedelta(minutes=i)))
    return Session(session_id=session_id, started_at=t0, messages=messages)


async def commit_notes(client, services, tenant: str, subject: str, s: Session, happened_at: datetime,
                       notes: list[str] | None = None) -> None:
    """Append the session and commit a consolidation of it without a worker: a note per message
    (no facts, no summary, importance 5), as the consolidation's commit writes them; `notes`, the
    notes' words when they are not the messages' (a summarizer's wording)."""
    await client.append_messages(tenant, subject, s)
    texts = notes or [m.content for m in s.messages]
    summary = SummaryResult(sentences=[], token_count=0, observations=[
        Observation(text=f"Lin: {text}", source_message_ids=[m.message_id], happened_at=m.created_at)
        for m, text in zip(s.messages, texts, strict=True)])
    request = {"session": s.session_id}
    await commit_consolidation(
        services.pool, services.keyring, tenant_id=tenant, subject_id=subject, session_id=s.session_id,
        key=CommitKey.for_request(s.session_id, request), request=request,
        extraction=ExtractionResult(provider="test", extractor="written-out", extractor_version="1", facts=[]),
        plan=ConflictPlan(decisions=[]), importance=ImportanceResult(importance=5), summary=summary,
        happened_at=happened_at)
