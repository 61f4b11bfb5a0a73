-- memory_vectors hash-partitioned by (tenant, subject) into 16 partitions, each with its own HNSW
-- graph (agent_memory/vector_search.py).
--
-- A filtered HNSW scan visits about limit x N / n vectors to find `limit` of a subject's n among
-- the graph's N. In one graph over a whole store, a large subject beside many others costs more
-- than an exact scan (50k vectors of one subject beside 950k others: 95 ms, recall@150 0.87,
-- against 50 ms exact), so it was scanned exactly. A subject's vectors now all sit in one
-- partition holding about 1/16 of the store: its share of that graph is 16 times larger, and
-- the filtered scan is cheap again. Small subjects keep their exact scan, now within one
-- partition.
--
-- A unique key of a partitioned table must contain the partition key: the primary key gains
-- subject_id, last, so lookups by (tenant, memory) still use it. A memory never changes subject,
-- so (tenant, memory, version, model) stays unique.
--
-- The partitions live in their own schema, which the application role cannot use: it reads and
-- writes through public.memory_vectors only, under its row-level security. Each partition also
-- forces the same policy, in case a privilege is ever granted on one.
--
-- The rows are copied before the indexes are built (a graph built over the loaded rows is much
-- faster than one insert per row): on a large store this migration takes minutes.
CREATE SCHEMA agent_memory_partitions;
REVOKE ALL ON SCHEMA agent_memory_partitions FROM PUBLIC;
-- Compaction clears each partition's statistics by name (agent_memory/compaction.py).
GRANT USAGE ON SCHEMA agent_memory_partitions TO agent_memory_maintainer;

ALTER TABLE public.memory_vectors RENAME TO memory_vectors_unpartitioned;
ALTER INDEX public.memory_vectors_pkey RENAME TO memory_vectors_unpartitioned_pkey;
ALTER INDEX public.memory_vectors_hnsw_384 RENAME TO memory_vectors_unpartitioned_hnsw_384;
ALTER INDEX public.memory_vectors_model RENAME TO memory_vectors_unpartitioned_model;
ALTER INDEX public.memory_vectors_subject_model RENAME TO memory_vectors_unpartitioned_subject_model;

CREATE TABLE public.memory_vectors (
    tenant_id    text        NOT NULL,
    subject_id   text        NOT NULL,
    memory_id    uuid        NOT NULL,
    memory_kind  text        NOT NULL CONSTRAINT memory_vectors_memory_kind_check
                                 CHECK (memory_kind IN ('fact', 'episode', 'observation')),
    version      integer     NOT NULL,
    model        text        NOT NULL,
    embedding    vector      NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
) PARTITION BY HASH (tenant_id, subject_id);

DO $$
BEGIN
    FOR r IN 0..15 LOOP
        EXECUTE format('CREATE TABLE agent_memory_partitions.%I PARTITION OF public.memory_vectors '
                       'FOR VALUES WITH (MODULUS 16, REMAINDER %s)', format('memory_vectors_p%s', lpad(r::text, 2, '0')), r);
    END LOOP;
END
$$;

INSERT INTO public.memory_vectors (tenant_id, subject_id, memory_id, memory_kind, version, model, embedding, created_at)
SELECT tenant_id, subject_id, memory_id, memory_kind, version, model, embedding, created_at
  FROM public.memory_vectors_unpartitioned;
DROP TABLE public.memory_vectors_unpartitioned;

ALTER TABLE public.memory_vectors ADD CONSTRAINT memory_vectors_pkey
    PRIMARY KEY (tenant_id, memory_id, version, model, subject_id);
CREATE INDEX memory_vectors_subject_model ON public.memory_vectors (tenant_id, subject_id, model, memory_kind);
CREATE INDEX memory_vectors_model ON public.memory_vectors (tenant_id, model, memory_id, version);
CREATE INDEX memory_vectors_hnsw_384 ON public.memory_vectors
    USING hnsw ((embedding::vector(384)) vector_cosine_ops) WHERE vector_dims(embedding) = 384;

DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT 'public.memory_vectors'::regclass
             UNION ALL
             SELECT inhrelid::regclass FROM pg_catalog.pg_inherits WHERE inhparent = 'public.memory_vectors'::regclass
    LOOP
        EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY tenant_isolation ON %s USING (tenant_id = current_setting(''app.tenant_id'', true)) '
            'WITH CHECK (tenant_id = current_setting(''app.tenant_id'', true))', t);
        -- Compaction (agent_memory/compaction.py) rewrites the parent's partitions: VACUUM checks
        -- the privilege on each one.
        EXECUTE format('GRANT MAINTAIN ON %s TO agent_memory_maintainer', t);
    END LOOP;
END
$$;
GRANT SELECT, INSERT, UPDATE, DELETE ON public.memory_vectors TO agent_memory_app;

-- Each partition's indexes named after the parent's (memory_vectors_p03_hnsw_384, ...), so that
-- plans read as the migrations name them.
DO $$
DECLARE
    i record;
BEGIN
    FOR i IN SELECT child.oid AS child, child.relname AS name,
                    part.relname || substr(parent.relname, length('memory_vectors') + 1) AS wanted
               FROM pg_catalog.pg_inherits h
               JOIN pg_catalog.pg_class parent ON parent.oid = h.inhparent
               JOIN pg_catalog.pg_class child ON child.oid = h.inhrelid
               JOIN pg_catalog.pg_index x ON x.indexrelid = child.oid
               JOIN pg_catalog.pg_class part ON part.oid = x.indrelid
              WHERE parent.relname LIKE 'memory\_vectors\_%' AND parent.relnamespace = 'public'::regnamespace
                AND parent.relkind = 'I'
    LOOP
        IF i.name <> i.wanted THEN  -- the primary key's are named so already
            EXECUTE format('ALTER INDEX %s RENAME TO %I', i.child::regclass, i.wanted);
        END IF;
    END LOOP;
END
$$;
