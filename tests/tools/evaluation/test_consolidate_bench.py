"""`python -m tools.cli bench consolidate` at a tiny size: the report's shape (not its speed), and that
both paths did the same work on the real stack."""

from __future__ import annotations

import json

from agent_memory.cli.core import parse_args
from tools.cli import build_parser
from tools.evaluation.consolidate_bench import ConsolidateBenchReport, run_consolidate_bench


async def test_the_consolidation_benchmark_runs_both_paths_side_by_side(services):
    report = await run_consolidate_bench(services, sessions=4, concurrency=2, model_latency_ms=5,
                                         embedder="hashing")
    direct, temporal = report.figures
    assert (direct.mode, temporal.mode) == ("direct", "temporal")
    assert direct.sessions == temporal.sessions == 4
    # The same sessions, the same activity code: the same facts and vectors either way.
    assert direct.facts == temporal.facts >= 4 and direct.vectors == temporal.vectors > direct.facts
    assert all(f.sessions_per_second > 0 and f.machine_cpu_ms_per_session > 0 for f in report.figures)
    assert report.temporal_over_direct > 0 and report.embedder == "hashing-embedder"
    assert "temporal/direct: throughput" in report.render()
    assert ConsolidateBenchReport.model_validate(json.loads(report.model_dump_json())) == report
    args = parse_args(build_parser(), ["bench", "consolidate", "--sessions", "128", "--concurrency", "8",
                                      "--model-latency-ms", "1000", "--json"])
    assert (args.sessions, args.concurrency, args.model_latency_ms, args.json) == (128, 8, 1000.0, True)
