-- Who a message was exchanged with besides the subject: the agent, the app and the run (one
-- execution of an agent) it belongs to (agent_memory/core/models.py, Message.agent_id, app_id,
-- run_id). Recall, the context, the facts listing and the export keep, on request, only the
-- memories citing a message of a given scope. Evidence like the rest of the row: erased with the
-- subject's messages. Nullable columns without a default add no rewrite; the checks are NOT VALID
-- because every existing row holds NULL, which passes them.
ALTER TABLE public.messages ADD COLUMN agent_id text, ADD COLUMN app_id text, ADD COLUMN run_id text;
ALTER TABLE public.messages ADD CONSTRAINT messages_scope_identifiers CHECK (
    (agent_id IS NULL OR agent_id ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$')
    AND (app_id IS NULL OR app_id ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$')
    AND (run_id IS NULL OR run_id ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$')) NOT VALID;
