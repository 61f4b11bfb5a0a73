"""The run an activity claims an operator request for (agent_memory/security/operator_requests.py).

A run that does all its destructive work in one activity (a key rotation, a compaction, a memory
sweep) claims for its own run id: a Temporal reset or a new start under the same workflow id is a
new run id and is refused. A run that continues as new over pages (a rebuild, a re-derivation, a
re-embedding) is one run spread over a chain; each run of the chain claims for the chain's first
run id, read from Temporal's description of the run (continue-as-new is the workflow's own
command: nobody outside the workflow can add a run to its chain, and a new start begins a chain
of its own). A retried activity claims for the same run id again, which passes.
"""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool
from temporalio import activity
from temporalio.client import Client

from agent_memory.security.keyring import KeyRing
from agent_memory.security.operator_requests import OperatorRequestKind, claim_operator_request

_CHAIN_CACHE_SIZE = 1024
_first_run_ids: dict[str, str] = {}  # run id -> its chain's first run id (never changes)


async def chain_first_run_id(temporal: Client | None) -> str:
    """The first run id of the chain the current activity's run belongs to (its own run id when
    it did not continue from another run, or without a client to ask)."""
    info = activity.info()
    run_id = info.workflow_run_id or ""
    if temporal is None or not run_id:
        return run_id
    if run_id not in _first_run_ids:
        description = await temporal.get_workflow_handle(info.workflow_id or "", run_id=run_id).describe()
        first = description.raw_description.workflow_execution_info.first_run_id or run_id
        if len(_first_run_ids) >= _CHAIN_CACHE_SIZE:
            _first_run_ids.clear()
        _first_run_ids[run_id] = first
    return _first_run_ids[run_id]


async def claim_for_this_run(pool: AsyncConnectionPool, keyring: KeyRing, kind: OperatorRequestKind, *,
                             chain: Client | None = None, chained: bool = False) -> None:
    """Claim the operator request of the current activity's workflow for its run (its chain's
    first run with `chained`, asked of `chain`); refused as UnauthorizedRequest otherwise."""
    info = activity.info()
    run_id = await chain_first_run_id(chain) if chained else info.workflow_run_id or ""
    await claim_operator_request(pool, keyring, kind, info.workflow_id or "", run_id)
