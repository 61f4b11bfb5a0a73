-- An erasure runs only for a request that an authorized caller registered here first (the CLI as
-- operator, an HTTP or MCP key with the erase scope). The registration stores a keyed digest over
-- tenant, subject, request id and the one workflow id allowed to act on it; the erasure's first
-- activity recomputes it for the run that executes it and refuses any other run. Temporal is an
-- orchestrator, not an authority: a start through a bare Temporal client finds no matching row.
-- Rows registered before the digest existed keep NULL and are honoured by tenant, request and
-- subject alone (an authorized caller registered each of them).
ALTER TABLE public.erasure_requests ADD COLUMN authorization_digest text;
