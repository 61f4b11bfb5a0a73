"""The HTTP benchmark at a tiny load (its figures are printed by `python -m tools.cli bench http`)."""

from __future__ import annotations

from tools.evaluation.http_bench import run_http_bench


async def test_the_http_benchmark_reports_both_routes(services):
    report = await run_http_bench(services, concurrency=3, seconds=1.5)
    assert [r.route for r in report.routes] == ["append", "context"]
    assert all(r.requests > 0 and r.errors == 0 and r.p50_ms > 0 for r in report.routes), report.render()
    assert "req/s" in report.render()
