-- The vector route's size check (agent_memory/vector_search.py: exact scan or HNSW) counts up to
-- 20,001 of a subject's vectors of one model. Through (tenant, subject) alone that read every
-- row from the heap to test the model: 17 ms at 50k memories, two thirds of the route. With the
-- model (and the kind the searches filter on) in the index the count is an index-only scan
-- (1.4 ms), and the exact scan of a small subject and erasure's delete use the same index.
CREATE INDEX memory_vectors_subject_model ON public.memory_vectors (tenant_id, subject_id, model, memory_kind);
-- Superseded by the index above (its prefix).
DROP INDEX public.memory_vectors_subject;
