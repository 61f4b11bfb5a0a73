"""`python -m tools.cli bench erase` / `bench erasure` at a tiny size: the report's shape (not its
speed), and that the erased subject left nothing behind."""

from __future__ import annotations

from agent_memory.cli.core import parse_args
from agent_memory.store.db import tenant_transaction
from tools.cli import build_parser
from tools.evaluation.erasure_bench import TENANT, run_erasure_bench


async def test_the_erasure_benchmark_erases_a_subject_with_all_its_memories(services):
    # 1,200 memories: three sessions (500, 500, 200), the shape `bench erase --memories N` builds.
    report = await run_erasure_bench(services, memories=1_200, per_subject=1_200, erase=1, vectors=True)
    assert (report.subjects, report.memories, report.erased_subjects) == (1, 1_200, 1)
    assert report.erase_seconds_per_subject > 0 and report.rows_in_erasure_tables >= 3 * 1_200
    assert "erasure (logical, 1 subjects)" in report.render()
    async with tenant_transaction(services.pool, TENANT) as conn:
        cur = await conn.execute("SELECT (SELECT count(*) FROM messages WHERE subject_id = 'subject-0'), "
                                 "(SELECT count(*) FROM observations WHERE subject_id = 'subject-0'), "
                                 "(SELECT count(*) FROM memory_vectors WHERE subject_id = 'subject-0')")
        assert await cur.fetchone() == (0, 0, 0)
    args = parse_args(build_parser(), ["bench", "erase", "--memories", "100000", "--json"])
    assert (args.bench_name, args.memories, args.json) == ("erase", 100_000, True)
