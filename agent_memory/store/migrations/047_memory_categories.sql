-- A tenant's categories of memory (agent_memory/memory/categories.py): its own names for what its
-- memories are about, each defined by the words that mark it and the fact namespaces it takes in.
-- The filters of recall, the context, the facts listing and the export keep the memories of given
-- categories. Configuration, no subject data.
CREATE TABLE public.memory_categories (
    tenant_id   text        NOT NULL,
    name        text        NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
    description text        NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    words       text[]      NOT NULL DEFAULT '{}' CHECK (cardinality(words) <= 50),
    namespaces  text[]      NOT NULL DEFAULT '{}' CHECK (cardinality(namespaces) <= 50),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);
ALTER TABLE public.memory_categories ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.memory_categories FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.memory_categories
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON public.memory_categories TO agent_memory_app;

-- A tenant whose first write is a category is listed for the Schedules (migration 037).
CREATE TRIGGER memory_categories_registers_tenant AFTER INSERT ON public.memory_categories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.note_tenants();
