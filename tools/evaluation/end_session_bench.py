"""`python -m tools.cli bench end-session`: the session-end hook's latency in a tenant holding N rows,
beside a fresh tenant, in one run.

The hook checks the caller's session (owner, erasure), ends its idle timer, counts the messages no
consolidation has covered (the check that used to scan the tenant's whole `operations` table) and
starts or attaches to the consolidation. Both tenants get the same measured sessions through
`client.append_messages`; the large one also holds filler sessions of 1,000 other subjects, each
shaped like a consolidated session of the write path: its `sessions` row, 10 messages, the five
recorded provider and store steps (extract, importance, summary, plan, and the commit with the
time it covered) and 10 recorded embeddings (their results abridged: size does not change which
rows an index lookup reads). Calls alternate fresh, large, large, fresh, so the machine's noise
hits both. Figures: p50/p99 of the whole hook and of the check alone, and the large/fresh ratios.
No worker polls the bench's task queue: the consolidations it starts wait and are terminated at
the end (the private stack goes away anyway).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta

import psycopg
from pydantic import BaseModel

from agent_memory.api.client import MemoryClient
from agent_memory.api.services import Services
from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import Message, Session
from agent_memory.core.settings import Settings
from agent_memory.memory.evidence import SESSION_IDLE_STATE_SQL, unconsolidated_messages
from agent_memory.providers.offline import offline_providers
from agent_memory.store.db import tenant_transaction
from tools.evaluation.recall_bench import _sentence

ROWS_PER_FILLER_SESSION = 26  # 1 session + 10 messages + 5 step records + 10 embedding records
FILLER_SUBJECTS = 1_000
FILLER_CHUNK = 5_000  # filler sessions per transaction

_FILLER_SQL = (
    """
    INSERT INTO sessions (tenant_id, subject_id, session_id, started_at)
    SELECT %(t)s, 'filler-' || (i %% 1000), 'fs-' || i, %(began)s FROM generate_series(%(lo)s::int, %(hi)s::int) i
    """,
    """
    INSERT INTO messages (tenant_id, subject_id, session_id, message_id, turn_index, role, content, created_at,
                          content_sha256)
    SELECT %(t)s, 'filler-' || (i %% 1000), 'fs-' || i, 'fs-' || i || ':' || j, j,
           CASE WHEN j %% 2 = 0 THEN 'user' ELSE 'assistant' END, 'filler message ' || j,
           %(began)s + make_interval(secs => j), md5(i || ':' || j)
      FROM generate_series(%(lo)s::int, %(hi)s::int) i, generate_series(0, 9) j
    """,
    """
    INSERT INTO operations (tenant_id, operation_id, subject_id, kind, request_hash, status, result, attempts,
                            session_id, key_digest)
    SELECT %(t)s, step || ':fs-' || i, 'filler-' || (i %% 1000), step, md5(step || i), 'succeeded',
           CASE WHEN step = 'commit' THEN jsonb_build_object('through', %(began)s + interval '1 minute')
                ELSE jsonb_build_object('step', step) END, 1, 'fs-' || i, md5(i::text)
      FROM generate_series(%(lo)s::int, %(hi)s::int) i, unnest(ARRAY['extract', 'importance', 'summary', 'plan', 'commit']) step
    """,
    """
    INSERT INTO operations (tenant_id, operation_id, subject_id, kind, request_hash, status, result, attempts,
                            memory_id, memory_version, model, model_version, key_digest)
    SELECT %(t)s, 'embed:' || m, 'filler-' || (i %% 1000), 'embed', md5(m::text), 'succeeded',
           jsonb_build_object('model', 'hashing-384'), 1, m, 1, 'hashing-384', '1', md5(m::text)
      FROM generate_series(%(lo)s::int, %(hi)s::int) i, generate_series(0, 9) j, LATERAL (SELECT md5(i || ':' || j)::uuid) AS u(m)
    """,
)


class EndSessionFigures(BaseModel):
    tenant: str  # "fresh" or "large"
    tenant_rows: int  # rows of the tenant in sessions, messages and operations
    calls: int
    end_session_p50_ms: float
    end_session_p99_ms: float
    check_p50_ms: float  # the unconsolidated-messages check alone
    check_p99_ms: float


class EndSessionBenchReport(BaseModel):
    rows: int
    sessions: int
    load_seconds: float
    figures: list[EndSessionFigures]
    end_session_large_over_fresh_p50: float
    check_large_over_fresh_p50: float
    check_plan: list[str]  # EXPLAIN ANALYZE of the check in the large tenant

    def render(self) -> str:
        lines = [f"end-session bench: a fresh tenant beside one of {self.rows:,} rows "
                 f"(loaded in {self.load_seconds:.0f} s), {self.sessions} sessions each"]
        for f in self.figures:
            lines.append(f"  {f.tenant:<6} {f.tenant_rows:>10,} rows  end_session p50 {f.end_session_p50_ms:7.2f} ms  "
                         f"p99 {f.end_session_p99_ms:7.2f} ms   check p50 {f.check_p50_ms:6.2f} ms  "
                         f"p99 {f.check_p99_ms:6.2f} ms  ({f.calls} calls)")
        lines.append(f"  large / fresh p50: end_session {self.end_session_large_over_fresh_p50:.2f}×, "
                     f"check {self.check_large_over_fresh_p50:.2f}×")
        lines += ["  the check's plan in the large tenant:", *(f"    {line}" for line in self.check_plan)]
        return "\n".join(lines)


def _percentile(times: list[float], q: int) -> float:
    if len(times) < 2:
        return round(times[0], 2)
    return round(statistics.quantiles(times, n=100, method="inclusive")[q - 1], 2)


async def _load_filler(services: Services, tenant: str, rows: int) -> None:
    sessions = rows // ROWS_PER_FILLER_SESSION
    began = datetime(2024, 1, 1, tzinfo=UTC)
    for lo in range(0, sessions, FILLER_CHUNK):
        params = {"t": tenant, "began": began, "lo": lo, "hi": min(sessions, lo + FILLER_CHUNK) - 1}
        async with tenant_transaction(services.pool, tenant) as conn:
            for statement in _FILLER_SQL:
                await conn.execute(statement, params)
    # What autovacuum would have done by now: fresh planner statistics, as the scratch stack's
    # owner (the application role holds no maintenance privilege).
    assert services.settings.database_admin_url is not None  # a scratch stack always has one
    async with await psycopg.AsyncConnection.connect(services.settings.database_admin_url, autocommit=True) as conn:
        await conn.execute("ANALYZE sessions, messages, operations")


async def _tenant_rows(services: Services, tenant: str) -> int:
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT (SELECT count(*) FROM sessions) + (SELECT count(*) FROM messages) "
                                 "+ (SELECT count(*) FROM operations)")
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def _check_plan(services: Services, tenant: str, subject: str, session: str) -> list[str]:
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + SESSION_IDLE_STATE_SQL,
                                 {"t": tenant, "u": subject, "s": session})
        return [str(row[0]) for row in await cur.fetchall()]


async def run_end_session_bench(services: Services, *, rows: int, sessions: int, calls: int,
                                seed: int = 11) -> EndSessionBenchReport:
    rng = random.Random(seed)
    queue = f"bench-end-session-{uuid.uuid4().hex[:8]}"
    tenants = {"fresh": f"bench-fresh-{uuid.uuid4().hex[:6]}", "large": f"bench-large-{uuid.uuid4().hex[:6]}"}
    client = MemoryClient(services, offline_providers().embedder, task_queue=queue, idle_timeout=None)
    t0 = time.perf_counter()
    await _load_filler(services, tenants["large"], rows)
    load_seconds = time.perf_counter() - t0
    began = datetime(2025, 6, 1, tzinfo=UTC)
    for tenant in tenants.values():
        for k in range(sessions):
            session_id = f"s{k}"
            messages = [Message(message_id=f"{session_id}:{i}", turn_index=i, role="user" if i % 2 == 0 else "assistant",
                                content=_sentence(rng), created_at=began + timedelta(seconds=i)) for i in range(10)]
            await client.append_messages(tenant, f"bench-u{k}", Session(session_id=session_id, started_at=began,
                                                                        messages=messages))
    hook: dict[str, list[float]] = {name: [] for name in tenants}
    check: dict[str, list[float]] = {name: [] for name in tenants}
    for call in range(calls):
        k = call % sessions
        for name in (("fresh", "large") if call % 2 == 0 else ("large", "fresh")):  # ABBA
            tenant = tenants[name]
            t = time.perf_counter()
            await client.end_session(tenant, f"bench-u{k}", f"s{k}")
            hook[name].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            await unconsolidated_messages(services.pool, tenant, f"bench-u{k}", f"s{k}")
            check[name].append((time.perf_counter() - t) * 1000)
    plan = await _check_plan(services, tenants["large"], "bench-u0", "s0")
    async for run in services.temporal.list_workflows(f"TaskQueue = '{queue}' AND ExecutionStatus = 'Running'"):
        await services.temporal.get_workflow_handle(run.id, run_id=run.run_id).terminate("bench over")
    figures = [EndSessionFigures(tenant=name, tenant_rows=await _tenant_rows(services, tenants[name]), calls=calls,
                                 end_session_p50_ms=round(statistics.median(hook[name]), 2),
                                 end_session_p99_ms=_percentile(hook[name], 99),
                                 check_p50_ms=round(statistics.median(check[name]), 2),
                                 check_p99_ms=_percentile(check[name], 99)) for name in tenants]
    fresh, large = figures
    return EndSessionBenchReport(
        rows=large.tenant_rows, sessions=sessions, load_seconds=round(load_seconds, 1), figures=figures,
        end_session_large_over_fresh_p50=round(large.end_session_p50_ms / max(fresh.end_session_p50_ms, 1e-9), 2),
        check_large_over_fresh_p50=round(large.check_p50_ms / max(fresh.check_p50_ms, 1e-9), 2), check_plan=plan)


async def end_session_bench_command(args: argparse.Namespace, settings: Settings) -> int:
    from workers.runtime import scratch_stack

    if args.rows < 0 or args.sessions < 1 or args.calls < 2:
        raise InvalidInput("--rows must be 0 or more, --sessions at least 1 and --calls at least 2")
    async with scratch_stack(settings, "bench-end-session", embedded_only=True) as services:
        report = await run_end_session_bench(services, rows=args.rows, sessions=args.sessions, calls=args.calls)
    print(json.dumps(report.model_dump(mode="json"), indent=2) if args.json else report.render())
    return 0
