-- The tenants registry: every tenant that ever wrote anything — messages, memory events (a
-- consolidation's or a direct write's), an erasure request, an API key, a policy or a consent —
-- noted at that first write by statement triggers. The Schedules (projection, retention, idle
-- timers, erasure re-drive, re-embedding) and the console list tenants from here, so a tenant
-- whose data never reached the outbox is still swept. Row security scopes each transaction to one
-- tenant, so this table holds tenant ids only: a tenant-scoped transaction sees (and may add) its
-- own id; a transaction with no tenant set (a Schedule's listing) sees them all. It replaces the
-- two narrower lists kept before (tenants with outbox rows; tenants with messages).
CREATE TABLE public.tenants (
    tenant_id      text        PRIMARY KEY,
    first_write_at timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT ON public.tenants TO agent_memory_app;

-- SECURITY INVOKER: the trigger runs with the inserting role's rights and under its tenant scope.
CREATE FUNCTION public.note_tenants() RETURNS trigger
    LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO public.tenants (tenant_id)
    SELECT DISTINCT n.tenant_id FROM new_rows n
     WHERE NOT EXISTS (SELECT 1 FROM public.tenants t WHERE t.tenant_id = n.tenant_id)
    ON CONFLICT (tenant_id) DO NOTHING;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.note_tenants() FROM PUBLIC;

-- The tables a tenant's first write lands in; everything else derives from these.
DO $$
DECLARE
    tbl text;
BEGIN
    FOREACH tbl IN ARRAY ARRAY['messages', 'memory_events', 'erasure_requests', 'api_keys', 'consents',
                               'recall_policies', 'retention_policies', 'write_policies',
                               'provider_policies', 'embedding_models']
    LOOP
        EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON public.%I REFERENCING NEW TABLE AS new_rows '
                       'FOR EACH STATEMENT EXECUTE FUNCTION public.note_tenants()', tbl || '_registers_tenant', tbl);
        -- Backfill from the rows already there: row security is lifted for this transaction only.
        EXECUTE format('ALTER TABLE public.%I NO FORCE ROW LEVEL SECURITY', tbl);
        EXECUTE format('INSERT INTO public.tenants (tenant_id) SELECT DISTINCT tenant_id FROM public.%I '
                       'ON CONFLICT (tenant_id) DO NOTHING', tbl);
        EXECUTE format('ALTER TABLE public.%I FORCE ROW LEVEL SECURITY', tbl);
    END LOOP;
END
$$;

-- The two narrower lists, folded in and dropped with their triggers.
ALTER TABLE public.projection_tenants NO FORCE ROW LEVEL SECURITY;
ALTER TABLE public.message_tenants NO FORCE ROW LEVEL SECURITY;
INSERT INTO public.tenants (tenant_id, first_write_at)
SELECT tenant_id, min(first_seen_at)
  FROM (SELECT tenant_id, first_seen_at FROM public.projection_tenants
        UNION ALL SELECT tenant_id, first_seen_at FROM public.message_tenants) seen
 GROUP BY tenant_id
ON CONFLICT (tenant_id) DO UPDATE SET first_write_at = least(public.tenants.first_write_at, EXCLUDED.first_write_at);
DROP TRIGGER projection_outbox_note_tenants ON public.projection_outbox;
DROP TRIGGER erasure_requests_note_tenants ON public.erasure_requests;
DROP TRIGGER messages_note_tenants ON public.messages;
DROP FUNCTION public.projection_outbox_note_tenants();
DROP FUNCTION public.messages_note_tenants();
DROP TABLE public.projection_tenants;
DROP TABLE public.message_tenants;

ALTER TABLE public.tenants ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.tenants FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.tenants
    USING (tenant_id = current_setting('app.tenant_id', true)
           OR coalesce(current_setting('app.tenant_id', true), '') = '')
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
