"""The re-embedding benchmark at a small size (its figures are printed by `python -m tools.cli bench
reembed`, not tested): every memory ends under the target model and the report says so."""

from __future__ import annotations

from agent_memory.store.db import tenant_transaction
from tools.evaluation.reembed_bench import run_reembed_bench


async def test_the_reembedding_benchmark_moves_every_memory_to_the_target_model(services):
    report = await run_reembed_bench(services, memories=200, source_name="hashing", target_name="e5-small",
                                     throughput_texts=64)
    assert report.memories == report.vectors == 200  # 2 sessions: 2 episodes + 198 notes
    assert report.vectors_per_second > 0 and report.target_passages_per_second is not None
    assert report.target_passages_per_second > 0
    assert "vectors re-embedded" in report.render() and "the target embedder alone" in report.render()
    unmeasured = report.model_copy(update={"target_passages_per_second": None}).render()
    assert "vectors re-embedded" in unmeasured and "alone" not in unmeasured
    async with services.pool.connection() as conn:
        cur = await conn.execute("SELECT tenant_id FROM tenants WHERE tenant_id LIKE 'bench-reembed-%%'")
        [tenant] = [row[0] for row in await cur.fetchall()]
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT model, count(*) FROM memory_vectors WHERE tenant_id = %s GROUP BY model",
                                 (tenant,))
        assert await cur.fetchall() == [("multilingual-e5-small-q4-v1-384", 200)]
