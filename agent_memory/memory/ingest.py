"""Reading session files (JSONL, one session a line) with errors that name the line and field.

The whole file is validated before anything is written, so a bad line never leaves half a file
in the store.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import Session

FIX_HINTS = {
    "missing": "add it",
    "string_too_short": "it must not be empty",
    "too_short": "it must not be empty",
    "datetime_from_date_parsing": "use an ISO 8601 time such as 2024-05-01T10:00:00Z",
    "datetime_parsing": "use an ISO 8601 time such as 2024-05-01T10:00:00Z",
    "literal_error": "use one of the allowed values",
}


class InputError(InvalidInput):
    """Bad input, explained in one line: where, what, and how to fix it."""


def _describe(err: ErrorDetails) -> str:
    where = ".".join(str(p) for p in err["loc"]) or "line"
    hint = FIX_HINTS.get(err["type"], "")
    if where.endswith("message_id") and err["type"] == "missing":
        hint = "every message needs a message_id (messages are idempotent by id)"
    return f"{where}: {err['msg'].lower()}" + (f" ({hint})" if hint else "")


DEFAULT_FUTURE_TOLERANCE = timedelta(minutes=5)


def _ahead(delta: timedelta) -> str:
    seconds = delta.total_seconds()
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.0f} {unit}"
    return f"{seconds:,.0f} seconds"


def check_time_not_future(field: str, when: datetime, *, now: datetime | None = None,
                          tolerance: timedelta = DEFAULT_FUTURE_TOLERANCE, prefix: str = "") -> None:
    """InputError naming `field` when `when` is later than `tolerance` past `now`."""
    now = now or datetime.now(UTC)
    if when > now + tolerance:
        raise InputError(
            f"{prefix}{field}: {when.isoformat()} is {_ahead(when - now)} in the future (more than the "
            f"{_ahead(tolerance)} allowed for clock skew, AGENT_MEMORY_FUTURE_TOLERANCE_SECONDS); send the "
            "time the message was written, with its UTC offset, e.g. 2024-05-01T10:00:00Z")


def check_not_future(session: Session, *, now: datetime | None = None,
                     tolerance: timedelta = DEFAULT_FUTURE_TOLERANCE, prefix: str = "") -> None:
    """Refuse a session whose messages (or start) are dated later than `tolerance` past `now`.

    A statement's time is when it was made; one dated in the future would close the fact it
    supersedes at that future date, leaving the key with no current value until then."""
    now = now or datetime.now(UTC)
    if session.started_at is not None:
        check_time_not_future("started_at", session.started_at, now=now, tolerance=tolerance, prefix=prefix)
    for n, message in enumerate(session.messages):
        check_time_not_future(f"messages.{n}.created_at", message.created_at, now=now, tolerance=tolerance,
                              prefix=prefix)


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


def read_sessions(path: Path, *, now: datetime | None = None,
                  future_tolerance: timedelta = DEFAULT_FUTURE_TOLERANCE) -> list[Session]:
    """Every session of the file, or InputError for the first bad line (nothing is written:
    a message dated past `now` + `future_tolerance` is refused here, with its line)."""
    now = now or datetime.now(UTC)
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
        check_not_future(session, now=now, tolerance=future_tolerance, prefix=f"line {line_no}: ")
        if session.session_id in ids:
            raise InputError(f"line {line_no}: session {session.session_id!r} appears twice in the file; "
                             "put all its messages on one line")
        ids.add(session.session_id)
        sessions.append(session)
    if not sessions:
        raise InputError(f"{path}: no sessions found; expected one JSON session per line")
    return sessions
