"""Inputs and outputs of the projector (workflows/projector.py): counts, cursors and timings only —
never texts or vectors, which stay in Postgres."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from agent_memory.core.run_inputs import RunInput


class ProjectionPolicy(BaseModel):
    """How the outbox is drained and retried: worker configuration (build_worker), not history."""

    batch_size: int = Field(default=32, ge=1, le=256)  # texts per provider call
    max_attempts: int = Field(default=12, ge=1)  # transient failures before a row is dead-lettered
    backoff_initial_seconds: float = Field(default=10.0, gt=0)
    backoff_max_seconds: float = Field(default=3600.0, gt=0)


class ProjectorInput(RunInput):
    kind: Literal["projector"] = "projector"
    tenant_id: str
    subject_id: str
    # Batches per run before continuing as new (history stays small).
    batches_per_run: int = Field(default=100, ge=1)
    # Totals carried over from the earlier runs of the chain.
    runs: int = 1
    batches: int = 0
    vectors_upserted: int = 0
    retried: int = 0
    dead_lettered: int = 0
    skipped: int = 0


class ProjectorBatchInput(RunInput):
    tenant_id: str
    subject_id: str


class ProjectorBatchOutcome(BaseModel):
    selected: int = 0  # due rows this batch looked at
    vectors_upserted: int = 0
    reused: int = 0  # embeddings taken from recorded operations, no provider call
    embedded: int = 0  # texts embedded by a provider call in this batch
    provider_calls: int = 0
    skipped: int = 0  # rows whose memory is gone (erased, replaced): marked done, nothing to embed
    retried: int = 0  # rows that failed transiently and will be tried again later
    dead_lettered: int = 0
    in_flight: int = 0  # rows another attempt is embedding right now (left alone)
    # The subject's outbox after the batch (pending = not projected, not dead).
    due: int = 0
    pending: int = 0
    next_attempt_in_seconds: float | None = None  # earliest pending row not due yet


class ProjectorProgress(BaseModel):
    step: str
    runs: int = 1
    batches: int = 0
    vectors_upserted: int = 0
    retried: int = 0
    dead_lettered: int = 0
    pending: int = 0


class ProjectorResult(BaseModel):
    tenant_id: str
    subject_id: str
    runs: int
    batches: int
    vectors_upserted: int
    retried: int
    dead_lettered: int
    skipped: int
    stopped_reason: str | None = None  # "subject erased"


class ProjectionSweepInput(RunInput):
    kind: Literal["projection-sweep"] = "projection-sweep"
    subjects_per_tenant: int = Field(default=1000, ge=1)
    prune_per_tenant: int = Field(default=10_000, ge=0)  # projected outbox rows deleted per tenant per run


class ProjectionSweepResult(BaseModel):
    tenants: int
    subjects_woken: int
    rows_pruned: int = 0  # projected outbox rows deleted (absent from runs before migration 023)


class ProjectionLag(BaseModel):
    """The projection's lag for a tenant (or one subject): what `agent-memory stats` shows."""

    tenant_id: str
    subject_id: str | None = None
    pending: int  # not projected yet, not dead
    due: int  # of those, due now
    retrying: int  # of those, failed at least once
    oldest_pending_age_seconds: float | None
    dead_letters: int
