"""Erasure activities: one per step, each idempotent, each returning small figures."""

from __future__ import annotations

from pathlib import Path

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel
from redis.asyncio import Redis
from temporalio import activity
from temporalio.client import Client

from activities.errors import temporal_failures
from activities.webhooks import start_webhook_deliveries
from agent_memory.core import contract
from agent_memory.core.hooks import fault_point
from agent_memory.core.models import ErasureInput, ErasureReceipt, ErasureStepInput, StoreCount
from agent_memory.core.run_inputs import RunInput
from agent_memory.lifecycle import erasure
from agent_memory.lifecycle.erasure_ledger import LedgerEntry, append_erasure
from agent_memory.security.keyring import KeyRing
from agent_memory.security.operator_requests import UnauthorizedRequestError, count_refusal
from agent_memory.store.counters import add_counts_if_known


class ResidueReport(BaseModel):
    residue: dict[str, int]
    total: int


class CompleteErasureInput(RunInput):
    tenant_id: str
    subject_id: str
    request_id: str
    residue: dict[str, int]


class ErasureActivities:
    def __init__(self, pool: AsyncConnectionPool, redis: Redis, keyring: KeyRing, *, ledger_home: Path | None = None,
                 temporal: Client | None = None):
        """`ledger_home`: the agent-memory home whose erasure ledger records each completed
        erasure (agent_memory/lifecycle/erasure_ledger.py); None keeps no ledger. `temporal`: the
        client that starts the webhook deliveries of a completed erasure (None: the sweep does)."""
        self.temporal = temporal
        self.pool = pool
        self.redis = redis
        self.keyring = keyring
        self.ledger_home = ledger_home

    @activity.defn(name=contract.BEGIN_ERASURE)
    @temporal_failures
    async def begin_erasure(self, request: ErasureInput) -> erasure.ErasureStarted:
        # The run executing this activity is the one the registered request must name, and the
        # one that claims it.
        info = activity.info()
        try:
            return await erasure.begin_erasure(self.pool, self.keyring, request.tenant_id, request.subject_id,
                                               request.request_id, workflow_id=info.workflow_id or "",
                                               run_id=info.workflow_run_id or "")
        except UnauthorizedRequestError as exc:
            activity.logger.warning("erasure refused: %s", exc)
            count_refusal(exc.reason)
            await add_counts_if_known(self.pool, request.tenant_id, {exc.counter: 1})
            raise

    @activity.defn(name=contract.ERASE_STORE)
    @temporal_failures
    async def erase_store(self, step: ErasureStepInput) -> StoreCount:
        removed = await erasure.erase_store(self.pool, self.redis, self.keyring, step.tenant_id, step.subject_id,
                                            step.request_id, step.store)
        fault_point(f"mid_erasure:{step.store}")
        return StoreCount(store=step.store, removed=removed)

    @activity.defn(name=contract.SHRED_SUBJECT_KEY)
    @temporal_failures
    async def shred_subject_key(self, step: ErasureStepInput) -> StoreCount:
        shredded = await erasure.shred_subject_key(self.pool, step.tenant_id, step.subject_id, step.request_id)
        return StoreCount(store="subject_key", removed=int(shredded))

    @activity.defn(name=contract.VERIFY_ERASURE)
    @temporal_failures
    async def verify_erasure(self, step: ErasureStepInput) -> ResidueReport:
        residue = await erasure.scan_residue(self.pool, self.redis, step.tenant_id, step.subject_id)
        return ResidueReport(residue=residue, total=sum(residue.values()))

    @activity.defn(name=contract.COMPLETE_ERASURE)
    @temporal_failures
    async def complete_erasure(self, step: CompleteErasureInput) -> ErasureReceipt:
        receipt = await erasure.complete_erasure(self.pool, self.keyring, step.tenant_id, step.subject_id,
                                                 step.request_id, step.residue)
        if self.ledger_home is not None:
            # Outside the database: a restore from a backup taken before now cannot forget it.
            entry = LedgerEntry(request_id=step.request_id, tenant_id=step.tenant_id, completed_at=receipt.completed_at,
                                subject_digest=self.keyring.subject_digest(step.tenant_id, step.subject_id))
            try:
                append_erasure(self.ledger_home, self.keyring, entry)
            except Exception as exc:  # the erasure is done; an operator must repair the ledger
                activity.logger.error("erasure %s of tenant %s completed but is not in the erasure ledger: %s",
                          step.request_id, step.tenant_id, exc)
        if self.temporal is not None:
            await start_webhook_deliveries(self.pool, self.temporal, activity.info().task_queue, step.tenant_id)
        return receipt
