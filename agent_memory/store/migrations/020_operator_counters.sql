-- Operator counters of a tenant (agent_memory/counters.py): memory reads and the items they
-- served, leak-filter drops by reason. They were Redis hashes and did not survive a restart of
-- an embedded stack without persistence; here they are durable and under row-level security.
-- No subject data: a counter name and a number. Each counter is spread over a few shard rows so
-- that concurrent reads of one tenant do not queue on one row lock; readers sum the shards.
CREATE TABLE public.operator_counters (
    tenant_id   text        NOT NULL,
    counter     text        NOT NULL,
    shard       smallint    NOT NULL CHECK (shard BETWEEN 0 AND 15),
    count       bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, counter, shard)
);
ALTER TABLE public.operator_counters ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.operator_counters FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.operator_counters
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
GRANT SELECT, INSERT, UPDATE ON public.operator_counters TO agent_memory_app;
