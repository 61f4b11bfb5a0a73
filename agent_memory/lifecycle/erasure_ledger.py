"""The erasure ledger: a record of completed erasures kept outside the database, so a database
restored from a backup taken before an erasure does not bring the subject back.

The ledger is an append-only file in the agent-memory home (`erasure-ledger.jsonl`, 0600, beside
the `keys` directory). A line is written when an erasure completes: its request id, tenant, the
subject's keyed digest (the digest erasure keeps, agent_memory/security/crypto.subject_digest: the subject
id is never written in clear), the completion time, the MAC of the line before it and its own
MAC (HMAC-SHA256 under a key derived from the identifier key). The chain makes an edited,
removed or reordered line detectable; the file cannot be silently rewritten without the
identifier key.

After a restore, `reapply` (the `agent-memory erasure reapply` command; the worker runs it at
start) finds the ledger's erasures the database does not know, finds each subject by matching
its digest against the subject ids present in the restored database, and registers and runs its
erasure again under the same request id. A subject with nothing left in the database gets its
tombstone back, so later writes for it are refused as they were before the restore.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from psycopg import sql
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy

from agent_memory.core import tables
from agent_memory.core.errors import AgentMemoryError
from agent_memory.lifecycle.erasure import register_erasure_request
from agent_memory.lifecycle.erasure_runs import start_erasure_workflow
from agent_memory.security.keyring import KeyRing
from agent_memory.store.db import tenant_transaction

LEDGER_FILE = "erasure-ledger.jsonl"
log = logging.getLogger(__name__)


class LedgerTamperedError(AgentMemoryError):
    """A line of the ledger does not verify: it was edited, removed, reordered or forged."""


class LedgerEntry(BaseModel):
    request_id: str
    tenant_id: str
    subject_digest: str
    completed_at: datetime


@dataclass(frozen=True)
class _Line:
    entry: LedgerEntry
    prev: str
    mac: str


def ledger_path(home: Path) -> Path:
    return home / LEDGER_FILE


def ledger_key(keyring: KeyRing) -> bytes:
    """The ledger's MAC key, derived from the identifier key (kept with the keys, not in the database)."""
    return hmac.new(keyring.identifier_key(), b"agent-memory erasure ledger v1", hashlib.sha256).digest()


def _mac(key: bytes, entry: LedgerEntry, prev: str) -> str:
    body = json.dumps({**entry.model_dump(mode="json"), "prev": prev}, sort_keys=True, separators=(",", ":"))
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


def _read(path: Path, key: bytes) -> list[_Line]:
    """Every line, verified in order; LedgerTamperedError names the first one that fails."""
    if not path.exists():
        return []
    lines: list[_Line] = []
    prev = ""
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
            entry = LedgerEntry.model_validate({k: v for k, v in data.items() if k not in ("prev", "mac")})
            line = _Line(entry, str(data["prev"]), str(data["mac"]))
        except (ValueError, KeyError) as exc:
            raise LedgerTamperedError(f"{path} line {n}: not a ledger line ({type(exc).__name__})") from None
        if line.prev != prev or not hmac.compare_digest(line.mac, _mac(key, entry, prev)):
            raise LedgerTamperedError(f"{path} line {n}: its MAC does not verify (the line or one before it was "
                                      "edited, removed or reordered, or the identifier key is not the one that "
                                      "wrote it); restore the ledger from its copy")
        lines.append(line)
        prev = line.mac
    return lines


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.fchmod(fd, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def read_ledger(home: Path, keyring: KeyRing) -> list[LedgerEntry]:
    """The ledger's entries, verified (LedgerTamperedError otherwise)."""
    return [line.entry for line in _read(ledger_path(home), ledger_key(keyring))]


def append_erasure(home: Path, keyring: KeyRing, entry: LedgerEntry) -> bool:
    """Append the completed erasure (once per tenant and request id: a retried completion
    appends nothing). Returns whether a line was written. The whole ledger is verified first:
    a line is never chained to a tampered ledger."""
    path = ledger_path(home)
    key = ledger_key(keyring)
    with _locked(path):
        lines = _read(path, key)
        if any(line.entry.tenant_id == entry.tenant_id and line.entry.request_id == entry.request_id
               for line in lines):
            return False
        prev = lines[-1].mac if lines else ""
        record = {**entry.model_dump(mode="json"), "prev": prev, "mac": _mac(key, entry, prev)}
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(record, sort_keys=True) + "\n")
            out.flush()
            os.fsync(out.fileno())
    return True


# --- after a restore -----------------------------------------------------------------------------


class ReappliedErasure(BaseModel):
    request_id: str
    tenant_id: str
    # started: the subject was found and its erasure runs again; tombstoned: nothing of the
    # subject is in the database, its tombstone was written back.
    action: str
    workflow_id: str | None = None


class ReapplyResult(BaseModel):
    ledger_entries: int = 0
    already_applied: int = 0
    reapplied: list[ReappliedErasure] = Field(default_factory=list)


async def _known(pool: AsyncConnectionPool, entry: LedgerEntry) -> bool:
    """Whether the database knows the erasure: its request completed, or the subject's tombstone."""
    async with tenant_transaction(pool, entry.tenant_id) as conn:
        cur = await conn.execute(
            "SELECT EXISTS (SELECT 1 FROM erasure_requests WHERE tenant_id = %s AND request_id = %s "
            "AND status = 'completed') OR EXISTS (SELECT 1 FROM tombstones WHERE tenant_id = %s "
            "AND subject_digest = %s)", (entry.tenant_id, entry.request_id, entry.tenant_id, entry.subject_digest))
        row = await cur.fetchone()
    return bool(row and row[0])


async def missing_erasures(pool: AsyncConnectionPool, keyring: KeyRing, home: Path) -> list[LedgerEntry]:
    """The ledger's erasures the database does not know (a restore from before them)."""
    return [entry for entry in read_ledger(home, keyring) if not await _known(pool, entry)]


async def subjects_present(pool: AsyncConnectionPool, tenant_id: str) -> set[str]:
    """Every subject id of the tenant that any table with subject data names."""
    named = [t for t in tables.TABLES if t.subject_column]
    query = sql.SQL(" UNION ").join(
        sql.SQL("SELECT {} FROM {} WHERE tenant_id = %(t)s AND {} IS NOT NULL").format(
            sql.Identifier(t.subject_column or ""), sql.Identifier(t.name), sql.Identifier(t.subject_column or ""))
        for t in named)
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(query, {"t": tenant_id})
        return {row[0] for row in await cur.fetchall()}


async def restore_tombstone(pool: AsyncConnectionPool, entry: LedgerEntry) -> None:
    """The tombstone of an erased subject of whom nothing is left: later writes are refused."""
    async with tenant_transaction(pool, entry.tenant_id) as conn:
        await conn.execute(
            "INSERT INTO tombstones (tenant_id, subject_id, subject_digest, request_id, created_at) "
            "VALUES (%s, NULL, %s, %s, %s) ON CONFLICT (tenant_id, subject_digest) DO NOTHING",
            (entry.tenant_id, entry.subject_digest, entry.request_id, entry.completed_at))


REAPPLY_REASON = "re-applied from the erasure ledger: the database was restored from before this erasure"


async def reapply_erasures(pool: AsyncConnectionPool, keyring: KeyRing, temporal: Client, task_queue: str,
                           home: Path) -> tuple[ReapplyResult, list[WorkflowHandle]]:
    """Register and start again every ledger erasure the database does not know (same request
    id; a new run of its workflow, as the old run's history may outlive the restore). Returns
    the result and the handles of the started runs (their receipts are the erasures' own)."""
    entries = read_ledger(home, keyring)
    result = ReapplyResult(ledger_entries=len(entries))
    handles: list[WorkflowHandle] = []
    digests: dict[str, dict[str, str]] = {}  # tenant -> digest -> subject id present in the database
    for entry in entries:
        if await _known(pool, entry):
            result.already_applied += 1
            continue
        if entry.tenant_id not in digests:
            digests[entry.tenant_id] = {keyring.subject_digest(entry.tenant_id, s): s
                                        for s in await subjects_present(pool, entry.tenant_id)}
        subject_id = digests[entry.tenant_id].get(entry.subject_digest)
        if subject_id is None:
            await restore_tombstone(pool, entry)
            result.reapplied.append(ReappliedErasure(request_id=entry.request_id, tenant_id=entry.tenant_id,
                                                     action="tombstoned"))
            continue
        await register_erasure_request(pool, keyring, entry.tenant_id, subject_id, entry.request_id, REAPPLY_REASON)
        handle = await start_erasure_workflow(temporal, task_queue, entry.tenant_id, subject_id, entry.request_id,
                                              reuse=WorkflowIDReusePolicy.ALLOW_DUPLICATE)
        log.warning("erasure %s of tenant %s was missing from the database (restored from before it): "
                    "running it again", entry.request_id, entry.tenant_id)
        handles.append(handle)
        result.reapplied.append(ReappliedErasure(request_id=entry.request_id, tenant_id=entry.tenant_id,
                                                 action="started", workflow_id=handle.id))
    return result, handles
