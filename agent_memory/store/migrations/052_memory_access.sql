-- How often and how recently each memory (fact, episode, note) entered a context or a recall
-- result (agent_memory/store/access.py): usage telemetry for the recall score's access term, not
-- memory. It lives outside the event log, so a rebuild does not reproduce it; erasure deletes a
-- subject's rows (with its operations), forgetting and the sweep delete a memory's rows. Counts
-- are recorded in Redis off the read's latency and added here in batches by the API processes'
-- flusher. Times are of the first and the last recorded access.
CREATE TABLE public.memory_access (
    tenant_id          text        NOT NULL,
    subject_id         text        NOT NULL,
    memory_id          uuid        NOT NULL,
    access_count       bigint      NOT NULL CHECK (access_count > 0),
    first_accessed_at  timestamptz NOT NULL,
    last_accessed_at   timestamptz NOT NULL CHECK (last_accessed_at >= first_accessed_at),
    PRIMARY KEY (tenant_id, subject_id, memory_id)
);
ALTER TABLE public.memory_access ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.memory_access FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.memory_access
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON public.memory_access TO agent_memory_app;
