"""The recall probe set through the real workflows and the built prompt, and the recall benchmark
at a small size (the benchmark's figures are printed by `python -m tools.cli bench recall`, not tested)."""

from __future__ import annotations

import psycopg
import pytest

from agent_memory.cli.core import parse_args
from agent_memory.providers.embedders import local_embedder
from tools.cli import build_parser
from tools.evaluation.recall_bench import ACCESS_OFF_ROUTE, ROUTES, run_recall_bench
from tools.evaluation.recall_probes import SPLITS, load_recall_probes, run_recall_probes


def test_the_recall_probe_set_is_large_bilingual_and_covers_every_category():
    cases = [c for split in SPLITS for c in load_recall_probes(split=split)]
    assert len(cases) >= 30 and len({c.id for c in cases}) == len(cases)
    for split in SPLITS:
        split_cases = load_recall_probes(split=split)
        assert {c.lang for c in split_cases} == {"en", "zh"}
        assert {c.category for c in split_cases} == {"recency", "importance", "window", "profile", "recent"}


def test_a_bad_probe_file_is_refused_in_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "sessions": [["2024-01-01", ["hi"]]], "query": "q", "as_of": "2024-01-02", '
                   '"recalled": [3]}\n')
    with pytest.raises(ValueError, match="line 1: a session index out of range"):
        load_recall_probes(bad)
    bad.write_text('{"id": "x", "sessions": [], "query": "q", "as_of": "2024-01-02", "recalld": [1]}\n')
    with pytest.raises(ValueError, match="line 1: recalld"):
        load_recall_probes(bad)


@pytest.mark.parametrize("split", SPLITS)
async def test_recall_probes_hold_under_the_designed_policy(services, task_queue, split):
    report = await run_recall_probes(services, load_recall_probes(split=split), split=split, preset="designed",
                                     task_queue=task_queue)
    # The regression floor; the figures themselves are in docs/evaluation.md.
    assert report.checks >= 40 and report.accuracy >= 0.9, report.render()
    assert report.by_category["recent"].passed == report.by_category["recent"].checks, report.render()
    assert report.by_category["window"].passed == report.by_category["window"].checks, report.render()


async def _hnsw_indexes(services) -> list[str]:
    async with await psycopg.AsyncConnection.connect(services.settings.database_admin_url) as admin:
        cur = await admin.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'memory_vectors' "
                                  "AND indexdef LIKE '%%USING hnsw%%' ORDER BY indexname")
        return [row[0] for row in await cur.fetchall()]


async def test_the_recall_benchmark_reports_every_route_at_each_size(services):
    indexes = await _hnsw_indexes(services)
    report = await run_recall_bench(services, sizes=[200, 400], queries=3, throughput_texts=64, total_rows=1_400,
                                    embedder=local_embedder("hashing"), access_off=True)
    # The filler is bulk-loaded with the HNSW indexes dropped, then built again as migrated; its
    # vectors are its texts' (the hashing embedder does 1,000 in well under a second).
    assert indexes and await _hnsw_indexes(services) == indexes
    assert report.filler_vectors == "embedded" and "(embedded vectors)" in report.render()
    assert [(r.memories, r.route) for r in report.rows] == [(n, route) for n in (200, 400)
                                                            for route in (*ROUTES, ACCESS_OFF_ROUTE)]
    # Measured with access statistics in place, on beside off.
    assert all(report.access_rows[n] > 0 for n in (200, 400)) and "access on/off" in report.render()
    assert report.filler_memories == 1_000 and "beside 1,000 memories of other subjects" in report.render()
    assert all(r.queries == 3 and r.p50_ms > 0 and r.mean_items > 0 for r in report.rows)
    assert set(report.embedding_throughput) == {"hashing", "e5-small"}
    assert "parallel/sequential" in report.render()
    args = parse_args(build_parser(), ["bench", "recall", "--memories", "1000", "50000", "--total-rows", "1000000",
                                       "--access-off"])
    assert (args.sizes, args.total_rows, args.access_off) == ([1000, 50000], 1_000_000, True)
