"""The idle timer of a session: when no message arrives for the idle timeout (10 minutes by
default), the session is treated as ended and its consolidation starts — the same workflow id
the session-end hook uses, so whichever comes first wins and the other attaches. An `end` signal
closes the timer the same way: whoever sent it (the hook, or any client), the consolidation of
the messages still pending exists when the timer closes."""

from __future__ import annotations

import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes, VersioningBehavior, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from activities.consolidation import ConsolidationActivities
    from agent_memory.core import contract
    from agent_memory.core.contract import SESSION_ID, SUBJECT_ID, TENANT_ID
    from agent_memory.core.models import ConsolidationInput, SessionIdleInput, SessionIdleResult, StepInput
    from workflows.consolidation import ConsolidationWorkflow

# Signals are history events: a very chatty session starts afresh now and then.
MAX_TOUCHES_PER_RUN = 1000


@workflow.defn(name=contract.SESSION_IDLE_WORKFLOW, versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class SessionIdleWorkflow:
    def __init__(self) -> None:
        self._touched = False
        self._ended = False
        self._ended_by_hook = False
        self._touches = 0

    @workflow.signal(name=contract.SIGNAL_TOUCH)
    def touch(self) -> None:
        """A message arrived: the idle clock starts again."""
        self._touched = True
        self._touches += 1

    @workflow.signal(name=contract.SIGNAL_END)
    def end(self, by_hook: bool = False) -> None:
        """The session ended: the timer stops waiting and makes sure the consolidation exists.
        The session-end hook says it sent the signal (`by_hook`): it started or attached to the
        consolidation itself (a run under an old id included), so the timer leaves it to the hook."""
        self._ended = True
        self._ended_by_hook = by_hook

    @workflow.run
    async def run(self, request: SessionIdleInput) -> SessionIdleResult:
        idle = timedelta(seconds=request.idle_seconds)
        while True:
            self._touched = False
            try:
                await workflow.wait_condition(lambda: self._touched or self._ended, timeout=idle)
            except TimeoutError:
                break
            if self._ended:
                if not workflow.patched("end-signal-ensures-consolidation") or self._ended_by_hook:
                    return SessionIdleResult(outcome="ended by the session-end hook")
                break
            if self._touches >= MAX_TOUCHES_PER_RUN:
                workflow.continue_as_new(request)
        if workflow.patched("consolidation-id-names-the-subject"):
            consolidation_id = contract.consolidation_workflow_id(request.tenant_id, request.subject_id,
                                                                  request.session_id)
        else:  # a history from before session ids were scoped per subject
            consolidation_id = contract.legacy_consolidation_workflow_id(request.tenant_id, request.session_id)
        # An outage must not drop the idle timer: retried without an attempt cap (contract.IDLE_CHECK).
        check = StepInput(tenant_id=request.tenant_id, subject_id=request.subject_id, session_id=request.session_id)
        pending = await workflow.execute_activity_method(
            ConsolidationActivities.count_unconsolidated, check, **contract.IDLE_CHECK.options())
        # Appends signal at most once per debounce window (MemoryClient._touch_idle_timer), so the
        # last messages may not have restarted the clock: idle is measured from the newest message.
        while (workflow.patched("idle-from-the-newest-message") and pending.count
               and pending.idle_seconds is not None and pending.idle_seconds < request.idle_seconds):
            remaining = timedelta(seconds=request.idle_seconds - pending.idle_seconds)
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(lambda: self._ended, timeout=remaining)
            if self._ended:
                if not workflow.patched("end-signal-ensures-consolidation") or self._ended_by_hook:
                    return SessionIdleResult(outcome="ended by the session-end hook")
                break
            pending = await workflow.execute_activity_method(
                ConsolidationActivities.count_unconsolidated, check, **contract.IDLE_CHECK.options())
        why = "ended" if self._ended else "idle"
        if pending.count == 0:
            return SessionIdleResult(outcome="nothing new to consolidate", consolidation_workflow_id=consolidation_id)
        try:
            # A closed run of this id covered older messages; these new ones get a new run.
            await workflow.start_child_workflow(
                ConsolidationWorkflow.run,
                ConsolidationInput(tenant_id=request.tenant_id, subject_id=request.subject_id,
                                   session_id=request.session_id),
                id=consolidation_id,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                priority=contract.tenant_fairness(request.tenant_id),
                search_attributes=TypedSearchAttributes([
                    SearchAttributePair(TENANT_ID, request.tenant_id),
                    SearchAttributePair(SUBJECT_ID, request.subject_id),
                    SearchAttributePair(SESSION_ID, request.session_id)]))
        except WorkflowAlreadyStartedError:
            return SessionIdleResult(outcome="consolidation already started", consolidation_workflow_id=consolidation_id)
        return SessionIdleResult(outcome=f"{why}: consolidation started", consolidation_workflow_id=consolidation_id)
