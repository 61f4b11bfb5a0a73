"""Prometheus scrapes `agent-memory up` as an operator would run it: a real Prometheus server
(Debian's /usr/bin/prometheus) scrapes the API's `/metrics` with an operator key, and after a
consolidation its query API answers with the Temporal SDK's own counters (the consolidation's
workflow completed) and the gauges the worker samples (the database pool, the outbox of the
tenant). `/metrics` refuses a request without a key (401) and a tenant's key (403). A worker-only
process (`agent-memory worker`) on the same stack serves the same on its metrics port
(AGENT_MEMORY_METRICS_PORT), keyless on loopback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_memory.api.http.server import free_port
from agent_memory.core.settings import ENV_VARS
from agent_memory.core.stack_connection import read_connection
from tests.workers.test_up_supervisor import ROOT, Up, _kill_leftovers

pytestmark = [pytest.mark.stack, pytest.mark.minutes(2)]

PROMETHEUS = "/usr/bin/prometheus"
TENANT = "metrics-tenant"
MESSAGES = [{"message_id": "m1", "turn_index": 0, "role": "user", "content": "I live in Oslo and work as a nurse.",
             "created_at": "2024-05-01T09:00:00Z"},
            {"message_id": "m2", "turn_index": 1, "role": "user", "content": "I'm allergic to peanuts.",
             "created_at": "2024-05-01T09:01:00Z"}]


def _env(home: Path, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env.update(AGENT_MEMORY_HOME=str(home), **settings)
    return env


def cli(home: Path, *args: str) -> Any:
    """An `agent-memory ... --json` command on the stack `up` runs under `home`; its JSON."""
    done = subprocess.run([sys.executable, "-m", "workers.cli", *args, "--json"], cwd=ROOT, env=_env(home),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    """One `up` for the module's tests (its start takes the better part of a minute)."""
    home = tmp_path_factory.mktemp("metrics") / "home"
    running = Up(home, settings={"AGENT_MEMORY_METRICS_SAMPLE_SECONDS": "1"})
    try:
        yield running
    finally:
        if running.proc.poll() is None:
            running.interrupt()
        _kill_leftovers(home)


class Prometheus:
    """A Prometheus server scraping `target` every second with `key`, its data under `directory`."""

    def __init__(self, directory: Path, target: str, key: str) -> None:
        directory.mkdir()
        config = directory / "prometheus.yml"
        config.write_text(json.dumps({  # YAML is a superset of JSON
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [{"job_name": "agent-memory", "metrics_path": "/metrics",
                                "authorization": {"credentials": key},
                                "static_configs": [{"targets": [target]}]}]}))
        self.port = free_port("127.0.0.1")
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = directory / "prometheus.log"
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}",
                                          f"--storage.tsdb.path={directory / 'data'}",
                                          f"--web.listen-address=127.0.0.1:{self.port}"],
                                         stdout=log, stderr=subprocess.STDOUT, cwd=directory)

    def query(self, expression: str) -> list[dict[str, Any]]:
        """The expression's series now; none while Prometheus starts (503)."""
        response = httpx.get(f"{self.url}/api/v1/query", params={"query": expression}, timeout=10)
        if response.status_code == 503:
            return []
        answer = response.json()
        assert answer["status"] == "success", answer
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def value(self, expression: str, timeout: float = 90) -> float:
        """The expression's one value, once Prometheus has scraped one (within `timeout`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            try:
                found = self.query(expression)
            except httpx.TransportError:  # still starting
                found = []
            if found:
                assert len(found) == 1, found
                return float(found[0]["value"][1])
            time.sleep(0.5)
        targets = httpx.get(f"{self.url}/api/v1/targets", timeout=10).json()
        raise AssertionError(f"no value of {expression} within {timeout} s; targets: {targets}")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def test_prometheus_scrapes_the_product_s_and_the_sdk_s_metrics_from_up(up, tmp_path):
    found = re.search(r"http://\S+/metrics", up.wait_for("  metrics   http://"))
    assert found is not None
    url = found.group(0)
    api = url.removesuffix("/metrics")
    operator = cli(up.home, "keys", "create-operator", "--name", "prometheus")["token"]
    writer = cli(up.home, "keys", "create", "--tenant", TENANT)["token"]

    # Only an operator key reads the metrics; the others get a problem+json.
    anonymous = httpx.get(url, timeout=30)
    assert anonymous.status_code == 401 and anonymous.headers["content-type"] == "application/problem+json"
    tenant_key = httpx.get(url, headers={"Authorization": f"Bearer {writer}"}, timeout=30)
    assert tenant_key.status_code == 403 and tenant_key.headers["content-type"] == "application/problem+json"
    page = httpx.get(url, headers={"Authorization": f"Bearer {operator}"}, timeout=30)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/plain; version=")
    assert "# TYPE agent_memory_db_pool_connections gauge" in page.text
    assert "temporal_" in page.text  # the SDK's families, read from its exporter

    # A consolidation: a session's messages, then its end.
    with httpx.Client(base_url=api, headers={"Authorization": f"Bearer {writer}"}, timeout=60) as http:
        appended = http.post("/v1/subjects/lin/sessions/s1/messages", json={"messages": MESSAGES})
        assert appended.status_code == 200, appended.text
        ended = http.post("/v1/subjects/lin/sessions/s1/end")
        assert ended.status_code == 200, ended.text
        workflow_id = ended.json()["workflow_id"]
        deadline = time.monotonic() + 120
        while (status := http.get(f"/v1/runs/{workflow_id}").json()["status"]) == "running":
            assert time.monotonic() < deadline, "the consolidation did not finish"
            time.sleep(0.5)
        assert status == "completed"
        context = http.post("/v1/subjects/lin/context", json={"query": "where do I live?"})
        assert context.status_code == 200, context.text

    prometheus = Prometheus(tmp_path / "prometheus", url.removeprefix("http://").removesuffix("/metrics"), operator)
    try:
        assert prometheus.value('up{job="agent-memory"}') == 1
        # The SDK's counter of the consolidation's completion, on up's task queue.
        completed = prometheus.value(f'sum(temporal_workflow_completed_total{{workflow_type="ConsolidationWorkflow",'
                                     f'task_queue="{up.task_queue}"}})')
        assert completed >= 1
        # The product's counters at their sites: the one committed consolidation, its model calls
        # (the offline providers count as models too), the context read and its size.
        assert prometheus.value(f'agent_memory_consolidations_total{{tenant="{TENANT}",outcome="committed"}}') == 1
        assert prometheus.value(f'sum(agent_memory_model_calls_total{{tenant="{TENANT}",purpose="extract",'
                                f'outcome="ok"}})') == 1
        assert prometheus.value('agent_memory_read_duration_seconds_count{route="context"}') == 1
        assert prometheus.value("agent_memory_context_items_count") >= 1
        # The sampled gauges: the pool's connections, the tenant's outbox and lag (projected by now,
        # or about to be), no erasure, no Schedule paused.
        in_use = prometheus.value('agent_memory_db_pool_connections{state="in_use"}')
        idle = prometheus.value('agent_memory_db_pool_connections{state="idle"}')
        assert in_use + idle >= 1 and prometheus.value('agent_memory_db_pool_connections{state="waiting"}') == 0
        assert prometheus.value(f'agent_memory_outbox_depth{{tenant="{TENANT}"}}') >= 0
        # The tenant's lag drains to 0 once its projector has applied the consolidation's events.
        assert prometheus.value(f'agent_memory_projection_lag_events{{tenant="{TENANT}"}} == 0') == 0
        assert prometheus.value(f'agent_memory_dead_letters{{tenant="{TENANT}"}}') == 0
        assert prometheus.value(f'agent_memory_erasures{{tenant="{TENANT}",state="running"}}') == 0
        assert prometheus.value('agent_memory_schedules_not_as_designed{state="paused"}') == 0
        assert prometheus.value(f'agent_memory_task_queue_backlog{{task_queue="{up.task_queue}"}}') >= 0
        assert prometheus.value("agent_memory_erasure_deadline_seconds") == 3600
    finally:
        prometheus.stop()


def test_a_worker_only_process_serves_its_metrics_on_its_port(up, tmp_path):
    connection = read_connection(up.home)
    assert connection is not None
    port = free_port("127.0.0.1")
    log = tmp_path / "worker.log"
    with open(log, "w") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "workers.cli", "worker"], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
            env=_env(up.home, TEMPORAL_ADDRESS=connection["temporal_address"],
                     DATABASE_URL=connection["database_url"], REDIS_URL=connection["redis_url"],
                     AGENT_MEMORY_TASK_QUEUE=up.task_queue, AGENT_MEMORY_METRICS_PORT=str(port),
                     AGENT_MEMORY_METRICS_SAMPLE_SECONDS="1"))
    try:
        deadline = time.monotonic() + 120
        while f"metrics   http://127.0.0.1:{port}/metrics" not in log.read_text():
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        while True:  # the first sample, and the worker's pollers, within seconds of its start
            page = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
            assert page.status_code == 200 and page.headers["content-type"].startswith("text/plain")
            if 'agent_memory_db_pool_connections{state="idle"}' in page.text and "temporal_num_pollers" in page.text:
                break
            assert time.monotonic() < deadline, page.text[-3000:]
            time.sleep(0.5)
        assert f'task_queue="{up.task_queue}"' in page.text  # the SDK's series of the worker's task queue
    finally:
        worker.terminate()
        worker.wait(timeout=60)
