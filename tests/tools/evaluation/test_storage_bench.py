"""`agent-memory-tools bench storage` at a tiny size: the report's shape (not its figures), on the
real schema and the consolidation's own write path."""

from __future__ import annotations

import json

from agent_memory.cli.core import parse_args
from tools.cli import build_parser
from tools.evaluation.storage_bench import StorageBenchReport, run_storage_bench


async def test_the_storage_benchmark_sizes_every_table_a_consolidation_writes(services):
    from workers.runtime import scratch_stack

    # A stack of its own, as the command runs it: the shared one's tables have pages other tests
    # filled, where a few new rows may fit without the table growing.
    async with scratch_stack(services.settings, "bench-storage", embedded_only=True) as private:
        report = await run_storage_bench(private, sessions=3)
    tables = {t.table: t for t in report.tables}
    assert report.messages == tables["messages"].rows >= 3 * 10 and tables["sessions"].rows >= 3
    # Each session's facts, episode and notes are memories, each indexed and embedded once.
    assert report.memories == tables["memory_search"].rows >= 3 * 3
    assert report.vectors == tables["memory_vectors"].rows >= report.memories
    assert {"facts", "episodes", "memory_events", "operations", "projection_outbox"} <= set(tables)
    # What the rows added to the empty schema: a few rows may fit in pages the schema had.
    assert all(t.rows > 0 and t.bytes >= 0 for t in report.tables)
    assert tables["messages"].bytes > 0 and tables["memory_vectors"].bytes > 0
    assert report.bytes_per_message > 0 and report.bytes_per_memory > report.bytes_per_message
    assert "bytes per message" in report.render()
    assert StorageBenchReport.model_validate(json.loads(report.model_dump_json())) == report
    args = parse_args(build_parser(), ["bench", "storage", "--sessions", "2000", "--json"])
    assert (args.sessions, args.json) == (2000, True)
