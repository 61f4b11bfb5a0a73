-- The vector projection's outbox no longer grows without bound (agent_memory/projection.py):
-- the projection sweep deletes rows projected over an hour ago, through the second index. The
-- first lets an erasure (and a forget) find a subject's rows, processed or not, without a scan of
-- the tenant's outbox.
CREATE INDEX projection_outbox_subject ON public.projection_outbox (tenant_id, subject_id);
CREATE INDEX projection_outbox_processed ON public.projection_outbox (tenant_id, processed_at)
    WHERE processed_at IS NOT NULL;
