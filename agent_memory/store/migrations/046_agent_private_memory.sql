-- Memory private to an agent. A session whose messages are marked private belongs to their agent
-- (sessions.private_to, set by its first append and never changed); its messages, its episode and
-- its notes carry the agent in `private_to`. A transaction that names a reading agent
-- (app.agent_id, set by agent_memory/store/db.py for a key limited to an agent) sees the shared
-- rows and its own agent's private ones, never another agent's: the restrictive policies below, so
-- a query that forgets to filter cannot leak. A transaction naming no agent (the worker, a
-- tenant-wide key) sees every row of its tenant, as before. The session row itself carries no
-- content and stays visible, so an append can refuse to mix agents in one session.
-- Nullable columns without a default: no table is rewritten.
ALTER TABLE public.sessions ADD COLUMN private_to text;
ALTER TABLE public.messages ADD COLUMN private_to text;
ALTER TABLE public.episodes ADD COLUMN private_to text;
ALTER TABLE public.observations ADD COLUMN private_to text;
-- A key limited to one agent writes that agent's messages and reads as that agent; one limited to
-- an app writes that app's messages and reads the memories citing them.
ALTER TABLE public.api_keys ADD COLUMN agent_id text, ADD COLUMN app_id text;

DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['messages', 'episodes', 'observations'] LOOP
        EXECUTE format(
            'CREATE POLICY agent_private ON public.%I AS RESTRICTIVE FOR ALL TO agent_memory_app '
            'USING (private_to IS NULL OR coalesce(current_setting(''app.agent_id'', true), '''') IN ('''', private_to)) '
            'WITH CHECK (private_to IS NULL OR coalesce(current_setting(''app.agent_id'', true), '''') IN ('''', private_to))',
            t);
    END LOOP;
END $$;
