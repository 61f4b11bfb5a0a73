-- An inverted index of memory_search: one row per item and lexeme (agent_memory/lexical.py).
--
-- BM25 read every candidate item's tsvector and cut it to the query's lexemes, about 3 us per
-- candidate: a query with a common word makes most of a subject's items candidates (18-30k of 50k
-- in bench lexical's Zipf corpus), so the lexical route grew with the subject. Here a query's
-- postings are the index ranges of its lexemes, read by an index-only scan that carries what the
-- score needs (kind, tf, length, time): no item is read, no tsvector is unnested.
--
-- Statement-level triggers on memory_search write and delete the postings of what each statement
-- inserted, deleted or updated (every path: apply, forget, sweep, rebuild's swap, erasure, COPY),
-- as migration 025 keeps the statistics. tf is what the search counted from the tsvector: the
-- number of positions Postgres kept (at most 256), 1 when it kept none.
CREATE TABLE public.memory_postings (
    tenant_id   text        NOT NULL,
    subject_id  text        NOT NULL,
    lexeme      text        COLLATE "C" NOT NULL,
    memory_id   uuid        NOT NULL,
    version     integer     NOT NULL,
    memory_kind text        NOT NULL,
    tf          smallint    NOT NULL,
    term_count  integer     NOT NULL,
    happened_at timestamptz NOT NULL,
    -- The one index: a query's range per lexeme, and a deleted item's rows by their full key.
    PRIMARY KEY (tenant_id, subject_id, lexeme, memory_id, version)
        INCLUDE (memory_kind, tf, term_count, happened_at)
);
-- Index-only scans read the heap for pages not yet marked all-visible; postings are mostly
-- inserted, so autovacuum visits them after 2% new rows rather than the default 20%.
ALTER TABLE public.memory_postings SET (autovacuum_vacuum_insert_scale_factor = 0.02);

CREATE FUNCTION public.memory_postings_changed() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        -- A subject the statement left without items (an erasure, a rebuild's swap) loses its
        -- postings by range; the others item by item, each item's rows found by their key.
        WITH subjects AS MATERIALIZED (
            SELECT o.tenant_id, o.subject_id,
                   NOT EXISTS (SELECT 1 FROM public.memory_search m
                                WHERE m.tenant_id = o.tenant_id AND m.subject_id = o.subject_id) AS emptied
              FROM (SELECT DISTINCT tenant_id, subject_id FROM old_rows) o
        ), emptied_postings AS (
            DELETE FROM public.memory_postings p USING subjects s
             WHERE s.emptied AND p.tenant_id = s.tenant_id AND p.subject_id = s.subject_id
        )
        DELETE FROM public.memory_postings p
         USING (SELECT o.tenant_id, o.subject_id, o.memory_id, o.version, l.lexeme
                  FROM old_rows o
                  JOIN subjects s ON s.tenant_id = o.tenant_id AND s.subject_id = o.subject_id AND NOT s.emptied,
                       unnest(pg_catalog.tsvector_to_array(o.tsv)) AS l(lexeme)) o
         WHERE p.tenant_id = o.tenant_id AND p.subject_id = o.subject_id AND p.lexeme = o.lexeme
           AND p.memory_id = o.memory_id AND p.version = o.version;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO public.memory_postings (tenant_id, subject_id, lexeme, memory_id, version, memory_kind, tf,
                                            term_count, happened_at)
        SELECT n.tenant_id, n.subject_id, t.lexeme, n.memory_id, n.version, n.memory_kind,
               coalesce(pg_catalog.array_length(t.positions, 1), 1), n.term_count, n.happened_at
          FROM new_rows n, unnest(n.tsv) AS t;
    END IF;
    RETURN NULL;
END
$$;

-- The postings of the rows the index holds today (as the owner, RLS lifted inside this
-- migration's transaction only, as in migration 025).
ALTER TABLE public.memory_search NO FORCE ROW LEVEL SECURITY;
INSERT INTO public.memory_postings (tenant_id, subject_id, lexeme, memory_id, version, memory_kind, tf, term_count,
                                    happened_at)
SELECT m.tenant_id, m.subject_id, t.lexeme, m.memory_id, m.version, m.memory_kind,
       coalesce(array_length(t.positions, 1), 1), m.term_count, m.happened_at
  FROM public.memory_search m, unnest(m.tsv) AS t;
ALTER TABLE public.memory_search FORCE ROW LEVEL SECURITY;

CREATE TRIGGER memory_search_postings_inserted AFTER INSERT ON public.memory_search
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.memory_postings_changed();
CREATE TRIGGER memory_search_postings_deleted AFTER DELETE ON public.memory_search
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION public.memory_postings_changed();
CREATE TRIGGER memory_search_postings_updated AFTER UPDATE ON public.memory_search
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION public.memory_postings_changed();

-- Superseded: candidates come from the postings now (the window's statistics still come from
-- memory_search_subject_window).
DROP INDEX public.memory_search_subject_tsv;

ALTER TABLE public.memory_postings ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.memory_postings FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON public.memory_postings
    USING (tenant_id = current_setting('app.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('app.tenant_id', true));
-- The triggers run as the role writing memory_search (the app role).
GRANT SELECT, INSERT, DELETE ON public.memory_postings TO agent_memory_app;
GRANT MAINTAIN ON public.memory_postings TO agent_memory_maintainer;
