"""The Python client: what an agent runtime calls (append, end session, recall, context, its own
fixes and tool calls); the operator's calls are AdminClient's (agent_memory/api/admin_client.py)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import warnings
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Self

from pydantic import JsonValue
from redis.exceptions import RedisError
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import (
    SearchAttributePair,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import TemporalError
from temporalio.service import RPCError, RPCStatusCode

# The run listings and ids moved with the operator's calls: re-exported for existing importers.
from agent_memory.api.admin_client import (  # noqa: F401
    AdminClient,
    ParkedRun,
    RunSummary,
    ServicesClient,
    erasure_request_id,
    visibility_query,
)
from agent_memory.api.services import Services
from agent_memory.core import contract
from agent_memory.core.concurrency import await_both
from agent_memory.core.contract import (  # the id builders: re-exported for existing importers
    SESSION_ID,
    SUBJECT_ID,
    TENANT_ID,
    consolidation_workflow_id,
    idle_workflow_id,
    legacy_consolidation_workflow_id,
    legacy_idle_workflow_id,
)
from agent_memory.core.errors import InvalidInput, NotFound
from agent_memory.core.fact_text import fact_line
from agent_memory.core.models import (
    CommitOutcome,
    ConsolidationInput,
    ConsolidationResult,
    FactRow,
    MetadataValue,
    Session,
    check_identifier,
    check_session_id,
    storable_text,
)
from agent_memory.lifecycle.forgetting import (
    Actor,
    ForgetResult,
    RestoreResult,
    forget_memory,
    restore_memory,
)
from agent_memory.lifecycle.idle_timers import arm_idle_timer
from agent_memory.memory.corrections import LiveActor, write_fact
from agent_memory.memory.entities import EntityView, list_entities
from agent_memory.memory.evidence import SESSION_IDLE_STATE_SQL, AppendResult, append_messages
from agent_memory.memory.filters import NO_FILTER, MemoryFilter, matching_items
from agent_memory.memory.ingest import check_not_future, check_time_not_future
from agent_memory.memory.memory_store import list_facts
from agent_memory.memory.relations import RelationView, list_relations
from agent_memory.memory.tool_calls import (
    LEASE_DEFAULT_SECONDS,
    ToolCall,
    claim_tool_call,
    read_tool_call,
    record_tool_call,
)
from agent_memory.memory.tool_calls import Outcome as ToolCallOutcome
from agent_memory.projection.projector import wake_projector
from agent_memory.providers.base import Embedder, Summarizer
from agent_memory.providers.factory import providers_for
from agent_memory.recall.context import AssembledContext, assemble_context
from agent_memory.recall.prompt import DEFAULT_SYSTEM, BuiltPrompt, build_prompt
from agent_memory.recall.recall import RecallResult, recall
from agent_memory.recall.recall_policy import RecallPolicy
from agent_memory.store.db import acting_as, fetch_one, tenant_transaction
from agent_memory.store.scope import Mode, SubjectErasedError, subject_scope
from agent_memory.telemetry.metrics import READ_DURATION
from agent_memory.telemetry.record import timed

log = logging.getLogger(__name__)


# A session with no new message for this long is consolidated as if its end hook had fired.
DEFAULT_IDLE_TIMEOUT = timedelta(minutes=10)
# Appends signal a session's idle timer at most once per this window (or half the idle timeout).
IDLE_SIGNAL_DEBOUNCE = timedelta(seconds=5)
# How long an append waits for its idle-timer signal before answering `idle_timer: "pending"`
# (Temporal unreachable: the SDK would retry for ~10 s); the rows are committed either way.
IDLE_SIGNAL_TIMEOUT = timedelta(seconds=3)


def _idle_touch_key(tenant_id: str, subject_id: str, session_id: str) -> str:
    """A Redis key per session that lives for the debounce window; a digest names it, so no
    subject id is written to Redis by it (erasure has nothing to find there)."""
    digest = hashlib.sha256(f"{tenant_id}\x1f{subject_id}\x1f{session_id}".encode()).hexdigest()[:32]
    return f"idle-touch:{digest}"


def query_text(field: str, value: str) -> str:
    """Text a read searches with or writes into a prompt: no NUL character and no lone surrogate,
    which the store and the model cannot take (422 naming the field)."""
    try:
        return storable_text(value)
    except InvalidInput as exc:
        raise InvalidInput(f"{field} {exc}") from None


# The operator's calls that were MemoryClient's, by their name there and on AdminClient; reached
# through MemoryClient they still work for one release, with a DeprecationWarning naming the new place.
MOVED_TO_ADMIN: dict[str, str] = {
    name: name for name in (
        "erase", "reapply_erasures", "erasure_receipt", "erasure_status", "erasure_counts", "redrive_erasures",
        "subject_erased", "export", "forgotten", "confirm_fact", "schedules_health", "rotate_keys", "compact",
        "sweep", "reembed", "reembed_progress", "rebuild", "rebuild_result", "rederive", "rederive_result",
        "put_category", "categories", "remove_category", "set_recall_policy", "set_retention_policy",
        "set_provider_policy", "set_write_policy", "set_token_budget", "grant_consent", "revoke_consent",
        "consents", "withheld_counts", "gated_sessions", "read_counts", "lifecycle_counts", "importance_spread",
        "leak_filter_drops", "authorizations", "refused_operator_runs", "add_webhook", "rotate_webhook_secret",
        "webhooks", "remove_webhook", "webhook_deliveries", "webhook_delivery", "redeliver_webhook",
        "wake_projector", "projection_lag", "wait_for_projection", "retry_dead_letters", "stale_marks",
        "stale_mark_counts", "resolve_stale_mark", "review", "runs", "parked_consolidations", "forget_grace",
        "future_tolerance")
} | {
    "recall_policy": "get_recall_policy", "retention_policy": "get_retention_policy",
    "provider_policy": "get_provider_policy", "write_policy": "get_write_policy", "token_budget": "get_token_budget",
}


class MemoryClient(ServicesClient):
    """The agent's calls: append a session's messages and end it, read what memory holds (facts,
    entities, relations, recall, the prompt's context), the agent's own fixes (correct, forget,
    restore one memory) and its side-effecting tool calls made once. The operator's calls are
    `admin` (an AdminClient on the same services)."""

    def __init__(self, services: Services, embedder: Embedder, *, task_queue: str | None = None,
                 idle_timeout: timedelta | None = DEFAULT_IDLE_TIMEOUT, summarizer: Summarizer | None = None,
                 idle_signal_debounce: timedelta = IDLE_SIGNAL_DEBOUNCE):
        """idle_timeout: consolidate a session after this long without messages (None: only the
        session-end hook consolidates). summarizer: writes the running summary of a long live
        session in `build_prompt` (default: the offline extractive one)."""
        super().__init__(services, task_queue=task_queue)
        self.embedder = embedder
        self.summarizer = summarizer
        self.idle_timeout = idle_timeout
        self.idle_signal_debounce = idle_signal_debounce  # zero: every append signals the idle timer
        self._admin: AdminClient | None = None

    @classmethod
    def _on_services(cls, services: Services, task_queue: str | None) -> Self:
        return cls(services, providers_for(services.settings).embedder, task_queue=task_queue)

    @property
    def admin(self) -> AdminClient:
        """The operator's client on this client's services, task queue and embedder."""
        if self._admin is None:
            self._admin = AdminClient(self.services, self.embedder, task_queue=self.task_queue)
        return self._admin

    if not TYPE_CHECKING:  # the type checker sees no moved name here: callers use `admin`
        def __getattr__(self, name: str) -> Any:
            moved = MOVED_TO_ADMIN.get(name)
            if moved is None or "_admin" not in self.__dict__:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            warnings.warn(f"MemoryClient.{name} is deprecated and will be removed in the next release: use "
                          f"MemoryClient.admin.{moved} (AdminClient.{moved})", DeprecationWarning, stacklevel=2)
            return getattr(self.admin, moved)

    @staticmethod
    def acting_as(*, agent_id: str | None = None, app_id: str | None = None) -> AbstractContextManager[None]:
        """Read and write inside the block as a key limited to `agent_id` and `app_id` does: the
        messages appended are that agent's and app's; other agents' private sessions, episodes and
        notes are invisible, and reads keep the memories citing the app's messages."""
        return acting_as(agent_id=agent_id, app_id=app_id)

    async def append_messages(self, tenant_id: str, subject_id: str, session: Session, *,
                              expected_parent: str | None = None) -> AppendResult:
        """expected_parent: the last message id the caller saw in the session (NO_PARENT: none);
        a different last stored message raises AppendConflictError (see evidence.append_messages).
        New messages restart the session's idle timer; an append of duplicates only (a retry)
        starts one if none is running. Committed rows are never reported as a failure: when
        Temporal cannot be reached the result says `idle_timer="pending"`, and the idle-timer
        sweep (agent_memory/lifecycle/idle_timers.py) or the next append arms it. A message dated later than
        the settings' future tolerance is refused (InputError naming its created_at) and nothing
        is written."""
        check_not_future(session, tolerance=self._future_tolerance)
        result = await append_messages(self.services.pool, self.services.redis, tenant_id, subject_id, session,
                                       subject_digest=self.services.keyring.subject_digest(tenant_id, subject_id),
                                       expected_parent=expected_parent)
        if self.idle_timeout is not None and (result.inserted or result.duplicates):
            try:
                await asyncio.wait_for(self._touch_idle_timer(tenant_id, subject_id, session.session_id,
                                                              self.idle_timeout, touch=bool(result.inserted)),
                                       IDLE_SIGNAL_TIMEOUT.total_seconds())
                result.idle_timer = "armed"
            except (TemporalError, RedisError, TimeoutError) as exc:  # RPCError is a TemporalError
                log.warning("session %s: the idle timer could not be signalled (%s); the rows are committed and "
                            "the idle-timer sweep arms it", session.session_id, str(exc) or type(exc).__name__)
                result.idle_timer = "pending"
        return result

    async def _touch_idle_timer(self, tenant_id: str, subject_id: str, session_id: str,
                                idle_timeout: timedelta, *, touch: bool = True) -> None:
        """Signal-with-start: the first message starts the timer, later ones restart it, at most
        once per debounce window (a signal is a server round trip and a history event; the timer
        measures idle time from the session's newest message, workflows/session_idle.py).
        touch=False (duplicates only): start a timer if none is running, leave a running one."""
        window_ms = int(min(self.idle_signal_debounce, idle_timeout / 2).total_seconds() * 1000)
        if window_ms <= 0:
            await self._signal_idle_timer(tenant_id, subject_id, session_id, idle_timeout, touch=touch)
            return
        key = _idle_touch_key(tenant_id, subject_id, session_id)
        if not await self.services.redis.set(key, "1", nx=True, px=window_ms):
            return  # signalled within the window
        try:
            await self._signal_idle_timer(tenant_id, subject_id, session_id, idle_timeout, touch=touch)
        except BaseException:
            with contextlib.suppress(RedisError):
                await self.services.redis.delete(key)  # the next append signals again
            raise

    async def _signal_idle_timer(self, tenant_id: str, subject_id: str, session_id: str,
                                 idle_timeout: timedelta, *, touch: bool = True) -> None:
        await arm_idle_timer(self.services.temporal, self.task_queue, tenant_id, subject_id, session_id,
                             idle_timeout.total_seconds(), touch=touch)

    async def end_session(self, tenant_id: str, subject_id: str, session_id: str) -> WorkflowHandle:
        """The session-end hook: one consolidation per session, however often it fires."""
        check_identifier("tenant", tenant_id)
        check_identifier("subject", subject_id)
        check_identifier("session", session_id)
        # What the hook reads, at once: the session's owner with the messages no consolidation has
        # covered (the session went on after a run finished: a new run under the same id), in one
        # transaction; and a run started before migration 021 (a read, used once the owner is
        # confirmed). Nothing changes before the owner is confirmed: a wrong subject must not end
        # the owner's idle timer, nor see its result.
        pending, legacy = await await_both(
            asyncio.ensure_future(self._owned_session_pending(tenant_id, subject_id, session_id)),
            asyncio.ensure_future(self._subject_run(legacy_consolidation_workflow_id(tenant_id, session_id),
                                                    subject_id, result_type=ConsolidationResult)))
        # A message right after this hook signals its timer again.
        await self.services.redis.delete(_idle_touch_key(tenant_id, subject_id, session_id))
        # The legacy run: attach to it while it runs, or when it covered every message; a second
        # run over the same messages would repeat its calls.
        if legacy is not None and (legacy[1] == WorkflowExecutionStatus.RUNNING or (
                legacy[1] == WorkflowExecutionStatus.COMPLETED and not pending)):
            await self._end_idle_timers(tenant_id, subject_id, session_id)
            return legacy[0]
        # Ending the idle timers and starting the run are independent (a timer that fires meanwhile
        # attaches to the same id): at once, two round trips' wait in all instead of four.
        handle, _ = await await_both(asyncio.ensure_future(self._start_consolidation(
            tenant_id, subject_id, session_id, pending)), asyncio.ensure_future(
            self._end_idle_timers(tenant_id, subject_id, session_id)))
        return handle

    async def _start_consolidation(self, tenant_id: str, subject_id: str, session_id: str,
                                   pending: int) -> WorkflowHandle:
        return await self._start_once(
            contract.CONSOLIDATION_WORKFLOW,
            ConsolidationInput(tenant_id=tenant_id, subject_id=subject_id, session_id=session_id),
            consolidation_workflow_id(tenant_id, subject_id, session_id),
            [SearchAttributePair(TENANT_ID, tenant_id), SearchAttributePair(SUBJECT_ID, subject_id),
             SearchAttributePair(SESSION_ID, session_id)], ConsolidationResult,
            reuse=(WorkflowIDReusePolicy.ALLOW_DUPLICATE if pending
                   else WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY),
            priority=contract.tenant_fairness(tenant_id))

    async def _end_idle_timers(self, tenant_id: str, subject_id: str, session_id: str) -> None:
        """The session's idle timer, and one started before migration 021 when it is the
        subject's, have nothing left to do: the hook consolidates."""
        async def end(idle: WorkflowHandle) -> None:
            try:
                await idle.signal(contract.SIGNAL_END, True)  # by the hook: it consolidates
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise

        async def end_legacy() -> None:
            legacy = await self._subject_run(legacy_idle_workflow_id(tenant_id, session_id), subject_id)
            if legacy is not None:
                await end(legacy[0])

        await asyncio.gather(end(self.services.temporal.get_workflow_handle(
            idle_workflow_id(tenant_id, subject_id, session_id))), end_legacy())

    async def _subject_run(self, workflow_id: str, subject_id: str, result_type: type | None = None,
                           ) -> tuple[WorkflowHandle, WorkflowExecutionStatus | None] | None:
        """The latest run under `workflow_id` and its status when it is the subject's, else None: an
        id without the subject (before migration 021) may name another subject's session."""
        handle = self.services.temporal.get_workflow_handle(workflow_id, result_type=result_type)
        try:
            description = await handle.describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        if description.typed_search_attributes.get(SUBJECT_ID) != subject_id:
            return None
        return handle, description.status

    async def _owned_session_pending(self, tenant_id: str, subject_id: str, session_id: str) -> int:
        """The session's messages no consolidation has covered, once the subject is found to have
        this session (session ids are per subject) and not to be erased; else a clear error."""
        async with subject_scope(self.services.pool, self.services.keyring, tenant_id, subject_id, Mode.READ) as scope:
            if scope.erased:
                raise SubjectErasedError(tenant_id, subject_id)
            cur = await scope.conn.execute(
                "SELECT 1 FROM sessions WHERE tenant_id = %s AND subject_id = %s AND session_id = %s",
                (tenant_id, subject_id, session_id))
            found = await cur.fetchone()
            if found is not None:
                cur = await scope.conn.execute(SESSION_IDLE_STATE_SQL,
                                               {"t": tenant_id, "u": subject_id, "s": session_id})
                pending, _ = await fetch_one(cur)
                return int(pending)
        raise NotFound(f"no session {session_id!r} of subject {subject_id!r} in tenant {tenant_id!r}: append "
                       "its messages first (agent-memory ingest, client.append_messages)")

    async def consolidation_result(self, handle: WorkflowHandle) -> ConsolidationResult:
        return await handle.result()

    async def forget(self, tenant_id: str, subject_id: str, memory_id: str, *, reason: str | None = None,
                     actor: Actor = "operator", actor_id: str | None = None) -> ForgetResult:
        """Forget one memory at once (every read stops returning it); restorable within the
        grace period, swept from every store after it (docs/lifecycle.md)."""
        result = await forget_memory(self.services.pool, self.services.keyring, tenant_id=tenant_id,
                                     subject_id=subject_id, memory_id=memory_id, reason=reason, actor=actor,
                                     actor_id=actor_id, grace=self._forget_grace)
        await self._start_webhook_deliveries(tenant_id)
        return result

    async def claim_tool_call(self, tenant_id: str, subject_id: str, call_key: str, tool: str, request: JsonValue,
                              *, lease_seconds: int = LEASE_DEFAULT_SECONDS, actor_id: str | None = None,
                              claimed_as: str | None = None) -> ToolCall:
        """Claim an agent's side-effecting call before making it: `claimed` (make it, then record
        it), `in_flight` (another attempt holds it) or `completed` with the recorded result
        (do not make it again). `claimed_as`: the identity of the key claiming it (api_keys.key_identity),
        whose call it is. See memory/tool_calls.py."""
        return await claim_tool_call(self.services.pool, self.services.keyring, tenant_id, subject_id, call_key,
                                     tool, request, lease_seconds=lease_seconds, actor_id=actor_id,
                                     claimed_as=claimed_as)

    async def record_tool_call(self, tenant_id: str, subject_id: str, call_key: str, *, attempt: int,
                               result: JsonValue, outcome: ToolCallOutcome = "completed",
                               claimed_as: str | None = None) -> ToolCall:
        """Record what attempt `attempt` of a claimed call returned (`failed`: may be made again);
        with `claimed_as`, only a call of that identity."""
        return await record_tool_call(self.services.pool, self.services.keyring, tenant_id, subject_id, call_key,
                                      attempt=attempt, result=result, outcome=outcome, claimed_as=claimed_as)

    async def tool_call(self, tenant_id: str, subject_id: str, call_key: str, *,
                        claimed_as: str | None = None) -> ToolCall:
        """A tool call's record (NotFound when never claimed, expired, or, with `claimed_as`,
        another identity's)."""
        return await read_tool_call(self.services.pool, self.services.keyring, tenant_id, subject_id, call_key,
                                    claimed_as=claimed_as)

    async def restore(self, tenant_id: str, subject_id: str, memory_id: str, *, reason: str | None = None,
                      actor: Actor = "operator", actor_id: str | None = None) -> RestoreResult:
        """Undo a forget within the grace period; the memory's vectors come back through the
        projector (woken here; recorded embeddings, no model call)."""
        result = await restore_memory(self.services.pool, self.services.keyring, tenant_id=tenant_id,
                                      subject_id=subject_id, memory_id=memory_id, reason=reason, actor=actor,
                                      actor_id=actor_id, grace=self._forget_grace)
        try:
            await wake_projector(self.services.temporal, self.task_queue, tenant_id, subject_id)
        except Exception as exc:  # the outbox rows stay due; the hourly projection sweep wakes it
            log.warning("projector wake-up after a restore deferred to the sweep: %s", exc)
        await self._start_webhook_deliveries(tenant_id)
        return result

    async def write_fact(self, tenant_id: str, subject_id: str, namespace: str, key: str, value: str, *,
                         expected_version: int, evidence_message_ids: list[str],
                         observed_at: datetime | None = None, expires_at: datetime | None = None,
                         ttl_seconds: int | None = None, actor: LiveActor = "user",
                         actor_id: str | None = None, metadata: dict[str, MetadataValue] | None = None) -> CommitOutcome:
        """A live write (the user states a fact directly, or an agent or operator on the user's
        behalf: `actor`, `actor_id` are recorded on the event), conditional on the fact's version.
        Facts and the lexical index are current when it returns; the subject's projector is woken
        to embed the vector (`wait_for_projection` waits for it). Should the wake-up fail, the
        outbox row stays due and the hourly sweep wakes the projector. An observed_at later than
        the settings' future tolerance is refused (InputError).

        `expires_at` or `ttl_seconds` (one or neither; a minute to ten years) give the fact an end:
        it is a temporary fact that no read returns after it, forgotten later by the memory sweep."""
        if observed_at is not None:
            check_time_not_future("observed_at", observed_at, tolerance=self._future_tolerance)
        outcome = await write_fact(self.services.pool, self.services.keyring, tenant_id=tenant_id,
                                   subject_id=subject_id, namespace=namespace, key=key, value=value,
                                   expected_version=expected_version, evidence_message_ids=evidence_message_ids,
                                   observed_at=observed_at, expires_at=expires_at, ttl_seconds=ttl_seconds,
                                   actor=actor, actor_id=actor_id, metadata=metadata)
        try:
            await wake_projector(self.services.temporal, self.task_queue, tenant_id, subject_id)
        except Exception as exc:  # the outbox row stays due; nothing is lost
            log.warning("projector wake-up after a live write deferred to the sweep: %s", exc)
        await self._start_webhook_deliveries(tenant_id)
        return outcome

    async def facts(self, tenant_id: str, subject_id: str, *, as_of: datetime | None = None,
                    history: bool = False, candidates: bool = False,
                    filters: MemoryFilter = NO_FILTER) -> list[FactRow]:
        """Current facts (as of a time, every interval, the candidates), narrowed by `filters`
        (namespaces, when each became true, the metadata and scope of the messages each cites)."""
        filters = filters.within_key_limits()
        rows = await list_facts(self.services.pool, self.services.keyring, tenant_id, subject_id, as_of=as_of,
                                include_history=history, include_candidates=candidates)
        rows = [row for row in rows if filters.fact_matches(row)]
        if not filters.narrows_content() or not rows:
            return rows
        async with tenant_transaction(self.services.pool, tenant_id) as conn:
            return await matching_items(conn, tenant_id, subject_id, filters, rows, lambda f: f.evidence_message_ids,
                                        lambda f: fact_line(f.namespace, f.key, f.value), lambda f: f.namespace,
                                        lambda f: f.metadata)

    async def entities(self, tenant_id: str, subject_id: str) -> list[EntityView]:
        """The people, pets, places, organisations, events and things the subject's sessions
        mention, each with its names and the messages that mention it, the first mentioned first."""
        check_identifier("tenant", tenant_id)
        check_identifier("subject", subject_id)
        async with tenant_transaction(self.services.pool, tenant_id) as conn:
            return await list_entities(conn, tenant_id, subject_id)

    async def relations(self, tenant_id: str, subject_id: str, *, history: bool = False) -> list[RelationView]:
        """The edges between the subject's entities that hold now ("works at", "her sister"),
        each with its evidence; with `history`, the ended intervals too."""
        check_identifier("tenant", tenant_id)
        check_identifier("subject", subject_id)
        async with tenant_transaction(self.services.pool, tenant_id) as conn:
            return await list_relations(conn, tenant_id, subject_id, history=history)

    async def context(self, tenant_id: str, subject_id: str, query: str, *, as_of: datetime | None = None,
                      token_budget: int | None = None, policy: RecallPolicy | None = None,
                      session_id: str | None = None, filters: MemoryFilter = NO_FILTER,
                      explain: bool = False) -> AssembledContext:
        """What goes into the prompt's memory: the profile (current facts) and the episodes and
        notes most relevant to the query, each citing its evidence, within the tenant's recall
        policy (or `policy`), its tiers scaled to `token_budget` when given. Task-local facts are
        in it only when it is read in their session (`session_id`). `filters` narrows it (kinds,
        fact namespaces, a time range). `explain` gives each item the terms of its score
        (`explanation`) and lists the candidates below the budget (`below_budget`)."""
        check_identifier("tenant", tenant_id)
        check_identifier("subject", subject_id)
        if session_id is not None:
            check_session_id(session_id)
        query_text("query", query)
        with timed(READ_DURATION, route="context"):
            context = await assemble_context(self.services.pool, self.services.keyring, self.embedder, tenant_id,
                                             subject_id, query, as_of=as_of, token_budget=token_budget,
                                             policy=policy, session_id=session_id, redis=self.services.redis,
                                             filters=filters, explain=explain)
        self.services.access.record(tenant_id, subject_id, (i.memory_id for i in context.items))
        return context

    async def build_prompt(self, tenant_id: str, subject_id: str, session_id: str, user_input: str, *,
                           system: str = DEFAULT_SYSTEM, as_of: datetime | None = None,
                           token_budget: int | None = None, policy: RecallPolicy | None = None) -> BuiltPrompt:
        """The prompt for the user's input in a live session, as chat messages in blocks: system,
        profile, episodic, recent turns of the session, input (`.chat_messages()` for an
        OpenAI-style API), with the cited memory ids and every block's tokens. Session ids are
        per subject: another subject's session of the same id is not this one."""
        query_text("input", user_input)
        query_text("system", system)
        with timed(READ_DURATION, route="prompt"):
            built = await build_prompt(self.services.pool, self.services.keyring, self.services.redis,
                                       self.embedder, tenant_id, subject_id, session_id, user_input, system=system,
                                       as_of=as_of, token_budget=token_budget, policy=policy,
                                       summarizer=self.summarizer)
        self.services.access.record(tenant_id, subject_id, built.cited_item_ids)
        return built

    async def recall(self, tenant_id: str, subject_id: str, query: str, *, limit: int = 5,
                     as_of: datetime | None = None, filters: MemoryFilter = NO_FILTER,
                     explain: bool = False) -> RecallResult:
        """Facts and the nearest episodes, narrowed by `filters` (kinds, namespaces, time range);
        `explain` adds why each is there and in its place (`explanations`)."""
        check_identifier("tenant", tenant_id)
        check_identifier("subject", subject_id)
        query_text("query", query)
        with timed(READ_DURATION, route="recall"):
            found = await recall(self.services.pool, self.services.keyring, self.embedder, tenant_id, subject_id,
                                 query, limit=limit, as_of=as_of, redis=self.services.redis, filters=filters,
                                 explain=explain)
        self.services.access.record(tenant_id, subject_id,
                                    [*(f.memory_id for f in found.facts), *(e.memory_id for e in found.episodes)])
        return found
