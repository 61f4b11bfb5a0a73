-- Retention per memory type (agent_memory/retention.py): one policy per tenant, configuration
-- only (no subject data), under row-level security like every tenant table. No row: defaults.
CREATE TABLE public.retention_policies (
    tenant_id   text        PRIMARY KEY,
    policy      jsonb       NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE public.retention_policies ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.retention_policies FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.retention_policies
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON public.retention_policies TO agent_memory_app;

-- Erasures stuck in 'started' (a workflow terminated by hand, failed on a bug, or lost with its
-- Temporal namespace) are re-driven by a Schedule (agent_memory/erasure_redrive.py): how often,
-- when last, and what it found the last time (ids and a short reason, no subject data).
ALTER TABLE public.erasure_requests
    ADD COLUMN redrive_count    integer NOT NULL DEFAULT 0,
    ADD COLUMN last_redriven_at timestamptz,
    ADD COLUMN redrive_note     text;
CREATE INDEX erasure_requests_started ON public.erasure_requests (tenant_id, requested_at)
    WHERE status = 'started';

-- The re-drive lists tenants from projection_tenants (migration 009: the one table a transaction
-- with no tenant set may list). A tenant whose only rows are an erasure request (a subject
-- erased before any memory was made) must be listed too: erasure requests note their tenant
-- there as outbox rows do, and the requests already made are backfilled.
CREATE TRIGGER erasure_requests_note_tenants AFTER INSERT ON public.erasure_requests
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.projection_outbox_note_tenants();
ALTER TABLE public.erasure_requests NO FORCE ROW LEVEL SECURITY;
ALTER TABLE public.projection_tenants NO FORCE ROW LEVEL SECURITY;
INSERT INTO public.projection_tenants (tenant_id)
SELECT DISTINCT tenant_id FROM public.erasure_requests ON CONFLICT (tenant_id) DO NOTHING;
ALTER TABLE public.projection_tenants FORCE ROW LEVEL SECURITY;
ALTER TABLE public.erasure_requests FORCE ROW LEVEL SECURITY;
