-- A maintenance run that does more than its Schedule would — a key rotation with nothing shredded,
-- a compaction of every table, a memory sweep with its own grace period, a forced rebuild — acts
-- only when an operator's client registered it here before starting it. A row names its run by a
-- keyed digest of kind and workflow id (a rebuild's id names its tenant and subject), nothing in
-- clear. Runs a Schedule starts with its own input need no row.
CREATE TABLE public.operator_requests (
    run_digest    text        PRIMARY KEY,
    kind          text        NOT NULL CHECK (kind IN ('key-rotation', 'compaction', 'memory-sweep', 'rebuild')),
    requested_at  timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT ON public.operator_requests TO agent_memory_app;
