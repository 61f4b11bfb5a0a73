"""Reading session files (JSONL, one session a line) with errors that name the line and field.

The whole file is validated before anything is written, so a bad line never leaves half a file
in the store.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from agent_memory.models import Session

FIX_HINTS = {
    "missing": "add it",
    "string_too_short": "it must not be empty",
    "too_short": "it must not be empty",
    "datetime_from_date_parsing": "use an ISO 8601 time such as 2024-05-01T10:00:00Z",
    "datetime_parsing": "use an ISO 8601 time such as 2024-05-01T10:00:00Z",
    "literal_error": "use one of the allowed values",
}


class InputError(ValueError):
    """Bad input, explained in one line: where, what, and how to fix it."""


def _describe(err: ErrorDetails) -> str:
    where = ".".join(str(p) for p in err["loc"]) or "line"
    hint = FIX_HINTS.get(err["type"], "")
    if where.endswith("message_id") and err["type"] == "missing":
        hint = "every message needs a message_id (messages are idempotent by id)"
    return f"{where}: {err['msg'].lower()}" + (f" ({hint})" if hint else "")


def parse_session_line(line: str, line_no: int) -> Session:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"line {line_no}: not valid JSON ({exc.msg} at column {exc.colno}); "
                         "each line must be one JSON object describing a session") from None
    except RecursionError:
        raise InputError(f"line {line_no}: JSON nested too deeply; each line must be one JSON object "
                         "describing a session") from None
    if not isinstance(data, dict):
        raise InputError(f"line {line_no}: expected a JSON object with session_id and messages, got "
                         f"{type(data).__name__}")
    if data.get("messages") == []:
        raise InputError(f"line {line_no}: session {data.get('session_id')!r} is empty; "
                         "a session needs at least one message")
    try:
        session = Session.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"line {line_no}: {_describe(exc.errors()[0])}") from None
    seen: set[str] = set()
    for message in session.messages:
        if message.message_id in seen:
            raise InputError(f"line {line_no}: message_id {message.message_id!r} appears twice in session "
                             f"{session.session_id!r}; message ids must be unique within a session")
        seen.add(message.message_id)
    return session


def read_sessions(path: Path) -> list[Session]:
    if not path.exists():
        raise InputError(f"{path}: no such file")
    sessions: list[Session] = []
    ids: set[str] = set()
    # Lines end at \n, \r\n or a lone \r, as an editor (and Python's text mode) counts them, so
    # the line number in an error is the one the user sees. Bytes first: a non-UTF-8 line is named.
    for line_no, raw in enumerate(path.read_bytes().splitlines(), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"line {line_no}: not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
                             "save the file as UTF-8") from None
        if not line.strip():
            continue
        session = parse_session_line(line, line_no)
        if session.session_id in ids:
            raise InputError(f"line {line_no}: session {session.session_id!r} appears twice in the file; "
                             "put all its messages on one line")
        ids.add(session.session_id)
        sessions.append(session)
    if not sessions:
        raise InputError(f"{path}: no sessions found; expected one JSON session per line")
    return sessions
