"""`python -m tools.cli bench consolidate --telemetry` at a tiny size, as a user runs it (a process of
its own: tracing is switched on inside it): the report's shape (not its speed), both sides did the
same work, and the traced side's spans reached the OTLP receiver."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_memory.core.settings import ENV_VARS
from tools.evaluation.tracing_bench import TracingBenchReport

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.stack
def test_the_tracing_benchmark_runs_untraced_and_traced_side_by_side(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env.update(AGENT_MEMORY_HOME=str(tmp_path / "home"), TMPDIR=str(tmp_path),
               OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")  # the bench's own receiver, not this one
    done = subprocess.run([sys.executable, "-m", "tools.cli", "bench", "consolidate", "--telemetry", "--sessions", "2",
                           "--concurrency", "2", "--embedder", "hashing", "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    report = TracingBenchReport.model_validate(json.loads(done.stdout))
    untraced, traced = report.figures
    assert (untraced.mode, traced.mode) == ("untraced", "traced") and untraced.sessions == traced.sessions == 2
    assert untraced.facts == traced.facts >= 2 and untraced.vectors == traced.vectors > 0
    assert report.exports > 0 and report.exported_kib > 0
    assert report.traced_over_untraced > 0 and report.cpu_traced_over_untraced > 0
    assert "traced/untraced: throughput" in report.render()
