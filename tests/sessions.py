"""Small session builders for tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent_memory.core.models import Message, Session


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
