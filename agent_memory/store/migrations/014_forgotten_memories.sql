-- Forgetting one memory (agent_memory/forgetting.py, agent_memory/sweeper.py): an operator's
-- forget appends a MemoryForgotten event and removes the memory's projection rows at once; a
-- restore within the grace period re-applies its events and appends MemoryRestored; the hourly
-- sweeper removes a memory forgotten longer than the grace period from every store, its events
-- included, and keeps this table's row as the memory's tombstone (id and version, no content).
ALTER TABLE public.memory_events DROP CONSTRAINT memory_events_event_type_check;
ALTER TABLE public.memory_events ADD CONSTRAINT memory_events_event_type_check CHECK (event_type IN (
    'MemoryCreated', 'MemoryUpdated', 'MemoryClosed', 'MemoryDeleted',
    'FactCreated', 'FactSuperseded', 'FactConfirmed', 'CandidateHeld', 'CandidatePromoted',
    'EpisodeCreated', 'ObservationCreated', 'FactEnded', 'FactCorrected',
    'MemoryForgotten', 'MemoryRestored'));

-- Who wrote an event beyond its kind (`actor`: consolidation, user, agent, operator): the
-- operator's or agent's own id, when the caller names one. Not subject data.
ALTER TABLE public.memory_events ADD COLUMN actor_id text;

CREATE TABLE public.forgotten_memories (
    tenant_id       text        NOT NULL,
    subject_id      text        NOT NULL,
    memory_id       uuid        NOT NULL,
    memory_kind     text        NOT NULL CHECK (memory_kind IN ('fact', 'episode', 'observation')),
    -- The version of the MemoryForgotten event: a swept memory's next version (if its key is
    -- said again after the forget) follows it, and nothing at or below it is ever projected.
    version         integer     NOT NULL CHECK (version > 0),
    -- Sessions the memory's events came from: the sweeper deletes their recorded provider
    -- results (extraction, plan, summary), which hold the memory's text. Ids, no content.
    session_ids     text[]      NOT NULL DEFAULT '{}',
    forgotten_at    timestamptz NOT NULL,
    actor           text        NOT NULL CHECK (actor IN ('operator', 'user', 'agent', 'retention')),
    actor_id        text,
    state           text        NOT NULL CHECK (state IN ('forgotten', 'swept')),
    swept_at        timestamptz,
    -- Rows of the memory found by the residue check after its sweep (0 expected).
    residue         integer,
    PRIMARY KEY (tenant_id, memory_id)
);
CREATE INDEX forgotten_memories_subject ON public.forgotten_memories (tenant_id, subject_id);
CREATE INDEX forgotten_memories_due ON public.forgotten_memories (tenant_id, forgotten_at)
    WHERE state = 'forgotten';
ALTER TABLE public.forgotten_memories ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.forgotten_memories FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.forgotten_memories
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON public.forgotten_memories TO agent_memory_app;
GRANT MAINTAIN ON public.forgotten_memories TO agent_memory_maintainer;

-- The event log stays append-only for the application except for one case: the events of a
-- memory the sweeper has marked swept (the row above, in the same transaction). A restrictive
-- policy, not a definer function (migration 006: no SECURITY DEFINER code callable by the app).
GRANT DELETE ON public.memory_events TO agent_memory_app;
CREATE POLICY delete_swept_memory_only ON public.memory_events AS RESTRICTIVE FOR DELETE
    TO agent_memory_app
    USING (EXISTS (SELECT 1 FROM public.forgotten_memories f
                    WHERE f.tenant_id = memory_events.tenant_id AND f.memory_id = memory_events.memory_id
                      AND f.state = 'swept' AND memory_events.aggregate_version <= f.version));
