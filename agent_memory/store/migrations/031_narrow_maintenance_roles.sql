-- Roles that can do only their job. The application no longer switches (SET ROLE) to
-- agent_memory_maintainer or agent_memory_key_rotator: as either it could inject planner
-- statistics (MAINTAIN allows pg_restore_relation_stats), lock pg_statistic for as long as it
-- kept a transaction open (MAINTAIN allows LOCK TABLE in any mode), overwrite any tenant's wrapped
-- subject key, or mark a key-encryption key destroyed while keys were still wrapped under it.
-- Those roles now own narrow SECURITY DEFINER functions, the only way the application reaches
-- their privileges; no function takes a table name it does not check against a fixed list.
-- Runs as the owner role.

-- 1. No more switching. Only the grantor (or a superuser) can take a membership back; where an
--    older deploy/postgres-init granted it as a superuser, the migration stops with the
--    statements to run (the owner must also be able to SET ROLE to hand the roles functions).
DO $$
BEGIN
    IF pg_catalog.pg_has_role('agent_memory_app', 'agent_memory_maintainer', 'MEMBER') THEN
        REVOKE agent_memory_maintainer FROM agent_memory_app;
    END IF;
    IF pg_catalog.pg_has_role('agent_memory_app', 'agent_memory_key_rotator', 'MEMBER') THEN
        REVOKE agent_memory_key_rotator FROM agent_memory_app;
    END IF;
    IF pg_catalog.pg_has_role('agent_memory_app', 'agent_memory_maintainer', 'MEMBER')
       OR pg_catalog.pg_has_role('agent_memory_app', 'agent_memory_key_rotator', 'MEMBER') THEN
        RAISE EXCEPTION 'agent_memory_app is still a member of agent_memory_maintainer or agent_memory_key_rotator'
            USING HINT = 'as a superuser: REVOKE agent_memory_maintainer, agent_memory_key_rotator FROM '
                         'agent_memory_app; GRANT agent_memory_maintainer, agent_memory_key_rotator TO '
                         'agent_memory_owner WITH ADMIN TRUE, INHERIT FALSE, SET TRUE; then migrate again';
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE EXCEPTION 'the migration role cannot revoke agent_memory_app''s membership in the maintenance roles'
        USING HINT = 'as a superuser: REVOKE agent_memory_maintainer, agent_memory_key_rotator FROM '
                     'agent_memory_app; GRANT agent_memory_maintainer, agent_memory_key_rotator TO '
                     'agent_memory_owner WITH ADMIN TRUE, INHERIT FALSE, SET TRUE; then migrate again';
END
$$;

-- An erasure reason is encrypted under the active KEK, as a new subject key is wrapped: nothing
-- new ever lands under a retiring KEK, so "no row references it" stays true once reached.
CREATE POLICY reason_under_active_kek ON public.erasure_requests AS RESTRICTIVE FOR INSERT TO agent_memory_app
    WITH CHECK (reason_kek_id IS NULL
                OR reason_kek_id = (SELECT k.kek_id FROM public.key_encryption_keys k WHERE k.state = 'active'));

-- 2. Key rotation, as agent_memory_key_rotator. What SQL can check, it checks: a wrapped key or
--    reason moves only from a retiring KEK to the active one, only from the exact ciphertext the
--    caller read (compare-and-swap: no blind overwrite, no replay of an older copy), to a
--    ciphertext of the same length under a fresh nonce; its identity (tenant, row id) is the
--    row's and is bound into the AES-GCM associated data the application checks on unwrap. SQL
--    cannot decrypt AES-GCM, so it cannot see that the new ciphertext wraps the same key; what
--    it can see is that the caller holds the key: a subject key carries rewrap_check, SHA-256 of
--    an HMAC under the key (agent_memory/crypto.py rewrap_proof), and a re-wrap must show that
--    HMAC. Holding the database credentials alone is not enough to replace a wrapped key.

-- Keys wrapped before this migration have none until their first re-wrap records it.
ALTER TABLE public.subject_keys ADD COLUMN rewrap_check bytea;
CREATE POLICY wrap_with_rewrap_check ON public.subject_keys AS RESTRICTIVE FOR INSERT TO agent_memory_app
    WITH CHECK (pg_catalog.octet_length(rewrap_check) = 32);
GRANT SELECT (rewrap_check), UPDATE (rewrap_check) ON public.subject_keys TO agent_memory_key_rotator;

-- The first KEK of a store (none registered, or only destroyed ones).
CREATE FUNCTION public.kek_register_first(kek_id text, check_nonce bytea, check_ciphertext bytea)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '30s'
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM public.key_encryption_keys k WHERE k.state IN ('active', 'retiring')) THEN
        RAISE EXCEPTION 'a key-encryption key is already registered: only a rotation adds another'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    INSERT INTO public.key_encryption_keys (kek_id, state, check_nonce, check_ciphertext)
    VALUES (kek_register_first.kek_id, 'active', kek_register_first.check_nonce, kek_register_first.check_ciphertext);
END
$$;

-- Whether any subject key or erasure reason (of any tenant) is still wrapped under the KEK.
CREATE FUNCTION public.kek_still_wraps(kek_id text)
RETURNS boolean LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT 1 FROM public.subject_keys s WHERE s.kek_id = kek_still_wraps.kek_id)
        OR EXISTS (SELECT 1 FROM public.erasure_requests r WHERE r.reason_kek_id = kek_still_wraps.kek_id)
$$;

-- Retire the active KEK and make a new one active. Waits (bounded) for transactions that
-- share-locked the active KEK to wrap a key under it. Refused while a rotation is unfinished.
CREATE FUNCTION public.kek_begin_rotation(new_kek_id text, check_nonce bytea, check_ciphertext bytea)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '30s'
AS $$
DECLARE
    retired text;
BEGIN
    IF EXISTS (SELECT 1 FROM public.key_encryption_keys k WHERE k.state = 'retiring') THEN
        RAISE EXCEPTION 'a rotation is unfinished: finish it before starting another'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    UPDATE public.key_encryption_keys k SET state = 'retiring', retired_at = pg_catalog.now()
     WHERE k.state = 'active' RETURNING k.kek_id INTO retired;
    IF retired IS NULL THEN
        RAISE EXCEPTION 'no active key-encryption key to rotate from' USING ERRCODE = 'insufficient_privilege';
    END IF;
    INSERT INTO public.key_encryption_keys (kek_id, state, check_nonce, check_ciphertext)
    VALUES (new_kek_id, 'active', kek_begin_rotation.check_nonce, kek_begin_rotation.check_ciphertext);
    RETURN retired;
END
$$;

-- Subject keys still wrapped under a retiring KEK, in key order after (after_tenant, after_subject).
CREATE FUNCTION public.kek_rewrap_candidates(after_tenant text, after_subject text, batch integer)
RETURNS TABLE (tenant_id text, subject_id text, kek_id text, wrapped_key bytea, wrap_nonce bytea)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s.tenant_id, s.subject_id, s.kek_id, s.wrapped_key, s.wrap_nonce FROM public.subject_keys s
     WHERE s.kek_id IN (SELECT k.kek_id FROM public.key_encryption_keys k WHERE k.state = 'retiring')
       AND (s.tenant_id, s.subject_id) > (after_tenant, after_subject)
     ORDER BY s.tenant_id, s.subject_id LIMIT least(batch, 5000)
$$;

-- Move one subject key from a retiring KEK to the active one; `proof` shows the caller holds the
-- key. False: the row changed or went (an erasure shredded it) since it was read.
CREATE FUNCTION public.kek_rewrap_subject_key(tenant_id text, subject_id text, from_kek_id text, to_kek_id text,
                                              old_wrapped_key bytea, new_wrapped_key bytea, new_wrap_nonce bytea,
                                              proof bytea)
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '30s'
AS $$
DECLARE
    stored_check bytea;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM public.key_encryption_keys k WHERE k.kek_id = from_kek_id AND k.state = 'retiring')
       OR NOT EXISTS (SELECT 1 FROM public.key_encryption_keys k WHERE k.kek_id = to_kek_id AND k.state = 'active') THEN
        RAISE EXCEPTION 'a wrapped key moves only from a retiring key-encryption key to the active one'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF pg_catalog.octet_length(new_wrapped_key) IS DISTINCT FROM pg_catalog.octet_length(old_wrapped_key) THEN
        RAISE EXCEPTION 'a re-wrapped key has the length of the key it replaces' USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT s.rewrap_check INTO stored_check FROM public.subject_keys s
     WHERE s.tenant_id = kek_rewrap_subject_key.tenant_id AND s.subject_id = kek_rewrap_subject_key.subject_id;
    IF stored_check IS DISTINCT FROM pg_catalog.sha256(proof) AND stored_check IS NOT NULL THEN
        RAISE EXCEPTION 'the proof does not match the subject key: only a holder of the key re-wraps it'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    UPDATE public.subject_keys s SET kek_id = to_kek_id, wrapped_key = new_wrapped_key, wrap_nonce = new_wrap_nonce,
           rewrap_check = pg_catalog.sha256(proof)
     WHERE s.tenant_id = kek_rewrap_subject_key.tenant_id AND s.subject_id = kek_rewrap_subject_key.subject_id
       AND s.kek_id = from_kek_id AND s.wrapped_key = old_wrapped_key AND s.wrap_nonce <> new_wrap_nonce;
    RETURN FOUND;
END
$$;

-- Erasure reasons still encrypted under a retiring KEK, in key order after (after_tenant, after_request).
CREATE FUNCTION public.kek_reencrypt_candidates(after_tenant text, after_request text, batch integer)
RETURNS TABLE (tenant_id text, request_id text, reason_kek_id text, reason_ciphertext bytea, reason_nonce bytea)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT r.tenant_id, r.request_id, r.reason_kek_id, r.reason_ciphertext, r.reason_nonce
      FROM public.erasure_requests r
     WHERE r.reason_kek_id IN (SELECT k.kek_id FROM public.key_encryption_keys k WHERE k.state = 'retiring')
       AND (r.tenant_id, r.request_id) > (after_tenant, after_request)
     ORDER BY r.tenant_id, r.request_id LIMIT least(batch, 5000)
$$;

-- Move one erasure reason from a retiring KEK to the active one (as kek_rewrap_subject_key).
CREATE FUNCTION public.kek_reencrypt_reason(tenant_id text, request_id text, from_kek_id text, to_kek_id text,
                                            old_ciphertext bytea, new_ciphertext bytea, new_nonce bytea)
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '30s'
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM public.key_encryption_keys k WHERE k.kek_id = from_kek_id AND k.state = 'retiring')
       OR NOT EXISTS (SELECT 1 FROM public.key_encryption_keys k WHERE k.kek_id = to_kek_id AND k.state = 'active') THEN
        RAISE EXCEPTION 'a reason moves only from a retiring key-encryption key to the active one'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF pg_catalog.octet_length(new_ciphertext) IS DISTINCT FROM pg_catalog.octet_length(old_ciphertext) THEN
        RAISE EXCEPTION 'a re-encrypted reason has the length of the one it replaces'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    UPDATE public.erasure_requests r
       SET reason_kek_id = to_kek_id, reason_ciphertext = new_ciphertext, reason_nonce = new_nonce
     WHERE r.tenant_id = kek_reencrypt_reason.tenant_id AND r.request_id = kek_reencrypt_reason.request_id
       AND r.reason_kek_id = from_kek_id AND r.reason_ciphertext = old_ciphertext AND r.reason_nonce <> new_nonce;
    RETURN FOUND;
END
$$;

-- Record a retiring KEK as destroyed (the application deleted its key file and checked it is
-- gone first): refused while any subject key or erasure reason is still wrapped under it, and
-- for any KEK that is not retiring. The row lock orders it against a concurrent rotation.
CREATE FUNCTION public.kek_mark_destroyed(kek_id text)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '30s'
AS $$
DECLARE
    current_state text;
    successor text;
BEGIN
    SELECT k.state INTO current_state FROM public.key_encryption_keys k
     WHERE k.kek_id = kek_mark_destroyed.kek_id FOR UPDATE;
    IF current_state IS DISTINCT FROM 'retiring' THEN
        RAISE EXCEPTION 'only a retiring key-encryption key can be destroyed (% is %)', kek_id,
            coalesce(current_state, 'not registered') USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF EXISTS (SELECT 1 FROM public.subject_keys s WHERE s.kek_id = kek_mark_destroyed.kek_id)
       OR EXISTS (SELECT 1 FROM public.erasure_requests r WHERE r.reason_kek_id = kek_mark_destroyed.kek_id) THEN
        RAISE EXCEPTION 'key-encryption key % still wraps subject keys or erasure reasons: re-wrap them first', kek_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT k.kek_id INTO successor FROM public.key_encryption_keys k WHERE k.state = 'active';
    UPDATE public.key_encryption_keys k SET state = 'destroyed', destroyed_at = pg_catalog.now(), destroyed_by = successor
     WHERE k.kek_id = kek_mark_destroyed.kek_id;
END
$$;

-- Privileges first: only the owner's GRANT counts once the functions change hands.
REVOKE ALL ON FUNCTION public.kek_register_first(text, bytea, bytea), public.kek_still_wraps(text),
    public.kek_begin_rotation(text, bytea, bytea), public.kek_rewrap_candidates(text, text, integer),
    public.kek_rewrap_subject_key(text, text, text, text, bytea, bytea, bytea, bytea),
    public.kek_reencrypt_candidates(text, text, integer),
    public.kek_reencrypt_reason(text, text, text, text, bytea, bytea, bytea), public.kek_mark_destroyed(text)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.kek_register_first(text, bytea, bytea), public.kek_still_wraps(text),
    public.kek_begin_rotation(text, bytea, bytea), public.kek_rewrap_candidates(text, text, integer),
    public.kek_rewrap_subject_key(text, text, text, text, bytea, bytea, bytea, bytea),
    public.kek_reencrypt_candidates(text, text, integer),
    public.kek_reencrypt_reason(text, text, text, text, bytea, bytea, bytea), public.kek_mark_destroyed(text)
    TO agent_memory_app;
-- A new owner needs CREATE on the schema at the moment it receives the function; it keeps
-- none afterwards (revoked at the end of this migration).
GRANT CREATE ON SCHEMA public TO agent_memory_key_rotator, agent_memory_maintainer;
ALTER FUNCTION public.kek_register_first(text, bytea, bytea) OWNER TO agent_memory_key_rotator;
ALTER FUNCTION public.kek_still_wraps(text) OWNER TO agent_memory_key_rotator;
ALTER FUNCTION public.kek_begin_rotation(text, bytea, bytea) OWNER TO agent_memory_key_rotator;
ALTER FUNCTION public.kek_rewrap_candidates(text, text, integer) OWNER TO agent_memory_key_rotator;
ALTER FUNCTION public.kek_rewrap_subject_key(text, text, text, text, bytea, bytea, bytea, bytea) OWNER TO agent_memory_key_rotator;
ALTER FUNCTION public.kek_reencrypt_candidates(text, text, integer) OWNER TO agent_memory_key_rotator;
ALTER FUNCTION public.kek_reencrypt_reason(text, text, text, text, bytea, bytea, bytea) OWNER TO agent_memory_key_rotator;
ALTER FUNCTION public.kek_mark_destroyed(text) OWNER TO agent_memory_key_rotator;

-- 3. Physical compaction, as agent_memory_maintainer. VACUUM cannot run in a function, and
--    whoever may VACUUM a table holds MAINTAIN on it, which also allows injecting statistics and
--    LOCK TABLE in any mode. So the rewrite is CLUSTER on the table's primary (or first plain
--    btree) index — the same copy of live rows into new files as VACUUM FULL, allowed inside a
--    function for a table that is not partitioned (each partition is rewritten on its own) — and
--    the statistics are cleared and re-sampled by ANALYZE, from a definer function. What limits
--    how long its ACCESS EXCLUSIVE locks (pg_statistic's included) are held: the functions run
--    only when called by the procedures below, which COMMIT right after each call. A procedure
--    can commit only when CALLed outside a transaction block; inside one the COMMIT fails and
--    the rollback releases the locks, so no caller can keep them past the statement.

-- The tables compaction rewrites (those an erasure deletes from or redacts, agent_memory/tables.py;
-- a test keeps both lists equal). Written by migrations only.
CREATE TABLE public.compaction_tables (table_name text PRIMARY KEY);
INSERT INTO public.compaction_tables (table_name) VALUES
    ('memory_vectors'), ('memory_search'), ('lexical_statistics'), ('memory_postings'), ('lexical_frequencies'),
    ('projection_outbox'), ('observations'), ('episodes'), ('facts'), ('forgotten_memories'), ('consents'),
    ('operations'), ('rebuild_reports'), ('messages'), ('sessions'), ('subject_keys'), ('memory_events'),
    ('erasure_requests'), ('tombstones');
GRANT SELECT ON public.compaction_tables TO agent_memory_app, agent_memory_maintainer;

-- Refuses unless `stack` (PG_CONTEXT, read by the function `callee`) shows `callee` called by the
-- compaction procedure `procedure` as a top-level CALL: exactly three frames (the callee, the
-- procedure's PERFORM statement, the procedure). A plpgsql function in pg_temp shows as
-- pg_temp_N.name, a DO block as inline_code_block, and the application can create functions
-- nowhere else, so no other caller matches; a caller wrapping the CALL adds a frame.
CREATE FUNCTION public.compaction_check_caller(stack text, callee text, procedure text)
RETURNS void LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    frames text[] := pg_catalog.regexp_split_to_array(stack, E'\n');
BEGIN
    IF pg_catalog.array_length(frames, 1) IS DISTINCT FROM 3
       OR frames[1] !~ ('^PL/pgSQL function (public\.)?' || callee || ' line \d+ at GET DIAGNOSTICS$')
       OR frames[2] !~ '^SQL statement "SELECT public\.compaction_rewrite_[a-z]+\([a-z_, ]*\)"$'
       OR frames[3] !~ ('^PL/pgSQL function (public\.)?' || procedure || ' line \d+ at PERFORM$') THEN
        RAISE EXCEPTION 'compaction runs only as CALL public.%, outside a transaction block',
            pg_catalog.replace(pg_catalog.replace(procedure, E'\\(', '('), E'\\)', ')')
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END
$$;

-- One relation of a compacted table (the table itself, or one of its partitions): its column
-- statistics cleared, its rows copied into new files (not for a partitioned parent, which has
-- none), its statistics sampled again. VERBOSE reports dead rows a snapshot forced it to keep.
CREATE FUNCTION public.compaction_rewrite_relation(table_name text, relation oid)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '30s'
AS $$
DECLARE
    stack text;
    target regclass;
    partitioned boolean;
    clustering_index regclass;
    col record;
BEGIN
    GET DIAGNOSTICS stack = PG_CONTEXT;
    PERFORM public.compaction_check_caller(stack, 'compaction_rewrite_relation\(text,oid\)',
                                           'compact_table\(text\)');
    IF NOT EXISTS (SELECT 1 FROM public.compaction_tables t WHERE t.table_name = compaction_rewrite_relation.table_name)
    THEN
        RAISE EXCEPTION 'compaction rewrites only the tables in public.compaction_tables, not %', table_name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT t.relid INTO target FROM pg_catalog.pg_partition_tree(pg_catalog.format('public.%I', table_name)::regclass) t
     WHERE t.relid = relation;
    IF target IS NULL AND relation = pg_catalog.format('public.%I', table_name)::regclass THEN
        target := relation;
    END IF;
    IF target IS NULL THEN
        RAISE EXCEPTION 'relation % is not public.% or one of its partitions', relation, table_name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT c.relkind = 'p' INTO partitioned FROM pg_catalog.pg_class c WHERE c.oid = target;
    FOR col IN SELECT n.nspname, c.relname, a.attname FROM pg_catalog.pg_class c
                 JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                 JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid
                WHERE c.oid = target AND a.attnum > 0 AND NOT a.attisdropped LOOP
        PERFORM pg_catalog.pg_clear_attribute_stats(col.nspname, col.relname, col.attname, partitioned);
    END LOOP;
    IF NOT partitioned THEN
        SELECT x.indexrelid INTO clustering_index FROM pg_catalog.pg_index x
          JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid JOIN pg_catalog.pg_am am ON am.oid = i.relam
         WHERE x.indrelid = target AND am.amname = 'btree' AND x.indisvalid AND x.indpred IS NULL
         ORDER BY x.indisprimary DESC, x.indisunique DESC, x.indexrelid LIMIT 1;
        IF clustering_index IS NULL THEN
            RAISE EXCEPTION 'relation % has no btree index to rewrite it by', target;
        END IF;
        EXECUTE pg_catalog.format('CLUSTER (VERBOSE) %s USING %I', target,
                                  (SELECT i.relname FROM pg_catalog.pg_class i WHERE i.oid = clustering_index));
    END IF;
    EXECUTE pg_catalog.format('ANALYZE ONLY %s', target);
END
$$;

-- pg_statistic itself: ANALYZE replaced the statistics rows, and the old versions (sampled
-- values) are dead tuples there until it is rewritten too.
CREATE FUNCTION public.compaction_rewrite_statistics()
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET lock_timeout = '30s'
AS $$
DECLARE
    stack text;
BEGIN
    GET DIAGNOSTICS stack = PG_CONTEXT;
    PERFORM public.compaction_check_caller(stack, 'compaction_rewrite_statistics\(\)', 'compact_statistics\(\)');
    CLUSTER (VERBOSE) pg_catalog.pg_statistic USING pg_statistic_relid_att_inh_index;
END
$$;

REVOKE ALL ON FUNCTION public.compaction_rewrite_relation(text, oid), public.compaction_rewrite_statistics(),
    public.compaction_check_caller(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.compaction_rewrite_relation(text, oid), public.compaction_rewrite_statistics(),
    public.compaction_check_caller(text, text, text) TO agent_memory_app, agent_memory_maintainer;
ALTER FUNCTION public.compaction_rewrite_relation(text, oid) OWNER TO agent_memory_maintainer;
ALTER FUNCTION public.compaction_rewrite_statistics() OWNER TO agent_memory_maintainer;

-- The entry points: CALL each in autocommit. Each relation is its own transaction (committed
-- before the next is locked), as VACUUM FULL processes a partitioned table. Invoker's rights:
-- the application's (names schema-qualified; no SET clause, which would forbid the COMMIT).
CREATE PROCEDURE public.compact_table(table_name text) LANGUAGE plpgsql
AS $$
DECLARE
    relation oid;
BEGIN
    -- Partitions first, the partitioned parent (its inherited statistics) last; a table that is
    -- not partitioned has no partition tree.
    FOR relation IN
        SELECT t.relid FROM pg_catalog.pg_partition_tree(pg_catalog.format('public.%I', table_name)::pg_catalog.regclass) t
         ORDER BY t.isleaf DESC, t.level DESC
    LOOP
        PERFORM public.compaction_rewrite_relation(table_name, relation);
        COMMIT;
    END LOOP;
    IF NOT FOUND THEN
        relation := pg_catalog.format('public.%I', table_name)::pg_catalog.regclass;
        PERFORM public.compaction_rewrite_relation(table_name, relation);
        COMMIT;
    END IF;
END
$$;

CREATE PROCEDURE public.compact_statistics() LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM public.compaction_rewrite_statistics();
    COMMIT;
END
$$;

REVOKE ALL ON PROCEDURE public.compact_table(text), public.compact_statistics() FROM PUBLIC;
GRANT EXECUTE ON PROCEDURE public.compact_table(text), public.compact_statistics() TO agent_memory_app;
ALTER PROCEDURE public.compact_table(text) OWNER TO agent_memory_maintainer;
ALTER PROCEDURE public.compact_statistics() OWNER TO agent_memory_maintainer;

REVOKE CREATE ON SCHEMA public FROM agent_memory_key_rotator, agent_memory_maintainer;
