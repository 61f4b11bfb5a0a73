-- Operation keys as real columns. An operation id is rendered from a typed key
-- (agent_memory/operation_keys.py); the key's fields are stored beside it, so readers query them
-- instead of parsing ids (rebuild's lookup of recorded embeddings by memory and version).
-- The app role's table-wide INSERT/UPDATE on operations (001) covers the new columns.
ALTER TABLE public.operations
    ADD COLUMN memory_id      uuid,     -- embed
    ADD COLUMN memory_version integer,  -- embed
    ADD COLUMN session_id     text,     -- extract, importance, summary, plan, commit
    ADD COLUMN model          text,     -- embed: the embedder; provider steps: the provider
    ADD COLUMN model_version  text,
    ADD COLUMN key_digest     text,     -- text, messages, extraction, request or batch digest
    ADD COLUMN plan_round     integer;  -- plan
CREATE INDEX operations_memory ON public.operations (tenant_id, memory_id, memory_version)
    WHERE memory_id IS NOT NULL;

-- Backfill of the rows recorded before: each id parsed once, here. Only what an id determines
-- unambiguously is filled. `{model}-{model version}` is not (both halves may contain dashes:
-- `hashing-embedder-1`, `openai-compatible-embedder-1-text-embedding-3-small-1536`), so model and
-- model_version stay NULL on these rows; a reader matches them as before, by every split of the
-- id's tag (EmbedKey.legacy_candidates), and only them. A provider step's session is what
-- precedes its last two segments (provider tags hold no '/'). Ids of no known format (tests,
-- benchmarks) keep NULL columns.
-- The backfill reads every tenant's rows: row security is lifted for this transaction only (an
-- owner that is not a superuser is otherwise bound by the forced policies).
ALTER TABLE public.operations NO FORCE ROW LEVEL SECURITY;

-- embed/{memory id}/{version}/{model}-{model version}/{text digest}
UPDATE public.operations
   SET memory_id = split_part(operation_id, '/', 2)::uuid,
       memory_version = split_part(operation_id, '/', 3)::integer,
       key_digest = substring(operation_id FROM '/([^/]+)$')
 WHERE kind = 'embed'
   AND operation_id ~ '^embed/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/[0-9]{1,9}/.+-.*/[^/]+$';

-- embed-batch/{digest}
UPDATE public.operations
   SET key_digest = substring(operation_id FROM '^embed-batch/([0-9a-f]+)$')
 WHERE kind = 'embed-batch' AND operation_id ~ '^embed-batch/[0-9a-f]+$';

-- {extract|importance|summary}/{session}/{provider}-{version}/{messages digest}
UPDATE public.operations
   SET session_id = substring(operation_id FROM '^[a-z]+/(.+)/[^/]+/[^/]+$'),
       key_digest = substring(operation_id FROM '/([^/]+)$')
 WHERE kind IN ('extract', 'importance', 'summary')
   AND operation_id ~ '^(extract|importance|summary)/.+/[^/]+-[^/]*/[0-9a-f]+$';

-- plan/{session}/{extraction digest}/{round}
UPDATE public.operations
   SET session_id = substring(operation_id FROM '^plan/(.+)/[0-9a-f]{16}/[0-9]+$'),
       key_digest = substring(operation_id FROM '/([0-9a-f]{16})/[0-9]+$'),
       plan_round = substring(operation_id FROM '/([0-9]{1,9})$')::integer
 WHERE kind = 'plan' AND operation_id ~ '^plan/.+/[0-9a-f]{16}/[0-9]{1,9}$';

-- commit/{session}/{request digest}; live/{request digest} (a live write, recorded as a commit)
UPDATE public.operations
   SET session_id = substring(operation_id FROM '^commit/(.+)/[0-9a-f]{16}$'),
       key_digest = substring(operation_id FROM '/([0-9a-f]{16})$')
 WHERE kind = 'commit' AND operation_id ~ '^commit/.+/[0-9a-f]{16}$';
UPDATE public.operations
   SET key_digest = substring(operation_id FROM '^live/([0-9a-f]{24})$')
 WHERE kind = 'commit' AND operation_id ~ '^live/[0-9a-f]{24}$';

ALTER TABLE public.operations FORCE ROW LEVEL SECURITY;
