"""The errors a caller can fix, in one table: the CLI prints them in one line (exit 2), the HTTP
API answers them as problem+json with their status, the MCP server as the tool's error text.
Anything else is a failing service or a bug, and is never shown to a caller with its traceback."""

from __future__ import annotations

from agent_memory.api_keys import ApiKeyError
from agent_memory.corrections import MemoryForgottenError, WriteRefusedError
from agent_memory.erasure import ErasureRequestConflictError
from agent_memory.events import VersionConflictError
from agent_memory.evidence import AppendConflictError, MessageConflictError
from agent_memory.forgetting import MemoryNotForgottenError, RestoreWindowClosedError
from agent_memory.ingest import InputError
from agent_memory.scope import SubjectErasedError

# (error type, HTTP status, title), subclasses before their bases.
USER_ERROR_TABLE: tuple[tuple[type[Exception], int, str], ...] = (
    (ApiKeyError, 401, "Unauthorized"),
    (PermissionError, 403, "Forbidden"),
    (WriteRefusedError, 403, "Refused by the tenant's write policy"),
    (SubjectErasedError, 409, "Subject erased"),
    (AppendConflictError, 409, "Session moved on"),
    (MessageConflictError, 409, "Message id reused with other content"),
    (VersionConflictError, 409, "Version conflict"),
    (MemoryForgottenError, 409, "Memory forgotten"),
    (MemoryNotForgottenError, 409, "Memory not forgotten"),
    (RestoreWindowClosedError, 409, "Grace period over"),
    (ErasureRequestConflictError, 409, "Request id taken"),
    (InputError, 422, "Invalid input"),
    (LookupError, 404, "Not found"),
    (ValueError, 422, "Invalid input"),
)
USER_ERRORS: tuple[type[Exception], ...] = tuple(error for error, _, _ in USER_ERROR_TABLE)
