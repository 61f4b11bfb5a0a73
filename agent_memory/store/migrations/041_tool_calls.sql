-- Idempotent tool calls (agent_memory/memory/tool_calls.py): an agent claims a call key before a
-- side-effecting call and records the result after, so a retried call is made once. One row per
-- subject and call key: the holding attempt and its lease, a keyed digest of the request (never
-- the request), and the result encrypted under the subject's key. An erasure deletes the
-- subject's rows (store "operations"); the retention Schedule deletes rows past expires_at.
CREATE TABLE public.tool_calls (
    tenant_id         text        NOT NULL,
    subject_id        text        NOT NULL,
    call_key          text        NOT NULL,
    tool              text        NOT NULL,
    request_digest    text        NOT NULL,
    status            text        NOT NULL CHECK (status IN ('in_flight', 'completed', 'failed')),
    attempt           integer     NOT NULL CHECK (attempt > 0),
    result_ciphertext bytea,
    result_nonce      bytea,
    claimed_by        text,
    claimed_at        timestamptz NOT NULL DEFAULT now(),
    lease_expires_at  timestamptz NOT NULL,
    completed_at      timestamptz,
    expires_at        timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, subject_id, call_key)
);
CREATE INDEX tool_calls_expiry ON public.tool_calls (tenant_id, expires_at);

ALTER TABLE public.tool_calls ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.tool_calls FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.tool_calls
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON public.tool_calls TO agent_memory_app;

-- A tenant whose first write is a tool call is listed for the retention Schedule (migration 037).
CREATE TRIGGER tool_calls_registers_tenant AFTER INSERT ON public.tool_calls REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION public.note_tenants();

-- An erasure deletes from it: physical compaction rewrites it (migration 031).
INSERT INTO public.compaction_tables (table_name) VALUES ('tool_calls');
GRANT MAINTAIN ON public.tool_calls TO agent_memory_maintainer;
