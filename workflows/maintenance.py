"""Periodic maintenance, run by Temporal Schedules an operator sees in the UI:

- key rotation (daily): re-wrap every live subject key under a new key-encryption key and
  destroy the old one, so old copies of shredded subject keys (WAL, backups) become useless;
- physical compaction (hourly): rewrite the tables erasures touched, so erased bytes leave
  table and index pages, planner statistics and Redis' persistence files.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import VersioningBehavior

with workflow.unsafe.imports_passed_through():
    from activities.maintenance import MaintenanceActivities
    from agent_memory.core import contract
    from agent_memory.lifecycle.compaction import CompactionInput, CompactionResult
    from agent_memory.security.keyring import KeyRotationInput, RotationResult

# Transient failures (a database restart) are retried without an attempt cap: an outage must not
# leave a rotation half done; a half-done rotation resumes where it stopped. Re-wrapping is one
# UPDATE per subject key and VACUUM FULL copies whole tables: generous bounds, with heartbeats to
# notice a dead worker quickly (contract.KEY_ROTATION, contract.PHYSICAL_COMPACTION).


@workflow.defn(name=contract.KEY_ROTATION_WORKFLOW, versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class KeyRotationWorkflow:
    @workflow.run
    async def run(self, request: KeyRotationInput) -> RotationResult:
        return await workflow.execute_activity_method(
            MaintenanceActivities.rotate_key_encryption_key, request, **contract.KEY_ROTATION.options())


@workflow.defn(name=contract.PHYSICAL_COMPACTION_WORKFLOW, versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class PhysicalCompactionWorkflow:
    @workflow.run
    async def run(self, request: CompactionInput) -> CompactionResult:
        return await workflow.execute_activity_method(
            MaintenanceActivities.compact_erased_data, request, **contract.PHYSICAL_COMPACTION.options())
