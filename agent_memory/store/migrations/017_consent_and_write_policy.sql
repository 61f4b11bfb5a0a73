-- Consent and authorization at write time (agent_memory/write_policy.py).
--
-- Who wrote an event and under which consent: `actor` (consolidation, user, agent, operator,
-- retention) and `actor_id` are there already; `consent_id` names the subject's consent a fact
-- of a consent-only namespace was stored under.
ALTER TABLE public.memory_events ADD COLUMN consent_id text;

-- A tenant's write policy: which namespaces may be stored at all, which only with the
-- subject's consent, which keys never change silently. Configuration, no subject data.
CREATE TABLE public.write_policies (
    tenant_id   text        PRIMARY KEY,
    policy      jsonb       NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- A subject's consent to storing a namespace (granted, and revoked when it was).
CREATE TABLE public.consents (
    tenant_id   text        NOT NULL,
    subject_id  text        NOT NULL,
    namespace   text        NOT NULL,
    consent_id  text        NOT NULL,
    granted_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz,
    PRIMARY KEY (tenant_id, subject_id, namespace)
);

-- What the write gate withheld, per tenant and reason (counters in Postgres: they survive a
-- restart). No subject data.
CREATE TABLE public.write_gate_counts (
    tenant_id   text        NOT NULL,
    reason      text        NOT NULL,
    count       bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, reason)
);

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['write_policies', 'consents', 'write_gate_counts']
    LOOP
        EXECUTE format('ALTER TABLE public.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE public.%I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY tenant_isolation ON public.%I USING (tenant_id = current_setting(''app.tenant_id'', true)) '
            'WITH CHECK (tenant_id = current_setting(''app.tenant_id'', true))', t);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON public.%I TO agent_memory_app', t);
    END LOOP;
END
$$;
GRANT MAINTAIN ON public.consents TO agent_memory_maintainer;
