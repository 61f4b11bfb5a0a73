-- Session ids are scoped per subject: two people of one tenant may each have a session "s1".
-- A session is (tenant, subject, session id) everywhere: its messages, its episode, its notes, the
-- consolidation's recorded operations and workflow ids (agent_memory/contract.py). Existing rows
-- keep their ids: a session id was unique per tenant until now, so (tenant, subject, session) is
-- unique for every stored row and nothing is rewritten.
ALTER TABLE public.messages DROP CONSTRAINT messages_tenant_id_session_id_fkey;
ALTER TABLE public.messages DROP CONSTRAINT messages_pkey;
ALTER TABLE public.sessions DROP CONSTRAINT sessions_pkey;
ALTER TABLE public.sessions ADD CONSTRAINT sessions_pkey PRIMARY KEY (tenant_id, subject_id, session_id);
ALTER TABLE public.messages ADD CONSTRAINT messages_pkey PRIMARY KEY (tenant_id, subject_id, session_id, message_id);
ALTER TABLE public.messages ADD CONSTRAINT messages_session_fkey FOREIGN KEY (tenant_id, subject_id, session_id)
    REFERENCES public.sessions (tenant_id, subject_id, session_id);
-- The primary keys lead with (tenant, subject): the old per-subject indexes are redundant. The
-- leak filter and the evidence checks look messages up by id within a subject.
DROP INDEX public.sessions_subject;
DROP INDEX public.messages_subject;
CREATE INDEX messages_subject_message ON public.messages (tenant_id, subject_id, message_id);

ALTER TABLE public.episodes DROP CONSTRAINT episodes_tenant_id_session_id_key;
ALTER TABLE public.episodes ADD CONSTRAINT episodes_session_key UNIQUE (tenant_id, subject_id, session_id);
ALTER TABLE public.observations DROP CONSTRAINT observations_tenant_id_session_id_message_id_key;
ALTER TABLE public.observations ADD CONSTRAINT observations_message_key
    UNIQUE (tenant_id, subject_id, session_id, message_id);

-- A session's successful commits, for the unconsolidated-messages check of the session-end hook
-- and the idle timer: an index lookup instead of a scan of the tenant's operations.
CREATE INDEX operations_session_commits ON public.operations (tenant_id, subject_id, session_id)
    WHERE kind = 'commit' AND status = 'succeeded';
