-- BM25's collection statistics per subject, kept at write time (agent_memory/lexical.py).
--
-- A search without a time window read the item count and the average length of the subject's
-- items by an index-only scan of all of them (9-12 ms of the lexical route's 55 ms at 50k items).
-- Statement-level triggers on memory_search add and subtract what each statement inserted,
-- deleted or updated (every path: apply, forget, sweep, rebuild's repairs, erasure, COPY), so the
-- search reads one row. A search with a window still counts the items inside it.
--
-- One row per subject with a pair of columns per kind, not a row per kind: a transaction that
-- writes several kinds of one subject locks one row, so two writers of a subject cannot lock two
-- rows in opposite orders. A row whose counts reach zero is deleted: an erased or emptied subject
-- leaves nothing here. The document frequencies are not kept: the search counts them from the
-- candidates it reads anyway, and a row per lexeme would be written by every item.
CREATE TABLE public.lexical_statistics (
    tenant_id         text   NOT NULL,
    subject_id        text   NOT NULL,
    fact_items        bigint NOT NULL,
    fact_terms        bigint NOT NULL,
    episode_items     bigint NOT NULL,
    episode_terms     bigint NOT NULL,
    observation_items bigint NOT NULL,
    observation_terms bigint NOT NULL,
    PRIMARY KEY (tenant_id, subject_id)
);

-- Subtracts what a statement removed (old_rows) and adds what it wrote (new_rows), per subject and
-- kind, in key order; the transition tables a trigger does not declare are never referenced.
CREATE FUNCTION public.lexical_statistics_changed() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        INSERT INTO public.lexical_statistics AS s (tenant_id, subject_id, fact_items, fact_terms, episode_items,
                                                    episode_terms, observation_items, observation_terms)
        SELECT o.tenant_id, o.subject_id,
               -count(*) FILTER (WHERE o.memory_kind = 'fact'),
               -coalesce(sum(o.term_count) FILTER (WHERE o.memory_kind = 'fact'), 0),
               -count(*) FILTER (WHERE o.memory_kind = 'episode'),
               -coalesce(sum(o.term_count) FILTER (WHERE o.memory_kind = 'episode'), 0),
               -count(*) FILTER (WHERE o.memory_kind = 'observation'),
               -coalesce(sum(o.term_count) FILTER (WHERE o.memory_kind = 'observation'), 0)
          FROM old_rows o GROUP BY o.tenant_id, o.subject_id ORDER BY o.tenant_id, o.subject_id
        ON CONFLICT (tenant_id, subject_id) DO UPDATE SET
            fact_items = s.fact_items + EXCLUDED.fact_items, fact_terms = s.fact_terms + EXCLUDED.fact_terms,
            episode_items = s.episode_items + EXCLUDED.episode_items,
            episode_terms = s.episode_terms + EXCLUDED.episode_terms,
            observation_items = s.observation_items + EXCLUDED.observation_items,
            observation_terms = s.observation_terms + EXCLUDED.observation_terms;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO public.lexical_statistics AS s (tenant_id, subject_id, fact_items, fact_terms, episode_items,
                                                    episode_terms, observation_items, observation_terms)
        SELECT n.tenant_id, n.subject_id,
               count(*) FILTER (WHERE n.memory_kind = 'fact'),
               coalesce(sum(n.term_count) FILTER (WHERE n.memory_kind = 'fact'), 0),
               count(*) FILTER (WHERE n.memory_kind = 'episode'),
               coalesce(sum(n.term_count) FILTER (WHERE n.memory_kind = 'episode'), 0),
               count(*) FILTER (WHERE n.memory_kind = 'observation'),
               coalesce(sum(n.term_count) FILTER (WHERE n.memory_kind = 'observation'), 0)
          FROM new_rows n GROUP BY n.tenant_id, n.subject_id ORDER BY n.tenant_id, n.subject_id
        ON CONFLICT (tenant_id, subject_id) DO UPDATE SET
            fact_items = s.fact_items + EXCLUDED.fact_items, fact_terms = s.fact_terms + EXCLUDED.fact_terms,
            episode_items = s.episode_items + EXCLUDED.episode_items,
            episode_terms = s.episode_terms + EXCLUDED.episode_terms,
            observation_items = s.observation_items + EXCLUDED.observation_items,
            observation_terms = s.observation_terms + EXCLUDED.observation_terms;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        DELETE FROM public.lexical_statistics s
         USING (SELECT DISTINCT o.tenant_id, o.subject_id FROM old_rows o) o
         WHERE s.tenant_id = o.tenant_id AND s.subject_id = o.subject_id
           AND s.fact_items = 0 AND s.episode_items = 0 AND s.observation_items = 0;
    END IF;
    RETURN NULL;
END
$$;

-- The rows the index holds today, counted once (as the owner: memory_search forces RLS on
-- everyone, its owner included, so that is lifted inside this migration's transaction only).
ALTER TABLE public.memory_search NO FORCE ROW LEVEL SECURITY;
INSERT INTO public.lexical_statistics (tenant_id, subject_id, fact_items, fact_terms, episode_items, episode_terms,
                                       observation_items, observation_terms)
SELECT tenant_id, subject_id,
       count(*) FILTER (WHERE memory_kind = 'fact'),
       coalesce(sum(term_count) FILTER (WHERE memory_kind = 'fact'), 0),
       count(*) FILTER (WHERE memory_kind = 'episode'),
       coalesce(sum(term_count) FILTER (WHERE memory_kind = 'episode'), 0),
       count(*) FILTER (WHERE memory_kind = 'observation'),
       coalesce(sum(term_count) FILTER (WHERE memory_kind = 'observation'), 0)
  FROM public.memory_search GROUP BY tenant_id, subject_id;
ALTER TABLE public.memory_search FORCE ROW LEVEL SECURITY;

CREATE TRIGGER memory_search_statistics_inserted AFTER INSERT ON public.memory_search
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.lexical_statistics_changed();
CREATE TRIGGER memory_search_statistics_deleted AFTER DELETE ON public.memory_search
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION public.lexical_statistics_changed();
CREATE TRIGGER memory_search_statistics_updated AFTER UPDATE ON public.memory_search
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION public.lexical_statistics_changed();
-- A TRUNCATE would bypass the triggers: only the owner can run one, and nothing does.

ALTER TABLE public.lexical_statistics ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.lexical_statistics FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.lexical_statistics
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
-- The triggers run as the role writing memory_search (the app role): it keeps the rows.
GRANT SELECT, INSERT, UPDATE, DELETE ON public.lexical_statistics TO agent_memory_app;
GRANT MAINTAIN ON public.lexical_statistics TO agent_memory_maintainer;
