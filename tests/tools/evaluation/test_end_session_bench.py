"""`python -m tools.cli bench end-session` at a tiny size: the report's shape (not its speed)."""

from __future__ import annotations

from agent_memory.cli.core import parse_args
from tools.cli import build_parser
from tools.evaluation.end_session_bench import ROWS_PER_FILLER_SESSION, run_end_session_bench


async def test_the_end_session_benchmark_compares_a_large_tenant_with_a_fresh_one(services):
    report = await run_end_session_bench(services, rows=100 * ROWS_PER_FILLER_SESSION, sessions=2, calls=4)
    fresh, large = report.figures
    assert (fresh.tenant, large.tenant) == ("fresh", "large")
    # Each measured session: its row and 10 messages; the filler is exactly what was asked for.
    assert fresh.tenant_rows == 2 * 11
    assert large.tenant_rows == report.rows == 100 * ROWS_PER_FILLER_SESSION + 2 * 11
    assert all(f.calls == 4 and f.end_session_p50_ms > 0 and f.check_p50_ms > 0 for f in report.figures)
    assert report.end_session_large_over_fresh_p50 > 0 and report.check_large_over_fresh_p50 > 0
    # The check reads the session's commits through their index, not the tenant's operations.
    assert any("operations_session_commits" in line for line in report.check_plan)
    assert "large / fresh p50" in report.render()
    args = parse_args(build_parser(), ["bench", "end-session", "--rows", "1000000", "--sessions", "20"])
    assert (args.rows, args.sessions, args.calls) == (1_000_000, 20, 200)
