"""The base of every workflow and activity input.

Temporal is an orchestrator, not an authority: anyone who reaches its frontend can start a
workflow with any input. An input therefore validates only as exactly what it declares — an
undeclared field is refused, not ignored — and each workflow's input names its kind, so another
workflow's input (copied from a history) never validates as this one's. A refusal fails the run at
once, non-retryably (agent_memory/security/payload_codec.py)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class RunInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def beyond_schedule(self) -> bool:
        """Whether this input asks for more than the Schedule that runs the workflow does (a
        forced rotation, a compaction of every table, a grace period of its own): such a run acts
        only on an operator request it claims (agent_memory/security/operator_requests.py). A
        Schedule's own input never is (workers/schedules.py refuses one that would be)."""
        return False
