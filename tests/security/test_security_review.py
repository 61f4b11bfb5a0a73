"""Attacks on the trust boundaries, reproduced on the real embedded stack: each test fails
unless the defence it names holds."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import psycopg
import pytest
from cryptography.exceptions import InvalidTag

from agent_memory.api.services import Services
from agent_memory.lifecycle.erasure import ErasureRequestConflictError
from agent_memory.memory.evidence import push_working_memory
from agent_memory.security.crypto import (
    FileKeyProvider,
    KeyUnavailableError,
    event_aad,
    unwrap_subject_key,
)
from agent_memory.security.keyring import KeyRing
from agent_memory.store.db import tenant_transaction
from tests.sessions import session

APP_ROLE = "agent_memory_app"


async def _consolidate(client, tenant, subject, s):
    await client.append_messages(tenant, subject, s)
    return await client.consolidation_result(await client.end_session(tenant, subject, s.session_id))


async def _admin(services):
    return await psycopg.AsyncConnection.connect(services.settings.database_admin_url, autocommit=True)


# --- 1. no code of the app role ever runs with someone else's rights ---------------------------


async def test_every_definer_function_the_app_can_call_is_pinned_and_owned_by_a_nologin_role(services):
    async with await _admin(services) as admin:
        cur = await admin.execute(
            "SELECT p.oid::regprocedure::text, p.proconfig, r.rolsuper, r.rolcanlogin, r.rolname = current_user "
            "FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE p.prosecdef AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
            "AND has_function_privilege(%s, p.oid, 'EXECUTE')", (APP_ROLE,))
        definers = await cur.fetchall()
        cur = await admin.execute("SELECT count(*) FROM pg_proc WHERE proname = 'redact_subject_events'")
        assert (await cur.fetchone())[0] == 0  # replaced by a column grant + restrictive policy
    for name, config, superuser, can_login, is_migration_owner in definers:
        assert config is not None and "search_path=pg_catalog, pg_temp" in config, name
        assert not superuser and not can_login and not is_migration_owner, name


async def test_planted_temp_objects_never_run_and_change_nothing(client, services, tenant, running_worker):
    """The review's exploit: temp relations shadowing what privileged code reads, with a planted
    function that records that it ran. Nothing privileged reads them any more."""
    victim, other = "victim", "bystander"
    async with running_worker():
        await _consolidate(client, tenant, victim, session("v1", "2024-01-01T00:00:00Z", "I live in Oslo."))
        await _consolidate(client, tenant, other, session("b1", "2024-01-01T00:00:00Z", "I live in Rome."))
    async with await psycopg.AsyncConnection.connect(services.settings.database_url, autocommit=True) as app:
        await app.execute("SELECT set_config('app.tenant_id', %s, false)", (tenant,))
        await app.execute("CREATE TEMP TABLE pwned_log (note text)")
        await app.execute("CREATE FUNCTION pg_temp.pwn() RETURNS boolean LANGUAGE sql "
                          "AS $$ INSERT INTO pg_temp.pwned_log VALUES ('ran'); SELECT true $$")
        for table in ("tombstones", "erasure_requests", "memory_events", "subject_keys", "key_encryption_keys",
                      "compaction_tickets"):
            await app.execute(f"CREATE TEMP VIEW {table} AS SELECT * FROM public.{table} WHERE pg_temp.pwn()")
        # Pretend an erasure of `other` is running: a request row the attacker is allowed to write.
        await app.execute("INSERT INTO public.erasure_requests (tenant_id, request_id, subject_id, status) "
                          "VALUES (%s, 'attack', 'nobody', 'started')", (tenant,))
        # The redaction grant: rows of a subject under erasure only, and only to redacted values.
        cur = await app.execute("UPDATE public.memory_events SET namespace = 'erased', operation_id = 'erased', "
                                "source_message_ids = '{}', extractor_name = NULL, extractor_version = NULL, "
                                "occurred_at = 'epoch', subject_id = 'erased:x' WHERE subject_id = %s", (other,))
        assert cur.rowcount == 0
        # A started request alone (no tombstone) opens nothing: the events stay append-only.
        await app.execute("INSERT INTO public.erasure_requests (tenant_id, request_id, subject_id, status) "
                          "VALUES (%s, 'attack2', %s, 'started')", (tenant, victim))
        cur = await app.execute("UPDATE public.memory_events SET namespace = 'erased', operation_id = 'erased', "
                                "source_message_ids = '{}', extractor_name = NULL, extractor_version = NULL, "
                                "occurred_at = 'epoch', subject_id = 'erased:x' WHERE subject_id = %s", (victim,))
        assert cur.rowcount == 0
        # With a tombstone too (an erasure the app may start), only the redacted values pass.
        await app.execute("INSERT INTO public.tombstones (tenant_id, subject_id, subject_digest, request_id) "
                          "VALUES (%s, %s, 'erased:attack', 'attack2')", (tenant, victim))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # WITH CHECK: only the redacted values
            await app.execute("UPDATE public.memory_events SET namespace = 'rewritten' WHERE subject_id = %s",
                              (victim,))
        # A tombstone without a digest (written before digests existed) cannot be lifted.
        await app.execute("INSERT INTO public.tombstones (tenant_id, subject_id, request_id) "
                          "VALUES (%s, 'legacy-dave', 'old')", (tenant,))
        cur = await app.execute("UPDATE public.tombstones SET subject_id = NULL WHERE subject_id = 'legacy-dave'")
        assert cur.rowcount == 0
        for statement in ("ALTER TABLE public.memory_events NO FORCE ROW LEVEL SECURITY",
                          "DELETE FROM public.tombstones", "UPDATE public.subject_keys SET wrapped_key = 'x'",
                          "UPDATE public.memory_events SET actor = 'x'", "SET ROLE postgres",
                          "UPDATE public.key_encryption_keys SET state = 'destroyed'",
                          "INSERT INTO public.key_encryption_keys VALUES ('forged', 'active', '', '')"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await app.execute(statement)
        cur = await app.execute("SELECT count(*) FROM pg_temp.pwned_log")
        assert (await cur.fetchone())[0] == 0  # the planted function never ran
    async with await _admin(services) as admin:  # the attacker's leftovers (the app may not delete them)
        await admin.execute("DELETE FROM erasure_requests WHERE tenant_id = %s", (tenant,))
        await admin.execute("DELETE FROM tombstones WHERE tenant_id = %s", (tenant,))
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM memory_events WHERE namespace = 'erased'")
        assert (await cur.fetchone())[0] == 0  # nothing changed
    assert [f.value for f in await client.facts(tenant, other)] == ["Rome"]


# --- 2. crypto-shredding that a WAL or backup copy cannot undo ----------------------------------


async def test_a_copied_wrapped_key_decrypts_until_the_rotation_and_never_after(client, services, tenant,
                                                                              running_worker):
    subject, keeper = "shred-me", "keep-me"
    async with running_worker():
        await _consolidate(client, tenant, subject, session("k1", "2024-01-01T00:00:00Z", "I live in Lisbon.",
                                                            "I have a cat named Miso."))
        await _consolidate(client, tenant, keeper, session("k2", "2024-01-01T00:00:00Z", "I live in Porto."))
        async with tenant_transaction(services.pool, tenant) as conn:
            # What a WAL segment or a base backup holds: the wrapped key row and the events.
            cur = await conn.execute("SELECT kek_id, wrapped_key, wrap_nonce FROM subject_keys "
                                     "WHERE tenant_id = %s AND subject_id = %s", (tenant, subject))
            kek_id, wrapped, wrap_nonce = await cur.fetchone()
            cur = await conn.execute(
                "SELECT event_id, memory_id, aggregate_version, event_type, payload_ciphertext, payload_nonce "
                "FROM memory_events WHERE tenant_id = %s AND subject_id = %s", (tenant, subject))
            events = await cur.fetchall()
        assert len(events) >= 3

        def decrypt_copy(kek: bytes) -> int:
            key = unwrap_subject_key(kek, tenant, subject, bytes(wrapped), bytes(wrap_nonce))
            return sum(1 for event_id, memory_id, version, event_type, ciphertext, nonce in events
                       if key.decrypt(bytes(ciphertext), bytes(nonce),
                                      event_aad(tenant, subject, event_id, memory_id, version, event_type)))

        receipt = await client.admin.erasure_receipt(await client.admin.erase(tenant, subject, reason="ticket 4711"))
        assert receipt.key_shredded and receipt.key_wrapped_by == kek_id and receipt.reason == "ticket 4711"
        status = await client.admin.erasure_status(tenant, receipt.request_id, subject)
        # Honest before the rotation: the copy still decrypts, and the status says so.
        assert not status.shred_irreversible and status.shred_irreversible_at is None
        assert status.reason == "ticket 4711"
        assert decrypt_copy(services.keyring.kek(kek_id)) == len(events)

        rotation = await client.admin.rotate_keys(force=False)  # the Schedule's mode: rotates after a shred
        assert rotation.rotated and kek_id in rotation.destroyed_kek_ids
        assert rotation.shreds_made_irreversible >= 1 and rotation.rewrapped_subject_keys >= 1
        assert services.keyring.provider.kek(kek_id) is None  # the old KEK is gone from the key store
        for live_kek in {rotation.new_kek_id}:
            with pytest.raises(InvalidTag):
                decrypt_copy(services.keyring.kek(live_kek))
        status = await client.admin.erasure_status(tenant, receipt.request_id, subject)
        assert status.shred_irreversible and status.shred_irreversible_by_rotation == rotation.new_kek_id
        assert status.reason == "ticket 4711"  # re-encrypted under the new KEK

        # Nothing else was lost: the live subject's events still decrypt (rebuild is equal) and new
        # writes use the new KEK.
        rebuilt = await (await client.admin.rebuild(tenant, keeper)).result()
        assert rebuilt.subjects_equal == 1
        await _consolidate(client, tenant, "newcomer", session("k3", "2024-01-02T00:00:00Z", "I live in Faro."))
        again = await client.admin.rotate_keys(force=False)
        assert not again.rotated  # nothing shredded since: the daily run does nothing
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT DISTINCT kek_id FROM subject_keys")
        assert await cur.fetchall() == [(rotation.new_kek_id,)]


async def test_a_payload_does_not_decrypt_as_another_event(client, services, tenant, running_worker):
    subject = "aad"
    async with running_worker():
        await _consolidate(client, tenant, subject, session("a1", "2024-01-01T00:00:00Z", "I live in Bern.",
                                                            "I work as a baker."))
    async with tenant_transaction(services.pool, tenant) as conn:
        key = await services.keyring.subject_key(conn, tenant, subject, create=False)
        cur = await conn.execute("SELECT event_id, memory_id, aggregate_version, event_type, payload_ciphertext, "
                                 "payload_nonce, aad_version FROM memory_events WHERE tenant_id = %s "
                                 "AND subject_id = %s ORDER BY event_id LIMIT 2", (tenant, subject))
        (e1, m1, v1, t1, c1, n1, aad1), (e2, m2, v2, t2, _, _, _) = await cur.fetchall()
    assert key is not None and aad1 == 2
    assert key.decrypt(bytes(c1), bytes(n1), event_aad(tenant, subject, e1, m1, v1, t1))
    for other in (event_aad(tenant, subject, e2, m2, v2, t2), event_aad(tenant, subject, e1, m1, v1 + 1, t1),
                  event_aad(tenant, subject, e1, m1, v1, "MemoryDeleted"), key.legacy_aad()):
        with pytest.raises(InvalidTag):
            key.decrypt(bytes(c1), bytes(n1), other)


async def test_a_process_without_the_registered_key_refuses_to_start(services, tmp_path):
    empty = services.settings.with_services(key_dir=tmp_path / "no-keys", master_key=None)
    with pytest.raises(KeyUnavailableError, match="refusing to start"):
        await Services.open(empty)
    # Same id, other bytes (a regenerated file): refused by the registered check value.
    active = next(k for k in services.keyring.provider.directory.glob("kek-*.key"))  # type: ignore[attr-defined]
    forged = tmp_path / "forged"
    forged.mkdir()
    (forged / active.name).write_text("A" * 43 + "=")
    (forged / "identifier.key").write_text((services.keyring.provider.directory / "identifier.key").read_text())
    with pytest.raises(KeyUnavailableError, match="not the one the database registered"):
        await Services.open(services.settings.with_services(key_dir=forged, master_key=None))


async def test_a_lost_or_changed_identifier_key_refuses_to_start(services, tmp_path):
    """Tombstones match by keyed digest: a process with a new identifier key would let erased
    subjects back in (the review made one by deleting identifier.key)."""
    source = services.keyring.provider.directory  # type: ignore[attr-defined]
    for name, change in (("lost", None), ("changed", "B" * 43 + "=")):
        copy = tmp_path / name
        copy.mkdir(mode=0o700)
        for key_file in source.glob("*.key"):
            if key_file.name != "identifier.key":
                (copy / key_file.name).write_text(key_file.read_text())
        if change:
            (copy / "identifier.key").write_text(change)
        with pytest.raises(KeyUnavailableError, match="erased subjects could come back"):
            await Services.open(services.settings.with_services(key_dir=copy, master_key=None))
        assert change or not (copy / "identifier.key").exists()  # not recreated


async def test_a_rotation_that_died_after_destroying_the_old_key_is_finished_by_the_next(client, services,
                                                                                       running_worker):
    """Crash between deleting the retired KEK's file and recording it: processes still start
    (the KEK wraps nothing any more) and the next rotation records the destruction."""
    from agent_memory.security.crypto import kek_check_value

    provider = services.keyring.provider
    dead = provider.create_kek()
    nonce, check = kek_check_value(provider.kek(dead))
    async with await _admin(services) as admin:
        await admin.execute("INSERT INTO key_encryption_keys (kek_id, state, check_nonce, check_ciphertext) "
                            "VALUES (%s, 'retiring', %s, %s)", (dead, nonce, check))
    provider.destroy_kek(dead)
    reopened = await Services.open(services.settings)  # starts: the missing KEK wraps no key
    await reopened.close()
    async with running_worker():
        finished = await client.admin.rotate_keys(force=False)
    assert dead in finished.destroyed_kek_ids
    async with await _admin(services) as admin:
        cur = await admin.execute("SELECT state FROM key_encryption_keys WHERE kek_id = %s", (dead,))
        assert (await cur.fetchone())[0] == "destroyed"


def test_key_files_are_private_and_destroyed_keys_leave_no_file(tmp_path):
    provider = FileKeyProvider(tmp_path / "keys")
    kek_id = provider.create_kek()
    path = tmp_path / "keys" / f"kek-{kek_id}.key"
    assert (path.stat().st_mode & 0o777) == 0o600 and ((tmp_path / "keys").stat().st_mode & 0o777) == 0o700
    assert provider.kek(kek_id) is not None
    provider.destroy_kek(kek_id)
    assert not path.exists() and provider.kek(kek_id) is None
    keyring = KeyRing(provider)
    with pytest.raises(KeyUnavailableError, match="identifier key is missing"):  # never made up silently
        keyring.subject_digest("t", "alice")
    assert provider.identifier_key(create=True) is not None
    assert keyring.subject_digest("t", "alice") == keyring.subject_digest("t", "alice") != \
        keyring.subject_digest("t", "bob")


# --- 3. erased plaintext gone from pages, statistics and Redis files ----------------------------


def _files_containing(root: Path, needles: list[bytes]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        data = path.read_bytes()
        hits = [n.decode() for n in needles if n in data]
        if hits:
            found[str(path.relative_to(root))] = hits
    return found


async def _statistics_containing(admin, needles: list[str]) -> list[str]:
    cur = await admin.execute(
        "SELECT starelid::regclass::text || '.' || a.attname, "
        "concat_ws(' ', s.stavalues1::text, s.stavalues2::text, s.stavalues3::text, s.stavalues4::text, "
        "s.stavalues5::text) FROM pg_statistic s JOIN pg_attribute a ON a.attrelid = s.starelid "
        "AND a.attnum = s.staattnum")
    return sorted({name for name, values in await cur.fetchall() for n in needles if n in (values or "")})


async def test_erasure_and_compaction_leave_no_plaintext_in_pages_statistics_or_redis(client, services, tenant,
                                                                                    running_worker):
    marker = uuid.uuid4().hex[:8]
    subject = f"subj-{marker}"
    words = [f"Quux{marker}ville", f"Zorb{marker}"]
    # As the lexical index's tsvectors and postings hold them: lower-cased, perhaps stemmed.
    lexemes = [f"quux{marker}", f"zorb{marker}"]
    await services.redis.config_set("appendonly", "yes")  # as compose runs Redis
    try:
        async with running_worker():
            s = session("p1", "2024-01-01T00:00:00Z", *[f"I live in {words[0]}.", f"My cat is named {words[1]}.",
                                                        f"{words[0]} is lovely in spring.", "I like tea."])
            await _consolidate(client, tenant, subject, s)
            await push_working_memory(services.redis, tenant, subject, "p1", s.messages)
            data_dir = services.settings.home / "postgres"
            async with await _admin(services) as admin:
                cur = await admin.execute("SELECT oid FROM pg_database WHERE datname = current_database()")
                db_dir = data_dir / "base" / str((await cur.fetchone())[0])
                await admin.execute("ANALYZE")
                await admin.execute("CHECKPOINT")
                # The problem, reproduced: the words are on disk and in the planner's statistics.
                assert _files_containing(db_dir, [w.encode() for w in words])
                assert _files_containing(db_dir, [w.encode() for w in lexemes])
                assert await _statistics_containing(admin, [*words, subject])
            await services.redis.bgrewriteaof()

            # A snapshot older than the erasure (a long report, pg_dump): VACUUM FULL must copy the
            # deleted rows, so the compaction may not claim it is done.
            old_snapshot = await psycopg.AsyncConnection.connect(services.settings.database_url)
            await old_snapshot.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            await old_snapshot.execute("SELECT 1")
            receipt = await client.admin.erasure_receipt(await client.admin.erase(tenant, subject, reason="compaction test"))
            assert receipt.residue_total == 0 and receipt.compaction_ticket
            assert "WAL" in (receipt.physical_horizon or "")
            deferred = await client.admin.compact()
            assert deferred.tickets >= 1 and deferred.tickets_closed == 0
            assert "snapshot older than the deletions" in (deferred.deferred_because or "")
            assert any(t.dead_rows_kept for t in deferred.tables)
            status = await client.admin.erasure_status(tenant, receipt.request_id, subject)
            assert not status.compacted
            await old_snapshot.close()

            compaction = await client.admin.compact()
            deadline = asyncio.get_running_loop().time() + 60
            while compaction.deferred_because:  # a transaction of the stack's own may hold a snapshot a while
                assert asyncio.get_running_loop().time() < deadline, compaction.deferred_because
                await asyncio.sleep(1)
                compaction = await client.admin.compact()
            assert compaction.deferred_because is None and compaction.tickets_closed == compaction.tickets >= 1
            assert {t.table for t in compaction.tables} >= {"messages", "memory_search", "memory_postings"}
            assert compaction.redis == {"aof": "rewritten", "rdb": "rewritten"}
            status = await client.admin.erasure_status(tenant, receipt.request_id, subject)
            assert status.compacted and status.compaction_id == compaction.compaction_id

            async with await _admin(services) as admin:
                await admin.execute("CHECKPOINT")
                assert await _statistics_containing(admin, [*words, *lexemes, subject]) == []
            assert _files_containing(db_dir, [w.encode() for w in [*words, *lexemes, subject]]) == {}
            redis_dir = Path((await services.redis.config_get("dir"))["dir"])
            assert _files_containing(redis_dir, [w.encode() for w in words]) == {}
    finally:
        await services.redis.config_set("appendonly", "no")


# --- 4. input limits and request ids ------------------------------------------------------------


async def test_a_request_id_of_another_subject_is_refused_and_tombstones_nothing(client, services, tenant,
                                                                             running_worker):
    async with running_worker():
        await client.append_messages(tenant, "first", session("r1", "2024-01-01T00:00:00Z", "I live in Graz."))
        await client.append_messages(tenant, "second", session("r2", "2024-01-01T00:00:00Z", "I live in Linz."))
        await client.admin.erasure_receipt(await client.admin.erase(tenant, "first", reason="r", request_id="req-1"))
        with pytest.raises(ErasureRequestConflictError, match="use a new request id"):
            await client.admin.erase(tenant, "second", reason="r", request_id="req-1")
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM tombstones")
        assert (await cur.fetchone())[0] == 1
    await client.append_messages(tenant, "second", session("r3", "2024-01-02T00:00:00Z", "Still here."))


@pytest.mark.parametrize("reason, fix", [("x" * 1001, "limit is 1000"), ("  ", "reason is empty"),
                                         ("a\x00b", "NUL")])
async def test_an_erasure_reason_out_of_bounds_is_refused_before_anything_is_written(client, services, tenant,
                                                                                  reason, fix):
    with pytest.raises(ValueError, match=fix):
        await client.admin.erase(tenant, "someone", reason=reason, request_id="bad-reason")
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM erasure_requests")
        assert (await cur.fetchone())[0] == 0


def test_environment_keys_need_an_identifier_key_and_cannot_rotate():
    from agent_memory.security.crypto import EnvKeyProvider, RotationUnsupportedError

    key = "A" * 43 + "="
    with pytest.raises(ValueError, match="AGENT_MEMORY_IDENTIFIER_KEY"):
        EnvKeyProvider(key, None)
    provider = EnvKeyProvider(f"k1:{key},k2:{'B' * 43}=", key)
    assert provider.newest == "k2" and provider.kek("k1") is not None
    with pytest.raises(RotationUnsupportedError, match="AGENT_MEMORY_KEY_DIR"):
        provider.create_kek()
    with pytest.raises(ValueError, match="exactly 32 bytes"):
        EnvKeyProvider("not-base64", key)


@pytest.mark.parametrize("field, size, limit", [("image_caption", 5_000_000, "4000"), ("speaker", 1_000, "200")])
def test_oversized_message_fields_get_a_clear_input_error(tmp_path, field, size, limit):
    import json

    from agent_memory.memory.ingest import InputError, read_sessions

    message = {"message_id": "m1", "turn_index": 0, "role": "user", "content": "hi",
               "created_at": "2024-01-01T00:00:00Z", field: "x" * size}
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"session_id": "s1", "messages": [message]}) + "\n")
    with pytest.raises(InputError, match=f"line 1: .*{field}.*{limit}"):
        read_sessions(path)


async def test_erasure_status_key_rotation_and_compaction_from_the_cli(client, services, tenant, running_worker,
                                                                       task_queue):
    import json

    from tests.cli.runner import run_cli

    async def cli(*args: str):
        out = await asyncio.to_thread(run_cli, services, *args, task_queue=task_queue)
        assert out.returncode == 0, out.stderr
        return out.stdout

    async with running_worker():
        await _consolidate(client, tenant, "cli-subject", session("c9", "2024-01-01T00:00:00Z", "I live in Turku."))
        receipt = json.loads(await cli("erase", "--tenant", tenant, "--subject", "cli-subject", "--reason",
                                       "ticket 1", "--request-id", "cli-req", "--json"))
        assert receipt["residue_total"] == 0 and receipt["key_wrapped_by"]
        text = await cli("erasure", "status", "--tenant", tenant, "--request-id", "cli-req")
        assert "reason: ticket 1" in text and "shred irreversible: not yet" in text
        rotated = json.loads(await cli("keys", "rotate", "--if-needed", "--json"))
        assert rotated["rotated"] and receipt["key_wrapped_by"] in rotated["destroyed_kek_ids"]
        keks = json.loads(await cli("keys", "status", "--json"))
        assert [k["state"] for k in keks if k["kek_id"] == rotated["new_kek_id"]] == ["active"]
        compacted = json.loads(await cli("compact", "--json"))
        assert compacted["tickets"] >= 1
        # A transaction of the stack's own (a projector's, a Schedule's) may hold a snapshot older
        # than the deletions: then the run keeps its tickets open, says why, and the next closes them.
        deadline = asyncio.get_running_loop().time() + 60
        while not compacted["tickets_closed"]:
            assert compacted["deferred_because"], compacted
            assert asyncio.get_running_loop().time() < deadline, compacted
            await asyncio.sleep(1)
            compacted = json.loads(await cli("compact", "--json"))
        status = json.loads(await cli("erasure", "status", "--tenant", tenant, "--request-id", "cli-req",
                                      "--subject", "cli-subject", "--json"))
        assert status["shred_irreversible"] and status["compacted"]
        assert status["receipt"]["subject_id"] == services.keyring.subject_digest(tenant, "cli-subject")
    missing = await asyncio.to_thread(run_cli, services, "erasure", "status", "--tenant", tenant, "--request-id",
                                      "nope")
    assert missing.returncode == 2 and "no erasure request 'nope'" in missing.stderr


async def test_a_workflow_started_without_the_payload_key_never_runs_and_histories_are_ciphertext(
        client, services, tenant, running_worker, task_queue):
    """Any local user can reach the dev server (it authenticates nobody) and start an erasure of
    someone else's subject. Payloads are encrypted: such a run's input does not decode, so the run
    fails before any step executes; histories are ciphertext."""
    import asyncio

    from temporalio.client import Client, WorkflowExecutionStatus
    from temporalio.contrib.pydantic import pydantic_data_converter

    from agent_memory.core.models import ErasureInput
    from agent_memory.security.payload_codec import ENCODING

    outsider = await Client.connect(services.settings.temporal_address, data_converter=pydantic_data_converter)
    await client.append_messages(tenant, "bob", session("o1", "2024-01-01T00:00:00Z", "I live in Oulu."))
    async with running_worker():
        forged = await outsider.start_workflow(
            "ErasureWorkflow", ErasureInput(tenant_id=tenant, subject_id="bob", request_id="evil"),
            id=f"evil-{uuid.uuid4().hex[:8]}", task_queue=task_queue)
        for _ in range(60):
            if (await forged.describe()).status != WorkflowExecutionStatus.RUNNING:
                break
            await asyncio.sleep(0.5)
        assert (await forged.describe()).status == WorkflowExecutionStatus.FAILED
        async with tenant_transaction(services.pool, tenant) as conn:
            cur = await conn.execute("SELECT count(*) FROM messages WHERE subject_id = 'bob'")
            assert (await cur.fetchone())[0] == 1
            cur = await conn.execute("SELECT count(*) FROM tombstones")
            assert (await cur.fetchone())[0] == 0

        handle = await client.admin.erase(tenant, "bob", reason="a reason nobody else may read")
        receipt = await handle.result()
        assert receipt.residue_total == 0
    with pytest.raises(Exception):  # noqa: B017 - whatever the converter raises, it cannot decode
        await outsider.get_workflow_handle(handle.id).result()
    payloads = []
    async for event in outsider.get_workflow_handle(handle.id).fetch_history_events():
        for attributes in (event.workflow_execution_started_event_attributes.input,
                           event.activity_task_scheduled_event_attributes.input,
                           event.activity_task_completed_event_attributes.result,
                           event.workflow_execution_completed_event_attributes.result):
            payloads += list(attributes.payloads)
    assert len(payloads) > 10 and all(p.metadata["encoding"] == ENCODING for p in payloads)
