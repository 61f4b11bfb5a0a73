-- The vector projection is its own durable flow (workflows/projector.py): outbox rows carry their
-- retry state. A row is
--   pending        processed_at IS NULL AND dead_lettered_at IS NULL (due once next_attempt_at <= now())
--   projected      processed_at IS NOT NULL
--   dead letter    dead_lettered_at IS NOT NULL (a permanent provider failure, or max attempts reached)
-- last_error is short and content-free: an error type and an HTTP status, never provider text.
-- Writers that name only (tenant_id, subject_id, memory_id, memory_kind, version, operation_id
-- [, processed_at]) get a row that is due at once.
ALTER TABLE public.projection_outbox
    ADD COLUMN attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    ADD COLUMN next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN last_error       text        CHECK (char_length(last_error) <= 200),
    ADD COLUMN dead_lettered_at timestamptz;

-- Pending rows by due time, per tenant (the sweep, the projector's "what is due" and its timer).
CREATE INDEX projection_outbox_due ON public.projection_outbox (tenant_id, next_attempt_at, subject_id)
    WHERE processed_at IS NULL AND dead_lettered_at IS NULL;
CREATE INDEX projection_outbox_dead ON public.projection_outbox (tenant_id, subject_id)
    WHERE dead_lettered_at IS NOT NULL;

-- The hourly sweep wakes the projector of every subject with due rows, in every tenant. Row
-- security scopes each transaction to one tenant, so the sweep lists the tenants from a table of
-- tenant ids only, filled by a statement trigger on the outbox (no SECURITY DEFINER: it runs
-- with the inserting role's rights). Its own policy: a tenant-scoped transaction sees (and may
-- add) its own tenant's id only, like every other table; only a transaction with no tenant set
-- (the sweep's listing) sees them all. After a tenant-scoped transaction on the same connection
-- the setting reads '' rather than NULL, hence the coalesce.
CREATE TABLE public.projection_tenants (
    tenant_id     text        PRIMARY KEY,
    first_seen_at timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT ON public.projection_tenants TO agent_memory_app;

CREATE FUNCTION public.projection_outbox_note_tenants() RETURNS trigger
    LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO public.projection_tenants (tenant_id)
    SELECT DISTINCT n.tenant_id FROM new_rows n
     WHERE NOT EXISTS (SELECT 1 FROM public.projection_tenants t WHERE t.tenant_id = n.tenant_id)
    ON CONFLICT (tenant_id) DO NOTHING;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION public.projection_outbox_note_tenants() FROM PUBLIC;
CREATE TRIGGER projection_outbox_note_tenants AFTER INSERT ON public.projection_outbox
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.projection_outbox_note_tenants();

-- Backfill from the rows already there: row security is lifted for this transaction only (an
-- owner that is not a superuser is otherwise bound by the forced policies), as in 008.
ALTER TABLE public.projection_outbox NO FORCE ROW LEVEL SECURITY;
INSERT INTO public.projection_tenants (tenant_id)
SELECT DISTINCT tenant_id FROM public.projection_outbox ON CONFLICT (tenant_id) DO NOTHING;
ALTER TABLE public.projection_outbox FORCE ROW LEVEL SECURITY;

ALTER TABLE public.projection_tenants ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.projection_tenants FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.projection_tenants
    USING (tenant_id = current_setting('app.tenant_id', true)
           OR coalesce(current_setting('app.tenant_id', true), '') = '')
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

-- 001 granted the app role UPDATE on the whole table; restated for the new columns' sake.
GRANT SELECT, INSERT, UPDATE, DELETE ON public.projection_outbox TO agent_memory_app;
