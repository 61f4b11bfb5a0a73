"""`python -m tools.cli bench ingest` at a tiny size: the report's shape (not its speed)."""

from __future__ import annotations

from agent_memory.cli.core import parse_args
from tools.cli import build_parser
from tools.evaluation.ingest_bench import run_ingest_bench


async def test_the_ingest_benchmark_reports_batched_and_one_per_call(services):
    report = await run_ingest_bench(services, messages=40, clients=2, batch=10)
    assert [f.mode for f in report.figures] == ["batched", "one per call, idle timer debounced",
                                                "one per call, a signal per append"]
    assert [f.messages for f in report.figures] == [40, 40, 40]
    assert all(f.messages_per_second > 0 for f in report.figures) and report.debounced_over_every_append > 0
    assert "messages/s" in report.render()
    args = parse_args(build_parser(), ["bench", "ingest", "--messages", "4000", "--clients", "8", "--batch", "100"])
    assert (args.messages, args.clients, args.batch) == (4000, 8, 100)
