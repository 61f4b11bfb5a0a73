-- memory_vectors re-partitioned from 64 hash partitions (migration 029) into 256.
--
-- A large subject's filtered HNSW scan visits, and its filter drops, the vectors of the other
-- subjects that share its partition's graph and lie near the query. Measured on a 1M-row store
-- with a 50k-memory subject (bench recall, docs/performance.md): with 64 partitions five other subjects' 25,000
-- vectors shared its graph and context p99 was 42.8-48.0 ms in a quiet hour; with 256 the
-- subject had its graph to itself and p99 was 31.8-40.5 ms. A query not narrowed to one subject opens every partition (and its indexes): the
-- application's queries on memory_vectors name the subject, except re-embedding's tenant-wide
-- reads, and the servers run with max_locks_per_transaction = 256 so such a query's locks fit.
--
-- Same table, keys, indexes, policies and grants as migration 029; the partitions are named
-- agent_memory_partitions.memory_vectors_p000 .. _p255. The rows are copied before the indexes are
-- built: on a large store this takes minutes, with memory_vectors locked until it commits.
ALTER TABLE public.memory_vectors RENAME TO memory_vectors_64;
ALTER INDEX public.memory_vectors_pkey RENAME TO memory_vectors_64_pkey;
ALTER INDEX public.memory_vectors_hnsw_384 RENAME TO memory_vectors_64_hnsw_384;
ALTER INDEX public.memory_vectors_model RENAME TO memory_vectors_64_model;
ALTER INDEX public.memory_vectors_subject_model RENAME TO memory_vectors_64_subject_model;
-- The old partitions' names are the new ones': moved aside (their indexes go with them below).
DO $$
BEGIN
    FOR r IN 0..63 LOOP
        EXECUTE format('ALTER TABLE agent_memory_partitions.%I RENAME TO %I',
                       format('memory_vectors_p%s', lpad(r::text, 2, '0')),
                       format('memory_vectors_64_p%s', lpad(r::text, 2, '0')));
    END LOOP;
END
$$;

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
    FOR r IN 0..255 LOOP
        EXECUTE format('CREATE TABLE agent_memory_partitions.%I PARTITION OF public.memory_vectors '
                       'FOR VALUES WITH (MODULUS 256, REMAINDER %s)', format('memory_vectors_p%s', lpad(r::text, 3, '0')), r);
    END LOOP;
END
$$;

INSERT INTO public.memory_vectors (tenant_id, subject_id, memory_id, memory_kind, version, model, embedding, created_at)
SELECT tenant_id, subject_id, memory_id, memory_kind, version, model, embedding, created_at
  FROM public.memory_vectors_64;
DROP TABLE public.memory_vectors_64;

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
        EXECUTE format('GRANT MAINTAIN ON %s TO agent_memory_maintainer', t);
    END LOOP;
END
$$;
GRANT SELECT, INSERT, UPDATE, DELETE ON public.memory_vectors TO agent_memory_app;
-- The new partitions' row counts, which the route choice reads (vector_search.PARTITION_SIZE_SQL),
-- and the planner's statistics, now rather than when autovacuum gets to 256 tables (8 s at 1M rows).
ANALYZE public.memory_vectors;

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
        IF i.name <> i.wanted THEN
            EXECUTE format('ALTER INDEX %s RENAME TO %I', i.child::regclass, i.wanted);
        END IF;
    END LOOP;
END
$$;
