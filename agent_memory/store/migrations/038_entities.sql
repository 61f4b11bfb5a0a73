-- Entities: the people, pets, places, organisations, events and things a subject's sessions
-- mention, with the other names the sessions use for them, linked to the messages that mention
-- them. Both are projections of the event log (EntityNoted events, agent_memory/memory/apply.py):
-- a rebuild reproduces them, an erasure deletes them with the subject, a forget removes one.
ALTER TABLE public.memory_events DROP CONSTRAINT memory_events_event_type_check;
ALTER TABLE public.memory_events ADD CONSTRAINT memory_events_event_type_check CHECK (event_type IN (
    'MemoryCreated', 'MemoryUpdated', 'MemoryClosed', 'MemoryDeleted',
    'FactCreated', 'FactSuperseded', 'FactConfirmed', 'CandidateHeld', 'CandidatePromoted',
    'EpisodeCreated', 'ObservationCreated', 'FactEnded', 'FactCorrected',
    'MemoryForgotten', 'MemoryRestored', 'EntityNoted'));

ALTER TABLE public.forgotten_memories DROP CONSTRAINT forgotten_memories_memory_kind_check;
ALTER TABLE public.forgotten_memories ADD CONSTRAINT forgotten_memories_memory_kind_check
    CHECK (memory_kind IN ('fact', 'episode', 'observation', 'entity'));

CREATE TABLE public.entities (
    memory_id       uuid        NOT NULL,
    tenant_id       text        NOT NULL,
    subject_id      text        NOT NULL,
    -- The version of the newest EntityNoted event: one per session that mentioned it.
    version         integer     NOT NULL CHECK (version > 0),
    name            text        NOT NULL,
    entity_type     text        NOT NULL
                    CHECK (entity_type IN ('person', 'pet', 'place', 'organisation', 'event', 'thing')),
    aliases         text[]      NOT NULL DEFAULT '{}',
    first_seen_at   timestamptz NOT NULL,
    last_seen_at    timestamptz NOT NULL,
    operation_id    text        NOT NULL,
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, memory_id)
);
CREATE INDEX entities_subject ON public.entities (tenant_id, subject_id);

-- One row per message that mentions an entity: which memories (notes, episodes, facts) speak of
-- it follows from the messages they cite.
CREATE TABLE public.entity_mentions (
    tenant_id       text        NOT NULL,
    subject_id      text        NOT NULL,
    memory_id       uuid        NOT NULL,
    message_id      text        NOT NULL,
    session_id      text        NOT NULL,
    -- The EntityNoted event that recorded the mention.
    version         integer     NOT NULL CHECK (version > 0),
    PRIMARY KEY (tenant_id, memory_id, message_id)
);
CREATE INDEX entity_mentions_message ON public.entity_mentions (tenant_id, subject_id, message_id);

ALTER TABLE public.entities ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.entities FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.entities
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
ALTER TABLE public.entity_mentions ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.entity_mentions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.entity_mentions
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

GRANT SELECT, INSERT, UPDATE, DELETE ON public.entities TO agent_memory_app;
GRANT SELECT, INSERT, DELETE ON public.entity_mentions TO agent_memory_app;
-- An erasure deletes from both: physical compaction rewrites them (migration 031).
INSERT INTO public.compaction_tables (table_name) VALUES ('entities'), ('entity_mentions');
GRANT MAINTAIN ON public.entities, public.entity_mentions TO agent_memory_maintainer;
