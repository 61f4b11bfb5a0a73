-- Initial schema. Runs as the owner role; the application connects as agent_memory_app,
-- which row-level security confines to the tenant set by app.tenant_id per transaction.

CREATE EXTENSION IF NOT EXISTS vector;

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'agent_memory_app') THEN
        CREATE ROLE agent_memory_app NOLOGIN NOSUPERUSER NOBYPASSRLS;
    END IF;
END
$$;

-- Sessions and their messages: evidence, append-only (no UPDATE is granted).
CREATE TABLE sessions (
    tenant_id        text        NOT NULL,
    session_id       text        NOT NULL,
    subject_id       text        NOT NULL,
    started_at       timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id)
);
CREATE INDEX sessions_subject ON sessions (tenant_id, subject_id);

CREATE TABLE messages (
    tenant_id        text        NOT NULL,
    session_id       text        NOT NULL,
    message_id       text        NOT NULL,
    subject_id       text        NOT NULL,
    turn_index       integer     NOT NULL,
    role             text        NOT NULL,
    speaker          text,
    content          text        NOT NULL,
    image_caption    text,
    created_at       timestamptz NOT NULL,
    content_sha256   text        NOT NULL,
    recorded_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id, message_id),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions (tenant_id, session_id)
);
CREATE INDEX messages_subject ON messages (tenant_id, subject_id);

-- The event log: source of truth. Payloads are AES-GCM encrypted with the subject's key.
CREATE TABLE memory_events (
    event_id            uuid        PRIMARY KEY,
    tenant_id           text        NOT NULL,
    subject_id          text        NOT NULL,
    memory_id           uuid        NOT NULL,
    namespace           text        NOT NULL,
    -- HMAC of namespace/key under the subject key: unlinkable once the key is shredded.
    key_digest          text        NOT NULL,
    event_type          text        NOT NULL CHECK (event_type IN
                            ('MemoryCreated', 'MemoryUpdated', 'MemoryClosed', 'MemoryDeleted')),
    payload_ciphertext  bytea,
    payload_nonce       bytea,
    aggregate_version   integer     NOT NULL CHECK (aggregate_version > 0),
    occurred_at         timestamptz NOT NULL,
    recorded_at         timestamptz NOT NULL DEFAULT now(),
    actor               text        NOT NULL,
    source_message_ids  text[]      NOT NULL DEFAULT '{}',
    extractor_name      text,
    extractor_version   text,
    operation_id        text        NOT NULL,
    UNIQUE (tenant_id, memory_id, aggregate_version)
);
CREATE INDEX memory_events_subject ON memory_events (tenant_id, subject_id);

-- Current-facts projection, bi-temporal: valid_from/valid_to is when it was true,
-- recorded_at/superseded_at is when we knew it. Only those closing columns may be updated.
CREATE TABLE facts (
    fact_id             uuid        PRIMARY KEY,
    tenant_id           text        NOT NULL,
    subject_id          text        NOT NULL,
    memory_id           uuid        NOT NULL,
    namespace           text        NOT NULL,
    key                 text        NOT NULL,
    value               text        NOT NULL,
    version             integer     NOT NULL,
    status              text        NOT NULL CHECK (status IN ('active', 'candidate', 'closed')),
    valid_from          timestamptz NOT NULL,
    valid_to            timestamptz,
    valid_until         timestamptz,
    recorded_at         timestamptz NOT NULL DEFAULT now(),
    superseded_at       timestamptz,
    confidence          real        NOT NULL,
    claim_type          text        NOT NULL,
    permanence          text        NOT NULL,
    source_kind         text        NOT NULL,
    evidence_message_ids text[]     NOT NULL,
    close_reason        text,
    operation_id        text        NOT NULL,
    UNIQUE (tenant_id, memory_id, version)
);
-- At most one active row per memory; a temporary fact is active with a known valid_to.
CREATE UNIQUE INDEX facts_one_active ON facts (tenant_id, memory_id) WHERE status = 'active';
CREATE INDEX facts_subject ON facts (tenant_id, subject_id, namespace, key);

CREATE TABLE episodes (
    memory_id           uuid        PRIMARY KEY,
    tenant_id           text        NOT NULL,
    subject_id          text        NOT NULL,
    session_id          text        NOT NULL,
    version             integer     NOT NULL DEFAULT 1,
    summary             text        NOT NULL,
    sentences           jsonb       NOT NULL,
    importance          smallint    NOT NULL CHECK (importance BETWEEN 1 AND 10),
    happened_at         timestamptz NOT NULL,
    source_message_ids  text[]      NOT NULL,
    operation_id        text        NOT NULL,
    recorded_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, session_id)
);
CREATE INDEX episodes_subject ON episodes (tenant_id, subject_id);

CREATE TABLE memory_vectors (
    tenant_id           text        NOT NULL,
    subject_id          text        NOT NULL,
    memory_id           uuid        NOT NULL,
    memory_kind         text        NOT NULL CHECK (memory_kind IN ('fact', 'episode')),
    version             integer     NOT NULL,
    model               text        NOT NULL,
    embedding           vector(384) NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, memory_id, version, model)
);
CREATE INDEX memory_vectors_hnsw ON memory_vectors USING hnsw (embedding vector_cosine_ops);
CREATE INDEX memory_vectors_subject ON memory_vectors (tenant_id, subject_id);

CREATE TABLE projection_outbox (
    tenant_id           text        NOT NULL,
    subject_id          text        NOT NULL,
    memory_id           uuid        NOT NULL,
    memory_kind         text        NOT NULL,
    version             integer     NOT NULL,
    operation_id        text        NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    processed_at        timestamptz,
    PRIMARY KEY (tenant_id, memory_id, version)
);
CREATE INDEX projection_outbox_pending ON projection_outbox (tenant_id, subject_id)
    WHERE processed_at IS NULL;

-- Recorded operations: one row per effectful step, so a retry returns the recorded result.
CREATE TABLE operations (
    tenant_id           text        NOT NULL,
    operation_id        text        NOT NULL,
    subject_id          text        NOT NULL,
    kind                text        NOT NULL,
    request_hash        text        NOT NULL,
    status              text        NOT NULL CHECK (status IN ('started', 'succeeded', 'failed')),
    result              jsonb,
    error               text,
    provider            text,
    provider_request_id text,
    input_tokens        integer     NOT NULL DEFAULT 0,
    output_tokens       integer     NOT NULL DEFAULT 0,
    attempts            integer     NOT NULL DEFAULT 0,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, operation_id)
);
CREATE INDEX operations_subject ON operations (tenant_id, subject_id);

CREATE TABLE subject_keys (
    tenant_id           text        NOT NULL,
    subject_id          text        NOT NULL,
    wrapped_key         bytea       NOT NULL,
    wrap_nonce          bytea       NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, subject_id)
);

CREATE TABLE tombstones (
    tenant_id           text        NOT NULL,
    subject_id          text        NOT NULL,
    request_id          text        NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, subject_id)
);

CREATE TABLE erasure_requests (
    tenant_id           text        NOT NULL,
    request_id          text        NOT NULL,
    subject_id          text        NOT NULL,
    reason              text        NOT NULL,
    status              text        NOT NULL CHECK (status IN ('started', 'completed')),
    requested_at        timestamptz NOT NULL DEFAULT now(),
    completed_at        timestamptz,
    receipt             jsonb,
    PRIMARY KEY (tenant_id, request_id)
);

-- Row-level security on every table with tenant data, forced for the owner too.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['sessions', 'messages', 'memory_events', 'facts', 'episodes',
                             'memory_vectors', 'projection_outbox', 'operations', 'subject_keys',
                             'tombstones', 'erasure_requests']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY tenant_isolation ON %I USING (tenant_id = current_setting(''app.tenant_id'', true)) '
            'WITH CHECK (tenant_id = current_setting(''app.tenant_id'', true))', t);
    END LOOP;
END
$$;

-- Least privilege: evidence and events are append-only for the application; facts may only
-- have their validity closed (or gain evidence); erasure may delete.
GRANT USAGE ON SCHEMA public TO agent_memory_app;
GRANT SELECT, INSERT, DELETE ON sessions, messages TO agent_memory_app;
GRANT SELECT, INSERT ON memory_events TO agent_memory_app;
GRANT SELECT, INSERT, DELETE ON facts TO agent_memory_app;
GRANT UPDATE (status, valid_to, superseded_at, close_reason, evidence_message_ids) ON facts TO agent_memory_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON episodes, memory_vectors, projection_outbox, operations,
    subject_keys, erasure_requests TO agent_memory_app;
GRANT SELECT, INSERT ON tombstones TO agent_memory_app;
