-- Webhooks (agent_memory/memory/webhooks.py): a tenant's endpoints, each subscribed to event types,
-- and one delivery row per endpoint and event. A delivery is written in the transaction of the
-- effect it reports (an outbox: no event is lost to a crash after the commit, none is written for
-- a rolled-back one) and delivered by WebhookDeliveryWorkflow (workflows/webhooks.py).
--
-- The signing secret is stored encrypted (AES-GCM under a key derived from the identifier key,
-- which lives with the keys, never in the database). A delivery's payload holds ids, counts and
-- event types only, never memory text or message content; the subject's deliveries are deleted by
-- its erasure (store "operations"); the memory sweep deletes delivered and dead ones after the
-- tenant's `webhook_delivery_days`.
CREATE TABLE public.webhook_endpoints (
    tenant_id         text        NOT NULL,
    endpoint_id       uuid        NOT NULL,
    url               text        NOT NULL,
    events            text[]      NOT NULL CHECK (cardinality(events) > 0),
    secret_ciphertext bytea       NOT NULL,
    secret_nonce      bytea       NOT NULL,
    enabled           boolean     NOT NULL DEFAULT true,
    created_at        timestamptz NOT NULL DEFAULT now(),
    disabled_at       timestamptz,
    PRIMARY KEY (tenant_id, endpoint_id)
);

CREATE TABLE public.webhook_deliveries (
    tenant_id        text        NOT NULL,
    delivery_id      uuid        NOT NULL,
    endpoint_id      uuid        NOT NULL,
    event_type       text        NOT NULL,
    event_id         uuid        NOT NULL,
    subject_id       text,
    payload          jsonb       NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
    status           text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'dead')),
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    redeliveries     integer     NOT NULL DEFAULT 0 CHECK (redeliveries >= 0),
    last_status_code integer,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    dispatched_at    timestamptz,
    delivered_at     timestamptz,
    dead_at          timestamptz,
    PRIMARY KEY (tenant_id, delivery_id),
    UNIQUE (tenant_id, endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_undispatched ON public.webhook_deliveries (tenant_id, created_at)
    WHERE status = 'pending' AND dispatched_at IS NULL;
CREATE INDEX webhook_deliveries_subject ON public.webhook_deliveries (tenant_id, subject_id);
CREATE INDEX webhook_deliveries_listing ON public.webhook_deliveries (tenant_id, status, created_at);

ALTER TABLE public.webhook_endpoints ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.webhook_endpoints FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.webhook_endpoints
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
GRANT SELECT, INSERT, UPDATE ON public.webhook_endpoints TO agent_memory_app;

ALTER TABLE public.webhook_deliveries ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.webhook_deliveries FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.webhook_deliveries
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON public.webhook_deliveries TO agent_memory_app;

-- A tenant whose first write is an endpoint is listed for the Schedules (migration 037).
CREATE TRIGGER webhook_endpoints_registers_tenant AFTER INSERT ON public.webhook_endpoints
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.note_tenants();
CREATE TRIGGER webhook_deliveries_registers_tenant AFTER INSERT ON public.webhook_deliveries
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.note_tenants();

-- An erasure deletes from it: physical compaction rewrites it (migration 031).
INSERT INTO public.compaction_tables (table_name) VALUES ('webhook_deliveries');
GRANT MAINTAIN ON public.webhook_deliveries TO agent_memory_maintainer;
