-- When each fact was last confirmed, and what wrote it (agent_memory/memory/apply.py).
--
-- last_confirmed_at: the latest time the fact's value was said again or confirmed. A value opens
-- its interval confirmed at its own statement's time (a correction's: when the correction was
-- said, though the value holds from the voided interval's start); each FactConfirmed event (a
-- later session restating it) moves it forward, never back. A projection column like the others:
-- a rebuild replays the same events and reproduces it.
--
-- extracted_by: the extractor and its version that wrote the interval's value ("rule-extractor/8",
-- "openai-compatible-extractor/6-gpt-4o-mini": the prompt's version, then the model), or, for a
-- value an agent, an app or an operator wrote directly, "live-write:" and the kind of writer
-- ("live-write:agent"). Taken from the opening event's extractor_name and extractor_version, which
-- every event has carried since migration 001; NULL where that event recorded none. A version
-- string and a time: no memory text, so nothing here needs the subject's key.
ALTER TABLE public.facts ADD COLUMN last_confirmed_at timestamptz;
ALTER TABLE public.facts ADD COLUMN extracted_by text;
-- The backfill reads every tenant's rows: row security is lifted for this transaction only (an
-- owner that is not a superuser is otherwise bound by the forced policies).
ALTER TABLE public.facts NO FORCE ROW LEVEL SECURITY;
ALTER TABLE public.memory_events NO FORCE ROW LEVEL SECURITY;
-- From the events' clear-text envelope: the opening event's time and extractor, and the typed
-- FactConfirmed events that follow it before anything else of the memory does (a supersession,
-- an end, a correction closes the interval; a forget undone by a restore does not). A legacy
-- confirmation (a MemoryUpdated event, its kind inside the encrypted payload) is not seen here:
-- a rebuild, which reads the payloads, moves such a fact's time forward and reports the repair.
UPDATE public.facts f
   SET extracted_by = CASE WHEN o.extractor_name = 'live-write' THEN 'live-write:' || o.actor
                           WHEN o.extractor_name IS NOT NULL
                           THEN o.extractor_name || '/' || coalesce(o.extractor_version, '') END,
       last_confirmed_at = greatest(coalesce(o.occurred_at, f.valid_from), (
           SELECT max(c.occurred_at) FROM public.memory_events c
            WHERE c.tenant_id = f.tenant_id AND c.memory_id = f.memory_id AND c.event_type = 'FactConfirmed'
              AND c.aggregate_version > f.version
              AND NOT EXISTS (SELECT 1 FROM public.memory_events x
                               WHERE x.tenant_id = f.tenant_id AND x.memory_id = f.memory_id
                                 AND x.aggregate_version > f.version AND x.aggregate_version < c.aggregate_version
                                 AND x.event_type NOT IN ('FactConfirmed', 'MemoryForgotten', 'MemoryRestored'))))
  FROM public.facts g
  LEFT JOIN public.memory_events o
    ON o.tenant_id = g.tenant_id AND o.memory_id = g.memory_id AND o.aggregate_version = g.version
 WHERE g.fact_id = f.fact_id;
ALTER TABLE public.facts FORCE ROW LEVEL SECURITY;
ALTER TABLE public.memory_events FORCE ROW LEVEL SECURITY;
ALTER TABLE public.facts ALTER COLUMN last_confirmed_at SET NOT NULL;
-- A confirmation moves the time on the open interval; the writer is set once, when it opens.
GRANT UPDATE (last_confirmed_at) ON public.facts TO agent_memory_app;
