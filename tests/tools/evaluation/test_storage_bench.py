"""`python -m tools.cli bench storage` at a tiny size: the report's shape (not its figures), on the
real schema and the consolidation's own write path, and the copies that make a large store."""

from __future__ import annotations

import json

import psycopg
from psycopg import sql

from agent_memory.cli.core import parse_args
from agent_memory.core.tables import TABLES
from tools.cli import build_parser
from tools.evaluation.storage_bench import StorageBenchReport, run_storage_bench


async def test_the_storage_benchmark_sizes_every_table_a_consolidation_writes(services):
    from workers.runtime import scratch_stack

    # A stack of its own, as the command runs it: the shared one's tables have pages other tests
    # filled, where a few new rows may fit without the table growing.
    async with scratch_stack(services.settings, "bench-storage", embedded_only=True) as private:
        copied: list[int] = []
        report = await run_storage_bench(private, sessions=3, copies=2, progress=copied.append)
        seeds = await _rows_by_copy(private.settings.database_admin_url)
    assert copied == [1, 2] and (report.sessions, report.consolidated_sessions) == (9, 3)
    # Each copy holds exactly the consolidated subjects' rows, the lexical postings and frequencies
    # included (memory_search's triggers wrote them), under new ids.
    for table, (consolidated, total, consolidated_ids, ids) in seeds.items():
        assert consolidated > 0 and total == 3 * consolidated, table
        assert ids == 3 * consolidated_ids, table
    assert {"memory_postings", "lexical_frequencies", "memory_vectors", "memory_events", "messages"} <= set(seeds)
    tables = {t.table: t for t in report.tables}
    assert report.messages == tables["messages"].rows >= 9 * 10 and tables["sessions"].rows == 9
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
    args = parse_args(build_parser(), ["bench", "storage", "--sessions", "2000", "--copies", "40", "--json"])
    assert (args.sessions, args.copies, args.json) == (2000, 40, True)


async def _rows_by_copy(admin_url: str | None) -> dict[str, tuple[int, int, int, int]]:
    """Each subject table with rows: rows of the consolidated subjects and all rows, then their
    distinct memory ids likewise (0 and 0 in a table without them)."""
    assert admin_url is not None
    found = {}
    async with await psycopg.AsyncConnection.connect(admin_url) as conn:
        for table in (t for t in TABLES if t.subject_column == "subject_id"):
            cur = await conn.execute("SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_name = %s "
                                     "AND column_name = 'memory_id')", (table.name,))
            has_ids = (await cur.fetchone() or (False,))[0]
            ids = sql.SQL("memory_id" if has_ids else "NULL::uuid")
            cur = await conn.execute(sql.SQL(
                "SELECT count(*) FILTER (WHERE strpos(subject_id, '~') = 0), count(*), "
                "count(DISTINCT {ids}) FILTER (WHERE strpos(subject_id, '~') = 0), count(DISTINCT {ids}) "
                "FROM {table}").format(ids=ids, table=sql.Identifier(table.name)))
            row = await cur.fetchone()
            if row and row[1]:
                found[table.name] = row
    return found
