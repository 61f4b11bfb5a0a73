-- A tenant's provider data policy (agent_memory/provider_policy.py): which identifier kinds are
-- replaced by placeholders before a call to a remote model, and which namespaces' current facts
-- are never sent. Configuration, no subject data. A tenant without a row redacts every kind.
CREATE TABLE public.provider_policies (
    tenant_id   text        PRIMARY KEY,
    policy      jsonb       NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE public.provider_policies ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.provider_policies FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.provider_policies
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON public.provider_policies TO agent_memory_app;
