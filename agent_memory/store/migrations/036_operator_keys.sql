-- Operator keys: the key of the operator-facing surfaces of `agent-memory serve` (the Temporal
-- UI's codec endpoint, the console), which read across tenants. Such a key names no tenant; it
-- grants nothing the app role does not already have (the app role may open any tenant's
-- transaction), so the app role verifies and creates them. Only a SHA-256 of the secret is stored.
CREATE TABLE public.operator_keys (
    key_id        text        PRIMARY KEY,
    secret_sha256 text        NOT NULL,
    name          text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz
);
GRANT SELECT, INSERT ON public.operator_keys TO agent_memory_app;
GRANT UPDATE (last_used_at, revoked_at) ON public.operator_keys TO agent_memory_app;
