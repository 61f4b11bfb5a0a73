"""Crash-and-resume checks: a worker that kills itself at fault points, and what must hold after.

- `worker_main()` (`python -m tools.chaos`, or `python -m tests.chaos.worker_main`): a
  worker process on the configured services with the offline providers, each real provider
  call appending one line (kind, tenant, request digest) to `AGENT_MEMORY_PROVIDER_LOG`.
- `WorkerSupervisor`: runs that process, and when it dies by SIGKILL fails its orphaned activity
  attempts (what their start-to-close timeout would do, 1–5 minutes later) and restarts it.
- Checks: `projection_digest` (content only: no tenant, subject, memory ids or recording
  times, so two tenants fed the same input compare equal), `duplicate_counts`, `lost_sessions`,
  `provider_calls`.
- `run_campaign()` / `python -m tools.cli chaos --kills N --seed S`: random kills on a private stack.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import random
import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel
from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.workflowservice.v1 import ResetStickyTaskQueueRequest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from agent_memory.cli.progress import Progress
from agent_memory.core.contract import projector_workflow_id, workflow_id_tenant
from agent_memory.core.errors import AgentMemoryError, InvalidInput
from agent_memory.core.models import Session
from agent_memory.core.settings import ENV_VARS, Settings
from agent_memory.core.tables import duplicate_keys
from agent_memory.lifecycle.erasure import STORES
from agent_memory.providers.base import runs_in_worker
from agent_memory.store.db import fetch_one, tenant_transaction
from tools.faults import FAULTS_ENV, STATE_ENV, hits

if TYPE_CHECKING:
    from agent_memory.providers.openai.bundle import ProviderBundle

PROVIDER_LOG_ENV = "AGENT_MEMORY_PROVIDER_LOG"
# "remote": the logged providers say they are not in the worker, so the consolidation runs its
# steps as one ordinary activity (the route of a remote model) instead of one local activity.
PLACEMENT_ENV = "AGENT_MEMORY_CHAOS_PROVIDERS"
CONSOLIDATION_POINTS = ("after_record:extract", "after_record:importance", "after_record:summary",
                        "after_record:plan", "after_record:embed", "after_plan", "after_commit", "mid_projection")
ERASURE_POINTS = tuple(f"mid_erasure:{store}" for store in STORES)
KILL_POINTS = CONSOLIDATION_POINTS + ERASURE_POINTS
SUBJECT = "lin"
ERASURE_REASON = "chaos: erase after consolidation"
_REPO_ROOT = Path(__file__).resolve().parents[1]


# --- the worker process -------------------------------------------------------------------------

def _tenant_in_activity() -> str:
    try:
        workflow_id = activity.info().workflow_id
    except RuntimeError:  # not in an activity
        return "-"
    # consolidate/{tenant}/{subject}/{session}, projector/{tenant}/{subject}; None: a standalone activity
    return workflow_id_tenant(workflow_id or "") or "-"


class _Logged:
    """A provider that appends `kind<TAB>tenant<TAB>request digest<TAB>pid` per real call (O_APPEND,
    one write a line: lines from processes killed mid-way are whole or absent)."""

    def __init__(self, inner, kind: str, log_path: str):
        self._inner = inner
        self._kind = kind
        self._log_path = log_path
        self.name = inner.name
        self.version = inner.version
        # The same route as unlogged, unless the scenario asks for the remote one.
        self.runs_in_worker = runs_in_worker(inner) and os.environ.get(PLACEMENT_ENV) != "remote"

    def _log(self, digest: str) -> None:
        fd = os.open(self._log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{self._kind}\t{_tenant_in_activity()}\t{digest}\t{os.getpid()}\n".encode())
        finally:
            os.close(fd)


def _messages_digest(messages) -> str:
    from activities.consolidation import messages_digest

    return messages_digest(messages)


class LoggedExtractor(_Logged):
    async def extract(self, messages, **kwargs):
        self._log(_messages_digest(messages))
        return await self._inner.extract(messages, **kwargs)


class LoggedScorer(_Logged):
    async def score(self, messages, **kwargs):
        self._log(_messages_digest(messages))
        return await self._inner.score(messages, **kwargs)


class LoggedSummarizer(_Logged):
    async def summarize(self, messages, **kwargs):
        self._log(_messages_digest(messages))
        return await self._inner.summarize(messages, **kwargs)


class LoggedEmbedder(_Logged):
    def __init__(self, inner, kind: str, log_path: str):
        super().__init__(inner, kind, log_path)
        self.dimensions = inner.dimensions

    async def embed(self, texts: list[str]):
        # One line per text: the projector batches whatever rows are due, so a call's make-up
        # depends on timing; a text embedded twice is what the check must catch.
        for text in texts:
            self._log(hashlib.sha256(text.encode()).hexdigest()[:24])
        return await self._inner.embed(texts)


def logged_providers(log_path: str | os.PathLike) -> ProviderBundle:
    from agent_memory.providers.offline import offline_providers
    from agent_memory.providers.openai.bundle import ProviderBundle

    p, log = offline_providers(), str(log_path)
    return ProviderBundle(LoggedExtractor(p.extractor, "extract", log), LoggedScorer(p.scorer, "importance", log),
                           LoggedSummarizer(p.summarizer, "summary", log), LoggedEmbedder(p.embedder, "embed", log))


async def _serve_worker() -> int:
    from agent_memory.api.services import Services
    from tools import faults
    from workers.worker import build_worker

    faults.install()  # the configured fault points kill this process
    # Timestamped warnings (a claim waited for, a renewal that failed): the log tells what a slow
    # scenario waited on.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = Settings.from_env()
    if not (settings.temporal_address and settings.database_url and settings.redis_url):
        raise SystemExit("the chaos worker needs TEMPORAL_ADDRESS, DATABASE_URL and REDIS_URL")
    log_path = os.environ.get(PROVIDER_LOG_ENV) or str(settings.home / "provider-calls.log")
    services = await Services.open(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with build_worker(services, task_queue=settings.task_queue, providers=logged_providers(log_path)):
            print(f"chaos worker {os.getpid()} polling {settings.task_queue} "
                  f"(faults: {os.environ.get(FAULTS_ENV) or 'none'})", flush=True)
            await stop.wait()
    finally:
        await services.close()
    return 0


def worker_main() -> int:
    return asyncio.run(_serve_worker())


def worker_env(settings: Settings, *, task_queue: str, provider_log: Path, state_dir: Path | None = None,
               faults: str | None = None, remote_providers: bool = False) -> dict[str, str]:
    """The environment of a chaos worker on `settings`' services (nothing of the caller's own
    service configuration leaks in). `remote_providers`: the steps as one ordinary activity."""
    env = {k: v for k, v in os.environ.items()
           if k not in ENV_VARS and k not in (FAULTS_ENV, STATE_ENV, PLACEMENT_ENV)}
    env.update(TEMPORAL_ADDRESS=settings.temporal_address or "", DATABASE_URL=settings.database_url or "",
               DATABASE_ADMIN_URL=settings.database_admin_url or "", REDIS_URL=settings.redis_url or "",
               TEMPORAL_NAMESPACE=settings.temporal_namespace, AGENT_MEMORY_TASK_QUEUE=task_queue,
               AGENT_MEMORY_HOME=str(settings.home), AGENT_MEMORY_PROVIDER="offline")
    env[PROVIDER_LOG_ENV] = str(provider_log)
    if settings.master_key:
        env["AGENT_MEMORY_MASTER_KEY"] = settings.master_key
    if state_dir is not None:
        env[STATE_ENV] = str(state_dir)
    if faults:
        env[FAULTS_ENV] = faults
    if remote_providers:
        env[PLACEMENT_ENV] = "remote"
    return env


# --- supervising it -----------------------------------------------------------------------------

class WorkerDied(AgentMemoryError):
    pass


async def fail_orphaned_activities(client: Client, workflow_ids, pid: int | None = None) -> int:
    """After the worker was SIGKILLed: fail the activity attempts it had started (the server
    would time them out after their start-to-close timeout; the retry policy then schedules
    the next attempt either way) and drop the dead worker's sticky queue. With `pid`, only the
    attempts of that process (a worker's identity is `pid@host`): the other workers' are alive."""
    failed = 0
    for workflow_id in list(workflow_ids):
        handle = client.get_workflow_handle(workflow_id)
        try:
            desc = await handle.describe()
        except RPCError as exc:  # a projector that was never started (yet)
            if exc.status == RPCStatusCode.NOT_FOUND:
                continue
            raise
        if desc.status != WorkflowExecutionStatus.RUNNING:
            continue
        for pending in desc.raw_description.pending_activities:
            if pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED and (
                    pid is None or pending.last_worker_identity.startswith(f"{pid}@")):
                try:
                    await client.get_async_activity_handle(
                        workflow_id=workflow_id, run_id=desc.run_id, activity_id=pending.activity_id).fail(
                        ApplicationError("the worker process was killed", type="WorkerKilled"))
                    failed += 1
                except Exception:  # completed or timed out meanwhile: nothing to fail
                    pass
        await client.workflow_service.reset_sticky_task_queue(ResetStickyTaskQueueRequest(
            namespace=client.namespace, execution=WorkflowExecution(workflow_id=workflow_id, run_id=desc.run_id)))
    return failed


class WorkerSupervisor:
    """Runs `processes` chaos worker subprocesses on one task queue; when one dies by SIGKILL,
    cleans up after it and restarts it with the faults `next_faults()` returns (None: none). Any
    other exit is an error for the waiters. Every process starts with the faults given to
    `start`: the hits are counted across them, so the one that reaches the configured hit dies."""

    def __init__(self, client: Client, env: dict[str, str], log_file: Path, *,
                 next_faults: Callable[[], str | None] = lambda: None,
                 argv: list[str] | None = None, processes: int = 1):
        self.client = client
        self.env = env
        self.log_file = log_file
        self.next_faults = next_faults
        self.argv = argv or [sys.executable, "-m", "tools.chaos"]
        self.processes = processes
        self.killed: dict[int, str] = {}  # pid -> the fault configuration it was killed at, in order
        self.orphans_failed = 0
        self.active: set[str] = set()  # workflow ids being waited for
        self.procs: list[asyncio.subprocess.Process] = []  # the live process of each slot
        self.faults: dict[int, str | None] = {}  # pid -> the fault configuration it runs with
        self._stopping = False
        self._died: asyncio.Future | None = None
        self._watchers: list[asyncio.Task] = []

    async def start(self, faults: str | None = None) -> WorkerSupervisor:
        self._died = died = asyncio.get_running_loop().create_future()
        for slot in range(self.processes):
            proc = await self._spawn(faults)
            self.procs.append(proc)
            self._watchers.append(asyncio.create_task(self._watch(slot, proc, died)))
        return self

    async def _spawn(self, faults: str | None) -> asyncio.subprocess.Process:
        env = dict(self.env)
        env.pop(FAULTS_ENV, None)
        if faults:
            env[FAULTS_ENV] = faults
        # The child needs a real file descriptor; appending to a local log file is not worth a thread.
        with open(self.log_file, "ab") as out:  # noqa: ASYNC230
            proc = await asyncio.create_subprocess_exec(
                *self.argv, env=env, stdout=out, stderr=asyncio.subprocess.STDOUT, stdin=asyncio.subprocess.DEVNULL,
                cwd=str(_REPO_ROOT), start_new_session=True)
        self.faults[proc.pid] = faults
        return proc

    async def _watch(self, slot: int, proc: asyncio.subprocess.Process, died: asyncio.Future) -> None:
        try:
            while True:
                code = await proc.wait()
                if self._stopping:
                    return
                if code != -signal.SIGKILL:
                    raise WorkerDied(f"a worker exited with {code}; log {self.log_file}:\n{self.log_tail()}")
                self.killed[proc.pid] = self.faults.get(proc.pid) or "?"
                self.orphans_failed += await fail_orphaned_activities(
                    self.client, self.active, proc.pid if self.processes > 1 else None)
                proc = self.procs[slot] = await self._spawn(self.next_faults())
        except Exception as exc:
            if not died.done():
                died.set_exception(exc)

    @property
    def kills(self) -> list[str]:
        """The fault configuration of each process that was killed, in order."""
        return list(self.killed.values())

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_file.read_text(errors="replace")[-chars:] if self.log_file.exists() else ""

    async def result(self, handle: WorkflowHandle, timeout: float = 120.0):
        """The workflow's result, restarting the worker as often as it is killed meanwhile."""
        died = self._died
        if died is None:
            raise RuntimeError("start() the supervisor before waiting for a result")
        self.active.add(handle.id)
        waiter = asyncio.ensure_future(handle.result())
        try:
            done, _ = await asyncio.wait({waiter, died}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if waiter in done:
                return waiter.result()
            if died in done:
                died.result()
            raise TimeoutError(f"workflow {handle.id} did not finish within {timeout:.0f}s; worker log:\n"
                               f"{self.log_tail()}")
        finally:
            self.active.discard(handle.id)
            if not waiter.done():
                waiter.cancel()

    async def stop(self) -> None:
        self._stopping = True
        await asyncio.gather(*(self._terminate(proc) for proc in self.procs))
        for watcher in self._watchers:
            watcher.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)

    @staticmethod
    async def _terminate(proc: asyncio.subprocess.Process) -> None:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 20)
            except TimeoutError:
                proc.kill()
                await proc.wait()


# --- what must hold after ------------------------------------------------------------------------

def _plain(value):
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


async def projection_contents(pool: AsyncConnectionPool, tenant_id: str, subject_id: str) -> dict[str, list]:
    """The subject's memory as content only: comparable across tenants fed the same input."""
    queries = {
        "facts": "SELECT namespace, key, value, version, valid_from, valid_to, status, evidence_message_ids "
                 "FROM facts WHERE tenant_id = %s AND subject_id = %s",
        "episodes": "SELECT session_id, summary, importance, version, happened_at FROM episodes "
                    "WHERE tenant_id = %s AND subject_id = %s",
        "observations": "SELECT session_id, message_id, text, happened_at FROM observations "
                        "WHERE tenant_id = %s AND subject_id = %s",
        "entities": "SELECT name, entity_type, aliases, version, first_seen_at, last_seen_at FROM entities "
                    "WHERE tenant_id = %s AND subject_id = %s",
        "entity_mentions": "SELECT message_id, session_id, version FROM entity_mentions "
                           "WHERE tenant_id = %s AND subject_id = %s",
        # Entities by name: their ids are keyed by the tenant's subject key.
        "relations": "SELECT s.name, r.relation, r.role, t.name, r.version, r.closed_version, r.valid_from, r.valid_to "
                     "FROM relations r JOIN entities s ON s.tenant_id = r.tenant_id AND s.memory_id = r.source_entity_id "
                     "JOIN entities t ON t.tenant_id = r.tenant_id AND t.memory_id = r.target_entity_id "
                     "WHERE r.tenant_id = %s AND r.subject_id = %s",
        "vectors": "SELECT memory_kind, model, count(*) FROM memory_vectors WHERE tenant_id = %s AND subject_id = %s "
                   "GROUP BY 1, 2",
        "search_index": "SELECT memory_kind, count(*) FROM memory_search WHERE tenant_id = %s AND subject_id = %s "
                        "GROUP BY 1",
        "events": "SELECT namespace, event_type, aggregate_version, count(*) FROM memory_events "
                  "WHERE tenant_id = %s AND subject_id = %s GROUP BY 1, 2, 3",
        "outbox_pending": "SELECT count(*) FROM projection_outbox WHERE tenant_id = %s AND subject_id = %s "
                          "AND processed_at IS NULL",
    }
    contents: dict[str, list] = {}
    async with tenant_transaction(pool, tenant_id) as conn:
        for name, query in queries.items():
            cur = await conn.execute(query, (tenant_id, subject_id))
            contents[name] = sorted((_plain(list(row)) for row in await cur.fetchall()),
                                    key=lambda row: json.dumps(row, default=str))
    return contents


async def projection_digest(pool: AsyncConnectionPool, tenant_id: str, subject_id: str) -> str:
    """sha256 of `projection_contents`: facts (namespace, key, value, version, valid_from,
    valid_to, status, evidence), episodes (session, summary, importance), observations (session,
    message, text), entities (name, type, aliases, version, first and last seen) and their mentions,
    relations (by their entities' names, with their intervals),
    vectors and index rows per kind, events per (namespace, type, version) and
    pending outbox rows. Tenant, subject, memory ids and recording times are left out."""
    contents = await projection_contents(pool, tenant_id, subject_id)
    return hashlib.sha256(json.dumps(contents, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


# Natural keys (from the table registry): a row written twice shows as a group of more than one.
DUPLICATE_KEYS: dict[str, tuple[str, str]] = duplicate_keys()


async def duplicate_counts(pool: AsyncConnectionPool, tenant_id: str, subject_id: str) -> dict[str, int]:
    """Rows beyond the first per natural key, per store (all must be 0); `fact_evidence`
    counts facts citing the same message twice (a confirmation applied twice)."""
    counts: dict[str, int] = {}
    async with tenant_transaction(pool, tenant_id) as conn:
        for name, (table, key) in DUPLICATE_KEYS.items():
            cur = await conn.execute(
                f"SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM {table} "
                f"WHERE tenant_id = %s AND subject_id = %s GROUP BY {key} HAVING count(*) > 1) d",
                (tenant_id, subject_id))
            counts[name] = int((await fetch_one(cur))[0])
        cur = await conn.execute(
            "SELECT count(*) FROM facts WHERE tenant_id = %s AND subject_id = %s AND cardinality(evidence_message_ids) "
            "> (SELECT count(DISTINCT m) FROM unnest(evidence_message_ids) m)", (tenant_id, subject_id))
        counts["fact_evidence"] = (await fetch_one(cur))[0]
    return counts


async def lost_sessions(pool: AsyncConnectionPool, tenant_id: str, subject_id: str) -> list[str]:
    """Sessions of the subject without their episode."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(
            "SELECT s.session_id FROM sessions s WHERE s.tenant_id = %s AND s.subject_id = %s AND NOT EXISTS "
            "(SELECT 1 FROM episodes e WHERE e.tenant_id = s.tenant_id AND e.subject_id = s.subject_id "
            "AND e.session_id = s.session_id) "
            "ORDER BY 1", (tenant_id, subject_id))
        return [row[0] for row in await cur.fetchall()]


def provider_calls(log_path: Path, tenant_id: str) -> dict[tuple[str, str], list[int]]:
    """Calls that reached the provider for `tenant_id`: per (kind, request digest), the pid of the
    process that made each call, in order."""
    calls: dict[tuple[str, str], list[int]] = {}
    if log_path.exists():
        for line in log_path.read_text().splitlines():
            kind, tenant, digest, pid = line.split("\t")
            if tenant == tenant_id:
                calls.setdefault((kind, digest), []).append(int(pid))
    return calls


# The kind of provider call whose recorded result a kill point follows: that request must be
# reused by the retry, never made again.
def _recorded_kind(fault: str) -> str | None:
    point = fault.split("@")[0]
    if point.startswith("after_record:"):
        return point.removeprefix("after_record:")
    return "embed" if point == "mid_projection" else None


def lost_in_flight(calls: dict[tuple[str, str], list[int]], killed: dict[int, str]) -> dict[tuple[str, str], int]:
    """Calls made again because the process that made them was killed before recording the result:
    a call in flight when its process dies (importance beside the summary, an embedding batch
    beside an extraction) returned to nobody, so the retry must call again; at-most-once holds
    for recorded results. Per request, the calls of killed processes (`killed`: pid -> fault)
    followed by a later call, except a call of the kind whose recorded result that process's kill
    point follows (that one must be reused)."""
    lost: dict[tuple[str, str], int] = {}
    for (kind, digest), pids in calls.items():
        if n := sum(pid in killed and _recorded_kind(killed[pid]) != kind for pid in pids[:-1]):
            lost[(kind, digest)] = n
    return lost


# --- scenario ----------------------------------------------------------------------------------

def demo_sessions() -> list[Session]:
    from agent_memory.memory.ingest import parse_session_line

    text = (resources.files("agent_memory") / "samples" / "demo_sessions.jsonl").read_text(encoding="utf-8")
    return [parse_session_line(line, n) for n, line in enumerate(text.splitlines(), 1) if line.strip()]


def comparable(result: BaseModel) -> dict:
    """A workflow result without its ids, times, the vectors figure (a resumed projection counts
    only what it upserted itself) and whether the projector was woken (the providers' placement
    and the timing decide who embeds; the digest of the vectors compares what was embedded)."""
    data = result.model_dump(mode="json")
    for name in ("workflow_id", "tenant_id", "subject_id", "vectors_upserted", "projector_woken", "request_id",
                 "requested_at", "tombstoned_at", "completed_at", "compaction_ticket"):
        data.pop(name, None)
    return data


class ScenarioOutcome(BaseModel):
    tenant_id: str
    consolidations: list[dict] = []
    digest: str = ""
    contents: dict = {}
    duplicates: dict[str, int] = {}
    lost: list[str] = []
    receipt: dict | None = None
    erased_digest: str = ""
    erased_duplicates: dict[str, int] = {}
    calls: dict[str, int] = {}  # per request, the calls whose result was recorded or reused
    lost_in_flight: dict[str, int] = {}  # per request, calls made again after their process died
    workflows_completed: int = 0
    workflows_failed: int = 0
    errors: list[str] = []

    @property
    def repeated(self) -> int:
        return sum(n - 1 for n in self.calls.values() if n > 1)


async def run_scenario(services, supervisor: WorkerSupervisor, tenant_id: str, *, provider_log: Path,
                       sessions: list[Session] | None = None, erase: bool = True,
                       timeout: float = 120.0) -> ScenarioOutcome:
    """Consolidate the sessions in order (each sees the facts of the earlier ones), check, then
    erase the subject and check again; the worker may be killed anywhere meanwhile."""
    from agent_memory.api.client import MemoryClient
    from agent_memory.providers.offline import offline_providers

    client = MemoryClient(services, offline_providers().embedder, task_queue=supervisor.env["AGENT_MEMORY_TASK_QUEUE"])
    outcome = ScenarioOutcome(tenant_id=tenant_id)
    sessions = sessions or demo_sessions()
    # The subject's projector runs alongside the consolidations: its attempts are cleaned up too.
    supervisor.active.add(projector_workflow_id(tenant_id, SUBJECT))
    for s in sessions:
        await client.append_messages(tenant_id, SUBJECT, s)
    for s in sessions:
        try:
            result = await supervisor.result(await client.end_session(tenant_id, SUBJECT, s.session_id), timeout)
            outcome.consolidations.append(comparable(result))
            outcome.workflows_completed += 1
        except (TimeoutError, WorkerDied):
            raise
        except Exception as exc:  # a workflow that failed for good
            outcome.workflows_failed += 1
            outcome.errors.append(f"{s.session_id}: {exc!r}")
    # The outbox is embedded by the runs themselves or by the subject's projector after them.
    await client.admin.wait_for_projection(tenant_id, SUBJECT, timeout=timeout)
    supervisor.active.discard(projector_workflow_id(tenant_id, SUBJECT))
    outcome.contents = await projection_contents(services.pool, tenant_id, SUBJECT)
    outcome.digest = await projection_digest(services.pool, tenant_id, SUBJECT)
    outcome.duplicates = await duplicate_counts(services.pool, tenant_id, SUBJECT)
    outcome.lost = await lost_sessions(services.pool, tenant_id, SUBJECT)
    if erase:
        try:
            receipt = await supervisor.result(await client.admin.erase(tenant_id, SUBJECT, ERASURE_REASON), timeout)
            outcome.receipt = comparable(receipt)
            # The projector records one `embed-batch/...` operation per provider call, and how
            # the due rows fall into batches depends on timing (a crash, a loaded machine): the
            # erased operations count may differ by those records alone. Each item's operation
            # is checked instead by the provider calls (each request reached once) and the digest.
            outcome.receipt.get("removed", {}).pop("operations", None)
            outcome.workflows_completed += 1
        except (TimeoutError, WorkerDied):
            raise
        except Exception as exc:
            outcome.workflows_failed += 1
            outcome.errors.append(f"erasure: {exc!r}")
        outcome.erased_digest = await projection_digest(services.pool, tenant_id, SUBJECT)
        outcome.erased_duplicates = await duplicate_counts(services.pool, tenant_id, SUBJECT)
    calls = provider_calls(provider_log, tenant_id)
    lost = lost_in_flight(calls, supervisor.killed)
    outcome.calls = {f"{k}:{d}": len(pids) - lost.get((k, d), 0) for (k, d), pids in sorted(calls.items())}
    outcome.lost_in_flight = {f"{k}:{d}": n for (k, d), n in sorted(lost.items())}
    return outcome


def mismatches(outcome: ScenarioOutcome, reference: ScenarioOutcome) -> list[str]:
    """What differs from the crash-free reference run (empty: the crash left no trace)."""
    found = []
    if outcome.digest != reference.digest:
        diff = [k for k in reference.contents if outcome.contents.get(k) != reference.contents[k]]
        found.append(f"projection digest differs in {diff}")
    if outcome.consolidations != reference.consolidations:
        found.append("consolidation results differ")
    if reference.receipt is not None:
        if outcome.erased_digest != reference.erased_digest:
            found.append("digest after erasure differs")
        if outcome.receipt != reference.receipt:
            found.append(f"erasure receipt differs: {outcome.receipt} != {reference.receipt}")
    if set(outcome.calls) != set(reference.calls):
        found.append(f"provider requests differ: {sorted(set(outcome.calls) ^ set(reference.calls))}")
    return found


# --- the randomized campaign ---------------------------------------------------------------------

class CampaignReport(BaseModel):
    seed: int
    workers: int  # worker processes on the campaign's task queue
    remote_providers: bool  # the route of a remote model: every step in one ordinary activity
    kills_requested: int
    kills: int
    kill_points: dict[str, int]
    rounds: int
    workflows_completed: int
    workflows_failed: int
    duplicates: int
    lost_sessions: int
    repeated_provider_calls: int
    in_flight_calls_made_again: int  # calls a killed process had in flight (never recorded)
    digest_mismatches: int
    receipt_mismatches: int
    residue: int
    orphaned_attempts_failed: int
    wall_seconds: float
    problems: list[str]

    def render(self) -> str:
        points = ", ".join(f"{p} ×{n}" for p, n in sorted(self.kill_points.items()))
        return "\n".join([
            f"agent-memory chaos — seed {self.seed}, {self.workers} worker{'s' if self.workers > 1 else ''}, "
            f"{self.rounds} rounds in {self.wall_seconds:.1f}s"
            f"{', providers remote' if self.remote_providers else ''}",
            f"  kills                     {self.kills} (asked {self.kills_requested})",
            f"  kill points               {points}",
            f"  workflows completed       {self.workflows_completed} (failed {self.workflows_failed})",
            f"  duplicates                {self.duplicates}",
            f"  lost sessions             {self.lost_sessions}",
            f"  repeated provider calls   {self.repeated_provider_calls} "
            f"(in flight at a kill, made again: {self.in_flight_calls_made_again})",
            f"  digest mismatches         {self.digest_mismatches}",
            f"  receipt mismatches        {self.receipt_mismatches} (residue {self.residue})",
            f"  orphaned attempts failed  {self.orphaned_attempts_failed}",
            *(f"  problem: {p}" for p in self.problems),
        ])


@dataclass
class _Aim:
    """Chooses the next kill: a random point whose hits so far are below what one round
    reaches, on a random one of its remaining hits (so it fires within the round)."""
    rng: random.Random
    state_dir: Path
    budget: dict[str, int]
    remaining: int
    chosen: list[str] = field(default_factory=list)

    def __call__(self) -> str | None:
        if self.remaining <= 0:
            return None
        open_points = [p for p in KILL_POINTS if hits(self.state_dir, p) < self.budget.get(p, 0)]
        if not open_points:
            return None
        # The consolidation points as a group twice as likely as the (more numerous) erasure stores.
        consolidation = [p for p in open_points if p in CONSOLIDATION_POINTS]
        erasure = [p for p in open_points if p not in CONSOLIDATION_POINTS]
        point = self.rng.choice(consolidation if consolidation and (not erasure or self.rng.random() < 2 / 3)
                                else erasure)
        nth = self.rng.randint(hits(self.state_dir, point) + 1, self.budget[point])
        self.remaining -= 1
        self.chosen.append(point)
        return f"{point}@{nth}"


async def run_campaign(services, *, kills: int, seed: int, work_dir: Path, remote_providers: bool = False,
                       workers: int = 1,
                       progress: Callable[[int, str], None] = lambda kills, line: None) -> CampaignReport:
    """The campaign; `progress(kills so far, what happened)` after the reference run and each round.
    `remote_providers`: the providers say they compute elsewhere (the route of a remote model).
    `workers`: worker processes sharing the task queue, any of which a kill may hit."""
    started = time.monotonic()
    rng = random.Random(seed)
    await asyncio.to_thread(work_dir.mkdir, parents=True, exist_ok=True)
    provider_log = work_dir / "provider-calls.log"
    run_id = f"{seed}-{uuid.uuid4().hex[:6]}"
    task_queue = f"chaos-{run_id}"

    async def scenario(tenant: str, aim: _Aim | None, state_dir: Path) -> tuple[ScenarioOutcome, WorkerSupervisor]:
        env = worker_env(services.settings, task_queue=task_queue, provider_log=provider_log, state_dir=state_dir,
                         remote_providers=remote_providers)
        supervisor = WorkerSupervisor(services.temporal, env, work_dir / "worker.log",
                                      next_faults=aim or (lambda: None), processes=workers)
        await supervisor.start(aim() if aim else None)
        try:
            return await run_scenario(services, supervisor, tenant, provider_log=provider_log), supervisor
        finally:
            await supervisor.stop()

    # The crash-free reference, which also measures how often each fault point is reached.
    ref_state = work_dir / "faults-reference"
    reference, _ = await scenario(f"chaos-ref-{run_id}", None, ref_state)
    budget = {p: hits(ref_state, p) for p in KILL_POINTS}
    progress(0, f"reference run done; fault point hits per round: {budget}")

    report = CampaignReport(seed=seed, workers=workers, remote_providers=remote_providers, kills_requested=kills, kills=0, kill_points={}, rounds=0,
                            workflows_completed=reference.workflows_completed, workflows_failed=0, duplicates=0,
                            lost_sessions=0, repeated_provider_calls=reference.repeated, in_flight_calls_made_again=0,
                            digest_mismatches=0, receipt_mismatches=0, residue=0, orphaned_attempts_failed=0,
                            wall_seconds=0.0, problems=[])
    max_rounds = 4 * kills + 4
    while report.kills < kills and report.rounds < max_rounds:
        report.rounds += 1
        tenant = f"chaos-{run_id}-r{report.rounds}"
        state_dir = work_dir / f"faults-r{report.rounds}"
        aim = _Aim(rng, state_dir, budget, remaining=min(rng.randint(1, 3), kills - report.kills))
        outcome, supervisor = await scenario(tenant, aim, state_dir)
        report.kills += len(supervisor.kills)
        for fault in supervisor.kills:
            point = fault.split("@")[0]
            report.kill_points[point] = report.kill_points.get(point, 0) + 1
        report.orphaned_attempts_failed += supervisor.orphans_failed
        report.workflows_completed += outcome.workflows_completed
        report.workflows_failed += outcome.workflows_failed
        report.duplicates += sum(outcome.duplicates.values()) + sum(outcome.erased_duplicates.values())
        report.lost_sessions += len(outcome.lost)
        report.repeated_provider_calls += outcome.repeated
        report.in_flight_calls_made_again += sum(outcome.lost_in_flight.values())
        report.digest_mismatches += (outcome.digest != reference.digest) + \
            (outcome.erased_digest != reference.erased_digest)
        report.receipt_mismatches += outcome.receipt != reference.receipt
        report.residue += (outcome.receipt or {}).get("residue_total", 0)
        problems = mismatches(outcome, reference) + outcome.errors
        report.problems += [f"round {report.rounds} ({', '.join(supervisor.kills) or 'no kill'}): {p}"
                            for p in problems]
        progress(report.kills, f"round {report.rounds}: killed at {supervisor.kills or 'nothing'}; "
                               f"{problems or 'ok'}")
    report.wall_seconds = round(time.monotonic() - started, 1)
    return report


async def chaos_command(args, settings: Settings) -> int:
    """`python -m tools.cli chaos`: on its own embedded stack (free ports, a temporary home removed
    afterwards), never on a running `agent-memory up` or configured services."""
    from workers.runtime import scratch_stack

    if args.workers < 1:
        raise InvalidInput("--workers must be at least 1")
    async with scratch_stack(settings, "chaos", embedded_only=True) as services:
        home = services.settings.home
        with Progress("chaos kills", args.kills, enabled=not args.json) as bar:
            bar.update(0, note=f"reference run on a stack under {home}")
            report = await run_campaign(services, kills=args.kills, seed=args.seed, remote_providers=args.remote_providers,
                                        workers=args.workers,
                                        work_dir=home / "chaos" / f"seed-{args.seed}-{uuid.uuid4().hex[:6]}",
                                        progress=lambda kills, line: bar.update(kills, note=line[:100]))
    if args.json:
        print(json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False))
    else:
        print(report.render())
    clean = not (report.duplicates or report.lost_sessions or report.repeated_provider_calls
                 or report.digest_mismatches or report.receipt_mismatches or report.residue
                 or report.workflows_failed or report.problems)
    return 0 if clean and report.kills >= args.kills else 1


if __name__ == "__main__":
    sys.exit(worker_main())
