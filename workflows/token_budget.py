"""A run parked on its tenant's daily token budget: consolidation and re-derivation call a model
only while the budget has tokens left, and wait, parked, while it is spent — never failing for it.

Parked, the run's memo and current details say so (the Temporal UI, `agent-memory runs`, the
console); it checks the budget again at the next UTC day (workflow time), every BUDGET_RECHECK, and
when its `budget_changed` signal says the budget was raised. Workflow code: no I/O, no wall clock.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, time, timedelta
from typing import Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.consolidation import ConsolidationActivities
    from agent_memory.core import contract
    from agent_memory.core.models import StepInput, TokenBudgetState
    from agent_memory.core.run_metadata import PublicText

# How often a parked run checks the budget again, besides the next UTC day and the signal.
BUDGET_RECHECK = timedelta(minutes=15)


class Progress(Protocol):
    """A run's progress as its query answers it: the step it is on."""

    step: str


class BudgetRaised:
    """Set by a run's `budget_changed` signal (contract.SIGNAL_BUDGET_CHANGED): a parked run checks
    the budget again now rather than at its next timer."""

    def __init__(self) -> None:
        self.signalled = False


async def within_token_budget(step: StepInput, progress: Progress, raised: BudgetRaised) -> None:
    """Return once the tenant's token budget has tokens left today; while it has none, the run is
    parked (the progress's step says so until it resumes)."""
    budget = await token_budget(step)
    if not budget.exhausted:
        return
    was = progress.step
    progress.step = contract.PARKED_TOKEN_BUDGET
    workflow.upsert_memo({contract.RUN_STATE_MEMO: PublicText(contract.PARKED_TOKEN_BUDGET)})
    workflow.logger.info("token budget of the day spent (%d of %d tokens): parked", budget.used_tokens,
                         budget.daily_tokens or 0)
    while budget.exhausted:
        now = workflow.now()
        next_day = datetime.combine(now.astimezone(UTC).date() + timedelta(days=1), time(), UTC)
        workflow.set_current_details(  # for the UI; creates no command
            f"**{contract.PARKED_TOKEN_BUDGET}**\n{budget.used_tokens} of {budget.daily_tokens} tokens spent on "
            f"{budget.day.isoformat()} (UTC)\nresumes at {next_day.isoformat()} or when the budget is raised")
        with contextlib.suppress(TimeoutError):  # the recheck's or the day's timer fired
            await workflow.wait_condition(lambda: raised.signalled,
                                          timeout=min(BUDGET_RECHECK, next_day - now + timedelta(seconds=1)))
        raised.signalled = False
        budget = await token_budget(step)
    workflow.upsert_memo({contract.RUN_STATE_MEMO: PublicText(contract.RESUMED_TOKEN_BUDGET)})
    workflow.set_current_details(f"**{contract.RESUMED_TOKEN_BUDGET}**\n{budget.used_tokens} tokens spent on "
                                 f"{budget.day.isoformat()} (UTC), budget {budget.daily_tokens or 'unlimited'}")
    workflow.logger.info("token budget has tokens left (%d spent of %s): resumed", budget.used_tokens,
                         budget.daily_tokens if budget.daily_tokens is not None else "unlimited")
    progress.step = was


async def token_budget(step: StepInput) -> TokenBudgetState:
    """The tenant's budget today, as a local activity (TOKEN_BUDGET_CHECK)."""
    return await workflow.execute_local_activity_method(
        ConsolidationActivities.check_token_budget, step, **contract.TOKEN_BUDGET_CHECK.local_options())
