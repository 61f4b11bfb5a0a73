-- Marks of the daily review (agent_memory/lifecycle/review.py): a memory that may have gone stale,
-- marked, never deleted, until an operator or the agent resolves it.
--
-- A projection of the event log like the facts: each mark is an aggregate of its own in
-- memory_events (memory_id = the mark's id, derived from the marked memory and the reason),
-- whose MemoryMarkedStale events open or renew the mark and StaleMarkResolved events close it
-- (agent_memory/memory/apply.py). A rebuild replays them and reproduces this table.
--
-- reason: 'stale' (a current fact past its namespace's shelf life, not confirmed since),
-- 'contradicted' (a current fact with later contradicting values held as candidates),
-- 'duplicate' (a note near-identical to an earlier note of the subject), 'candidate_expiring'
-- (a candidate close to its retention expiry). Ids, reason codes and times only: no memory text.
CREATE TABLE public.stale_marks (
    tenant_id           text        NOT NULL,
    subject_id          text        NOT NULL,
    memory_id           uuid        NOT NULL,  -- the mark's own id (its aggregate in memory_events)
    marked_memory_id    uuid        NOT NULL,
    marked_kind         text        NOT NULL CHECK (marked_kind IN ('fact', 'candidate', 'observation')),
    fact_id             uuid,                  -- the fact interval marked (NULL for a note)
    reason              text        NOT NULL
                        CHECK (reason IN ('stale', 'contradicted', 'duplicate', 'candidate_expiring')),
    related_memory_ids  uuid[]      NOT NULL DEFAULT '{}',
    confirmed_at        timestamptz,           -- the fact's last confirmation the mark was made against
    state               text        NOT NULL CHECK (state IN ('open', 'resolved')),
    marked_at           timestamptz NOT NULL,
    resolved_at         timestamptz,
    resolution          text        CHECK (resolution IN ('keep', 'correct', 'forget', 'obsolete')),
    version             integer     NOT NULL,
    operation_id        text        NOT NULL,
    recorded_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, memory_id)
);
CREATE INDEX stale_marks_open ON public.stale_marks (tenant_id, subject_id, marked_memory_id) WHERE state = 'open';
ALTER TABLE public.stale_marks ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.stale_marks FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.stale_marks
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON public.stale_marks TO agent_memory_app;
-- Deleted by an erasure with the subject's facts, so rewritten by the compaction after one.
INSERT INTO public.compaction_tables (table_name) VALUES ('stale_marks');
GRANT MAINTAIN ON public.stale_marks TO agent_memory_maintainer;

-- The marks' events in the log.
ALTER TABLE public.memory_events DROP CONSTRAINT memory_events_event_type_check;
ALTER TABLE public.memory_events ADD CONSTRAINT memory_events_event_type_check CHECK (event_type IN (
    'MemoryCreated', 'MemoryUpdated', 'MemoryClosed', 'MemoryDeleted',
    'FactCreated', 'FactSuperseded', 'FactConfirmed', 'CandidateHeld', 'CandidatePromoted',
    'EpisodeCreated', 'ObservationCreated', 'FactEnded', 'FactCorrected',
    'MemoryForgotten', 'MemoryRestored', 'EntityNoted', 'RelationNoted', 'RelationClosed',
    'MemoryMarkedStale', 'StaleMarkResolved'));
