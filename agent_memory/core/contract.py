"""The contract between clients, workflows, activities and workers, importable without worker code.

Everything a running deployment depends on by value lives here, so a rename in Python cannot
change it: the workflow and activity type names (recorded in every history), the workflow-id
formats (id reuse and "attach to the running one" depend on them), the search attributes an
operator filters on, the error types workflows compare against, and the activity option presets.

Imports: the standard library and temporalio.common only (never workers, activities, workflows,
temporalio.worker or temporalio.client), so the CLI, the client and the workflow sandbox can all
import it cheaply.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from enum import StrEnum
from typing import Any, Final, TypedDict

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.common import Priority, RetryPolicy, SearchAttributeKey

# --- Workflow type names (pinned: checked-in histories and running executions carry them) ------

CONSOLIDATION_WORKFLOW: Final = "ConsolidationWorkflow"
ERASURE_WORKFLOW: Final = "ErasureWorkflow"
REBUILD_WORKFLOW: Final = "RebuildWorkflow"
SESSION_IDLE_WORKFLOW: Final = "SessionIdleWorkflow"
KEY_ROTATION_WORKFLOW: Final = "KeyRotationWorkflow"
PHYSICAL_COMPACTION_WORKFLOW: Final = "PhysicalCompactionWorkflow"
PROJECTOR_WORKFLOW: Final = "ProjectorWorkflow"
PROJECTION_SWEEP_WORKFLOW: Final = "ProjectionSweepWorkflow"
MEMORY_SWEEP_WORKFLOW: Final = "MemorySweepWorkflow"
ERASURE_REDRIVE_WORKFLOW: Final = "ErasureRedriveWorkflow"
REEMBED_WORKFLOW: Final = "ReembedWorkflow"
IDLE_TIMER_SWEEP_WORKFLOW: Final = "IdleTimerSweepWorkflow"
WEBHOOK_DELIVERY_WORKFLOW: Final = "WebhookDeliveryWorkflow"
REDERIVE_WORKFLOW: Final = "RederiveWorkflow"
REVIEW_WORKFLOW: Final = "ReviewWorkflow"

WORKFLOW_NAMES: Final = (CONSOLIDATION_WORKFLOW, ERASURE_WORKFLOW, REBUILD_WORKFLOW, SESSION_IDLE_WORKFLOW,
                         KEY_ROTATION_WORKFLOW, PHYSICAL_COMPACTION_WORKFLOW, PROJECTOR_WORKFLOW,
                         PROJECTION_SWEEP_WORKFLOW, MEMORY_SWEEP_WORKFLOW, ERASURE_REDRIVE_WORKFLOW,
                         REEMBED_WORKFLOW, IDLE_TIMER_SWEEP_WORKFLOW, WEBHOOK_DELIVERY_WORKFLOW, REDERIVE_WORKFLOW,
                         REVIEW_WORKFLOW)

# Signals of SessionIdleWorkflow (sent by the client by name).
SIGNAL_TOUCH: Final = "touch"
SIGNAL_END: Final = "end"
# Signal of ProjectorWorkflow: rows may be due (sent with signal-with-start by commits, live
# writes, rebuilds and the sweep).
SIGNAL_WAKE: Final = "wake"
# Queries of ConsolidationWorkflow: its progress, and what its steps did (the counts, the commit
# and the embedding batch: what a one-activity route's activity reports of the run it waited for).
PROGRESS_QUERY: Final = "progress"
STEPS_OUTCOME_QUERY: Final = "steps_outcome"
# Signal of ConsolidationWorkflow: the tenant's token budget changed; a run parked on it checks
# again now (sent by AdminClient.set_token_budget to the tenant's running consolidations).
SIGNAL_BUDGET_CHANGED: Final = "budget_changed"
# A parked consolidation's memo (written in clear: what `agent-memory runs`, the console and the
# Temporal UI show of it): RUN_STATE_MEMO -> PARKED_TOKEN_BUDGET while it waits, then
# RESUMED_TOKEN_BUDGET (a memo key's removal would be written encrypted, which the server does
# not read as a removal).
RUN_STATE_MEMO: Final = "state"
PARKED_TOKEN_BUDGET: Final = "parked: token budget"
RESUMED_TOKEN_BUDGET: Final = "resumed after the token budget"

# --- Activity type names (pinned likewise) ----------------------------------------------------

# Consolidation
EXTRACT_FACTS: Final = "extract_facts"
SCORE_IMPORTANCE: Final = "score_importance"
SUMMARIZE_SESSION: Final = "summarize_session"
CHECK_CONFLICTS: Final = "check_conflicts"
COMMIT_CONSOLIDATION: Final = "commit_consolidation"
COUNT_UNCONSOLIDATED: Final = "count_unconsolidated"
LOCATE_PROVIDERS: Final = "locate_providers"
CONSOLIDATE_IN_WORKER: Final = "consolidate_in_worker"
CONSOLIDATE_WITH_REMOTE_PROVIDERS: Final = "consolidate_with_remote_providers"
PROJECT_VECTORS: Final = "project_vectors"
CHECK_TOKEN_BUDGET: Final = "check_token_budget"
# Erasure
BEGIN_ERASURE: Final = "begin_erasure"
ERASE_STORE: Final = "erase_store"
SHRED_SUBJECT_KEY: Final = "shred_subject_key"
VERIFY_ERASURE: Final = "verify_erasure"
COMPLETE_ERASURE: Final = "complete_erasure"
# Rebuild
LIST_SUBJECTS_TO_REBUILD: Final = "list_subjects_to_rebuild"
REBUILD_SUBJECT: Final = "rebuild_subject"
# Maintenance
ROTATE_KEY_ENCRYPTION_KEY: Final = "rotate_key_encryption_key"
COMPACT_ERASED_DATA: Final = "compact_erased_data"
# Projection (workflows/projector.py)
PROJECT_OUTBOX_BATCH: Final = "project_outbox_batch"
WAKE_PROJECTOR: Final = "wake_projector"
SWEEP_PROJECTION_OUTBOX: Final = "sweep_projection_outbox"
# Lifecycle (workflows/lifecycle.py)
SWEEP_FORGOTTEN_MEMORIES: Final = "sweep_forgotten_memories"
APPLY_RETENTION: Final = "apply_retention"
REDRIVE_STUCK_ERASURES: Final = "redrive_stuck_erasures"
SWEEP_IDLE_TIMERS: Final = "sweep_idle_timers"
# Re-embedding (workflows/reembedding.py)
BEGIN_REEMBEDDING: Final = "begin_reembedding"
REEMBED_BATCH: Final = "reembed_batch"
SWITCH_EMBEDDING_MODEL: Final = "switch_embedding_model"
# Webhooks (workflows/webhooks.py; the sweep of undispatched deliveries runs with the idle-timer sweep)
WEBHOOK_RETRY_POLICY: Final = "webhook_retry_policy"
DELIVER_WEBHOOK: Final = "deliver_webhook"
MARK_WEBHOOK_DEAD: Final = "mark_webhook_dead"
SWEEP_WEBHOOK_DELIVERIES: Final = "sweep_webhook_deliveries"
# Re-derivation (workflows/rederive.py; the extraction is the consolidation's extract_facts)
LIST_SUBJECTS_TO_REDERIVE: Final = "list_subjects_to_rederive"
LIST_SESSIONS_TO_REDERIVE: Final = "list_sessions_to_rederive"
REDERIVE_SESSION: Final = "rederive_session"
# The review of stale memory (workflows/review.py)
LIST_REVIEW_TENANTS: Final = "list_review_tenants"
REVIEW_TENANT: Final = "review_tenant"

ACTIVITY_NAMES: Final = (EXTRACT_FACTS, SCORE_IMPORTANCE, SUMMARIZE_SESSION, CHECK_CONFLICTS, COMMIT_CONSOLIDATION,
                         COUNT_UNCONSOLIDATED, LOCATE_PROVIDERS, CONSOLIDATE_IN_WORKER, CONSOLIDATE_WITH_REMOTE_PROVIDERS, PROJECT_VECTORS,
                         CHECK_TOKEN_BUDGET,
                         BEGIN_ERASURE, ERASE_STORE, SHRED_SUBJECT_KEY,
                         VERIFY_ERASURE, COMPLETE_ERASURE, LIST_SUBJECTS_TO_REBUILD, REBUILD_SUBJECT,
                         ROTATE_KEY_ENCRYPTION_KEY, COMPACT_ERASED_DATA, PROJECT_OUTBOX_BATCH, WAKE_PROJECTOR,
                         SWEEP_PROJECTION_OUTBOX, SWEEP_FORGOTTEN_MEMORIES, APPLY_RETENTION, REDRIVE_STUCK_ERASURES,
                         BEGIN_REEMBEDDING, REEMBED_BATCH, SWITCH_EMBEDDING_MODEL, SWEEP_IDLE_TIMERS,
                         WEBHOOK_RETRY_POLICY, DELIVER_WEBHOOK, MARK_WEBHOOK_DEAD, SWEEP_WEBHOOK_DELIVERIES,
                         LIST_SUBJECTS_TO_REDERIVE, LIST_SESSIONS_TO_REDERIVE, REDERIVE_SESSION,
                         LIST_REVIEW_TENANTS, REVIEW_TENANT)

# --- Workflow ids (formats pinned: id reuse and attaching to a running run depend on them) ------


def consolidation_workflow_id(tenant_id: str, subject_id: str, session_id: str) -> str:
    """One consolidation per session: the session-end hook and the idle timer share it. Session
    ids are scoped per subject (migration 021), so the id names the subject."""
    return f"consolidate/{tenant_id}/{subject_id}/{session_id}"


def steps_route_workflow_id(workflow_id: str, run_id: str, activity_id: str) -> str:
    """The consolidation on the step route that an activity of a one-activity route runs and waits
    for (ConsolidationActivities.consolidate_with_remote_providers): one per activity of a run,
    however often it is retried. More parts than a consolidation's id has: it names no session."""
    return f"{workflow_id}/{run_id}/{activity_id}"


def model_task_queue(task_queue: str) -> str:
    """The task queue of the model calls of workflows on `task_queue` (extraction, importance, the
    summary, a remote embedder's batch): workers of their own, with their own rate limit. Pinned:
    a running consolidation schedules its model steps there."""
    return f"{task_queue}-model"


def tenant_fairness(tenant_id: str) -> Priority:
    """A consolidation's fairness key, on its start and on its model calls: the server's matching
    hands a task queue's backlog out round-robin by key (with `matching.enableFairness` on), so one
    tenant's flood of session ends does not queue another tenant's consolidations behind it. A
    server without fairness ignores the key and dispatches in order."""
    return Priority(fairness_key=tenant_id)


def idle_workflow_id(tenant_id: str, subject_id: str, session_id: str) -> str:
    return f"idle/{tenant_id}/{subject_id}/{session_id}"


def legacy_consolidation_workflow_id(tenant_id: str, session_id: str) -> str:
    """The id before sessions were scoped per subject. Runs started under it keep it: the
    session-end hook attaches to one of the caller's subject (client.end_session), and the replay
    of an idle timer that started its consolidation under it uses it (workflows/session_idle.py);
    an old idle timer still waiting consolidates under the new id."""
    return f"consolidate/{tenant_id}/{session_id}"


def legacy_idle_workflow_id(tenant_id: str, session_id: str) -> str:
    """An idle timer started before migration 021: the session-end hook still ends it (when its
    subject is the caller's) so it does not consolidate a second time."""
    return f"idle/{tenant_id}/{session_id}"


def erasure_workflow_id(tenant_id: str, subject_id: str, request_id: str) -> str:
    return f"erase/{tenant_id}/{subject_id}/{request_id}"


def rebuild_workflow_id(tenant_id: str, subject_id: str | None, request_id: str) -> str:
    """`*` stands for "every subject of the tenant"."""
    return f"rebuild/{tenant_id}/{subject_id or '*'}/{request_id}"


def rederive_workflow_id(tenant_id: str, subject_id: str | None, request_id: str) -> str:
    """A re-derivation of one subject's sessions (`*`: every subject of the tenant); each request
    is a run of its own."""
    return f"rederive/{tenant_id}/{subject_id or '*'}/{request_id}"


def reembed_workflow_id(tenant_id: str, target_model: str) -> str:
    """One re-embedding per tenant and target model (the model id may hold any character: its
    digest names the run)."""
    return f"reembed/{tenant_id}/{uuid.uuid5(uuid.NAMESPACE_URL, target_model).hex[:16]}"


def projector_workflow_id(tenant_id: str, subject_id: str) -> str:
    """One projector per subject: every wake-up signals the running one or starts the next run."""
    return f"projector/{tenant_id}/{subject_id}"


def webhook_delivery_workflow_id(delivery_id: str, redeliveries: int = 0) -> str:
    """One run per delivery (a second start is a no-op), and one per operator re-delivery."""
    return f"webhook-delivery-{delivery_id}" + (f"-r{redeliveries}" if redeliveries else "")


def manual_key_rotation_workflow_id(token: str) -> str:
    """A rotation an operator asked for now; `token` makes each request a new run."""
    return f"key-rotation/manual-{token}"


def manual_compaction_workflow_id(token: str) -> str:
    return f"physical-compaction/manual-{token}"


def manual_memory_sweep_workflow_id(token: str) -> str:
    return f"memory-sweep/manual-{token}"


def manual_erasure_redrive_workflow_id(token: str) -> str:
    return f"erasure-redrive/manual-{token}"


KEY_ROTATION_SCHEDULE_ID: Final = "agent-memory/key-rotation"
COMPACTION_SCHEDULE_ID: Final = "agent-memory/physical-compaction"
PROJECTION_SWEEP_SCHEDULE_ID: Final = "agent-memory/projection-sweep"
MEMORY_SWEEP_SCHEDULE_ID: Final = "agent-memory/memory-sweep"
ERASURE_REDRIVE_SCHEDULE_ID: Final = "agent-memory/erasure-redrive"
IDLE_TIMER_SWEEP_SCHEDULE_ID: Final = "agent-memory/idle-timer-sweep"
REVIEW_SCHEDULE_ID: Final = "agent-memory/review"


def manual_review_workflow_id(tenant_id: str, token: str) -> str:
    return f"review/{tenant_id}/manual-{token}"


def scheduled_workflow_id(schedule_id: str) -> str:
    """The id prefix of the runs a Schedule starts (Temporal appends the scheduled time)."""
    return f"{schedule_id}/run"


# The per-tenant ids above put the tenant (an identifier: no '/') right after their prefix.
_TENANT_ID_PREFIXES: Final = ("consolidate", "idle", "erase", "rebuild", "projector", "reembed", "rederive", "review")


def workflow_id_tenant(workflow_id: str) -> str | None:
    """The tenant a per-tenant workflow id names; None for any other id (maintenance runs and
    schedules name no tenant)."""
    prefix, sep, rest = workflow_id.partition("/")
    if prefix not in _TENANT_ID_PREFIXES or not sep:
        return None
    return rest.partition("/")[0] or None


# --- Search attributes (registered by `agent-memory up`, `agent-memory register-search-attributes`
# and the production compose file; operators filter on them in the Temporal UI) ------------------

TENANT_ID = SearchAttributeKey.for_keyword("TenantId")
SUBJECT_ID = SearchAttributeKey.for_keyword("SubjectId")
SESSION_ID = SearchAttributeKey.for_keyword("SessionId")

SEARCH_ATTRIBUTES: Final = (TENANT_ID, SUBJECT_ID, SESSION_ID)
SEARCH_ATTRIBUTE_NAMES: Final = tuple(key.name for key in SEARCH_ATTRIBUTES)


def search_attribute_type_name(key: SearchAttributeKey[Any]) -> str:
    """The type as the Temporal CLI spells it (`--search-attribute TenantId=Keyword`)."""
    name = IndexedValueType.Name(IndexedValueType.ValueType(key.indexed_value_type)).removeprefix("INDEXED_VALUE_TYPE_")
    return "".join(part.title() for part in name.split("_"))  # KEYWORD_LIST -> KeywordList


# --- Error types (ApplicationError.type; values pinned: histories and workflows compare them) ---


class ErrorType(StrEnum):
    # Permanent: retrying cannot help (activities/errors.py maps domain errors to these).
    SUBJECT_ERASED = "SubjectErased"
    ERASURE_REQUEST_CONFLICT = "ErasureRequestConflict"
    UNAUTHORIZED_REQUEST = "UnauthorizedRequest"
    # A payload or input that this deployment did not write for this run (payload_codec.py).
    PAYLOAD_REJECTED = "PayloadRejected"
    INPUT_REJECTED = "InputRejected"
    KEY_UNAVAILABLE = "KeyUnavailable"
    ROTATION_UNSUPPORTED = "RotationUnsupported"
    VERSION_CONFLICT = "VersionConflict"
    OPERATION_MISMATCH = "OperationMismatch"
    NOT_FOUND = "NotFound"
    PROVIDER_PERMANENT = "ProviderPermanent"
    PROVIDER_OUTPUT_INVALID = "ProviderOutputInvalid"
    UNSTORABLE_VALUE = "UnstorableValue"
    EVENT_LOG_UNREADABLE = "EventLogUnreadable"
    MODEL_MISMATCH = "ModelMismatch"
    # Raised by workflows themselves.
    ERASURE_RESIDUE = "ErasureResidue"
    REEMBED_INCOMPLETE = "ReembedIncomplete"
    # A webhook receiver's refusal (a 4xx other than 408 and 429) or a removed endpoint: dead at once.
    WEBHOOK_REJECTED = "WebhookRejected"
    # Transient: retried by the retry policy (after the provider's Retry-After, if any).
    PROVIDER_RETRYABLE = "ProviderRetryable"
    # A webhook receiver that is down, slow, or answers 408, 429 or 5xx: retried within the bound.
    WEBHOOK_RETRYABLE = "WebhookRetryable"
    # PostgreSQL, Redis or Temporal down, restarting or too slow to answer: retried.
    DEPENDENCY_UNAVAILABLE = "DependencyUnavailable"


# --- Activity option presets ------------------------------------------------------------------


class ActivityOptions(TypedDict, total=False):
    """Keyword arguments of workflow.execute_activity_method: `**preset.options()`."""

    start_to_close_timeout: timedelta
    heartbeat_timeout: timedelta
    retry_policy: RetryPolicy


class LocalActivityOptions(TypedDict, total=False):
    """Keyword arguments of workflow.execute_local_activity_method: `**preset.local_options()`."""

    start_to_close_timeout: timedelta
    retry_policy: RetryPolicy


@dataclass(frozen=True)
class ActivityPreset:
    """How one kind of activity is run. Transient failures are retried without an attempt cap
    at a capped interval (an outage of Postgres or of the model provider must not fail a run);
    the permanent error types listed end the retries at once (activities raise them as
    non-retryable as well: the list here is the workflow's side of the same contract)."""

    start_to_close: timedelta
    heartbeat: timedelta | None
    initial_interval: timedelta
    maximum_interval: timedelta
    permanent: tuple[ErrorType, ...]
    backoff: float = 2.0
    maximum_attempts: int = 0  # 0: no cap

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(initial_interval=self.initial_interval, backoff_coefficient=self.backoff,
                           maximum_interval=self.maximum_interval, maximum_attempts=self.maximum_attempts,
                           non_retryable_error_types=[str(t) for t in self.permanent])

    def bounded(self, attempts: int, initial_seconds: float, maximum_seconds: float) -> ActivityPreset:
        """This preset with another attempt bound and backoff (a deployment's settings, passed to
        the run through its history)."""
        return replace(self, maximum_attempts=attempts, initial_interval=timedelta(seconds=initial_seconds),
                       maximum_interval=timedelta(seconds=maximum_seconds))

    def options(self) -> ActivityOptions:
        """A fresh mapping each call (a shared dict could be mutated by one workflow for all)."""
        options = ActivityOptions(start_to_close_timeout=self.start_to_close, retry_policy=self.retry_policy())
        if self.heartbeat is not None:
            options["heartbeat_timeout"] = self.heartbeat
        return options

    def local_options(self) -> LocalActivityOptions:
        """The same bounds and retries for a local activity (run in the workflow's worker, its
        result one marker event: no task round trip through the server). No heartbeat: a dead
        worker is noticed by the workflow task's timeout, and the step runs again on another."""
        return LocalActivityOptions(start_to_close_timeout=self.start_to_close, retry_policy=self.retry_policy())


# Activities heartbeat at a third of their heartbeat timeout (activities/heartbeat.py): a dead
# worker is noticed after the heartbeat timeout instead of the (longer) start-to-close timeout.
_HEARTBEAT = timedelta(seconds=20)
_E = ErrorType

# Model calls: the recorded operation makes each retry free of a second call once a result exists.
# Timeouts, innermost first: the provider client's per call (OpenAICompatibleConfig.timeout_seconds:
# 60 s for a remote API, 300 s for a small local model on a busy machine; a long session is a few
# calls); the recorded operation's claim (operations.CLAIM_LEASE, renewed while the call runs);
# this start-to-close, above the client timeout plus a lease a retry may have to wait out. A dead
# worker is noticed by the heartbeat, not by this bound.
PROVIDER_STEP: Final = ActivityPreset(
    start_to_close=timedelta(minutes=10), heartbeat=_HEARTBEAT,
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(minutes=2),
    permanent=(_E.SUBJECT_ERASED, _E.NOT_FOUND, _E.OPERATION_MISMATCH, _E.PROVIDER_PERMANENT,
               _E.PROVIDER_OUTPUT_INVALID, _E.UNSTORABLE_VALUE, _E.KEY_UNAVAILABLE))
# Database writes: fast retries for transient errors (restarts, serialisation).
STORE_WRITE: Final = ActivityPreset(
    start_to_close=timedelta(seconds=60), heartbeat=_HEARTBEAT,
    initial_interval=timedelta(milliseconds=500), maximum_interval=timedelta(seconds=30),
    permanent=(_E.SUBJECT_ERASED, _E.VERSION_CONFLICT, _E.NOT_FOUND, _E.OPERATION_MISMATCH, _E.UNSTORABLE_VALUE,
               _E.KEY_UNAVAILABLE))
# Plan-and-commit rounds of one consolidation: a commit refused because another writer changed a
# fact since the plan is re-decided against the new facts, at most this often.
MAX_CONFLICT_ROUNDS: Final = 5
# The two presets below serve runs recorded on the one-activity routes (a new run schedules each
# step with PROVIDER_STEP, STORE_WRITE, VECTOR_PROJECTION and PROJECTOR_WAKE). Their bounds
# cover every step of a consolidation in one activity; their permanent types are every step's.
# The local activity (ConsolidationActivities.consolidate_in_worker) of a run in flight on those
# routes only says where the providers compute.
IN_WORKER_CONSOLIDATION: Final = ActivityPreset(
    start_to_close=timedelta(minutes=10), heartbeat=None,
    initial_interval=timedelta(milliseconds=500), maximum_interval=timedelta(seconds=30),
    permanent=(_E.SUBJECT_ERASED, _E.VERSION_CONFLICT, _E.NOT_FOUND, _E.OPERATION_MISMATCH, _E.PROVIDER_PERMANENT,
               _E.PROVIDER_OUTPUT_INVALID, _E.UNSTORABLE_VALUE, _E.KEY_UNAVAILABLE))
# The one ordinary activity (ConsolidationActivities.consolidate_with_remote_providers): it waits
# for the steps, run as a consolidation on the step route. Its bound covers the steps in a row
# (two model calls, at most MAX_CONFLICT_ROUNDS plans and commits, one embedding batch); a retry
# after it waits for the same run. The heartbeat notices a dead worker within 20 s whatever the
# bound.
REMOTE_CONSOLIDATION: Final = ActivityPreset(
    start_to_close=timedelta(minutes=30), heartbeat=_HEARTBEAT,
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(minutes=2),
    permanent=IN_WORKER_CONSOLIDATION.permanent)
# The vector projection can lag; it keeps trying without blocking the facts.
VECTOR_PROJECTION: Final = ActivityPreset(
    start_to_close=timedelta(minutes=5), heartbeat=_HEARTBEAT,
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=60),
    permanent=(_E.NOT_FOUND, _E.OPERATION_MISMATCH, _E.PROVIDER_PERMANENT, _E.PROVIDER_OUTPUT_INVALID,
               _E.UNSTORABLE_VALUE, _E.KEY_UNAVAILABLE))
# The idle timer's short read: an outage must not drop the timer. No heartbeat (a 30 s query).
IDLE_CHECK: Final = ActivityPreset(
    start_to_close=timedelta(seconds=30), heartbeat=None,
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30),
    permanent=(_E.NOT_FOUND, _E.UNSTORABLE_VALUE))
# The tenant's token budget, read before a consolidation's model calls (one short read; an outage
# is waited out: the run neither fails nor calls the model unchecked).
TOKEN_BUDGET_CHECK: Final = ActivityPreset(
    start_to_close=timedelta(seconds=30), heartbeat=None,
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30),
    permanent=(_E.UNSTORABLE_VALUE,))
# Erasure is a legal obligation: transient failures are retried until they pass.
ERASURE_STEP: Final = ActivityPreset(
    start_to_close=timedelta(minutes=2), heartbeat=_HEARTBEAT,
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(minutes=1),
    permanent=(_E.ERASURE_REQUEST_CONFLICT, _E.KEY_UNAVAILABLE, _E.NOT_FOUND, _E.OPERATION_MISMATCH,
               _E.UNSTORABLE_VALUE))
# Rebuild: reads, then one transaction per subject (replay, compare, swap, re-embed what is missing).
REBUILD_LIST: Final = ActivityPreset(
    start_to_close=timedelta(seconds=60), heartbeat=_HEARTBEAT,
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30),
    permanent=(_E.NOT_FOUND, _E.UNSTORABLE_VALUE))
REBUILD_SUBJECT_STEP: Final = ActivityPreset(
    start_to_close=timedelta(minutes=10), heartbeat=_HEARTBEAT,
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30),
    permanent=(_E.EVENT_LOG_UNREADABLE, _E.KEY_UNAVAILABLE, _E.NOT_FOUND, _E.OPERATION_MISMATCH,
               _E.UNSTORABLE_VALUE))
# Maintenance: re-wrapping is one UPDATE per subject key and compaction copies whole tables:
# generous bounds; a half-done rotation resumes where it stopped.
KEY_ROTATION: Final = ActivityPreset(
    start_to_close=timedelta(hours=2), heartbeat=timedelta(seconds=30),
    initial_interval=timedelta(seconds=2), maximum_interval=timedelta(minutes=2),
    permanent=(_E.KEY_UNAVAILABLE, _E.ROTATION_UNSUPPORTED))
PHYSICAL_COMPACTION: Final = ActivityPreset(
    start_to_close=timedelta(hours=2), heartbeat=timedelta(seconds=30),
    initial_interval=timedelta(seconds=2), maximum_interval=timedelta(minutes=2),
    permanent=(_E.KEY_UNAVAILABLE, _E.ROTATION_UNSUPPORTED))
# The projector's wake-up (a signal-with-start to Temporal) and the hourly sweep that sends one
# per subject with due outbox rows, in every tenant.
PROJECTOR_WAKE: Final = ActivityPreset(
    start_to_close=timedelta(seconds=30), heartbeat=_HEARTBEAT,
    initial_interval=timedelta(milliseconds=500), maximum_interval=timedelta(seconds=30),
    permanent=(_E.NOT_FOUND, _E.UNSTORABLE_VALUE))
PROJECTION_SWEEP: Final = ActivityPreset(
    start_to_close=timedelta(minutes=10), heartbeat=_HEARTBEAT,
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=60),
    permanent=(_E.UNSTORABLE_VALUE,))
# The lifecycle steps (retention, the memory sweeper, the erasure re-drive): one transaction per
# memory or request, every tenant; a database outage is waited out (a step resumes where it
# stopped: what is forgotten, swept or re-driven is marked so).
MEMORY_SWEEP: Final = ActivityPreset(
    start_to_close=timedelta(minutes=30), heartbeat=_HEARTBEAT,
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=60),
    permanent=(_E.UNSTORABLE_VALUE,))
# A re-embedding batch: one embedder call of up to 1,024 texts (e5 on one core: ~10 s for 1,000);
# a provider outage is waited out like a consolidation's.
REEMBED_STEP: Final = ActivityPreset(
    start_to_close=timedelta(minutes=10), heartbeat=_HEARTBEAT,
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(minutes=1),
    permanent=(_E.UNSTORABLE_VALUE, _E.MODEL_MISMATCH))

# A webhook delivery's POST: exponential backoff and a bounded number of attempts, after which the
# delivery is dead-lettered. The bounds here are the defaults of AGENT_MEMORY_WEBHOOK_MAX_ATTEMPTS,
# AGENT_MEMORY_WEBHOOK_INITIAL_RETRY_SECONDS and AGENT_MEMORY_WEBHOOK_MAX_RETRY_SECONDS; a run uses
# the worker's settings (WebhookDeliveryWorkflow reads them through an activity, recorded in its history).
WEBHOOK_DELIVERY: Final = ActivityPreset(
    start_to_close=timedelta(seconds=30), heartbeat=None,
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(minutes=10),
    permanent=(_E.WEBHOOK_REJECTED, _E.NOT_FOUND, _E.UNSTORABLE_VALUE, _E.KEY_UNAVAILABLE), maximum_attempts=8)

ACTIVITY_PRESETS: Final[Mapping[str, ActivityPreset]] = {
    "PROVIDER_STEP": PROVIDER_STEP, "STORE_WRITE": STORE_WRITE, "IN_WORKER_CONSOLIDATION": IN_WORKER_CONSOLIDATION,
    "REMOTE_CONSOLIDATION": REMOTE_CONSOLIDATION, "VECTOR_PROJECTION": VECTOR_PROJECTION,
    "IDLE_CHECK": IDLE_CHECK, "TOKEN_BUDGET_CHECK": TOKEN_BUDGET_CHECK, "ERASURE_STEP": ERASURE_STEP, "REBUILD_LIST": REBUILD_LIST,
    "REBUILD_SUBJECT_STEP": REBUILD_SUBJECT_STEP, "KEY_ROTATION": KEY_ROTATION,
    "PROJECTOR_WAKE": PROJECTOR_WAKE, "PROJECTION_SWEEP": PROJECTION_SWEEP,
    "PHYSICAL_COMPACTION": PHYSICAL_COMPACTION, "MEMORY_SWEEP": MEMORY_SWEEP,
    "REEMBED_STEP": REEMBED_STEP, "WEBHOOK_DELIVERY": WEBHOOK_DELIVERY,
}
# The presets that give up: after their attempts the workflow dead-letters the work (every other
# preset retries transient failures without a cap).
DEAD_LETTERING_PRESETS: Final = ("WEBHOOK_DELIVERY",)
