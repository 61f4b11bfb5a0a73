-- A tenant's recall policy (agent_memory/recall_policy.py): time decay, importance weight, recall
-- window and tier budgets. Configuration, not subject data: one row per tenant, under row-level
-- security like every tenant table. No row: the shipped default policy.
CREATE TABLE public.recall_policies (
    tenant_id   text        PRIMARY KEY,
    policy      jsonb       NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE public.recall_policies ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.recall_policies FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.recall_policies
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON public.recall_policies TO agent_memory_app;
