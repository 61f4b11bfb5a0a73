-- A tenant's daily model-token budget (agent_memory/memory/token_budget.py): the input and output
-- tokens its recorded model calls may spend per UTC day before its consolidations park until the
-- next day or until the budget is raised. Configuration, no subject data. A tenant without a row
-- has the deployment's default (AGENT_MEMORY_DAILY_TOKEN_BUDGET); a row with a NULL budget is
-- unlimited whatever the default. The tokens spent are counted per day in operator_counters
-- (`model_tokens:YYYY-MM-DD`).
CREATE TABLE public.token_budgets (
    tenant_id     text        PRIMARY KEY,
    daily_tokens  bigint      CHECK (daily_tokens IS NULL OR daily_tokens > 0),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE public.token_budgets ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.token_budgets FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.token_budgets
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON public.token_budgets TO agent_memory_app;

-- A tenant whose first write is its budget is listed for the Schedules (migration 037).
CREATE TRIGGER token_budgets_registers_tenant AFTER INSERT ON public.token_budgets
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.note_tenants();
