-- Projections that survive an embedding-model change (agent_memory/reembedding.py).
--
-- 1. The vector column no longer fixes 384 dimensions: a model of any width can be stored
--    beside another during a re-embedding. The approximate index becomes a partial expression
--    index per width (HNSW needs a fixed one); 384 is the shipped embedders' width.
DROP INDEX IF EXISTS public.memory_vectors_hnsw;
ALTER TABLE public.memory_vectors ALTER COLUMN embedding TYPE vector;
CREATE INDEX memory_vectors_hnsw_384 ON public.memory_vectors
    USING hnsw ((embedding::vector(384)) vector_cosine_ops) WHERE vector_dims(embedding) = 384;
-- The re-embedding pages through one model's vectors of a tenant.
CREATE INDEX memory_vectors_model ON public.memory_vectors (tenant_id, model, memory_id, version);

-- 2. Which model each tenant's recall reads (`active`), which one a re-embedding is filling
--    (`building`), and the retired ones. At most one active model per tenant. No row: recall
--    reads the configured embedder's vectors (as before this migration).
CREATE TABLE public.embedding_models (
    tenant_id    text        NOT NULL,
    model        text        NOT NULL,
    dimensions   integer     NOT NULL CHECK (dimensions > 0),
    state        text        NOT NULL CHECK (state IN ('active', 'building', 'retired')),
    started_at   timestamptz NOT NULL DEFAULT now(),
    switched_at  timestamptz,
    PRIMARY KEY (tenant_id, model)
);
CREATE UNIQUE INDEX embedding_models_one_active ON public.embedding_models (tenant_id) WHERE state = 'active';
ALTER TABLE public.embedding_models ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.embedding_models FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.embedding_models
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON public.embedding_models TO agent_memory_app;
