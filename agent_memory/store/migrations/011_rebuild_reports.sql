-- One report per subject per rebuild request: the rebuild workflow carries only counts and a
-- cursor across continue-as-new (its history stays small at any tenant size); what each subject
-- showed is read from here. An erased subject is reported under its keyed digest, and erasure
-- deletes a subject's reports (agent_memory/tables.py: store "operations").
CREATE TABLE public.rebuild_reports (
    tenant_id       text        NOT NULL,
    request_id      text        NOT NULL,
    subject_id      text        NOT NULL,
    equal           boolean     NOT NULL,
    repaired        boolean     NOT NULL,
    skipped_erased  boolean     NOT NULL,
    report          jsonb       NOT NULL,
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, request_id, subject_id)
);
CREATE INDEX rebuild_reports_subject ON public.rebuild_reports (tenant_id, subject_id);
ALTER TABLE public.rebuild_reports ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.rebuild_reports FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.rebuild_reports
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON public.rebuild_reports TO agent_memory_app;
GRANT MAINTAIN ON public.rebuild_reports TO agent_memory_maintainer;
