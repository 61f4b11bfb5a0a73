"""The write-gate probe set through the real workflows: every check must hold."""

from __future__ import annotations

from tools.evaluation.probes import load_probes, run_probes


def test_probe_set_is_large_and_bilingual():
    cases = load_probes()
    assert len(cases) >= 60
    texts = [line if isinstance(line, str) else line[1] for c in cases for _, lines in c.sessions for line in lines]
    assert sum(any("\u4e00" <= ch <= "\u9fff" for ch in t) for t in texts) >= 20
    assert len({c.id for c in cases}) == len(cases)


async def test_probe_set_current_and_as_of_accuracy(services, task_queue):
    report = await run_probes(services, task_queue=task_queue)
    assert report.failures == [], report.render()
    assert report.checks["current"] >= 60 and report.checks["as_of"] >= 25
    assert all(value == 1.0 for value in report.accuracy.values())
