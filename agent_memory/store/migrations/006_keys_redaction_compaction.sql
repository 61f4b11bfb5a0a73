-- Security hardening: no SECURITY DEFINER code callable by the application,
-- key-encryption keys with ids and rotation, erased identifiers kept only as keyed digests, and
-- physical compaction after erasure. Runs as the owner role.

-- Two NOLOGIN roles the application may switch to (SET ROLE) for one job, never inherits:
--   agent_memory_key_rotator  re-wraps subject keys under a new key-encryption key (all tenants)
--   agent_memory_maintainer   VACUUM FULL / ANALYZE / clears statistics after an erasure
-- With NOCREATEROLE owners (docker-compose) deploy/postgres-init creates and grants them.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'agent_memory_key_rotator') THEN
        CREATE ROLE agent_memory_key_rotator NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'agent_memory_maintainer') THEN
        CREATE ROLE agent_memory_maintainer NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
    IF NOT pg_catalog.pg_has_role('agent_memory_app', 'agent_memory_key_rotator', 'SET') THEN
        GRANT agent_memory_key_rotator TO agent_memory_app WITH INHERIT FALSE, SET TRUE;
    END IF;
    IF NOT pg_catalog.pg_has_role('agent_memory_app', 'agent_memory_maintainer', 'SET') THEN
        GRANT agent_memory_maintainer TO agent_memory_app WITH INHERIT FALSE, SET TRUE;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA public TO agent_memory_key_rotator, agent_memory_maintainer;

-- 1. The definer function ran caller-planted code (temp relations shadow `public`) with its
--    owner's rights. Redaction is now an ordinary column grant bounded by a restrictive policy:
--    only rows of a tombstoned subject whose erasure is in progress, and only to the redacted
--    values. (Against someone holding the app's credentials this bounds, not forbids: they can
--    erase a subject of the tenant, which is the app's right.)
DROP FUNCTION public.redact_subject_events(text, text);

-- Payload AAD version: 1 = tenant|subject (legacy); 2 binds tenant, subject, event id, memory id,
-- version and event type, so a ciphertext cannot be replayed under another event.
ALTER TABLE public.memory_events ADD COLUMN aad_version smallint NOT NULL DEFAULT 1
    CHECK (aad_version IN (1, 2));
ALTER TABLE public.memory_events ALTER COLUMN aad_version SET DEFAULT 2;

GRANT UPDATE (subject_id, namespace, source_message_ids, operation_id, extractor_name, extractor_version,
              occurred_at) ON public.memory_events TO agent_memory_app;
CREATE POLICY redact_erasing_subject_only ON public.memory_events AS RESTRICTIVE FOR UPDATE
    TO agent_memory_app
    USING (EXISTS (SELECT 1 FROM public.erasure_requests r
                    WHERE r.tenant_id = memory_events.tenant_id AND r.subject_id = memory_events.subject_id
                      AND r.status = 'started')
           AND EXISTS (SELECT 1 FROM public.tombstones t
                        WHERE t.tenant_id = memory_events.tenant_id AND t.subject_id = memory_events.subject_id))
    WITH CHECK (namespace = 'erased' AND operation_id = 'erased' AND source_message_ids = '{}'
                AND extractor_name IS NULL AND extractor_version IS NULL
                AND subject_id LIKE 'erased:%' AND occurred_at = 'epoch'::timestamptz);

-- 2. Key-encryption keys (KEKs) by id. The key bytes live in a key provider outside the
--    database; this table says which one wraps new subject keys and which were destroyed.
CREATE TABLE public.key_encryption_keys (
    kek_id           text        PRIMARY KEY,
    state            text        NOT NULL CHECK (state IN ('active', 'retiring', 'destroyed')),
    -- AES-GCM of a constant under the KEK: proves a process holds the right key bytes.
    check_nonce      bytea       NOT NULL,
    check_ciphertext bytea       NOT NULL,
    -- Subject keys shredded while this KEK was active: their old copies (WAL, backups) stay
    -- decryptable until this KEK is destroyed by a rotation.
    shredded_keys    integer     NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    retired_at       timestamptz,
    destroyed_at     timestamptz,
    destroyed_by     text
);
CREATE UNIQUE INDEX key_encryption_keys_one_active ON public.key_encryption_keys ((true)) WHERE state = 'active';
-- Only the rotator registers and retires KEKs; the app reads them and counts its shreds.
GRANT SELECT ON public.key_encryption_keys TO agent_memory_app;
GRANT UPDATE (shredded_keys) ON public.key_encryption_keys TO agent_memory_app;
GRANT SELECT, INSERT ON public.key_encryption_keys TO agent_memory_key_rotator;
GRANT UPDATE (state, retired_at, destroyed_at, destroyed_by) ON public.key_encryption_keys
    TO agent_memory_key_rotator;

-- The identifier key digests erased subject ids; a process with another one would let erased
-- subjects back in, so its HMAC check value is registered once and compared at every start.
CREATE TABLE public.identifier_key_check (
    singleton   boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    check_value text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT ON public.identifier_key_check TO agent_memory_app;

-- Keys wrapped before KEK ids existed carry the id 'legacy' (the old master.key or
-- AGENT_MEMORY_MASTER_KEY); the first rotation re-wraps them and destroys it.
ALTER TABLE public.subject_keys ADD COLUMN kek_id text NOT NULL DEFAULT 'legacy';
ALTER TABLE public.subject_keys ALTER COLUMN kek_id DROP DEFAULT;
CREATE INDEX subject_keys_kek ON public.subject_keys (kek_id);
-- Only the rotator rewrites a wrapped key; the app inserts (under the active KEK) and deletes.
REVOKE UPDATE ON public.subject_keys FROM agent_memory_app;
CREATE POLICY wrap_under_active_kek ON public.subject_keys AS RESTRICTIVE FOR INSERT TO agent_memory_app
    WITH CHECK (kek_id = (SELECT k.kek_id FROM public.key_encryption_keys k WHERE k.state = 'active'));
GRANT SELECT (tenant_id, subject_id, kek_id, wrapped_key, wrap_nonce),
      UPDATE (kek_id, wrapped_key, wrap_nonce) ON public.subject_keys TO agent_memory_key_rotator;
CREATE POLICY key_rotation ON public.subject_keys FOR ALL TO agent_memory_key_rotator USING (true) WITH CHECK (true);

-- 3. Erased identifiers: a keyed digest (HMAC under the deployment's identifier key) replaces
--    the subject id in what erasure keeps, so the rows block resurrection without naming anyone.
ALTER TABLE public.tombstones ADD COLUMN subject_digest text;
ALTER TABLE public.tombstones DROP CONSTRAINT tombstones_pkey;
ALTER TABLE public.tombstones ALTER COLUMN subject_id DROP NOT NULL;
CREATE UNIQUE INDEX tombstones_subject_digest ON public.tombstones (tenant_id, subject_digest);
CREATE INDEX tombstones_subject ON public.tombstones (tenant_id, subject_id);
-- The clear id is kept while the erasure runs (projections join on it), then cleared.
GRANT UPDATE (subject_id) ON public.tombstones TO agent_memory_app;
CREATE POLICY clear_subject_only ON public.tombstones AS RESTRICTIVE FOR UPDATE TO agent_memory_app
    USING (subject_digest IS NOT NULL) WITH CHECK (subject_id IS NULL);

-- The reason is free text: stored encrypted under the active KEK (re-encrypted by rotation),
-- never in the clear and never in workflow history.
ALTER TABLE public.erasure_requests ALTER COLUMN subject_id DROP NOT NULL;
ALTER TABLE public.erasure_requests ALTER COLUMN reason DROP NOT NULL;
ALTER TABLE public.erasure_requests
    ADD COLUMN subject_digest     text,
    ADD COLUMN reason_ciphertext  bytea,
    ADD COLUMN reason_nonce       bytea,
    ADD COLUMN reason_kek_id      text,
    ADD COLUMN shred_kek_id       text,
    ADD COLUMN compaction_ticket  uuid;
GRANT SELECT (tenant_id, request_id, reason_ciphertext, reason_nonce, reason_kek_id),
      UPDATE (reason_ciphertext, reason_nonce, reason_kek_id) ON public.erasure_requests
    TO agent_memory_key_rotator;
CREATE POLICY key_rotation ON public.erasure_requests FOR ALL TO agent_memory_key_rotator
    USING (true) WITH CHECK (true);

-- 4. Physical compaction after erasure: deleted tuples stay in heap pages, GIN entries and
--    pg_statistic until the table is rewritten and re-analysed. Tickets name tables only (no
--    tenant data); a Schedule compacts every pending ticket in one batch.
CREATE TABLE public.compaction_tickets (
    ticket_id     uuid        PRIMARY KEY,
    tables        text[]      NOT NULL,
    requested_at  timestamptz NOT NULL DEFAULT now(),
    compacted_at  timestamptz,
    compaction_id text
);
CREATE INDEX compaction_tickets_pending ON public.compaction_tickets (requested_at) WHERE compacted_at IS NULL;
GRANT SELECT, INSERT ON public.compaction_tickets TO agent_memory_app;
GRANT UPDATE (compacted_at, compaction_id) ON public.compaction_tickets TO agent_memory_app;

-- pg_statistic keeps dead statistics rows (with sampled values) until it is rewritten too.
-- Only its owner (a superuser) can grant this; deploy/postgres-init does where owners are not.
DO $$
BEGIN
    GRANT MAINTAIN ON pg_catalog.pg_statistic TO agent_memory_maintainer;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'grant MAINTAIN ON pg_catalog.pg_statistic TO agent_memory_maintainer as a superuser';
END
$$;
GRANT MAINTAIN ON public.sessions, public.messages, public.memory_events, public.facts, public.episodes,
    public.memory_vectors, public.projection_outbox, public.operations, public.subject_keys, public.tombstones,
    public.erasure_requests, public.observations, public.memory_search TO agent_memory_maintainer;
