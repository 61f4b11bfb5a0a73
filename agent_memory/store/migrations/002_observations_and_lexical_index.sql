-- Observations (one compact note per informative message) and the lexical index projection,
-- which recall fuses with the vector index. Both are projections of the event log.

CREATE TABLE observations (
    memory_id           uuid        PRIMARY KEY,
    tenant_id           text        NOT NULL,
    subject_id          text        NOT NULL,
    session_id          text        NOT NULL,
    message_id          text        NOT NULL,
    version             integer     NOT NULL DEFAULT 1,
    text                text        NOT NULL,
    happened_at         timestamptz NOT NULL,
    source_message_ids  text[]      NOT NULL,
    operation_id        text        NOT NULL,
    recorded_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, session_id, message_id)
);
CREATE INDEX observations_subject ON observations (tenant_id, subject_id, happened_at);

-- search_text is the item's text plus CJK bigrams (Postgres' parsers do not segment Chinese).
CREATE TABLE memory_search (
    tenant_id           text        NOT NULL,
    subject_id          text        NOT NULL,
    memory_id           uuid        NOT NULL,
    memory_kind         text        NOT NULL CHECK (memory_kind IN ('fact', 'episode', 'observation')),
    version             integer     NOT NULL,
    search_text         text        NOT NULL,
    tsv                 tsvector    GENERATED ALWAYS AS (to_tsvector('english', search_text)) STORED,
    term_count          integer     NOT NULL,
    happened_at         timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, memory_id, version)
);
CREATE INDEX memory_search_tsv ON memory_search USING gin (tsv);
CREATE INDEX memory_search_subject ON memory_search (tenant_id, subject_id);

ALTER TABLE memory_vectors DROP CONSTRAINT memory_vectors_memory_kind_check;
ALTER TABLE memory_vectors ADD CONSTRAINT memory_vectors_memory_kind_check
    CHECK (memory_kind IN ('fact', 'episode', 'observation'));

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['observations', 'memory_search']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY tenant_isolation ON %I USING (tenant_id = current_setting(''app.tenant_id'', true)) '
            'WITH CHECK (tenant_id = current_setting(''app.tenant_id'', true))', t);
    END LOOP;
END
$$;

GRANT SELECT, INSERT, DELETE ON observations, memory_search TO agent_memory_app;
