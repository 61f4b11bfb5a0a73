"""A worker-only process's metrics port (AGENT_MEMORY_METRICS_PORT) serves the product's families;
an SDK exporter that does not answer leaves them served, and a port that cannot be bound is
refused naming the setting."""

from __future__ import annotations

import socket

import httpx
import pytest

from agent_memory.core.errors import InvalidInput
from agent_memory.telemetry.exposition import CONTENT_TYPE, MetricsServer, exposition


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_metrics_port_serves_the_product_s_families_without_the_sdk_s_when_it_is_gone():
    gone = f"127.0.0.1:{_closed_port()}"  # an SDK exporter that does not answer
    server = MetricsServer("127.0.0.1", 0, gone)
    try:
        assert server.url == f"http://127.0.0.1:{server.port}/metrics"
        page = httpx.get(server.url, timeout=10)
        assert page.status_code == 200
        assert "# TYPE agent_memory_erasure_deadline_seconds gauge" in page.text
        assert "# TYPE agent_memory_consolidations_total counter" in page.text
        assert "temporal_" not in page.text
        assert exposition(gone).decode() == exposition(None).decode()
        assert CONTENT_TYPE.startswith("text/plain")
    finally:
        server.close()


def test_a_port_in_use_is_refused_naming_the_setting():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(InvalidInput, match="AGENT_MEMORY_METRICS_PORT"):
            MetricsServer("127.0.0.1", taken.getsockname()[1], None)
