"""Migrations run once, as the owner (`agent-memory migrate`, or `up`); every other command and
the worker only check, as the app role, that the schema is current. The app role's password
reaches PostgreSQL only as a SCRAM-SHA-256 verifier."""

from __future__ import annotations

import base64
import hashlib
import hmac
import subprocess
import uuid
from datetime import UTC, datetime
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

from agent_memory.core.errors import ServiceUnavailable
from agent_memory.core.settings import ENV_VARS
from agent_memory.store.db import (
    APP_ROLE,
    EARLIER_DIGESTS,
    apply_migrations,
    migration_files,
    scram_verifier,
    set_app_role_password,
)
from tests.databases import database_before, with_database
from workers.embedded import EmbeddedStack


def cli(env_extra: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """`agent-memory ARGS` in process, on `env_extra` alone of the service configuration."""
    from tests.cli.runner import invoke
    from workers.cli import build_parser

    env: dict[str, str | None] = {**dict.fromkeys(ENV_VARS), **env_extra}
    return invoke(build_parser(), args, env)



def rfc_verifier(password: str, salt: bytes, iterations: int) -> str:
    """The SCRAM-SHA-256 verifier of RFC 5802 and RFC 7677, computed here as the reference:
    `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`, all base64."""
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    stored_key = hashlib.sha256(hmac.digest(salted, b"Client Key", "sha256")).digest()
    server_key = hmac.digest(salted, b"Server Key", "sha256")
    b64 = (base64.b64encode(part).decode() for part in (salt, stored_key, server_key))
    return "SCRAM-SHA-256${}:{}${}:{}".format(iterations, *b64)


def test_the_reference_verifier_matches_rfc_7677():
    # RFC 7677 section 3: user "user", password "pencil"; the server's signature and the client's
    # proof of that exchange must follow from the StoredKey and ServerKey of the reference.
    verifier = rfc_verifier("pencil", base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096)
    keys = verifier.rpartition("$")[2]
    stored_key, server_key = (base64.b64decode(k) for k in keys.split(":"))
    nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    auth_message = (f"n=user,r=rOprNGfwEbeRWgbNEkqO,r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
                    f"c=biws,r={nonce}").encode()
    server_signature = hmac.digest(server_key, auth_message, "sha256")
    assert base64.b64encode(server_signature).decode() == "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    client_key = bytes(a ^ b for a, b in zip(proof, hmac.digest(stored_key, auth_message, "sha256"), strict=True))
    assert hashlib.sha256(client_key).digest() == stored_key


async def test_the_scram_verifier_is_the_rfcs_with_a_fresh_salt(services):
    """libpq's verifier (the one sent to the server) is the RFC's for its own salt and iteration
    count, a fresh 16-byte salt each time; SASLprep leaves an ASCII password as it is."""
    async with await psycopg.AsyncConnection.connect(services.settings.database_admin_url) as conn:
        one, two = (scram_verifier(conn, APP_ROLE, "pencil") for _ in range(2))
    for verifier in (one, two):
        method, _, rest = verifier.partition("$")
        iterations, b64_salt = rest.partition("$")[0].split(":")
        assert (method, iterations) == ("SCRAM-SHA-256", "4096")
        assert len(base64.b64decode(b64_salt)) == 16
        assert verifier == rfc_verifier("pencil", base64.b64decode(b64_salt), int(iterations))
    assert one != two


async def test_the_app_password_reaches_postgres_only_as_a_verifier(services):
    admin_url, app_url = services.settings.database_admin_url, services.settings.database_url
    password = urlsplit(app_url).password
    # Log every statement of this admin session to the server log, as DDL logging would.
    logged_url = f"{admin_url}?options=-c%20log_statement%3Dall"
    log_file = EmbeddedStack(services.settings.home).postgres_log
    offset = log_file.stat().st_size
    verifier = await set_app_role_password(logged_url, password)

    assert verifier.startswith("SCRAM-SHA-256$4096:")
    async with await psycopg.AsyncConnection.connect(admin_url) as admin:
        cur = await admin.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", (APP_ROLE,))
        assert (await cur.fetchone())[0] == verifier
    async with await psycopg.AsyncConnection.connect(app_url) as app:  # the app still logs in with it
        cur = await app.execute("SELECT current_user")
        assert (await cur.fetchone())[0] == APP_ROLE

    logged = log_file.read_bytes()[offset:].decode(errors="replace")
    assert "ALTER ROLE" in logged and verifier in logged, "the statement was not logged: the check proves nothing"
    assert password not in logged, "the plaintext password reached the server log"


async def test_commands_and_the_worker_refuse_a_schema_behind_and_migrate_brings_it_current(services, tmp_path):
    """A database never migrated: `facts` and `worker` (given the owner's URL too) migrate nothing
    and say to run `agent-memory migrate`; that command then brings it current."""
    database = f"behind_{uuid.uuid4().hex[:10]}"
    admin_url = services.settings.database_admin_url
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
        await admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    try:
        env = {"AGENT_MEMORY_HOME": str(tmp_path), "TEMPORAL_ADDRESS": services.settings.temporal_address,
               "REDIS_URL": services.settings.redis_url,
               "DATABASE_URL": with_database(services.settings.database_url, database),
               "DATABASE_ADMIN_URL": with_database(admin_url, database)}
        for args in (["facts", "--tenant", "t", "--subject", "s", "--json"], ["worker"]):
            out = cli(env, *args)
            assert out.returncode == 1, (args, out.stdout, out.stderr)
            assert len(out.stderr.strip().splitlines()) == 1, out.stderr
            assert "schema is behind" in out.stderr and "run `agent-memory migrate`" in out.stderr, out.stderr
        async with await psycopg.AsyncConnection.connect(with_database(admin_url, database)) as conn:
            cur = await conn.execute("SELECT to_regclass('schema_migrations')")
            assert (await cur.fetchone())[0] is None, "a command other than migrate applied migrations"

        migrated = cli(env, "migrate")
        assert migrated.returncode == 0, migrated.stderr
        assert f"applied {len(migration_files())} migration(s)" in migrated.stdout
        assert cli(env, "migrate").stdout.strip() == "the schema is up to date"
        facts = cli(env, "facts", "--tenant", "t", "--subject", "s", "--json")
        assert facts.returncode == 0, facts.stderr
        assert facts.stdout.strip() == "[]"

        # Without the owner's URL, migrate says what to set.
        no_admin = cli({k: v for k, v in env.items() if k != "DATABASE_ADMIN_URL"}, "migrate")
        assert no_admin.returncode == 1 and "DATABASE_ADMIN_URL" in no_admin.stderr
    finally:
        async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
            await admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))


async def test_migrate_on_the_embedded_stack_sets_the_app_password_as_a_verifier(services):
    admin_url = services.settings.database_admin_url

    async def stored() -> str:
        async with await psycopg.AsyncConnection.connect(admin_url) as admin:
            cur = await admin.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", (APP_ROLE,))
            return (await cur.fetchone())[0]

    before = await stored()
    out = cli({"AGENT_MEMORY_HOME": str(services.settings.home)}, "migrate")  # reuses the running Postgres
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "the schema is up to date"
    after = await stored()
    assert after.startswith("SCRAM-SHA-256$4096:") and after != before  # set again, with a fresh salt
    async with await psycopg.AsyncConnection.connect(services.settings.database_url) as app:
        await app.execute("SELECT 1")


async def test_migration_008_gives_every_fact_row_its_memorys_version(services):
    """An existing database migrates forward: a fact whose memory was confirmed (event version 2,
    no new interval) gets memory_version 2 on its row, a fact without events keeps its own."""
    async with database_before(services.settings.database_admin_url, "008") as (conn, migrate_the_rest):
        confirmed, bare = uuid.uuid4(), uuid.uuid4()
        for version, event_type in ((1, "MemoryCreated"), (2, "MemoryUpdated")):
            await conn.execute(
                "INSERT INTO memory_events (event_id, tenant_id, subject_id, memory_id, namespace, key_digest, "
                "event_type, payload_ciphertext, payload_nonce, aggregate_version, occurred_at, actor, "
                "operation_id) VALUES (%s, 't', 's', %s, 'location', 'd', %s, '\\x00', '\\x00', %s, now(), "
                "'consolidation', 'op')", (uuid.uuid4(), confirmed, event_type, version))
        for memory_id in (confirmed, bare):
            await conn.execute(
                "INSERT INTO facts (fact_id, tenant_id, subject_id, memory_id, namespace, key, value, version, "
                "status, valid_from, confidence, claim_type, permanence, source_kind, evidence_message_ids, "
                "operation_id) VALUES (%s, 't', 's', %s, 'location', 'home_city', 'Porto', 1, 'active', now(), "
                "0.9, 'explicit', 'permanent', 'user_statement', '{m1}', 'op')", (uuid.uuid4(), memory_id))
        await migrate_the_rest()
        cur = await conn.execute("SELECT memory_id, version, memory_version FROM facts")
        rows = {m: (v, mv) for m, v, mv in await cur.fetchall()}
        cur = await conn.execute("SELECT relforcerowsecurity FROM pg_class WHERE relname IN "
                                 "('facts', 'memory_events')")
        forced = [f for (f,) in await cur.fetchall()]
    assert rows == {confirmed: (1, 2), bare: (1, 1)}
    assert forced == [True, True]  # the backfill lifted row security for its transaction only


async def test_migration_050_gives_every_fact_its_last_confirmation_and_its_writer(services):
    """An existing database migrates forward: each interval is last confirmed at its opening
    event or at the latest FactConfirmed before the event that closed it, and names the
    extractor of its opening event, or the writer of a live write."""
    t = lambda day: datetime(2024, 1, day, tzinfo=UTC)  # noqa: E731
    async with database_before(services.settings.database_admin_url, "050") as (conn, migrate_the_rest):
        city, tea, bare = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        events = [(city, 1, "FactCreated", t(1), "rule-extractor", "8", "consolidation"),
                  (city, 2, "FactConfirmed", t(3), "rule-extractor", "8", "consolidation"),
                  (city, 3, "FactSuperseded", t(5), "rule-extractor", "9", "consolidation"),
                  (city, 4, "FactConfirmed", t(9), "rule-extractor", "9", "consolidation"),
                  (city, 5, "FactConfirmed", t(7), "rule-extractor", "9", "consolidation"),
                  (tea, 1, "FactCreated", t(2), "live-write", "1", "agent")]
        for memory_id, version, event_type, at, name, extractor_version, actor in events:
            await conn.execute(
                "INSERT INTO memory_events (event_id, tenant_id, subject_id, memory_id, namespace, key_digest, "
                "event_type, payload_ciphertext, payload_nonce, aggregate_version, occurred_at, actor, "
                "extractor_name, extractor_version, operation_id) VALUES (%s, 't', 's', %s, 'location', 'd', %s, "
                "'\\x00', '\\x00', %s, %s, %s, %s, %s, 'op')",
                (uuid.uuid4(), memory_id, event_type, version, at, actor, name, extractor_version))
        rows = [(city, 1, "closed", t(1)), (city, 3, "active", t(5)), (tea, 1, "active", t(2)),
                (bare, 1, "active", t(4))]
        for memory_id, version, status, valid_from in rows:
            await conn.execute(
                "INSERT INTO facts (fact_id, tenant_id, subject_id, memory_id, namespace, key, value, version, "
                "memory_version, status, valid_from, confidence, claim_type, permanence, source_kind, "
                "evidence_message_ids, operation_id) VALUES (%s, 't', 's', %s, 'location', 'home_city', 'Porto', "
                "%s, %s, %s, %s, 0.9, 'explicit', 'permanent', 'user_statement', '{m1}', 'op')",
                (uuid.uuid4(), memory_id, version, version, status, valid_from))
        await migrate_the_rest()
        cur = await conn.execute("SELECT memory_id, version, last_confirmed_at, extracted_by FROM facts")
        migrated = {(m, v): (at, by) for m, v, at, by in await cur.fetchall()}
    assert migrated == {(city, 1): (t(3), "rule-extractor/8"),  # v3 closed it: later confirmations are v3's
                        (city, 3): (t(9), "rule-extractor/9"),  # the latest, not the last recorded
                        (tea, 1): (t(2), "live-write:agent"),
                        (bare, 1): (t(4), None)}  # no event: its own start, writer unknown


async def _vectors_across_migration(conn: psycopg.AsyncConnection, migrate_the_rest, *, subjects: int
                                    ) -> tuple[list[tuple], list[tuple]]:
    """(the vectors stored before the migration, the rows after it with the partition each is in):
    one 384-wide and one 8-wide vector per subject."""
    rows = [("t", f"s{n}", uuid.uuid4(), "episode", 1, model, "[" + ",".join(["0.5"] * width) + "]")
            for n in range(subjects) for model, width in (("m384", 384), ("m8", 8))]
    for row in rows:
        await conn.execute("INSERT INTO memory_vectors (tenant_id, subject_id, memory_id, memory_kind, version, "
                           "model, embedding) VALUES (%s, %s, %s, %s, %s, %s, %s::vector)", row)
    await migrate_the_rest()
    cur = await conn.execute("SELECT tenant_id, subject_id, memory_id, memory_kind, version, model, "
                             "embedding::text, tableoid::regclass::text FROM memory_vectors")
    return rows, await cur.fetchall()


async def test_migration_027_moves_every_vector_into_its_subjects_partition(services):
    """An existing store migrates forward: every vector (of any width) is copied into the
    partition of its (tenant, subject), whose indexes are named after the parent's."""
    async with database_before(services.settings.database_admin_url, "027", until="029") as (conn, migrate_the_rest):
        rows, after = await _vectors_across_migration(conn, migrate_the_rest, subjects=24)
        cur = await conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_index x ON x.indexrelid = c.oid "
            "WHERE x.indrelid = 'agent_memory_partitions.memory_vectors_p00'::regclass")
        indexes = {name for (name,) in await cur.fetchall()}
    assert sorted(r[:7] for r in after) == sorted(rows)
    partition_of = {(r[1], r[5]): r[7] for r in after}
    assert len(set(partition_of.values())) > 1  # spread over partitions
    assert all(partition_of[(s, "m384")] == partition_of[(s, "m8")] for s, _ in partition_of)  # by subject
    assert indexes == {"memory_vectors_p00_pkey", "memory_vectors_p00_subject_model", "memory_vectors_p00_model",
                       "memory_vectors_p00_hnsw_384"}


@pytest.mark.parametrize(("migration", "until", "old", "new"), [("029", "030", 16, 64), ("030", None, 64, 256)])
async def test_a_repartitioning_moves_every_vector_into_its_subjects_partition(services, migration, until, old, new):
    """A store with `old` partitions migrates forward to `new` (029: 16 to 64, 030: 64 to 256): the
    same rows, each subject's in the one partition Postgres's hash routes it to, every partition
    with its four indexes (named after the parent's) and forced row-level security, nothing left
    of the old table."""
    async with database_before(services.settings.database_admin_url, migration, until=until) as (
            conn, migrate_the_rest):
        rows, after = await _vectors_across_migration(conn, migrate_the_rest, subjects=80)
        cur = await conn.execute(
            "SELECT c.relname, c.relrowsecurity AND c.relforcerowsecurity, "
            "(SELECT array_agg(ix.relname::text ORDER BY ix.relname) FROM pg_index x "
            "  JOIN pg_class ix ON ix.oid = x.indexrelid WHERE x.indrelid = c.oid), "
            "pg_get_expr(c.relpartbound, c.oid) "
            "FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'public.memory_vectors'::regclass")
        partitions = {name: (forced, indexes, bound) for name, forced, indexes, bound in await cur.fetchall()}
        cur = await conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE %s",
                                 (f"memory\\_vectors\\_{old}%",))
        leftovers = await cur.fetchone()
        cur = await conn.execute("SELECT count(*) FILTER (WHERE c.reltuples < 0) FROM pg_inherits i "
                                 "JOIN pg_class c ON c.oid = i.inhrelid "
                                 "WHERE i.inhparent = 'public.memory_vectors'::regclass")
        (never_analyzed,) = await cur.fetchone()
    width = len(str(new - 1))
    assert sorted(r[:7] for r in after) == sorted(rows)
    assert sorted(partitions) == [f"memory_vectors_p{n:0{width}d}" for n in range(new)]
    assert all(bound.startswith(f"FOR VALUES WITH (modulus {new},") for _, _, bound in partitions.values())
    assert all(forced for forced, _, _ in partitions.values())
    assert all(indexes == sorted(f"{name}{suffix}" for suffix in ("_pkey", "_subject_model", "_model", "_hnsw_384"))
               for name, (_, indexes, _) in partitions.items())
    assert leftovers == (0,)
    if migration >= "030":  # analysed by the migration: the route choice reads each partition's row count
        assert never_analyzed == 0
    partition_of = {(r[1], r[5]): r[7] for r in after}
    assert len(set(partition_of.values())) > old  # spread over more than the old partitions
    assert all(partition_of[(s, "m384")] == partition_of[(s, "m8")] for s, _ in partition_of)  # by subject


async def test_migration_028_counts_the_document_frequencies_of_the_index_it_finds(services):
    """An existing index migrates forward: each subject's lexemes get their item counts per kind,
    as the triggers then keep them."""
    async with database_before(services.settings.database_admin_url, "028") as (conn, migrate_the_rest):
        items = [("t", subject, uuid.uuid4(), kind, text)
                 for subject, texts in (("lin", ("oslo trip", "rome trip", "oslo oslo jazz")), ("kim", ("jazz",)))
                 for text in texts for kind in ("episode", "observation")]
        await conn.execute("SELECT set_config('app.tenant_id', 't', false)")  # memory_search forces RLS
        for tenant, subject, memory_id, kind, text in items:
            await conn.execute("INSERT INTO memory_search (tenant_id, subject_id, memory_id, memory_kind, version, "
                               "search_text, term_count, happened_at) VALUES (%s, %s, %s, %s, 1, %s, 2, now())",
                               (tenant, subject, memory_id, kind, text))
        await migrate_the_rest()
        cur = await conn.execute("SELECT subject_id, lexeme, fact_items, episode_items, observation_items "
                                 "FROM lexical_frequencies ORDER BY subject_id, lexeme")
        frequencies = await cur.fetchall()
    assert frequencies == [("kim", "jazz", 0, 1, 1), ("lin", "jazz", 0, 1, 1), ("lin", "oslo", 0, 2, 2),
                           ("lin", "rome", 0, 1, 1), ("lin", "trip", 0, 2, 2)]


async def test_migration_056_gives_each_claimed_tool_call_the_identity_of_its_key(services):
    """An existing database migrates forward: a tool call claimed over HTTP or MCP is its key's
    agent's, app's or, for a key limited to neither, the tenant's; one claimed in process has none."""
    async with database_before(services.settings.database_admin_url, "056") as (conn, migrate_the_rest):
        keys = [("k-agent", "support-bot", None), ("k-app", None, "crm"), ("k-both", "support-bot", "crm"),
                ("k-none", None, None)]
        for key_id, agent_id, app_id in keys:
            await conn.execute("INSERT INTO api_keys (tenant_id, key_id, secret_sha256, scope, agent_id, app_id) "
                               "VALUES ('t', %s, 'x', 'write', %s, %s)", (key_id, agent_id, app_id))
        claims = [("c1", "api-key:k-agent"), ("c2", "mcp:k-app"), ("c3", "api-key:k-both"), ("c4", "mcp:k-none"),
                  ("c5", None), ("c6", "api-key:k-unknown")]
        for call_key, claimed_by in claims:
            await conn.execute(
                "INSERT INTO tool_calls (tenant_id, subject_id, call_key, tool, request_digest, status, attempt, "
                "claimed_by, lease_expires_at, expires_at) VALUES ('t', 's', %s, 'send', 'd', 'completed', 1, %s, "
                "now(), now() + interval '1 day')", (call_key, claimed_by))
        await migrate_the_rest()
        cur = await conn.execute("SELECT call_key, claimed_as FROM tool_calls ORDER BY call_key")
        claimed_as = dict(await cur.fetchall())
        cur = await conn.execute("SELECT relforcerowsecurity FROM pg_class WHERE relname IN ('tool_calls', 'api_keys')")
        forced = [f for (f,) in await cur.fetchall()]
    assert claimed_as == {"c1": "agent:support-bot", "c2": "app:crm", "c3": "agent:support-bot/app:crm",
                          "c4": "tenant", "c5": None, "c6": None}
    assert forced == [True, True]


def statements(text: str) -> str:
    return "\n".join(line for line in text.split("\n") if not line.lstrip().startswith("--"))


# The statements of the migrations with earlier wordings, as they shipped.
SHIPPED_STATEMENTS = {
    "006_keys_redaction_compaction.sql": "c59dc7481f3ddd7f04957bae3786638928376dd312a0a99b0358eb94692ca426",
    "030_vector_partitions_256.sql": "83e6777e7db58c2109861e356fcb984cc77f169d6ea866665517fe592526d04d",
}


async def test_a_store_refuses_a_changed_migration_but_not_an_earlier_wording_of_its_comments(services):
    files = dict(migration_files())
    assert set(EARLIER_DIGESTS) == set(SHIPPED_STATEMENTS)
    for name, digest in SHIPPED_STATEMENTS.items():  # only comments differ from what shipped
        assert hashlib.sha256(statements(files[name]).encode()).hexdigest() == digest, name
    admin_url = services.settings.database_admin_url
    async with database_before(admin_url, "999") as (conn, _):
        url = with_database(admin_url, conn.info.dbname)
        for name, text in files.items():  # a store migrated under the earlier wordings
            recorded = min(EARLIER_DIGESTS[name]) if name in EARLIER_DIGESTS else hashlib.sha256(text.encode()).hexdigest()
            await conn.execute("INSERT INTO schema_migrations (name, sha256) VALUES (%s, %s)", (name, recorded))
        await conn.commit()
        assert await apply_migrations(url) == []
        await conn.execute("UPDATE schema_migrations SET sha256 = %s WHERE name = %s", ("0" * 64, min(files)))
        await conn.commit()
        with pytest.raises(ServiceUnavailable, match="changed after it was applied"):
            await apply_migrations(url)


async def test_migration_057_marks_every_registered_webhook_secret_legacy(services):
    """An endpoint the migration finds holds a legacy secret: it is marked so, and its deliveries
    keep the legacy signature until a rotation; one inserted later defaults to the standard form."""
    async with database_before(services.settings.database_admin_url, "057") as (conn, migrate_the_rest):
        registered = uuid.uuid4()
        await conn.execute("INSERT INTO webhook_endpoints (tenant_id, endpoint_id, url, events, secret_ciphertext, "
                           "secret_nonce) VALUES ('t', %s, 'https://example.org/h', '{memory.created}', '\\x00', "
                           "'\\x00')", (registered,))
        await migrate_the_rest()
        later = uuid.uuid4()
        await conn.execute("INSERT INTO webhook_endpoints (tenant_id, endpoint_id, url, events, secret_ciphertext, "
                           "secret_nonce) VALUES ('t', %s, 'https://example.org/h', '{memory.created}', '\\x00', "
                           "'\\x00')", (later,))
        cur = await conn.execute("SELECT endpoint_id, secret_format, secret_rotated_at, previous_secret_ciphertext, "
                                 "previous_secret_expires_at FROM webhook_endpoints")
        migrated = {row[0]: row[1:] for row in await cur.fetchall()}
    assert migrated == {registered: ("legacy", None, None, None), later: ("standard", None, None, None)}
