"""Restores that cannot resurrect: a subject is consolidated, the database dumped (pg_dump of the
embedded Postgres), the subject erased, the dump restored into a fresh database; the subject is
back there until the erasure ledger in the home (written when the erasure completed) is
re-applied, after which nothing of the subject is left. The ledger is private and its lines
cannot be edited unnoticed."""

from __future__ import annotations

import asyncio
import json
import stat
import subprocess
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
import pytest
from psycopg import sql

from agent_memory.api.client import MemoryClient
from agent_memory.api.services import Services
from agent_memory.lifecycle.erasure import scan_residue
from agent_memory.lifecycle.erasure_ledger import LedgerTamperedError, ledger_path, read_ledger
from agent_memory.providers.offline import offline_providers
from agent_memory.store.db import tenant_transaction
from tests.cli.runner import run_cli
from tests.databases import with_database
from tests.sessions import session
from workers.cli import reapply_ledger_erasures
from workers.embedded import postgres_bin_dir
from workers.worker import build_worker

S = session("s-ana", "2024-03-01T09:00:00Z", "Hi, my name is Ana.", "I live in Lisbon.", "I'm allergic to shellfish.")


def pg(tool: str, *args: str) -> None:
    done = subprocess.run([str(postgres_bin_dir() / tool), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


@asynccontextmanager
async def restored(services, dump: str) -> AsyncIterator[Services]:
    """Services on a fresh database restored from `dump` (same keys, Redis and Temporal)."""
    settings = services.settings
    assert settings.database_admin_url and settings.database_url
    name = f"restored_{uuid.uuid4().hex[:10]}"
    async with await psycopg.AsyncConnection.connect(settings.database_admin_url, autocommit=True) as admin:
        await admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        await asyncio.to_thread(pg, "pg_restore", "--exit-on-error", "-d",
                                with_database(settings.database_admin_url, name), dump)
        copy = await Services.open(settings.with_services(
            database_url=with_database(settings.database_url, name),
            database_admin_url=with_database(settings.database_admin_url, name)))
        try:
            yield copy
        finally:
            await copy.close()
    finally:
        async with await psycopg.AsyncConnection.connect(settings.database_admin_url, autocommit=True) as admin:
            await admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


async def messages_of(pool, tenant: str, subject: str) -> int:
    async with tenant_transaction(pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM messages WHERE tenant_id = %s AND subject_id = %s",
                                 (tenant, subject))
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def test_an_erasure_is_reapplied_to_a_database_restored_from_before_it(client, services, tenant, task_queue,
                                                                             running_worker, tmp_path):
    dump = str(tmp_path / "before-erasure.dump")
    async with running_worker():
        await client.append_messages(tenant, "ana", S)
        await client.consolidation_result(await client.end_session(tenant, "ana", S.session_id))
        assert await client.facts(tenant, "ana")
        # The backup, taken before the erasure.
        assert services.settings.database_admin_url
        await asyncio.to_thread(pg, "pg_dump", "-Fc", "-f", dump, services.settings.database_admin_url)
        receipt = await client.admin.erasure_receipt(await client.admin.erase(tenant, "ana", "ticket 42", request_id="gdpr-42"))
    assert receipt.residue_total == 0
    # The ledger has the erasure, by digest only, in a private file.
    path = ledger_path(services.settings.home)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    [entry] = [e for e in read_ledger(services.settings.home, services.keyring) if e.tenant_id == tenant]
    assert entry.request_id == "gdpr-42" and entry.subject_digest == services.keyring.subject_digest(tenant, "ana")
    assert "ana" not in path.read_text().replace(entry.subject_digest, "")

    async with restored(services, dump) as copy:
        again = MemoryClient(copy, offline_providers().embedder, task_queue=task_queue)
        # The restore brought the subject back.
        assert await messages_of(copy.pool, tenant, "ana") == 3 and await again.facts(tenant, "ana")
        worker = build_worker(copy, task_queue=task_queue)
        async with worker:
            result, receipts = await again.admin.reapply_erasures(wait=True)
        assert [(r.request_id, r.action) for r in result.reapplied if r.tenant_id == tenant] == [("gdpr-42", "started")]
        assert [r.residue_total for r in receipts] == [0]
        # Gone again, with zero residue in every store, and refused as an erased subject.
        residue = await scan_residue(copy.pool, copy.redis, tenant, "ana")
        assert sum(residue.values()) == 0, residue
        assert await messages_of(copy.pool, tenant, "ana") == 0
        assert await again.admin.subject_erased(tenant, "ana") and await again.facts(tenant, "ana") == []
        status = await again.admin.erasure_status(tenant, "gdpr-42", "ana")
        assert status.status == "completed"
        # Nothing is missing any more: a second run (the worker's start) re-applies nothing.
        result, _ = await again.admin.reapply_erasures()
        assert not [r for r in result.reapplied if r.tenant_id == tenant]
    # The ledger still holds the erasure once.
    assert [e.request_id for e in read_ledger(services.settings.home, services.keyring)
            if e.tenant_id == tenant] == ["gdpr-42"]
    # The CLI on the live database: nothing to re-apply, JSON on stdout.
    out = await asyncio.to_thread(run_cli, services, "erasure", "reapply", "--json", task_queue=task_queue)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["reapplied"] == []


async def test_an_erased_subject_with_nothing_left_in_the_restore_gets_its_tombstone_back(
        client, services, tenant, task_queue, running_worker, tmp_path):
    dump = str(tmp_path / "empty.dump")
    assert services.settings.database_admin_url
    await asyncio.to_thread(pg, "pg_dump", "-Fc", "-f", dump, services.settings.database_admin_url)
    async with running_worker():  # the subject's data and erasure both come after the backup
        await client.append_messages(tenant, "bo", S)
        await client.admin.erasure_receipt(await client.admin.erase(tenant, "bo", "ticket 7", request_id="gdpr-7"))
    async with restored(services, dump) as copy:
        again = MemoryClient(copy, offline_providers().embedder, task_queue=task_queue)
        assert not await again.admin.subject_erased(tenant, "bo")
        await reapply_ledger_erasures(copy)  # what the worker does at start
        assert await again.admin.subject_erased(tenant, "bo")  # a later write for the id is refused, as before the restore
        result, _ = await again.admin.reapply_erasures()
        assert not [r for r in result.reapplied if r.tenant_id == tenant]


def test_an_edited_ledger_line_is_detected(services, tmp_path):
    from agent_memory.lifecycle.erasure_ledger import LedgerEntry, append_erasure

    home = tmp_path
    first = LedgerEntry(request_id="r1", tenant_id="t", subject_digest="erased:aa", completed_at="2024-05-01T10:00:00Z")
    second = first.model_copy(update={"request_id": "r2", "subject_digest": "erased:bb"})
    assert append_erasure(home, services.keyring, first) and append_erasure(home, services.keyring, second)
    assert not append_erasure(home, services.keyring, first)  # once per request
    assert [e.request_id for e in read_ledger(home, services.keyring)] == ["r1", "r2"]
    path = ledger_path(home)
    lines = path.read_text().splitlines()
    path.write_text(lines[0].replace("erased:aa", "erased:cc") + "\n" + lines[1] + "\n")
    with pytest.raises(LedgerTamperedError, match="line 1"):
        read_ledger(home, services.keyring)
    path.write_text(lines[1] + "\n")  # the first line removed
    with pytest.raises(LedgerTamperedError, match="line 1"):
        read_ledger(home, services.keyring)
