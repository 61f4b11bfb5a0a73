-- One version per memory. `facts.version` stays what it always was: the event version that opened
-- the row's interval (it identifies the interval's lexical and vector rows). `memory_version` is the
-- memory's own version (its latest event: a confirmation moves it without opening an interval), the
-- number every read model shows and every conditional write accepts.
ALTER TABLE public.facts ADD COLUMN memory_version integer;
-- The backfill reads every tenant's rows: row security is lifted for this transaction only (an
-- owner that is not a superuser is otherwise bound by the forced policies).
ALTER TABLE public.facts NO FORCE ROW LEVEL SECURITY;
ALTER TABLE public.memory_events NO FORCE ROW LEVEL SECURITY;
UPDATE public.facts f
   SET memory_version = coalesce((SELECT max(e.aggregate_version) FROM public.memory_events e
                                   WHERE e.tenant_id = f.tenant_id AND e.memory_id = f.memory_id), f.version);
ALTER TABLE public.facts FORCE ROW LEVEL SECURITY;
ALTER TABLE public.memory_events FORCE ROW LEVEL SECURITY;
ALTER TABLE public.facts ALTER COLUMN memory_version SET NOT NULL;
ALTER TABLE public.facts ADD CONSTRAINT facts_memory_version_check CHECK (memory_version >= version);
GRANT UPDATE (memory_version) ON public.facts TO agent_memory_app;

-- Typed events (agent_memory/events.py). The legacy types stay valid: old logs are read as they are.
ALTER TABLE public.memory_events DROP CONSTRAINT memory_events_event_type_check;
ALTER TABLE public.memory_events ADD CONSTRAINT memory_events_event_type_check CHECK (event_type IN (
    'MemoryCreated', 'MemoryUpdated', 'MemoryClosed', 'MemoryDeleted',
    'FactCreated', 'FactSuperseded', 'FactConfirmed', 'CandidateHeld', 'CandidatePromoted',
    'EpisodeCreated', 'ObservationCreated'));
