"""The worker: every workflow and activity on one task queue, and the model calls of the
consolidation on a task queue of their own (contract.model_task_queue), by a second worker in the
same process unless it runs elsewhere."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from types import TracebackType
from typing import Any

from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities.consolidation import ConsolidationActivities
from activities.erasure import ErasureActivities
from activities.lifecycle import LifecycleActivities
from activities.maintenance import MaintenanceActivities
from activities.projection import ProjectionActivities
from activities.rebuild import RebuildActivities
from activities.rederive import RederiveActivities
from activities.reembedding import ReembeddingActivities
from activities.review import ReviewActivities
from activities.webhooks import WebhookActivities, WebhookRetryBounds
from agent_memory.api.services import Services
from agent_memory.core import contract
from agent_memory.core.contract import model_task_queue
from agent_memory.core.projection_models import ProjectionPolicy
from agent_memory.providers.factory import providers_for
from agent_memory.providers.offline import OfflineProviders
from agent_memory.providers.openai.bundle import ProviderBundle
from agent_memory.store.db import long_statements
from agent_memory.telemetry.tracing import sandbox_passthrough
from workers.deployment import deployment_config, deployment_version, workflow_runners
from workers.run_metrics import RunOutcomes
from workflows.consolidation import ConsolidationWorkflow
from workflows.erasure import ErasureWorkflow
from workflows.lifecycle import ErasureRedriveWorkflow, IdleTimerSweepWorkflow, MemorySweepWorkflow
from workflows.maintenance import KeyRotationWorkflow, PhysicalCompactionWorkflow
from workflows.projector import ProjectionSweepWorkflow, ProjectorWorkflow
from workflows.rebuild import RebuildWorkflow
from workflows.rederive import RederiveWorkflow
from workflows.reembedding import ReembedWorkflow
from workflows.review import ReviewWorkflow
from workflows.session_idle import SessionIdleWorkflow
from workflows.webhooks import WebhookDeliveryWorkflow

# Client libraries that activity modules import (workflows import those modules for method
# references only): passed through the sandbox, never re-imported per workflow run, never used
# by workflow code. Without this the sandbox warns about their lazy submodule imports.
PASSTHROUGH_MODULES = ("redis", "psycopg", "psycopg_pool", "pgvector", "cryptography", "openai", "httpx", "tenacity")

WORKFLOWS = [ConsolidationWorkflow, ErasureWorkflow, RebuildWorkflow, SessionIdleWorkflow, KeyRotationWorkflow,
             PhysicalCompactionWorkflow, ProjectorWorkflow, ProjectionSweepWorkflow, MemorySweepWorkflow,
             ErasureRedriveWorkflow, ReembedWorkflow, IdleTimerSweepWorkflow, WebhookDeliveryWorkflow, RederiveWorkflow,
             ReviewWorkflow]


# The long operator jobs' steps: their statements (a large subject's erasure, rebuild or
# re-embedding) run with store.db.LONG_STATEMENT_SECONDS as statement_timeout, not the pool's.
LONG_STATEMENT_ACTIVITIES = frozenset({
    contract.BEGIN_ERASURE, contract.ERASE_STORE, contract.SHRED_SUBJECT_KEY, contract.VERIFY_ERASURE,
    contract.COMPLETE_ERASURE, contract.LIST_SUBJECTS_TO_REBUILD, contract.REBUILD_SUBJECT,
    contract.BEGIN_REEMBEDDING, contract.REEMBED_BATCH, contract.SWITCH_EMBEDDING_MODEL, contract.REDERIVE_SESSION})


class _LongStatementsInbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        if activity.info().activity_type not in LONG_STATEMENT_ACTIVITIES:
            return await super().execute_activity(input)
        with long_statements():
            return await super().execute_activity(input)


class LongStatements(Interceptor):
    """The long operator jobs' steps run with a statement_timeout of their own (LONG_STATEMENT_ACTIVITIES)."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _LongStatementsInbound(next)


class Workers:
    """The workers of one process, run and stopped together: `async with build_worker(...):`."""

    def __init__(self, *workers: Worker):
        self.workers = workers

    async def __aenter__(self) -> Workers:
        started: list[Worker] = []
        try:
            for worker in self.workers:
                await worker.__aenter__()
                started.append(worker)
        except BaseException as err:
            for worker in reversed(started):
                await worker.__aexit__(type(err), err, err.__traceback__)
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await asyncio.gather(*(worker.__aexit__(exc_type, exc, tb) for worker in self.workers))

    async def run(self) -> None:
        await asyncio.gather(*(worker.run() for worker in self.workers))

    async def shutdown(self) -> None:
        await asyncio.gather(*(worker.shutdown() for worker in self.workers))


def build_worker(services: Services, *, task_queue: str | None = None,
                 providers: OfflineProviders | ProviderBundle | None = None,
                 projection_policy: ProjectionPolicy | None = None, model_worker: bool | None = None) -> Workers:
    """`model_worker`: also run the model queue's worker in this process (default: the setting
    AGENT_MEMORY_MODEL_WORKER, on unless it is 0); its rate limit is the setting
    AGENT_MEMORY_MODEL_ACTIVITIES_PER_SECOND, for every worker of that queue. Both run as the Worker
    Deployment version of the settings (AGENT_MEMORY_DEPLOYMENT_NAME and AGENT_MEMORY_BUILD_ID;
    unversioned without a build id; workers/deployment.py)."""
    providers = providers or providers_for(services.settings)
    version = deployment_version(services.settings)
    erasure = ErasureActivities(services.pool, services.redis, services.keyring, ledger_home=services.settings.home,
                                temporal=services.temporal)
    assert services.settings.database_url is not None
    maintenance = MaintenanceActivities(services.pool, services.redis, services.keyring, services.settings.database_url)
    rebuild = RebuildActivities(services.pool, services.keyring, providers.embedder, services.temporal)
    projection = ProjectionActivities(services.pool, services.keyring, providers.embedder, services.temporal,
                                      projection_policy)
    consolidation = ConsolidationActivities(services.pool, services.keyring, providers.extractor, providers.scorer,
                                            providers.summarizer, providers.embedder, temporal=services.temporal,
                                            daily_token_budget=services.settings.daily_token_budget or None)
    queue = task_queue or services.settings.task_queue
    lifecycle = LifecycleActivities(services.pool, services.keyring, services.temporal, queue,
                                    forget_grace=timedelta(seconds=services.settings.forget_grace_seconds),
                                    idle_timeout=timedelta(seconds=services.settings.idle_timeout_seconds))
    reembedding = ReembeddingActivities(services.pool, services.keyring, providers.embedder, services.temporal)
    rederive = RederiveActivities(services.pool, services.keyring, providers.extractor, services.temporal)
    review = ReviewActivities(services.pool, services.keyring, services.temporal, queue)
    webhooks = WebhookActivities(services.pool, services.keyring, services.temporal,
                                 bounds=WebhookRetryBounds.from_settings(services.settings),
                                 timeout_seconds=services.settings.webhook_timeout_seconds,
                                 allow_private=services.settings.webhook_allow_private,
                                 nameserver=services.settings.webhook_nameserver,
                                 ca_file=services.settings.webhook_ca_file)
    sandboxed, unsandboxed = workflow_runners(version, SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH_MODULES,
                                                                          *sandbox_passthrough())))
    main = Worker(
        services.temporal,
        task_queue=queue,
        workflows=WORKFLOWS,
        interceptors=[LongStatements(), RunOutcomes()],
        deployment_config=deployment_config(version),
        workflow_runner=sandboxed,
        unsandboxed_workflow_runner=unsandboxed,
        activities=[
            consolidation.extract_facts,
            consolidation.score_importance,
            consolidation.check_conflicts,
            consolidation.summarize_session,
            consolidation.commit_consolidation,
            consolidation.project_vectors,
            consolidation.count_unconsolidated,
            consolidation.locate_providers,
            consolidation.check_token_budget,
            consolidation.consolidate_in_worker,
            consolidation.consolidate_with_remote_providers,
            erasure.begin_erasure,
            erasure.erase_store,
            erasure.shred_subject_key,
            erasure.verify_erasure,
            erasure.complete_erasure,
            rebuild.list_subjects_to_rebuild,
            rebuild.rebuild_subject,
            maintenance.rotate_key_encryption_key,
            maintenance.compact_erased_data,
            projection.project_outbox_batch,
            projection.wake_projector,
            projection.sweep_projection_outbox,
            lifecycle.apply_retention,
            lifecycle.sweep_forgotten_memories,
            lifecycle.redrive_stuck_erasures,
            review.list_review_tenants,
            review.review_tenant,
            lifecycle.sweep_idle_timers,
            reembedding.begin_reembedding,
            reembedding.reembed_batch,
            reembedding.switch_embedding_model,
            webhooks.webhook_retry_policy,
            webhooks.deliver_webhook,
            webhooks.mark_webhook_dead,
            webhooks.sweep_webhook_deliveries,
            rederive.list_subjects_to_rederive,
            rederive.list_sessions_to_rederive,
            rederive.rederive_session,
        ],
    )
    if not (services.settings.model_worker if model_worker is None else model_worker):
        return Workers(main)
    return Workers(main, build_model_worker(services, task_queue=queue, providers=providers,
                                            projection_policy=projection_policy))


def build_model_worker(services: Services, *, task_queue: str | None = None,
                       providers: OfflineProviders | ProviderBundle | None = None,
                       projection_policy: ProjectionPolicy | None = None) -> Worker:
    """The worker of the model queue of `task_queue`: the consolidation's model calls and a remote
    embedder's batch of a run's own rows. A call mostly waits on the model; the rate limit
    (AGENT_MEMORY_MODEL_ACTIVITIES_PER_SECOND) is the model's, shared by every worker of the queue
    (the server enforces it). A versioned one (AGENT_MEMORY_BUILD_ID) serves the model calls of the
    runs pinned to its version: each version needs its model workers."""
    settings = services.settings
    providers = providers or providers_for(settings)
    projection = ProjectionActivities(services.pool, services.keyring, providers.embedder, services.temporal,
                                      projection_policy)
    consolidation = ConsolidationActivities(services.pool, services.keyring, providers.extractor, providers.scorer,
                                            providers.summarizer, providers.embedder)
    return Worker(
        services.temporal,
        task_queue=model_task_queue(task_queue or settings.task_queue),
        activities=[
            consolidation.extract_facts,
            consolidation.score_importance,
            consolidation.summarize_session,
            projection.project_outbox_batch,
        ],
        max_concurrent_activities=settings.model_concurrency,
        max_task_queue_activities_per_second=settings.model_activities_per_second,
        deployment_config=deployment_config(deployment_version(settings)),
    )
