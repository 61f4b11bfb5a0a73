-- The idle-timer sweep (agent_memory/idle_timers.py, a Schedule every 10 minutes) starts the idle
-- timer of every session with messages no consolidation has covered, idle longer than the idle
-- timeout, whose timer is not running (its signal failed during a Temporal outage, say). Row
-- security scopes each transaction to one tenant, so the sweep lists the tenants from a table of
-- tenant ids only, filled by a statement trigger on messages, as projection_tenants (009) is for
-- the outbox: a tenant-scoped transaction sees (and may add) its own id only; a transaction with
-- no tenant set (the sweep's listing) sees them all.
CREATE TABLE public.message_tenants (
    tenant_id     text        PRIMARY KEY,
    first_seen_at timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT ON public.message_tenants TO agent_memory_app;

CREATE FUNCTION public.messages_note_tenants() RETURNS trigger
    LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO public.message_tenants (tenant_id)
    SELECT DISTINCT n.tenant_id FROM new_rows n
     WHERE NOT EXISTS (SELECT 1 FROM public.message_tenants t WHERE t.tenant_id = n.tenant_id)
    ON CONFLICT (tenant_id) DO NOTHING;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.messages_note_tenants() FROM PUBLIC;
CREATE TRIGGER messages_note_tenants AFTER INSERT ON public.messages
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.messages_note_tenants();

-- Backfill from the messages already there: row security is lifted for this transaction only.
ALTER TABLE public.messages NO FORCE ROW LEVEL SECURITY;
INSERT INTO public.message_tenants (tenant_id)
SELECT DISTINCT tenant_id FROM public.messages ON CONFLICT (tenant_id) DO NOTHING;
ALTER TABLE public.messages FORCE ROW LEVEL SECURITY;

ALTER TABLE public.message_tenants ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.message_tenants FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.message_tenants
    USING (tenant_id = current_setting('app.tenant_id', true)
           OR coalesce(current_setting('app.tenant_id', true), '') = '')
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

-- The sweep reads a tenant's recent messages only (its lookback window).
CREATE INDEX messages_recorded ON public.messages (tenant_id, recorded_at);
