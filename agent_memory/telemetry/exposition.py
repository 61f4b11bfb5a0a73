"""One scrape for a process's metrics: the product's families (`metrics.REGISTRY`) and the Temporal
SDK's own runtime metrics (workflow and activity completions, task latencies, pollers, slots).

The SDK's Rust core exports its metrics through its Prometheus exporter on a loopback port of its
own (`agent_memory.api.services.serve_runtime_metrics`). `SdkMetrics` reads that page at each
scrape and hands its families on, so the API's `/metrics` (and a worker's metrics port) serve both
in one text page; Prometheus scrapes one target per process.
"""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from agent_memory.core.errors import InvalidInput
from agent_memory.telemetry.metrics import ERASURE_DEADLINE_SECONDS, REGISTRY, configure_tenant_labels

if TYPE_CHECKING:
    from agent_memory.core.settings import Settings

log = logging.getLogger(__name__)

CONTENT_TYPE = CONTENT_TYPE_LATEST
# The SDK's exporter answers from memory on loopback: a slow answer means it is gone.
SDK_SCRAPE_TIMEOUT_SECONDS = 2.0


class SdkMetrics(Collector):
    """The Temporal SDK's metric families, read from its exporter at `address` (`host:port`) at
    each collection; none (logged) when it does not answer."""

    def __init__(self, address: str) -> None:
        self.url = f"http://{address}/metrics"

    def collect(self) -> Iterable[Any]:
        try:
            with urllib.request.urlopen(self.url, timeout=SDK_SCRAPE_TIMEOUT_SECONDS) as answer:
                text = answer.read().decode()
        except OSError as exc:
            log.warning("the Temporal SDK's metrics at %s did not answer: %s", self.url, exc)
            return []
        return list(text_string_to_metric_families(text))


class _Product(Collector):
    def collect(self) -> Iterator[Any]:
        return iter(REGISTRY.collect())


def configure_process_metrics(settings: Settings) -> None:
    """Apply the metrics settings at a process's start: the tenant label's cap and switch, and the
    erasure deadline published for alert rules."""
    configure_tenant_labels(cap=settings.metrics_tenant_cap, enabled=settings.metrics_tenant_labels)
    ERASURE_DEADLINE_SECONDS.set(settings.erasure_deadline_seconds)


def process_registry(sdk_address: str | None) -> CollectorRegistry:
    """A registry of everything the process exposes: the product's families, and the SDK's when
    its exporter runs (`sdk_address`)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Product())
    if sdk_address:
        registry.register(SdkMetrics(sdk_address))
    return registry


def exposition(sdk_address: str | None) -> bytes:
    """The process's metrics as Prometheus text (CONTENT_TYPE)."""
    return generate_latest(process_registry(sdk_address))


class MetricsServer:
    """The process's metrics on `http://host:port/metrics`, served from a thread (prometheus_client's
    server): a worker-only process's scrape target (AGENT_MEMORY_METRICS_PORT). No key: bind it to
    loopback or a network only Prometheus reaches."""

    def __init__(self, host: str, port: int, sdk_address: str | None) -> None:
        from prometheus_client import start_http_server

        self.host, self.port = host, port
        try:
            self._server, self._thread = start_http_server(port, host, registry=process_registry(sdk_address))
        except OSError as exc:
            raise InvalidInput(f"the metrics cannot be served on {host}:{port} ({exc.strerror}): set "
                               "AGENT_MEMORY_METRICS_PORT to a free port (AGENT_MEMORY_METRICS_HOST to an address of "
                               "this machine)") from None
        self.port = int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

