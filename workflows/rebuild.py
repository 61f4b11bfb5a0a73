"""Rebuild of a tenant's (or one subject's) projections from the event log, with proof.

list subjects → per subject: replay the events, hash the rebuilt and the live projection,
swap the rebuilt tables in where they differ. History carries subject ids, digests and counts.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import VersioningBehavior

with workflow.unsafe.imports_passed_through():
    from activities.rebuild import RebuildActivities
    from agent_memory.core import contract
    from agent_memory.core.models import (
        RebuildInput,
        RebuildProgress,
        RebuildResult,
        RebuildSubjectInput,
        SubjectListInput,
        SubjectRebuild,
    )
    from agent_memory.core.run_metadata import progress_details

# Reads and one transaction per subject: transient database errors retried without an attempt
# cap, at a capped interval (contract.REBUILD_LIST, contract.REBUILD_SUBJECT_STEP: one subject's
# replay, comparison and swap, and any re-embedding of vectors left missing).
# A tenant-wide rebuild continues as a new run after each page of subjects (request
# .subjects_per_run), so history stays small. Each subject's report is written to the
# rebuild_reports table by its activity; the workflow carries only counts and a cursor (the last
# subject done), so a forced rebuild of any number of subjects stays far below the 2 MB payload
# limit. The client reads the reports for the result (AdminClient.rebuild_result).


@workflow.defn(name=contract.REBUILD_WORKFLOW, versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class RebuildWorkflow:
    def __init__(self) -> None:
        self._progress = RebuildProgress(step="starting")

    @workflow.query
    def progress(self) -> RebuildProgress:
        return self._progress

    @workflow.run
    async def run(self, request: RebuildInput) -> RebuildResult:
        more = False
        if request.subject_id:
            subjects = [request.subject_id]
        else:
            self._progress.step = "list_subjects"
            listed = await workflow.execute_activity_method(
                RebuildActivities.list_subjects_to_rebuild,
                SubjectListInput(tenant_id=request.tenant_id, after_subject=request.after_subject,
                                 limit=request.subjects_per_run),
                **contract.REBUILD_LIST.options())
            subjects = listed.subjects
            more = len(subjects) == request.subjects_per_run
        self._progress.subjects_total = len(subjects)

        entries: list[SubjectRebuild] = []
        for subject in subjects:
            self._progress.step = f"rebuild_subject {subject}"
            entry = await workflow.execute_activity_method(
                RebuildActivities.rebuild_subject,
                RebuildSubjectInput(tenant_id=request.tenant_id, subject_id=subject, force=request.force,
                                    request_id=request.request_id),
                **contract.REBUILD_SUBJECT_STEP.options())
            entries.append(entry)
            self._progress.subjects_done += 1
            self._progress.rows += entry.rows
            self._progress.mismatched += int(not entry.equal and not entry.skipped_erased)
            self._progress.skipped_erased += int(entry.skipped_erased)
            workflow.set_current_details(progress_details(self._progress))  # for the UI; no command
        result = self._totals(request, entries)
        # Runs recorded before paging existed listed every subject in one run and never continued:
        # replaying one that happened to list exactly a page must not continue either.
        if more and workflow.patched("rebuild-pages-with-continue-as-new"):
            self._progress.step = "continue with the next subjects"
            workflow.continue_as_new(request.model_copy(update={"after_subject": subjects[-1], "carried": result}))
        self._progress.step = "done"
        workflow.set_current_details(progress_details(self._progress))
        return result

    @staticmethod
    def _totals(request: RebuildInput, entries: list[SubjectRebuild]) -> RebuildResult:
        """This run's subjects added to what the earlier runs of the chain counted. Counts only:
        the subjects' reports are in rebuild_reports (runs recorded before the table existed
        carried listed entries; what they carried is kept, never added to)."""
        carried = request.carried
        replayed = [e for e in entries if not e.skipped_erased]
        return RebuildResult(
            workflow_id=workflow.info().workflow_id, request_id=request.request_id, listed_max=request.listed_max,
            tenant_id=request.tenant_id,
            subject_id=request.subject_id, force=request.force, subjects=carried.subjects if carried else [],
            subjects_total=len(entries) + (carried.subjects_total if carried else 0),
            subjects_equal=sum(e.equal for e in replayed) + (carried.subjects_equal if carried else 0),
            subjects_repaired=sum(e.repaired for e in entries) + (carried.subjects_repaired if carried else 0),
            skipped_erased=len(entries) - len(replayed) + (carried.skipped_erased if carried else 0),
            rows=sum(e.rows for e in entries) + (carried.rows if carried else 0),
            events=sum(e.events for e in entries) + (carried.events if carried else 0),
            all_equal=all(e.equal for e in replayed) and (carried.all_equal if carried else True),
            subjects_not_listed=carried.subjects_not_listed if carried else 0)
