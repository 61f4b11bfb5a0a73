-- A re-derivation that writes (agent-memory rederive without --dry-run) changes stored memory
-- under the current extractor: like a forced rebuild, it acts only when an operator's client
-- registered it here before starting it (agent_memory/security/operator_requests.py). A dry run
-- writes no memory and needs no row.
ALTER TABLE public.operator_requests DROP CONSTRAINT operator_requests_kind_check;
ALTER TABLE public.operator_requests ADD CONSTRAINT operator_requests_kind_check
    CHECK (kind IN ('key-rotation', 'compaction', 'memory-sweep', 'rebuild', 'rederive'));
