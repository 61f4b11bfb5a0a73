-- Erasure shreds the subject key, so event payloads and key digests become unreadable; this
-- also clears what the event rows say in the clear (namespace, evidence message ids, the
-- operation id that names the session). The application role cannot UPDATE the event log, so
-- the redaction is a function run with the owner's rights, only for a tombstoned subject of
-- the transaction's own tenant.
CREATE FUNCTION redact_subject_events(p_tenant text, p_subject text) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    redacted integer;
BEGIN
    IF p_tenant IS DISTINCT FROM current_setting('app.tenant_id', true) THEN
        RAISE EXCEPTION 'redact_subject_events: tenant % is not the transaction''s tenant', p_tenant;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM tombstones WHERE tenant_id = p_tenant AND subject_id = p_subject) THEN
        RAISE EXCEPTION 'redact_subject_events: subject has no tombstone; erase it first';
    END IF;
    UPDATE memory_events
       SET namespace = 'erased', source_message_ids = '{}', operation_id = 'erased',
           extractor_name = NULL, extractor_version = NULL
     WHERE tenant_id = p_tenant AND subject_id = p_subject AND operation_id <> 'erased';
    GET DIAGNOSTICS redacted = ROW_COUNT;
    RETURN redacted;
END
$$;
REVOKE ALL ON FUNCTION redact_subject_events(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION redact_subject_events(text, text) TO agent_memory_app;
