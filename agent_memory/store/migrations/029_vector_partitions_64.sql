-- memory_vectors re-partitioned from 16 hash partitions (migration 027) into 64.
--
-- A filtered HNSW scan of a large subject visits the vectors of the other subjects that share
-- its partition's graph and lie near the query; the filter then drops them. Measured on a
-- 1M-row store with a 50k-memory subject (agent_memory/vector_search.py): the slowest queries were
-- those whose neighbourhood other subjects crowded (about 1,600 vectors dropped per query against
-- about 200 for the rest, 35-45 ms against 13 ms). With 64 partitions the subject shares its
-- graph with a quarter as many other vectors. Small subjects keep their exact scan; the bound
-- between the two (vector_search.exact_scan_limit) reads the partition's size from reltuples, so
-- it follows the smaller partitions by itself.
--
-- Same table, keys, indexes, policies and grants as migration 027; the partitions keep its
-- names (agent_memory_partitions.memory_vectors_p00 .. _p63). The rows are copied before the
-- indexes are built: on a large store this takes minutes.
ALTER TABLE public.memory_vectors RENAME TO memory_vectors_16;
ALTER INDEX public.memory_vectors_pkey RENAME TO memory_vectors_16_pkey;
ALTER INDEX public.memory_vectors_hnsw_384 RENAME TO memory_vectors_16_hnsw_384;
ALTER INDEX public.memory_vectors_model RENAME TO memory_vectors_16_model;
ALTER INDEX public.memory_vectors_subject_model RENAME TO memory_vectors_16_subject_model;
-- The old partitions' names are the new ones': moved aside (their indexes go with them below).
DO $$
BEGIN
    FOR r IN 0..15 LOOP
        EXECUTE format('ALTER TABLE agent_memory_partitions.%I RENAME TO %I',
                       format('memory_vectors_p%s', lpad(r::text, 2, '0')),
                       format('memory_vectors_16_p%s', lpad(r::text, 2, '0')));
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
    FOR r IN 0..63 LOOP
        EXECUTE format('CREATE TABLE agent_memory_partitions.%I PARTITION OF public.memory_vectors '
                       'FOR VALUES WITH (MODULUS 64, REMAINDER %s)', format('memory_vectors_p%s', lpad(r::text, 2, '0')), r);
    END LOOP;
END
$$;

INSERT INTO public.memory_vectors (tenant_id, subject_id, memory_id, memory_kind, version, model, embedding, created_at)
SELECT tenant_id, subject_id, memory_id, memory_kind, version, model, embedding, created_at
  FROM public.memory_vectors_16;
DROP TABLE public.memory_vectors_16;

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
