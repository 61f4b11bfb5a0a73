"""The operator's client: tenant policies, webhooks, erasure, rebuilds and re-derivations,
Schedules, keys, counters and run listings. It shares the agent's `Services` (one set of
connections): `MemoryClient.admin`, or `AdminClient(services)`."""



from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Literal, Self, TypeVar

import psycopg
from pydantic import BaseModel
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import (
    Priority,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import TemporalError, WorkflowAlreadyStartedError
from temporalio.service import RPCError

from agent_memory.api.services import Services, check_schema
from agent_memory.core import contract
from agent_memory.core.contract import (  # the id builders: re-exported for existing importers
    SUBJECT_ID,
    TENANT_ID,
)
from agent_memory.core.errors import InvalidInput, NotFound
from agent_memory.core.models import (
    CommitOutcome,
    ErasureReceipt,
    ErasureStatus,
    RebuildInput,
    RebuildResult,
    RederiveInput,
    RederiveReport,
    RederiveResult,
    TokenBudgetState,
    check_identifier,
)
from agent_memory.core.projection_models import ProjectionLag
from agent_memory.core.run_metadata import RunPayloads, public_memo_text, read_run_payloads
from agent_memory.core.settings import Settings
from agent_memory.lifecycle.compaction import CompactionInput, CompactionResult
from agent_memory.lifecycle.erasure import (
    check_reason,
    erasure_reason,
    erasure_status,
    register_erasure_request,
    with_reason,
)
from agent_memory.lifecycle.erasure_ledger import ReapplyResult, reapply_erasures
from agent_memory.lifecycle.erasure_runs import (
    ErasureCounts,
    ErasureRedriveInput,
    ErasureRedriveResult,
    erasure_counts,
    start_erasure_workflow,
)
from agent_memory.lifecycle.export import SubjectExport, export_subject
from agent_memory.lifecycle.forgetting import (
    ForgottenMemory,
    list_forgotten,
)
from agent_memory.lifecycle.retention import RetentionPolicy, read_retention, write_retention
from agent_memory.lifecycle.review import (
    ResolveResult,
    ReviewActor,
    ReviewInput,
    ReviewResult,
    resolve_mark,
    tenant_mark_counts,
    tenant_marks,
)
from agent_memory.lifecycle.schedules import (
    BLOCKS_COMPACTION,
    BLOCKS_IRREVERSIBILITY,
    SchedulesHealth,
    check_schedules,
    schedules_health,
)
from agent_memory.lifecycle.sweeper import LifecycleCounts, MemorySweepInput, MemorySweepResult, lifecycle_counts
from agent_memory.memory.categories import (
    Category,
    CategoryNotFoundError,
    list_categories,
    put_category,
    remove_category,
)
from agent_memory.memory.corrections import LiveActor, confirm_candidate
from agent_memory.memory.filters import NO_FILTER, MemoryFilter
from agent_memory.memory.rederive import rederive_report
from agent_memory.memory.stale_marks import MARK_LIST_MAX, MarkCounts, StaleMark
from agent_memory.memory.substance import gated_counts
from agent_memory.memory.token_budget import check_daily_tokens, token_budget_state, write_token_budget
from agent_memory.memory.webhooks import (
    ROTATION_OVERLAP_DEFAULT,
    ROTATION_OVERLAP_MAX,
    CreatedWebhookEndpoint,
    DeliveryStatus,
    WebhookDelivery,
    WebhookEndpoint,
    add_endpoint,
    dispatch_deliveries,
    list_deliveries,
    list_endpoints,
    read_delivery,
    redeliver,
    remove_endpoint,
    rotate_secret,
)
from agent_memory.memory.write_policy import (
    Consent,
    WritePolicy,
    grant_consent,
    list_consents,
    read_write_policy,
    revoke_consent,
    withheld_counts,
    write_write_policy,
)
from agent_memory.projection.projector import projection_lag, requeue_dead_letters, wake_projector
from agent_memory.projection.rebuild import rebuild_reports
from agent_memory.projection.reembedding import ReembedProgress, start_reembedding
from agent_memory.providers.base import Embedder
from agent_memory.providers.factory import providers_for
from agent_memory.providers.policy import ProviderPolicy, read_provider_policy, write_provider_policy
from agent_memory.recall.read_metrics import read_counts
from agent_memory.recall.recall_policy import RecallPolicy
from agent_memory.recall.recall_policy import read_policy as read_recall_policy
from agent_memory.recall.recall_policy import reset_policy as reset_recall_policy
from agent_memory.recall.recall_policy import write_policy as write_recall_policy
from agent_memory.security.keyring import KeyRotationInput, RotationResult
from agent_memory.security.leak_filter import drop_counts
from agent_memory.security.operator_requests import (
    OperatorAuthorization,
    OperatorRequestKind,
    list_operator_requests,
    local_operator,
    refused_operator_runs,
    register_operator_request,
    starts_a_new_run,
)
from agent_memory.security.webhook_targets import Resolver
from agent_memory.store.db import tenant_transaction
from agent_memory.store.inventory import ImportanceSpread, importance_spread
from agent_memory.store.scope import Mode, subject_scope

log = logging.getLogger(__name__)


def _scope_attributes(tenant_id: str, subject_id: str | None) -> list[SearchAttributePair]:
    """The search attributes of a run over a tenant, or over one of its subjects."""
    attributes = [SearchAttributePair(TENANT_ID, tenant_id)]
    if subject_id is not None:
        attributes.append(SearchAttributePair(SUBJECT_ID, subject_id))
    return attributes


PolicyT = TypeVar("PolicyT", bound=BaseModel)
# How a tenant policy is read, and stored (None: back to its default), inside a tenant transaction.
PolicyRead = Callable[[psycopg.AsyncConnection, str], Awaitable[PolicyT]]
PolicyWrite = Callable[[psycopg.AsyncConnection, str, PolicyT | None], Awaitable[None]]


async def _write_recall_policy(conn: psycopg.AsyncConnection, tenant_id: str, policy: RecallPolicy | None) -> None:
    if policy is None:
        await reset_recall_policy(conn, tenant_id)
    else:
        await write_recall_policy(conn, tenant_id, policy)


class RunSummary(RunPayloads):
    workflow_id: str
    workflow_type: str
    status: str
    started_at: datetime | None
    closed_at: datetime | None
    # What a running run says of its state in its memo: "parked: token budget" while a
    # consolidation waits for its tenant's token budget; None otherwise.
    state: str | None = None


class ParkedRun(BaseModel):
    """A consolidation waiting for its tenant's token budget (contract.PARKED_TOKEN_BUDGET)."""

    workflow_id: str
    run_id: str | None
    started_at: datetime | None


def erasure_request_id(tenant_id: str, subject_id: str, reason: str) -> str:
    """The same request (tenant, subject, reason) maps to the same id, hence the same receipt."""
    return hashlib.sha256(f"{tenant_id}\x1f{subject_id}\x1f{reason}".encode()).hexdigest()[:16]


def visibility_query(tenant_id: str, subject_id: str | None = None) -> str:
    """The query an operator types in the Temporal UI's search box."""
    query = f"TenantId = '{check_identifier('tenant', tenant_id)}'"
    if subject_id:
        query += f" AND SubjectId = '{check_identifier('subject', subject_id)}'"
    return query


class ServicesClient:
    """What both clients share: the services they run on, the task queue they start runs on, and
    the connections `open`/`connect` made for them."""

    def __init__(self, services: Services, *, task_queue: str | None = None):
        self.services = services
        self.task_queue = task_queue or services.settings.task_queue
        self._owns_services = False

    @classmethod
    def _on_services(cls, services: Services, task_queue: str | None) -> Self:
        raise NotImplementedError

    @classmethod
    async def open(cls, settings: Settings | None = None, *, task_queue: str | None = None) -> Self:
        """A client on the configured services (TEMPORAL_ADDRESS, DATABASE_URL, REDIS_URL) or on the
        stack `agent-memory up` runs under AGENT_MEMORY_HOME, with the configured embedder. It
        owns its connections: `await client.aclose()` (or use `connect()`)."""
        settings = (settings or Settings.from_env()).with_running_stack()
        await check_schema(settings)
        services = await Services.open(settings)
        try:
            client = cls._on_services(services, task_queue)
        except BaseException:
            await services.close()
            raise
        client._owns_services = True
        return client

    @classmethod
    @asynccontextmanager
    async def connect(cls, settings: Settings | None = None, *,
                      task_queue: str | None = None) -> AsyncIterator[Self]:
        """`async with MemoryClient.connect() as client:` (or `AdminClient.connect()`) — `open()`,
        closed at the end."""
        client = await cls.open(settings, task_queue=task_queue)
        try:
            yield client
        finally:
            await client.aclose()

    async def aclose(self) -> None:
        """Close the connections this client opened (`open`/`connect`); a client built on your
        own Services leaves them to you."""
        if self._owns_services:
            self._owns_services = False
            await self.services.close()

    @property
    def _future_tolerance(self) -> timedelta:
        return timedelta(seconds=self.services.settings.future_tolerance_seconds)

    @property
    def _forget_grace(self) -> timedelta:
        return timedelta(seconds=self.services.settings.forget_grace_seconds)

    async def _start_once(self, workflow: str, arg: BaseModel, workflow_id: str,
                          attributes: list[SearchAttributePair], result_type: type,
                          reuse: WorkflowIDReusePolicy = WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
                          priority: Priority = Priority.default) -> WorkflowHandle:
        """Start, or attach to the run that already has this id: a running one always, a closed
        one unless it failed (then it runs again) or `reuse` allows a new run."""
        try:
            return await self.services.temporal.start_workflow(
                workflow, arg, id=workflow_id, task_queue=self.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING, id_reuse_policy=reuse,
                # With a worker of this queue on the same client (`up`, `serve` beside a worker),
                # the server hands the run's first workflow task straight back to it: no
                # dispatch through the task queue. Elsewhere the start is an ordinary one. Not in a
                # versioned deployment (AGENT_MEMORY_BUILD_ID): the worker beside this client may
                # be an old version's, and a run must start on the current one (it is pinned there).
                request_eager_start=not self.services.settings.build_id, priority=priority,
                search_attributes=TypedSearchAttributes(attributes), result_type=result_type)
        except WorkflowAlreadyStartedError:
            return self.services.temporal.get_workflow_handle(workflow_id, result_type=result_type)

    async def _start_webhook_deliveries(self, tenant_id: str) -> None:
        """After a commit: start the runs of the tenant's new webhook deliveries. Should that fail,
        they stay pending (committed with the change) and the idle-timer sweep starts them."""
        try:
            await dispatch_deliveries(self.services.pool, self.services.temporal, self.task_queue, tenant_id)
        except Exception as exc:
            log.warning("webhook deliveries of tenant %s deferred to the sweep: %s", tenant_id, exc)


class AdminClient(ServicesClient):
    """The operator's calls. `embedder`: the model a re-embedding moves the tenant to (default:
    the configured one)."""

    def __init__(self, services: Services, embedder: Embedder | None = None, *, task_queue: str | None = None):
        super().__init__(services, task_queue=task_queue)
        self.embedder = embedder

    @classmethod
    def _on_services(cls, services: Services, task_queue: str | None) -> Self:
        return cls(services, task_queue=task_queue)

    @property
    def future_tolerance(self) -> timedelta:
        """How far past this clock a message's created_at may be (AGENT_MEMORY_FUTURE_TOLERANCE_SECONDS)."""
        return self._future_tolerance

    async def _has_data(self, tenant_id: str, subject_id: str) -> bool:
        """Whether anything of the subject is stored, or it is erased already (then erasing again
        returns the recorded receipt)."""
        async with subject_scope(self.services.pool, self.services.keyring, tenant_id, subject_id, Mode.READ) as scope:
            if scope.erased:
                return True
            cur = await scope.conn.execute(
                "SELECT EXISTS (SELECT 1 FROM sessions WHERE tenant_id = %(t)s AND subject_id = %(s)s) "
                "OR EXISTS (SELECT 1 FROM memory_events WHERE tenant_id = %(t)s AND subject_id = %(s)s) "
                "OR EXISTS (SELECT 1 FROM subject_keys WHERE tenant_id = %(t)s AND subject_id = %(s)s) "
                "OR EXISTS (SELECT 1 FROM erasure_requests WHERE tenant_id = %(t)s AND subject_id = %(s)s)",
                {"t": tenant_id, "s": subject_id})
            row = await cur.fetchone()
        return bool(row and row[0])

    async def erase(self, tenant_id: str, subject_id: str, reason: str, request_id: str | None = None, *,
                    block_future_writes: bool = False) -> WorkflowHandle:
        """Start (or attach to) the erasure of a subject. The request and its reason (encrypted)
        are recorded in Postgres first: workflow history carries ids only. A request id already
        used for another subject raises ErasureRequestConflictError and nothing is written.

        A subject with no data at all (a mistyped id) is refused with NotFound: its tombstone
        would block that id forever. `block_future_writes=True` erases it anyway, to refuse any
        future write for the id; the receipt's `data_found` then says nothing was found."""
        check_identifier("tenant", tenant_id)
        check_identifier("subject", subject_id)
        check_reason(reason)
        if not block_future_writes and not await self._has_data(tenant_id, subject_id):
            raise NotFound(f"subject {subject_id!r} has no data in tenant {tenant_id!r}: nothing to erase (check "
                           "the id); to refuse future writes for this id anyway, pass --block-future-writes")
        request_id = request_id or erasure_request_id(tenant_id, subject_id, reason)
        check_identifier("request id", request_id)
        await register_erasure_request(self.services.pool, self.services.keyring, tenant_id, subject_id, request_id,
                                       reason)
        try:
            return await start_erasure_workflow(self.services.temporal, self.task_queue, tenant_id, subject_id,
                                                request_id)
        except WorkflowAlreadyStartedError:  # completed before: attach to it (its receipt)
            return self.services.temporal.get_workflow_handle(
                contract.erasure_workflow_id(tenant_id, subject_id, request_id), result_type=ErasureReceipt)

    async def reapply_erasures(self, *, wait: bool = False) -> tuple[ReapplyResult, list[ErasureReceipt]]:
        """After a restore: run again every erasure of the erasure ledger (in the home) that the
        database does not know; with `wait`, their receipts (a worker must be running)."""
        result, handles = await reapply_erasures(self.services.pool, self.services.keyring, self.services.temporal,
                                                 self.task_queue, self.services.settings.home)
        receipts = [await handle.result() for handle in handles] if wait else []
        return result, receipts

    async def erasure_receipt(self, handle: WorkflowHandle) -> ErasureReceipt:
        """The erasure's receipt, with the reason given with the request (kept out of workflow
        history, read back from the request)."""
        receipt: ErasureReceipt = await handle.result()
        reason = await erasure_reason(self.services.pool, self.services.keyring, receipt.tenant_id, receipt.request_id)
        return with_reason(receipt, reason)

    async def erasure_status(self, tenant_id: str, request_id: str, subject_id: str | None = None) -> ErasureStatus:
        """The request now: receipt, whether the shred is irreversible yet, whether compacted, and
        the Schedules not as designed that hold either back."""
        check_identifier("tenant", tenant_id)
        check_identifier("request id", request_id)
        status = await erasure_status(self.services.pool, self.services.keyring, tenant_id, request_id, subject_id)
        waits_on = {BLOCKS_IRREVERSIBILITY: not status.shred_irreversible, BLOCKS_COMPACTION: not status.compacted}
        if not any(waits_on.values()):
            return status
        try:
            health = await self.schedules_health()
        except (TemporalError, OSError) as exc:  # the status is the database's; Temporal may be down
            log.warning("erasure status without the Schedules' check (Temporal did not answer): %s", exc)
            return status
        held = {}
        for schedule_id, waiting in waits_on.items():
            if waiting and schedule_id in health.degraded:
                what = ("the shred stays reversible (the KEK that wrapped the key is not destroyed)"
                        if schedule_id == BLOCKS_IRREVERSIBILITY else "the erased residue stays on disk")
                state = ("paused" if schedule_id in health.paused else "missing" if schedule_id in health.missing
                         else "altered")
                held[schedule_id] = f"{state}: {what} until it is restored (agent-memory schedules ensure)"
        return status.model_copy(update={"held_back_by": held})

    async def schedules_health(self) -> SchedulesHealth:
        """The deployment's Schedules that are paused, altered or missing (nothing is changed)."""
        checks = await check_schedules(self.services.temporal, self.task_queue,
                                       keys_rotatable=self.services.keyring.provider.rotatable)
        return schedules_health(checks)

    async def _register(self, kind: OperatorRequestKind, workflow_id: str, registered_by: str | None, *,
                        tenant_id: str | None = None, subject_id: str | None = None,
                        attachable: bool = False) -> None:
        """Register the run's single-use authorization (agent_memory/security/operator_requests.py):
        `registered_by` names the caller (default: this process's OS account); it is listed with a
        subject by its digest only. With `attachable` (a request id given again), nothing is
        registered when the start will attach to the run already under this id (running, or
        finished other than by failing): its consumed authorization stays consumed."""
        if attachable and not await starts_a_new_run(self.services.temporal, workflow_id, failed_only=True):
            return
        shown = workflow_id
        if tenant_id is not None and subject_id is not None:
            shown = workflow_id.replace(f"/{tenant_id}/{subject_id}/",
                                        f"/{tenant_id}/{self.services.keyring.subject_digest(tenant_id, subject_id)[:16]}/", 1)
        await register_operator_request(self.services.pool, self.services.keyring, kind, workflow_id,
                                        registered_by=registered_by or local_operator(),
                                        ttl_seconds=self.services.settings.operator_request_ttl_seconds,
                                        shown_workflow_id=shown, tenant_id=tenant_id)

    async def rotate_keys(self, *, force: bool = True, registered_by: str | None = None) -> RotationResult:
        """Run a key rotation now, as a workflow (the daily Schedule runs the same one); a forced
        one on a single-use authorization registered by `registered_by`."""
        workflow_id = contract.manual_key_rotation_workflow_id(uuid.uuid4().hex[:12])
        if force:
            await self._register("key-rotation", workflow_id, registered_by)
        handle = await self.services.temporal.start_workflow(
            contract.KEY_ROTATION_WORKFLOW, KeyRotationInput(force=force), id=workflow_id,
            task_queue=self.task_queue, result_type=RotationResult)
        return await handle.result()

    async def compact(self, *, force: bool = False, registered_by: str | None = None) -> CompactionResult:
        """Run physical compaction now, as a workflow (the hourly Schedule runs the same one); a
        forced one on a single-use authorization registered by `registered_by`."""
        workflow_id = contract.manual_compaction_workflow_id(uuid.uuid4().hex[:12])
        if force:
            await self._register("compaction", workflow_id, registered_by)
        handle = await self.services.temporal.start_workflow(
            contract.PHYSICAL_COMPACTION_WORKFLOW, CompactionInput(force=force), id=workflow_id,
            task_queue=self.task_queue, result_type=CompactionResult)
        return await handle.result()

    @property
    def forget_grace(self) -> timedelta:
        """How long a forgotten memory stays restorable (AGENT_MEMORY_FORGET_GRACE_SECONDS)."""
        return self._forget_grace

    async def put_category(self, tenant_id: str, category: Category) -> Category:
        """Define one of the tenant's categories of memory, or replace its definition."""
        return await put_category(self.services.pool, tenant_id, category)

    async def categories(self, tenant_id: str) -> list[Category]:
        """The tenant's categories of memory, by name."""
        return await list_categories(self.services.pool, tenant_id)

    async def remove_category(self, tenant_id: str, name: str) -> None:
        """Remove one of the tenant's categories (NotFound when it has none of that name); no memory changes."""
        if not await remove_category(self.services.pool, tenant_id, name):
            raise CategoryNotFoundError(f"no category {name!r} in tenant {tenant_id!r}")

    async def export(self, tenant_id: str, subject_id: str, *, filters: MemoryFilter = NO_FILTER) -> SubjectExport:
        """Everything memory holds about the subject, as one document (the right of access);
        `filters` narrows its facts, episodes and notes."""
        check_identifier("tenant", tenant_id)
        check_identifier("subject", subject_id)
        return await export_subject(self.services.pool, self.services.keyring, tenant_id, subject_id,
                                    grace=self.forget_grace, filters=filters)

    async def forgotten(self, tenant_id: str, subject_id: str) -> list[ForgottenMemory]:
        return await list_forgotten(self.services.pool, self.services.keyring, tenant_id, subject_id)

    async def sweep(self, *, grace_seconds: float | None = None, retention: bool = True,
                    registered_by: str | None = None) -> MemorySweepResult:
        """Run the memory sweep now, as a workflow (the hourly Schedule runs the same one):
        retention first (unless `retention=False`), then the sweeper; `grace_seconds` overrides
        the worker's grace period for this run, on a single-use authorization registered by
        `registered_by`."""
        workflow_id = contract.manual_memory_sweep_workflow_id(uuid.uuid4().hex[:12])
        if grace_seconds is not None:
            await self._register("memory-sweep", workflow_id, registered_by)
        handle = await self.services.temporal.start_workflow(
            contract.MEMORY_SWEEP_WORKFLOW, MemorySweepInput(grace_seconds=grace_seconds, retention=retention),
            id=workflow_id, task_queue=self.task_queue, result_type=MemorySweepResult)
        return await handle.result()

    async def reembed(self, tenant_id: str, *, registered_by: str | None = None) -> WorkflowHandle:
        """Start (or attach to) the tenant's re-embedding under this client's embedder model
        (workers start it by themselves when their model changed), on a single-use authorization
        registered by `registered_by`."""
        check_identifier("tenant", tenant_id)
        return await start_reembedding(self.services.pool, self.services.keyring, self.services.temporal,
                                       self.task_queue, tenant_id,
                                       self.embedder or providers_for(self.services.settings).embedder,
                                       registered_by=registered_by or local_operator(),
                                       ttl_seconds=self.services.settings.operator_request_ttl_seconds)

    async def reembed_progress(self, handle: WorkflowHandle) -> ReembedProgress | None:
        """The running re-embedding's progress (its `progress` query), or its result once done."""
        description = await handle.describe()
        if description.status == WorkflowExecutionStatus.RUNNING:
            return await handle.query("progress", result_type=ReembedProgress)
        return await handle.result()

    async def redrive_erasures(self, *, stuck_after_seconds: float = 3600.0) -> ErasureRedriveResult:
        """Run the erasure re-drive now, as a workflow (the hourly Schedule runs the same one)."""
        handle = await self.services.temporal.start_workflow(
            contract.ERASURE_REDRIVE_WORKFLOW, ErasureRedriveInput(stuck_after_seconds=stuck_after_seconds),
            id=contract.manual_erasure_redrive_workflow_id(uuid.uuid4().hex[:12]), task_queue=self.task_queue,
            result_type=ErasureRedriveResult)
        return await handle.result()

    async def rebuild(self, tenant_id: str, subject_id: str | None = None, *, force: bool = False,
                      request_id: str | None = None, subjects_per_run: int = 200,
                      listed_max: int = 200, registered_by: str | None = None) -> WorkflowHandle:
        """Rebuild the projections of one subject (or every subject of the tenant) from the event
        log and compare digests; workflow id rebuild/{tenant}/{subject or '*'}/{request}."""
        check_identifier("tenant", tenant_id)
        if subject_id is not None:
            check_identifier("subject", subject_id)
        request_id = request_id or uuid.uuid4().hex[:16]  # each rebuild is a new check
        check_identifier("request id", request_id)
        attributes = _scope_attributes(tenant_id, subject_id)
        workflow_id = contract.rebuild_workflow_id(tenant_id, subject_id, request_id)
        if force:
            await self._register("rebuild", workflow_id, registered_by, tenant_id=tenant_id, subject_id=subject_id,
                                 attachable=True)
        return await self._start_once(
            contract.REBUILD_WORKFLOW,
            RebuildInput(tenant_id=tenant_id, subject_id=subject_id, request_id=request_id, force=force,
                         subjects_per_run=subjects_per_run, listed_max=listed_max),
            workflow_id, attributes, RebuildResult)

    async def rebuild_result(self, handle: WorkflowHandle) -> RebuildResult:
        """The rebuild's totals (from the workflow) with its subject reports (from
        rebuild_reports): at most the request's `listed_max`, those that differed or were
        repaired first."""
        result: RebuildResult = await handle.result()
        if result.request_id is None or result.subjects:
            return result  # a run from before rebuild_reports carried its entries itself
        reports, total = await rebuild_reports(self.services.pool, result.tenant_id, result.request_id,
                                               limit=result.listed_max)
        return result.model_copy(update={"subjects": reports, "subjects_not_listed": max(0, total - len(reports))})

    async def rederive(self, tenant_id: str, subject_id: str | None = None, *, dry_run: bool = True,
                       all_sessions: bool = False, request_id: str | None = None,
                       subjects_per_run: int = 100, registered_by: str | None = None) -> WorkflowHandle:
        """Re-derive stored memory under the workers' current extractor: the sessions of one
        subject (or of every subject of the tenant) whose facts an older extractor wrote (every
        consolidated session with `all_sessions`) are extracted again and compared with the
        current facts (docs/lifecycle.md). A dry run (the default) lists the differences and
        writes no event; otherwise the request is registered here first (operator_requests),
        and the run applies them. Workflow id rederive/{tenant}/{subject or '*'}/{request}."""
        check_identifier("tenant", tenant_id)
        if subject_id is not None:
            check_identifier("subject", subject_id)
        request_id = request_id or uuid.uuid4().hex[:16]
        check_identifier("request id", request_id)
        attributes = _scope_attributes(tenant_id, subject_id)
        workflow_id = contract.rederive_workflow_id(tenant_id, subject_id, request_id)
        if not dry_run:
            await self._register("rederive", workflow_id, registered_by, tenant_id=tenant_id, subject_id=subject_id,
                                 attachable=True)
        return await self._start_once(
            contract.REDERIVE_WORKFLOW,
            RederiveInput(tenant_id=tenant_id, subject_id=subject_id, request_id=request_id, dry_run=dry_run,
                          all_sessions=all_sessions, subjects_per_run=subjects_per_run),
            workflow_id, attributes, RederiveResult)

    async def rederive_result(self, handle: WorkflowHandle) -> RederiveReport:
        """The re-derivation's totals (from the workflow) with each subject's differences (read
        from the sessions' records in Postgres: they hold values, which the history never does)."""
        result: RederiveResult = await handle.result()
        subjects = await rederive_report(self.services.pool, result.tenant_id, result.request_id, result.dry_run)
        return RederiveReport(result=result, subjects=subjects)

    async def confirm_fact(self, tenant_id: str, subject_id: str, candidate_memory_id: str, *,
                           actor: LiveActor = "user", actor_id: str | None = None) -> CommitOutcome:
        """Confirm a value of the candidate area (a sensitive key's new value waits there): it
        becomes the current fact."""
        check_identifier("tenant", tenant_id)
        check_identifier("subject", subject_id)
        outcome = await confirm_candidate(self.services.pool, self.services.keyring, tenant_id=tenant_id,
                                          subject_id=subject_id, candidate_memory_id=candidate_memory_id,
                                          actor=actor, actor_id=actor_id)
        try:
            await self.wake_projector(tenant_id, subject_id)
        except Exception as exc:  # the outbox row stays due; nothing is lost
            log.warning("projector wake-up after a confirmation deferred to the sweep: %s", exc)
        await self._start_webhook_deliveries(tenant_id)
        return outcome

    # The tenant's policies, each read and set by its own name (None: back to its default).

    async def _read_policy(self, tenant_id: str, read: PolicyRead[PolicyT]) -> PolicyT:
        check_identifier("tenant", tenant_id)
        async with tenant_transaction(self.services.pool, tenant_id) as conn:
            return await read(conn, tenant_id)

    async def _store_policy(self, tenant_id: str, policy: PolicyT | None, write: PolicyWrite[PolicyT],
                            read: PolicyRead[PolicyT]) -> PolicyT:
        """Store the policy (None: the default) and read back the one in force, in one transaction."""
        check_identifier("tenant", tenant_id)
        async with tenant_transaction(self.services.pool, tenant_id) as conn:
            await write(conn, tenant_id, policy)
            return await read(conn, tenant_id)

    async def get_recall_policy(self, tenant_id: str) -> RecallPolicy:
        """The tenant's recall policy (the shipped default when none was set)."""
        return await self._read_policy(tenant_id, read_recall_policy)

    async def set_recall_policy(self, tenant_id: str, policy: RecallPolicy | None) -> RecallPolicy:
        """Set the tenant's recall policy; None returns the tenant to the shipped default."""
        return await self._store_policy(tenant_id, policy, _write_recall_policy, read_recall_policy)

    async def get_retention_policy(self, tenant_id: str) -> RetentionPolicy:
        """The tenant's retention policy (the defaults when none was set)."""
        return await self._read_policy(tenant_id, read_retention)

    async def set_retention_policy(self, tenant_id: str, policy: RetentionPolicy | None) -> RetentionPolicy:
        """Set the tenant's retention policy (None: the defaults); the hourly memory sweep applies it."""
        return await self._store_policy(tenant_id, policy, write_retention, read_retention)

    async def get_write_policy(self, tenant_id: str) -> WritePolicy:
        """The tenant's write gate: namespaces stored, those needing consent, keys needing
        confirmation (the defaults when none was set)."""
        return await self._read_policy(tenant_id, read_write_policy)

    async def set_write_policy(self, tenant_id: str, policy: WritePolicy | None) -> WritePolicy:
        """Set which namespaces are stored, which need consent, which keys need confirmation
        (None: the defaults). The next commit of any session applies it."""
        return await self._store_policy(tenant_id, policy, write_write_policy, read_write_policy)

    async def get_provider_policy(self, tenant_id: str) -> ProviderPolicy:
        """What a remote model may see of the tenant's data (default: every identifier kind redacted)."""
        return await self._read_policy(tenant_id, read_provider_policy)

    async def set_provider_policy(self, tenant_id: str, policy: ProviderPolicy | None) -> ProviderPolicy:
        """Store the tenant's provider data policy (None: back to the default)."""
        return await self._store_policy(tenant_id, policy, write_provider_policy, read_provider_policy)

    async def get_token_budget(self, tenant_id: str) -> TokenBudgetState:
        """The tenant's daily model-token budget in force (its own, else the deployment's
        AGENT_MEMORY_DAILY_TOKEN_BUDGET) and the tokens its model calls spent today (UTC)."""
        check_identifier("tenant", tenant_id)
        return await token_budget_state(self.services.pool, tenant_id, self.services.settings.daily_token_budget or None)

    async def set_token_budget(self, tenant_id: str, daily_tokens: int | str | None, *,
                               reset: bool = False) -> TokenBudgetState:
        """Set the tenant's daily model-token budget (None or "unlimited": no budget), or with
        `reset` drop it (the deployment's default applies). A budget below 1 or not a whole number
        is refused (InvalidInput naming daily_tokens). Consolidations and re-derivations parked on
        the budget are signalled to check it again at once (a run the signal misses checks again within
        workflows.token_budget.BUDGET_RECHECK anyway)."""
        check_identifier("tenant", tenant_id)
        tokens = None if reset else check_daily_tokens(daily_tokens)
        async with tenant_transaction(self.services.pool, tenant_id) as conn:
            await write_token_budget(conn, tenant_id, tokens, reset=reset)
        await self._signal_parked(tenant_id)
        return await self.get_token_budget(tenant_id)

    async def grant_consent(self, tenant_id: str, subject_id: str, namespace: str, consent_id: str) -> None:
        await grant_consent(self.services.pool, self.services.keyring, tenant_id, subject_id, namespace, consent_id)

    async def revoke_consent(self, tenant_id: str, subject_id: str, namespace: str) -> bool:
        return await revoke_consent(self.services.pool, self.services.keyring, tenant_id, subject_id, namespace)

    async def consents(self, tenant_id: str, subject_id: str) -> list[Consent]:
        return await list_consents(self.services.pool, self.services.keyring, tenant_id, subject_id)

    async def withheld_counts(self, tenant_id: str) -> dict[str, int]:
        """Facts the write gate kept out, per reason, since the tenant began (Postgres counters)."""
        check_identifier("tenant", tenant_id)
        return await withheld_counts(self.services.pool, tenant_id)

    async def gated_sessions(self, tenant_id: str) -> dict[str, int]:
        """Sessions consolidated without an episode by the substance gate (too short, small talk),
        per reason and in total, since the tenant began (Postgres counters)."""
        check_identifier("tenant", tenant_id)
        return await gated_counts(self.services.pool, tenant_id)

    async def add_webhook(self, tenant_id: str, url: str, events: list[str]) -> CreatedWebhookEndpoint:
        """Register a webhook endpoint subscribed to `events` (memory.webhooks.EVENT_TYPES); the
        result carries its signing secret, shown this once. https:// only, unless the settings
        allow http (AGENT_MEMORY_WEBHOOK_ALLOW_HTTP); a public host only, unless they allow
        private targets (AGENT_MEMORY_WEBHOOK_ALLOW_PRIVATE)."""
        settings = self.services.settings
        return await add_endpoint(self.services.pool, self.services.keyring, tenant_id, url, events,
                                  allow_http=settings.webhook_allow_http, allow_private=settings.webhook_allow_private,
                                  resolver=Resolver(settings.webhook_nameserver))

    async def rotate_webhook_secret(self, tenant_id: str, endpoint_id: str, *,
                                    overlap_hours: float = ROTATION_OVERLAP_DEFAULT.total_seconds() / 3600
                                    ) -> CreatedWebhookEndpoint:
        """Give an endpoint a new signing secret, shown this once; the replaced one keeps signing
        deliveries next to it for `overlap_hours` (at most 168; 0: not at all)."""
        check_identifier("tenant", tenant_id)
        if isinstance(overlap_hours, bool) or not isinstance(overlap_hours, int | float) \
                or not 0 <= overlap_hours <= ROTATION_OVERLAP_MAX.total_seconds() / 3600:
            raise InvalidInput("overlap_hours is invalid: give 0 to 168 hours for the replaced secret to keep "
                               "signing deliveries")
        return await rotate_secret(self.services.pool, self.services.keyring, tenant_id, endpoint_id,
                                   overlap=timedelta(hours=overlap_hours))

    async def webhooks(self, tenant_id: str, *, include_removed: bool = False) -> list[WebhookEndpoint]:
        """The tenant's webhook endpoints (no secrets)."""
        check_identifier("tenant", tenant_id)
        return await list_endpoints(self.services.pool, tenant_id, include_removed=include_removed)

    async def remove_webhook(self, tenant_id: str, endpoint_id: str) -> WebhookEndpoint:
        """Disable an endpoint: nothing more is delivered to it."""
        check_identifier("tenant", tenant_id)
        return await remove_endpoint(self.services.pool, tenant_id, endpoint_id)

    async def webhook_deliveries(self, tenant_id: str, *, status: DeliveryStatus | None = None,
                                 limit: int = 100) -> list[WebhookDelivery]:
        """The tenant's webhook deliveries, newest first; `status`: pending, delivered or dead."""
        check_identifier("tenant", tenant_id)
        return await list_deliveries(self.services.pool, tenant_id, status=status, limit=limit)

    async def webhook_delivery(self, tenant_id: str, delivery_id: str) -> WebhookDelivery:
        check_identifier("tenant", tenant_id)
        return await read_delivery(self.services.pool, tenant_id, delivery_id)

    async def redeliver_webhook(self, tenant_id: str, delivery_id: str) -> WebhookDelivery:
        """An operator's re-delivery of a dead (or delivered) delivery: pending again, in a new
        run (workflow id suffixed with the re-delivery count); its earlier attempts stay counted."""
        check_identifier("tenant", tenant_id)
        delivery = await redeliver(self.services.pool, tenant_id, delivery_id)
        await self._start_webhook_deliveries(tenant_id)
        return delivery

    async def wake_projector(self, tenant_id: str, subject_id: str) -> None:
        """Signal-with-start the subject's projector (workflow projector/{tenant}/{subject})."""
        await wake_projector(self.services.temporal, self.task_queue, tenant_id, subject_id)

    async def projection_lag(self, tenant_id: str, subject_id: str | None = None) -> ProjectionLag:
        """Outbox rows not projected yet (due now, retrying), the oldest one's age, dead letters."""
        check_identifier("tenant", tenant_id)
        if subject_id is not None:
            check_identifier("subject", subject_id)
        return await projection_lag(self.services.pool, tenant_id, subject_id)

    async def wait_for_projection(self, tenant_id: str, subject_id: str | None = None, *,
                                  timeout: float = 60.0, interval: float = 0.2) -> ProjectionLag:
        """Poll the outbox until no row of the subject (or tenant) is pending; dead letters do not
        count. Consolidation ends at its commit, so vectors lag it: wait here before a recall that
        needs them. Raises TimeoutError with the lag when rows are still pending after `timeout`."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            lag = await self.projection_lag(tenant_id, subject_id)
            if lag.pending == 0:
                return lag
            if asyncio.get_running_loop().time() >= deadline:
                raise TimeoutError(f"projection still pending after {timeout:g} s: {lag.pending} row(s), "
                                   f"{lag.retrying} retrying, {lag.dead_letters} dead letter(s)")
            await asyncio.sleep(interval)

    async def retry_dead_letters(self, tenant_id: str, subject_id: str | None = None) -> list[str]:
        """Give dead-lettered rows a fresh set of attempts and wake their projectors; returns the
        subjects woken."""
        check_identifier("tenant", tenant_id)
        subjects = await requeue_dead_letters(self.services.pool, tenant_id, subject_id)
        for subject in subjects:
            await self.wake_projector(tenant_id, subject)
        return subjects

    async def subject_erased(self, tenant_id: str, subject_id: str) -> bool:
        """Whether the subject has a tombstone (reads of an erased subject return nothing)."""
        async with subject_scope(self.services.pool, self.services.keyring, tenant_id, subject_id, Mode.READ) as scope:
            return scope.erased

    async def read_counts(self, tenant_id: str) -> dict[str, int]:
        """The tenant's memory-read counters (agent_memory.recall.read_metrics)."""
        check_identifier("tenant", tenant_id)
        return await read_counts(self.services.pool, tenant_id)

    async def erasure_counts(self, tenant_id: str) -> ErasureCounts:
        """Erasure requests still started, stuck (open past AGENT_MEMORY_ERASURE_DEADLINE_SECONDS),
        completed, and re-driven by the Schedule."""
        check_identifier("tenant", tenant_id)
        return await erasure_counts(self.services.pool, tenant_id,
                                    stuck_after_seconds=self.services.settings.erasure_deadline_seconds)

    async def authorizations(self, *, limit: int = 100) -> list[OperatorAuthorization]:
        """The single-use authorizations of destructive runs, newest first: who registered each,
        which run claimed it and when, and whether it is unclaimed, claimed or expired."""
        return await list_operator_requests(self.services.pool, limit=limit)

    async def refused_operator_runs(self) -> int:
        """Runs refused across the deployment because another run had consumed their operator
        request or it had expired (a rotation, a compaction, a sweep name no tenant)."""
        return await refused_operator_runs(self.services.pool)

    async def lifecycle_counts(self, tenant_id: str) -> LifecycleCounts:
        """Forgotten memories in their grace period, swept ones, and swept ones whose residue
        check found rows (0 expected)."""
        check_identifier("tenant", tenant_id)
        return await lifecycle_counts(self.services.pool, tenant_id)

    async def stale_marks(self, tenant_id: str, *, subject_id: str | None = None, include_resolved: bool = False,
                          limit: int = MARK_LIST_MAX) -> list[StaleMark]:
        """The daily review's marks in force (or every mark), newest first (docs/lifecycle.md)."""
        return await tenant_marks(self.services.pool, tenant_id, subject_id=subject_id,
                                  include_resolved=include_resolved, limit=limit)

    async def review(self, tenant_id: str) -> ReviewResult:
        """Review the tenant now, as a workflow (the daily Schedule runs the same one for every
        tenant); a review of the tenant already going is waited for first."""
        check_identifier("tenant", tenant_id)
        return await self.services.temporal.execute_workflow(
            contract.REVIEW_WORKFLOW, ReviewInput(tenant_id=tenant_id),
            id=contract.manual_review_workflow_id(tenant_id, uuid.uuid4().hex[:12]), task_queue=self.task_queue,
            result_type=ReviewResult)

    async def stale_mark_counts(self, tenant_id: str) -> MarkCounts:
        """The review's marks in force per reason, and how many were resolved."""
        return await tenant_mark_counts(self.services.pool, tenant_id)

    async def resolve_stale_mark(self, tenant_id: str, subject_id: str, mark_id: str,
                                 resolution: Literal["keep", "forget"], *, actor: ReviewActor = "operator",
                                 actor_id: str | None = None, reason: str | None = None) -> ResolveResult:
        """Keep (the fact counts as confirmed) or forget the marked memory, closing the mark; a
        correction (`write_fact`) closes the marks of the fact it corrects."""
        result = await resolve_mark(self.services.pool, self.services.keyring, tenant_id=tenant_id,
                                    subject_id=subject_id, mark_id=mark_id, resolution=resolution, actor=actor,
                                    actor_id=actor_id, reason=reason, grace=self.forget_grace)
        await self._start_webhook_deliveries(tenant_id)
        return result

    async def importance_spread(self, tenant_id: str) -> ImportanceSpread:
        """The tenant's episodes per importance score, flagged when every one got the same score."""
        check_identifier("tenant", tenant_id)
        return await importance_spread(self.services.pool, tenant_id)

    async def leak_filter_drops(self, tenant_id: str) -> dict[str, int]:
        """The tenant's leak-filter drop counters: {"total": n, "<reason>": n, ...}."""
        check_identifier("tenant", tenant_id)
        return await drop_counts(self.services.pool, tenant_id)

    async def runs(self, tenant_id: str, subject_id: str | None = None, limit: int = 100, *,
                   parked: bool = False) -> list[RunSummary]:
        """The tenant's (or subject's) runs as the Temporal UI lists them; `parked`: only the
        consolidations parked on the tenant's token budget."""
        query = visibility_query(tenant_id, subject_id)
        if parked:
            query += (f" AND WorkflowType = '{contract.CONSOLIDATION_WORKFLOW}' AND ExecutionStatus = 'Running'")
        runs: list[RunSummary] = []
        async for wf in self.services.temporal.list_workflows(query, limit=limit):
            status = wf.status.name if isinstance(wf.status, WorkflowExecutionStatus) else str(wf.status)
            state = (public_memo_text(wf.raw_info.memo, contract.RUN_STATE_MEMO)
                     if wf.status == WorkflowExecutionStatus.RUNNING else None)
            if parked and state != contract.PARKED_TOKEN_BUDGET:
                continue
            payloads = await read_run_payloads(self.services.temporal, wf.id, wf.run_id)
            runs.append(RunSummary(workflow_id=wf.id, workflow_type=wf.workflow_type, status=status,
                                   started_at=wf.start_time, closed_at=wf.close_time, state=state,
                                   **payloads.model_dump()))
        return runs

    async def parked_consolidations(self, tenant_id: str, subject_id: str | None = None) -> list[ParkedRun]:
        """The tenant's (or subject's) running consolidations parked on its token budget, from
        Temporal's visibility (a run's memo says so within a second or two of parking)."""
        return await self._parked_runs(tenant_id, subject_id, contract.CONSOLIDATION_WORKFLOW)

    async def _parked_runs(self, tenant_id: str, subject_id: str | None, workflow_type: str) -> list[ParkedRun]:
        query = (f"{visibility_query(tenant_id, subject_id)} AND WorkflowType = '{workflow_type}' "
                 "AND ExecutionStatus = 'Running'")
        return [ParkedRun(workflow_id=wf.id, run_id=wf.run_id, started_at=wf.start_time)
                async for wf in self.services.temporal.list_workflows(query)
                if public_memo_text(wf.raw_info.memo, contract.RUN_STATE_MEMO) == contract.PARKED_TOKEN_BUDGET]

    async def _signal_parked(self, tenant_id: str) -> int:
        """Tell the tenant's parked consolidations (and re-derivations) that its budget changed;
        returns how many."""
        signalled = 0
        try:
            parked = [*await self.parked_consolidations(tenant_id),
                      *await self._parked_runs(tenant_id, None, contract.REDERIVE_WORKFLOW)]
            for run in parked:
                with contextlib.suppress(RPCError):  # closed meanwhile
                    await self.services.temporal.get_workflow_handle(run.workflow_id, run_id=run.run_id).signal(
                        contract.SIGNAL_BUDGET_CHANGED)
                    signalled += 1
        except (RPCError, TemporalError) as exc:  # the budget is stored: parked runs check it again soon
            log.warning("could not signal the parked consolidations of %s (they check again within minutes): %s",
                        tenant_id, exc)
        return signalled
