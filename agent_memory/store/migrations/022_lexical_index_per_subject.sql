-- Lexical search through its index (agent_memory/lexical.py). BM25 candidates are the subject's
-- items whose tsvector holds a query lexeme: one GIN index over (tenant, subject, tsv) finds them
-- without reading the subject's other items (btree_gin indexes the two text columns; it is a
-- trusted contrib extension, so the owner role creates it). The corpus statistics (item count and
-- average length within the window) come from an index-only scan of the second index.
CREATE EXTENSION IF NOT EXISTS btree_gin;
CREATE INDEX memory_search_subject_tsv ON public.memory_search USING gin (tenant_id, subject_id, tsv);
CREATE INDEX memory_search_subject_window ON public.memory_search (tenant_id, subject_id, happened_at)
    INCLUDE (memory_kind, term_count);
-- Superseded by the two above.
DROP INDEX public.memory_search_tsv;
DROP INDEX public.memory_search_subject;
