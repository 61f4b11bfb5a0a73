-- Relations: edges between a subject's entities ("Lin works at Acme", "my sister Mia"), bi-temporal
-- like facts. Each edge (source, relation, target) is a memory of its own; each interval in which
-- it held is one row, opened by a RelationNoted event and closed by a RelationClosed one (a row is
-- closed, never overwritten). A projection of the event log (agent_memory/memory/apply.py): a
-- rebuild reproduces it, an erasure deletes it with the subject, forgetting an entity forgets the
-- edges that touch it (forgotten_memories, kind 'relation').
ALTER TABLE public.memory_events DROP CONSTRAINT memory_events_event_type_check;
ALTER TABLE public.memory_events ADD CONSTRAINT memory_events_event_type_check CHECK (event_type IN (
    'MemoryCreated', 'MemoryUpdated', 'MemoryClosed', 'MemoryDeleted',
    'FactCreated', 'FactSuperseded', 'FactConfirmed', 'CandidateHeld', 'CandidatePromoted',
    'EpisodeCreated', 'ObservationCreated', 'FactEnded', 'FactCorrected',
    'MemoryForgotten', 'MemoryRestored', 'EntityNoted', 'RelationNoted', 'RelationClosed'));

ALTER TABLE public.forgotten_memories DROP CONSTRAINT forgotten_memories_memory_kind_check;
ALTER TABLE public.forgotten_memories ADD CONSTRAINT forgotten_memories_memory_kind_check
    CHECK (memory_kind IN ('fact', 'episode', 'observation', 'entity', 'relation'));

CREATE TABLE public.relations (
    -- One interval of the edge: derived from the edge's memory id and the version that opened it.
    relation_id      uuid        NOT NULL,
    tenant_id        text        NOT NULL,
    subject_id       text        NOT NULL,
    -- The edge across its intervals (the memory its events belong to).
    memory_id        uuid        NOT NULL,
    source_entity_id uuid        NOT NULL,
    relation         text        NOT NULL CHECK (relation IN (
                         'family', 'partner', 'friend', 'colleague', 'works_at', 'studies_at', 'lives_in',
                         'member_of', 'owns', 'attended', 'visited')),
    role             text        NOT NULL DEFAULT '',
    target_entity_id uuid        NOT NULL,
    valid_from       timestamptz NOT NULL,
    valid_to         timestamptz,  -- NULL: the edge holds now
    -- The versions (and event ids) of the RelationNoted that opened the interval and the
    -- RelationClosed that closed it.
    version          integer     NOT NULL CHECK (version > 0),
    closed_version   integer     CHECK (closed_version > version),
    started_event_id uuid        NOT NULL,
    closed_event_id  uuid,
    evidence_message_ids text[]  NOT NULL DEFAULT '{}',
    operation_id     text        NOT NULL,
    recorded_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, relation_id),
    CHECK ((valid_to IS NULL) = (closed_event_id IS NULL)),
    -- Deferred: a commit, a restore and a rebuild's swap write entities and edges in any order
    -- within their transaction.
    FOREIGN KEY (tenant_id, source_entity_id) REFERENCES public.entities (tenant_id, memory_id)
        DEFERRABLE INITIALLY DEFERRED,
    FOREIGN KEY (tenant_id, target_entity_id) REFERENCES public.entities (tenant_id, memory_id)
        DEFERRABLE INITIALLY DEFERRED
);
-- At most one open interval per edge.
CREATE UNIQUE INDEX relations_current_interval ON public.relations (tenant_id, memory_id) WHERE valid_to IS NULL;
CREATE INDEX relations_memory ON public.relations (tenant_id, memory_id);
CREATE INDEX relations_subject ON public.relations (tenant_id, subject_id);
-- The current edges of an entity, in either direction (recall's one hop).
CREATE INDEX relations_current_from ON public.relations (tenant_id, subject_id, source_entity_id)
    WHERE valid_to IS NULL;
CREATE INDEX relations_current_to ON public.relations (tenant_id, subject_id, target_entity_id)
    WHERE valid_to IS NULL;
-- Any interval of an entity (forgetting the entity forgets them all).
CREATE INDEX relations_source ON public.relations (tenant_id, source_entity_id);
CREATE INDEX relations_target ON public.relations (tenant_id, target_entity_id);

ALTER TABLE public.relations ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.relations FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.relations
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));

GRANT SELECT, INSERT, UPDATE, DELETE ON public.relations TO agent_memory_app;
-- An erasure deletes from it: physical compaction rewrites it (migration 031).
INSERT INTO public.compaction_tables (table_name) VALUES ('relations');
GRANT MAINTAIN ON public.relations TO agent_memory_maintainer;
