-- Every destructive or irreversible run consumes its authorization once. An operator request
-- records which caller registered it (registered_by: the operator's key or account) and when it
-- expires unclaimed; the first run that acts on it claims it (claimed_by_run_id, claimed_at) and
-- any other run is refused, under the same workflow id or not. The claim is one atomic UPDATE
-- (agent_memory/security/operator_requests.py); a retried activity of the claiming run passes.
-- shown_workflow_id is what `agent-memory authorizations` lists (a subject appears by its keyed
-- digest only, as everywhere an erasure may outlive it); run_tenant, the tenant a rebuild,
-- re-derivation or re-embedding names, counts its refused runs in that tenant's stats (the table
-- stays cross-tenant, an operator's, without row-level security). Re-embedding is a registered kind too.
-- Registrations made before this migration are treated as expired once their TTL has passed.
ALTER TABLE public.operator_requests
    ADD COLUMN registered_by     text,
    ADD COLUMN shown_workflow_id text,
    ADD COLUMN run_tenant        text,
    ADD COLUMN expires_at        timestamptz,
    ADD COLUMN claimed_by_run_id text,
    ADD COLUMN claimed_at        timestamptz,
    ADD COLUMN refused_runs      integer NOT NULL DEFAULT 0,
    ADD COLUMN last_refused_at   timestamptz;
UPDATE public.operator_requests SET expires_at = requested_at + interval '15 minutes';
ALTER TABLE public.operator_requests ALTER COLUMN expires_at SET NOT NULL;
ALTER TABLE public.operator_requests DROP CONSTRAINT operator_requests_kind_check;
ALTER TABLE public.operator_requests ADD CONSTRAINT operator_requests_kind_check
    CHECK (kind IN ('key-rotation', 'compaction', 'memory-sweep', 'rebuild', 'rederive', 'reembedding'));
ALTER TABLE public.operator_requests ADD CONSTRAINT operator_requests_claim_check
    CHECK ((claimed_by_run_id IS NULL) = (claimed_at IS NULL));
CREATE INDEX operator_requests_requested_at ON public.operator_requests (requested_at DESC);
-- A new registration of the same run name (a re-run of a request id, a model changed back)
-- renews the row; the runtime role updates only what a registration, a claim and a refusal write.
GRANT UPDATE (registered_by, shown_workflow_id, run_tenant, requested_at, expires_at, claimed_by_run_id, claimed_at,
              refused_runs, last_refused_at) ON public.operator_requests TO agent_memory_app;

-- An erasure request is claimed the same way by the run that begins it: once the erasure is
-- completed, no other run of its workflow id acts on it (a started one may be re-driven). The
-- runtime role already updates erasure requests (migration 001).
ALTER TABLE public.erasure_requests
    ADD COLUMN claimed_by_run_id text,
    ADD COLUMN claimed_at        timestamptz;
