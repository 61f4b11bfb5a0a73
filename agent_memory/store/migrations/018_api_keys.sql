-- API keys of the HTTP API (agent_memory/api_keys.py). A key names its tenant, so the lookup runs
-- in that tenant's transaction under row-level security like every read; only a SHA-256 of the
-- key's secret is stored (the secret is 32 random bytes: no slow hash is needed).
CREATE TABLE public.api_keys (
    tenant_id     text        NOT NULL,
    key_id        text        NOT NULL,
    secret_sha256 text        NOT NULL,
    scope         text        NOT NULL CHECK (scope IN ('read', 'write', 'erase')),
    name          text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz,
    PRIMARY KEY (tenant_id, key_id)
);
ALTER TABLE public.api_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.api_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.api_keys
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
GRANT SELECT, INSERT ON public.api_keys TO agent_memory_app;
GRANT UPDATE (last_used_at, revoked_at) ON public.api_keys TO agent_memory_app;
