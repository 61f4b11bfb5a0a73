-- BM25's document frequencies per subject and lexeme, kept at write time (agent_memory/lexical.py).
--
-- A search without a time window counted each query lexeme's postings with a window function as
-- they streamed out of the index, and computed each lexeme's idf per posting: at 50k items the
-- search read from here takes p50/p95 0.76x/0.78x as long (10.7/13.8 -> 8.1/10.8 ms), the same rows
-- with bit-identical scores for 100 of 100 queries. Migration
-- 025 left them out because every item writes a row per lexeme; statement-level triggers write
-- them per statement, grouped by lexeme, so a consolidation's commit upserts each of its distinct
-- lexemes once. A search with a window still counts the postings inside it.
--
-- A column per kind, as lexical_statistics. Lock order: these triggers are named to fire after
-- memory_search_statistics_* (a relation's triggers fire in name order), whose upsert locks the
-- subject's statistics row first, so two writers of one subject never lock lexeme rows in opposite
-- orders. A row whose counts reach zero is deleted: an erased or emptied subject leaves no lexeme
-- here.
CREATE TABLE public.lexical_frequencies (
    tenant_id         text   NOT NULL,
    subject_id        text   NOT NULL,
    lexeme            text   COLLATE "C" NOT NULL,
    fact_items        bigint NOT NULL,
    episode_items     bigint NOT NULL,
    observation_items bigint NOT NULL,
    PRIMARY KEY (tenant_id, subject_id, lexeme)
);

CREATE FUNCTION public.lexical_frequencies_changed() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        INSERT INTO public.lexical_frequencies AS f (tenant_id, subject_id, lexeme, fact_items, episode_items,
                                                     observation_items)
        SELECT o.tenant_id, o.subject_id, l.lexeme,
               -count(*) FILTER (WHERE o.memory_kind = 'fact'),
               -count(*) FILTER (WHERE o.memory_kind = 'episode'),
               -count(*) FILTER (WHERE o.memory_kind = 'observation')
          FROM old_rows o, unnest(pg_catalog.tsvector_to_array(o.tsv)) AS l(lexeme)
         GROUP BY o.tenant_id, o.subject_id, l.lexeme ORDER BY o.tenant_id, o.subject_id, l.lexeme COLLATE "C"
        ON CONFLICT (tenant_id, subject_id, lexeme) DO UPDATE SET
            fact_items = f.fact_items + EXCLUDED.fact_items,
            episode_items = f.episode_items + EXCLUDED.episode_items,
            observation_items = f.observation_items + EXCLUDED.observation_items;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO public.lexical_frequencies AS f (tenant_id, subject_id, lexeme, fact_items, episode_items,
                                                     observation_items)
        SELECT n.tenant_id, n.subject_id, l.lexeme,
               count(*) FILTER (WHERE n.memory_kind = 'fact'),
               count(*) FILTER (WHERE n.memory_kind = 'episode'),
               count(*) FILTER (WHERE n.memory_kind = 'observation')
          FROM new_rows n, unnest(pg_catalog.tsvector_to_array(n.tsv)) AS l(lexeme)
         GROUP BY n.tenant_id, n.subject_id, l.lexeme ORDER BY n.tenant_id, n.subject_id, l.lexeme COLLATE "C"
        ON CONFLICT (tenant_id, subject_id, lexeme) DO UPDATE SET
            fact_items = f.fact_items + EXCLUDED.fact_items,
            episode_items = f.episode_items + EXCLUDED.episode_items,
            observation_items = f.observation_items + EXCLUDED.observation_items;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        DELETE FROM public.lexical_frequencies f
         USING (SELECT DISTINCT o.tenant_id, o.subject_id, l.lexeme
                  FROM old_rows o, unnest(pg_catalog.tsvector_to_array(o.tsv)) AS l(lexeme)) o
         WHERE f.tenant_id = o.tenant_id AND f.subject_id = o.subject_id AND f.lexeme = o.lexeme
           AND f.fact_items = 0 AND f.episode_items = 0 AND f.observation_items = 0;
    END IF;
    RETURN NULL;
END
$$;

-- The frequencies of the rows the index holds today (as the owner, RLS lifted inside this
-- migration's transaction only, as in migration 025).
ALTER TABLE public.memory_search NO FORCE ROW LEVEL SECURITY;
INSERT INTO public.lexical_frequencies (tenant_id, subject_id, lexeme, fact_items, episode_items, observation_items)
SELECT m.tenant_id, m.subject_id, l.lexeme,
       count(*) FILTER (WHERE m.memory_kind = 'fact'),
       count(*) FILTER (WHERE m.memory_kind = 'episode'),
       count(*) FILTER (WHERE m.memory_kind = 'observation')
  FROM public.memory_search m, unnest(tsvector_to_array(m.tsv)) AS l(lexeme)
 GROUP BY m.tenant_id, m.subject_id, l.lexeme;
ALTER TABLE public.memory_search FORCE ROW LEVEL SECURITY;

CREATE TRIGGER memory_search_term_frequencies_inserted AFTER INSERT ON public.memory_search
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.lexical_frequencies_changed();
CREATE TRIGGER memory_search_term_frequencies_deleted AFTER DELETE ON public.memory_search
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION public.lexical_frequencies_changed();
CREATE TRIGGER memory_search_term_frequencies_updated AFTER UPDATE ON public.memory_search
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION public.lexical_frequencies_changed();

ALTER TABLE public.lexical_frequencies ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.lexical_frequencies FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.lexical_frequencies
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
-- The triggers run as the role writing memory_search (the app role): it keeps the rows.
GRANT SELECT, INSERT, UPDATE, DELETE ON public.lexical_frequencies TO agent_memory_app;
GRANT MAINTAIN ON public.lexical_frequencies TO agent_memory_maintainer;
