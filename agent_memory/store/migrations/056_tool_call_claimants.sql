-- Whose a tool call is (agent_memory/memory/tool_calls.py): the identity of the API key that
-- claimed it, `claimed_as` — the agent and app the key is limited to ('agent:<id>', 'app:<id>',
-- or 'agent:<id>/app:<id>'), or 'tenant' for a key limited to neither. Its record and result
-- answer keys of that identity only; to any other key of the tenant the call does not exist. A
-- call claimed in process, through the library with no key, has none.
ALTER TABLE public.tool_calls ADD COLUMN claimed_as text;

-- A call claimed already names its key in claimed_by ('api-key:<id>' over HTTP, 'mcp:<id>' over
-- MCP): the identity comes from that key.
ALTER TABLE public.tool_calls NO FORCE ROW LEVEL SECURITY;
ALTER TABLE public.api_keys NO FORCE ROW LEVEL SECURITY;
UPDATE public.tool_calls t
   SET claimed_as = CASE
           WHEN k.agent_id IS NOT NULL AND k.app_id IS NOT NULL THEN 'agent:' || k.agent_id || '/app:' || k.app_id
           WHEN k.agent_id IS NOT NULL THEN 'agent:' || k.agent_id
           WHEN k.app_id IS NOT NULL THEN 'app:' || k.app_id
           ELSE 'tenant'
       END
  FROM public.api_keys k
 WHERE k.tenant_id = t.tenant_id AND t.claimed_by IN ('api-key:' || k.key_id, 'mcp:' || k.key_id);
ALTER TABLE public.tool_calls FORCE ROW LEVEL SECURITY;
ALTER TABLE public.api_keys FORCE ROW LEVEL SECURITY;
