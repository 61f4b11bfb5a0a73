-- An erasure deletes a subject's access statistics (memory_access) with its operations, so the
-- compaction after an erasure rewrites that table too: its dead tuples would otherwise keep the
-- erased subject's memory ids on disk until autovacuum reused the pages.
INSERT INTO public.compaction_tables (table_name) VALUES ('memory_access') ON CONFLICT DO NOTHING;
GRANT MAINTAIN ON public.memory_access TO agent_memory_maintainer;
