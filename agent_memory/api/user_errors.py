"""The errors a caller can fix: the CLI prints them in one line (exit 2), the HTTP API answers
them as problem+json with their status, the MCP server as the tool's error text.

They are the `UserError`s of agent_memory.core.errors, each carrying its status, title and exit code,
and pydantic's ValidationError of a request's or a file's content (422, exit 2). Nothing else:
a built-in exception (KeyError, ValueError, PermissionError, ...) reaching a caller is a bug,
answered as an internal error with an id whose traceback is in the log."""

from __future__ import annotations

import os
import sys
import traceback
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from agent_memory.core.errors import InvalidInput, UserError, new_error_id

USER_ERRORS: tuple[type[Exception], ...] = (UserError, ValidationError)


def user_error_status(exc: BaseException) -> tuple[int, str, int] | None:
    """(HTTP status, title, CLI exit code) of an error the caller can fix, else None."""
    if isinstance(exc, UserError):
        return exc.status, exc.title, exc.exit_code
    if isinstance(exc, ValidationError):
        return InvalidInput.status, InvalidInput.title, InvalidInput.exit_code
    return None


def cli_error_log(home: Path) -> Path:
    """Where the CLI writes the traceback of an internal error: the home's logs directory."""
    return home / "logs" / "cli-errors.log"


def log_internal_error(exc: BaseException, home: Path) -> str:
    """Record a bug's traceback under a fresh error id in cli_error_log(home) (private to the
    user: it may quote the data at hand), or on stderr when that file cannot be written; return
    the one line a CLI command prints: `internal error <id> (logged to <where>)`."""
    error_id = new_error_id()
    record = (f"{datetime.now(UTC).isoformat(timespec='seconds')} internal error {error_id}\n"
              + "".join(traceback.format_exception(exc)))
    path = cli_error_log(home)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as log_file:
            log_file.write(record)
        where = str(path)
    except OSError:
        sys.stderr.write(record)
        where = "stderr"
    return f"internal error {error_id} (logged to {where})"
