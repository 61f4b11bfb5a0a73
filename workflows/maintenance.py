"""Periodic maintenance, run by Temporal Schedules an operator sees in the UI:

- key rotation (daily): re-wrap every live subject key under a new key-encryption key and
  destroy the old one, so old copies of shredded subject keys (WAL, backups) become useless;
- physical compaction (hourly): rewrite the tables erasures touched, so erased bytes leave
  table and index pages, planner statistics and Redis' persistence files.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.maintenance import MaintenanceActivities
    from agent_memory.compaction import CompactionInput, CompactionResult
    from agent_memory.keyring import KeyRotationInput, RotationResult

# Transient failures (a database restart) are retried without an attempt cap: an outage must not
# leave a rotation half done; a half-done rotation resumes where it stopped.
MAINTENANCE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), backoff_coefficient=2.0,
                                maximum_interval=timedelta(minutes=2), maximum_attempts=0,
                                non_retryable_error_types=["KeyUnavailable", "RotationUnsupported"])
# Re-wrapping is one UPDATE per subject key and VACUUM FULL copies whole tables: generous bounds,
# with heartbeats (every 5 s, activities/errors.py) to notice a dead worker quickly.
ROTATION_TIMEOUT = timedelta(hours=2)
COMPACTION_TIMEOUT = timedelta(hours=2)
HEARTBEAT_TIMEOUT = timedelta(seconds=30)


@workflow.defn
class KeyRotationWorkflow:
    @workflow.run
    async def run(self, request: KeyRotationInput) -> RotationResult:
        return await workflow.execute_activity_method(
            MaintenanceActivities.rotate_key_encryption_key, request, start_to_close_timeout=ROTATION_TIMEOUT,
            heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=MAINTENANCE_RETRY)


@workflow.defn
class PhysicalCompactionWorkflow:
    @workflow.run
    async def run(self, request: CompactionInput) -> CompactionResult:
        return await workflow.execute_activity_method(
            MaintenanceActivities.compact_erased_data, request, start_to_close_timeout=COMPACTION_TIMEOUT,
            heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=MAINTENANCE_RETRY)
