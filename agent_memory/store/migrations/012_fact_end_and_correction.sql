-- Fact operations beyond replace: a fact can END (no longer true, no new value: its interval
-- closes) and be CORRECTED (the value was never true: its interval is voided — valid_to =
-- valid_from, so no as-of read returns it — and the corrected value holds from the voided start).
ALTER TABLE public.facts DROP CONSTRAINT facts_status_check;
ALTER TABLE public.facts ADD CONSTRAINT facts_status_check
    CHECK (status IN ('active', 'candidate', 'closed', 'promoted', 'voided'));
ALTER TABLE public.memory_events DROP CONSTRAINT memory_events_event_type_check;
ALTER TABLE public.memory_events ADD CONSTRAINT memory_events_event_type_check CHECK (event_type IN (
    'MemoryCreated', 'MemoryUpdated', 'MemoryClosed', 'MemoryDeleted',
    'FactCreated', 'FactSuperseded', 'FactConfirmed', 'CandidateHeld', 'CandidatePromoted',
    'EpisodeCreated', 'ObservationCreated', 'FactEnded', 'FactCorrected'));
