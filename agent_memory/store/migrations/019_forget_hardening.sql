-- Forgetting, hardened after review (agent_memory/forgetting.py).
--
-- 1. The app may delete a memory's events only when the memory was really forgotten: the
--    tombstone's version must be that of a MemoryForgotten event of the memory (a row forged
--    into forgotten_memories with a high version no longer opens the log).
DROP POLICY delete_swept_memory_only ON public.memory_events;
CREATE POLICY delete_swept_memory_only ON public.memory_events AS RESTRICTIVE FOR DELETE
    TO agent_memory_app
    USING (EXISTS (SELECT 1 FROM public.forgotten_memories f
                    WHERE f.tenant_id = memory_events.tenant_id AND f.memory_id = memory_events.memory_id
                      AND f.state = 'swept' AND memory_events.aggregate_version <= f.version
                      AND EXISTS (SELECT 1 FROM public.memory_events e
                                   WHERE e.tenant_id = f.tenant_id AND e.memory_id = f.memory_id
                                     AND e.aggregate_version = f.version AND e.event_type = 'MemoryForgotten')));
-- A new row is always a forget in its grace period; only the sweeper's UPDATE makes it swept.
CREATE POLICY insert_forgotten_only ON public.forgotten_memories AS RESTRICTIVE FOR INSERT
    TO agent_memory_app WITH CHECK (state = 'forgotten');

-- 2. A swept memory said again, forgotten again and then restored must keep its first
--    tombstone (its version and forget time still hold back what was said before the sweep).
ALTER TABLE public.forgotten_memories
    ADD COLUMN swept_before_version integer,
    ADD COLUMN swept_before_at timestamptz;
