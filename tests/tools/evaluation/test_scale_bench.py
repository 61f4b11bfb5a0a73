"""`python -m tools.cli bench scale` at a tiny size: the report's shape (not its speed), worker
processes of their own consolidating every session, a provider's rate limit held with its 429s
absorbed, and the fairness phase."""

from __future__ import annotations

import json

import pytest

from agent_memory.cli.core import parse_args
from tools.cli import build_parser
from tools.evaluation.scale_bench import MODEL_CALLS_PER_SESSION, ScaleBenchReport, peak_rate, run_scale_bench

pytestmark = pytest.mark.minutes(1)


def test_the_peak_rate_is_the_most_calls_in_any_one_second_window():
    assert peak_rate([]) == 0
    assert peak_rate([0.0, 0.5, 0.99, 1.0, 1.5]) == 3  # (0, 1] holds 0.5, 0.99, 1.0
    assert peak_rate([5.0, 1.0, 1.2, 9.0]) == 2


async def test_worker_processes_consolidate_every_session_under_the_providers_limit(services, tmp_path):
    sessions, rate = 4, 2.0
    report = await run_scale_bench(services, workers=[1, 2], sessions=sessions, model_latency_ms=20,
                                   worker_concurrency=2, provider_rate=rate, run_dir=tmp_path)
    calls = sessions * MODEL_CALLS_PER_SESSION
    assert [row.workers for row in report.scaling] == [1, 2]
    assert report.scaling[0].ratio_to_first == 1.0 and report.scaling[1].ratio_to_first > 0
    for row in report.scaling:  # no limit: every model call admitted once, none refused
        assert (row.sessions, row.failed, row.model_calls, row.rejected_429) == (sessions, 0, calls, 0)
        assert row.sessions_per_second > 0 and 0 < row.p50_seconds <= row.p99_seconds <= row.seconds
    # The provider's limit, with the queue's server-side limit at the same rate and without it: no
    # consolidation fails, no window holds more admitted calls than the rate, and without the
    # queue's limit the workers call faster than the rate and each 429 is retried until admitted.
    assert [(row.workers, row.queue_rate) for row in report.provider_limit] == [(2, rate), (2, None)]
    for row in report.provider_limit:
        assert (row.sessions, row.failed, row.model_calls) == (sessions, 0, calls)
        assert 0 < row.peak_calls_per_second <= rate
    unlimited = report.provider_limit[1]
    assert unlimited.rejected_429 > 0 and unlimited.attempted_peak_per_second > rate
    fairness = report.fairness
    assert (fairness.workers, fairness.flood_sessions, fairness.trickle_sessions, fairness.failed) == (2, 4, 2, 0)
    assert fairness.trickle_alone_p99_seconds > 0 and fairness.trickle_during_flood_p99_seconds > 0
    assert fairness.during_flood_over_alone > 0 and fairness.flood_seconds > 0
    rendered = report.render()
    assert "429s absorbed" in rendered and "fairness (2 workers)" in rendered
    assert ScaleBenchReport.model_validate(json.loads(report.model_dump_json())) == report
    # Each worker process logged to its own file in the run's directory.
    assert len(list(tmp_path.glob("bench-scale-*/worker-*.log"))) == 1 + 2 + 2 + 2 + 2


def test_the_command_takes_worker_counts_and_a_provider_rate():
    args = parse_args(build_parser(), ["bench", "scale", "--workers", "1", "2", "4", "--sessions", "64",
                                      "--model-latency-ms", "1000", "--provider-rate", "8", "--json"])
    assert (args.workers, args.sessions, args.model_latency_ms, args.provider_rate, args.worker_concurrency,
            args.json) == ([1, 2, 4], 64, 1000.0, 8.0, 4, True)
