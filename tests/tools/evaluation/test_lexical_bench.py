"""`python -m tools.cli bench lexical` at a tiny size: the report's shape (not its speed)."""

from __future__ import annotations

from agent_memory.cli.core import parse_args
from tools.cli import build_parser
from tools.evaluation.lexical_bench import run_lexical_bench


async def test_the_lexical_benchmark_reports_both_searches_per_size(services):
    report = await run_lexical_bench(services, sizes=[30, 60], queries=4, total_rows=100)
    assert [(r.memories, r.search) for r in report.rows] == [
        (30, "indexed"), (30, "full-scan"), (60, "indexed"), (60, "full-scan")]
    assert all(r.queries == 4 and 0 < r.p50_ms <= r.p99_ms for r in report.rows)
    assert report.same_ranking and report.total_rows == 100
    assert set(report.plans) == {"30/indexed", "30/full-scan", "60/indexed", "60/full-scan"}
    # The indexed search reads the postings; the full scan it replaced, every item's tsvector.
    assert all("memory_postings" in plan for name, plan in report.plans.items() if name.endswith("/indexed"))
    assert all("memory_search" in plan for name, plan in report.plans.items() if name.endswith("/full-scan"))
    text = report.render()
    assert "indexed/full-scan p50" in text and "growth 30 → 60" in text
    args = parse_args(build_parser(), ["bench", "lexical", "--memories", "1000", "50000", "--total-rows", "1000000"])
    assert (args.memories, args.total_rows) == ([1000, 50000], 1_000_000)
