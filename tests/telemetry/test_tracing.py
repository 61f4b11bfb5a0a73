"""Traces for operators: off (and OpenTelemetry's SDK never imported) unless the OTEL_* variables
ask; the scrubber leaves no subject, session, path id or value in what is exported; a log line in
a span names its trace; and, against `agent-memory up` exporting to a real OTLP/HTTP receiver, an
HTTP append and the session-end hook, the consolidation's workflow and activities, their SQL and
the webhook delivery form one trace."""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from agent_memory.core.errors import InvalidInput, ServiceUnavailable
from agent_memory.core.settings import ENV_VARS
from agent_memory.telemetry import tracing

ROOT = Path(__file__).resolve().parents[2]
# What tracing loads; off, none of it. (FastAPI and redis import the OpenTelemetry API, and redis the
# SDK's metrics, when they are installed: theirs, not the product's.)
OTEL_PACKAGES = ("opentelemetry.sdk.trace", "opentelemetry.exporter", "opentelemetry.instrumentation",
                 "temporalio.contrib.opentelemetry")


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS and not k.startswith("OTEL_")}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


# --- switched by the variables ----------------------------------------------------------------

def test_the_otel_variables_switch_tracing():
    assert not tracing.tracing_requested({})
    assert tracing.tracing_requested({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert tracing.tracing_requested({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"})
    assert tracing.tracing_requested({"OTEL_TRACES_EXPORTER": "otlp"})
    assert not tracing.tracing_requested({"OTEL_TRACES_EXPORTER": "none",
                                          "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert not tracing.tracing_requested({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"})
    assert tracing.tracing_requested({"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp",
                                      "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
    with pytest.raises(InvalidInput, match="'otlp'"):
        tracing.tracing_requested({"OTEL_TRACES_EXPORTER": "zipkin"})
    with pytest.raises(InvalidInput, match="http/protobuf"):
        tracing.tracing_requested({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})


def test_with_tracing_off_the_api_and_the_worker_load_nothing_of_tracing():
    code = ("import json, sys\nimport agent_memory.api.http.app, agent_memory.api.services, workers.worker\n"
            "from agent_memory.telemetry import tracing\nassert tracing.configure_tracing() is False\n"
            "print(json.dumps(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_clean_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    modules = json.loads(done.stdout)
    assert "agent_memory.telemetry.tracing" in modules
    assert [m for m in modules if m.startswith(OTEL_PACKAGES)] == []


def test_tracing_asked_for_without_the_extra_is_one_line_naming_it():
    code = ("import sys\nclass Missing:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.startswith('opentelemetry.sdk'):\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "sys.meta_path.insert(0, Missing())\n"
            "from agent_memory.telemetry import tracing\n"
            "try:\n    tracing.configure_tracing()\nexcept Exception as exc:\n    print(type(exc).__name__, exc)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env=_clean_env(OTEL_TRACES_EXPORTER="otlp"))
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()
    assert line.startswith(f"{ServiceUnavailable.__name__} tracing is on") and "pip install 'agent-memory[otel]'" in line


# --- scrubbed before export -------------------------------------------------------------------

@pytest.fixture
def exported() -> Iterator[tuple[Any, InMemorySpanExporter]]:
    """A tracer whose spans pass the scrubber into memory (a provider of the test's own)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(tracing.ScrubbingSpanProcessor(SimpleSpanProcessor(memory)))  # type: ignore[arg-type]
    yield provider.get_tracer("test"), memory
    provider.shutdown()


def test_the_scrubber_leaves_route_templates_digests_and_placeholders(exported):
    tracer, memory = exported
    route = "/v1/subjects/{subject_id}/sessions/{session_id}/messages"
    with tracer.start_as_current_span(f"POST {route}", kind=SpanKind.SERVER, attributes={
            "http.route": route, "http.method": "POST", "http.target": "/v1/subjects/lin-wei/sessions/s1/messages",
            "url.path": "/v1/subjects/lin-wei/sessions/s1/messages", "url.query": "subject=lin-wei",
            "http.url": "http://127.0.0.1:8000/v1/subjects/lin-wei/sessions/s1/messages?x=1",
            "http.request.header.authorization": "Bearer secret", "http.status_code": 200}):
        pass
    with tracer.start_as_current_span("POST /v1/subjects/lin-wei/facts", attributes={"http.method": "POST"}):
        pass
    with tracer.start_as_current_span("StartWorkflow:ConsolidationWorkflow", attributes={
            "temporalWorkflowID": "consolidate/acme/lin-wei/s1", "temporalRunID": "0b7c1f0e-1c1b-4d2e-9b1e-1c1b4d2e9b1e",
            "temporalActivityID": "webhook/acme/lin-wei"}) as span:
        span.record_exception(ValueError("subject lin-wei said 'my gate code is 4711'"))
        span.set_status(Status(StatusCode.ERROR, "lin-wei: my gate code is 4711"))
    with tracer.start_as_current_span("SELECT", kind=SpanKind.CLIENT, attributes={
            "db.statement": "SELECT * FROM facts WHERE subject_id = 'lin-wei' AND note = E'gate ''4711''' AND n = %s",
            "db.statement.parameters": "('lin-wei',)"}):
        pass
    with tracer.start_as_current_span("", kind=SpanKind.CLIENT, attributes={"db.system": "postgresql",
                                                                "db.statement": ""}):
        pass
    with tracer.start_as_current_span("POST", kind=SpanKind.CLIENT, attributes={
            "url.full": "https://hooks.example:8443/t/acme/lin-wei?token=s3cr3t", "http.request.method": "POST"}):
        pass
    server, unmatched, start, select, webhook = memory.get_finished_spans()  # not the pool's empty check

    assert server.name == f"POST {route}"
    assert dict(server.attributes) == {"http.route": route, "http.method": "POST", "http.status_code": 200,
                                       "http.url": "http://127.0.0.1:8000"}
    assert unmatched.name == "POST"
    workflow_id = start.attributes["temporalWorkflowID"]
    assert workflow_id.startswith("consolidate/") and len(workflow_id) == len("consolidate/") + 16
    assert workflow_id == tracing.workflow_id_digest("consolidate/acme/lin-wei/s1")  # keyed, and stable: runs join
    assert start.attributes["temporalRunID"] == "0b7c1f0e-1c1b-4d2e-9b1e-1c1b4d2e9b1e"
    assert "acme" not in start.attributes["temporalActivityID"]
    [event] = start.events
    assert event.name == "exception" and dict(event.attributes) == {"exception.type": "ValueError",
                                                                    "exception.escaped": "False"}
    assert start.status.status_code is StatusCode.ERROR and not start.status.description
    assert select.attributes["db.statement"] == ("SELECT * FROM facts WHERE subject_id = '?' AND note = '?' "
                                                 "AND n = %s")
    assert "db.statement.parameters" not in select.attributes
    assert webhook.attributes["url.full"] == "https://hooks.example:8443"
    for span in memory.get_finished_spans():
        _assert_private(span.name, dict(span.attributes), ("lin-wei", "4711", "s3cr3t", "secret"))


def test_a_digest_is_keyed_by_the_deployment():
    before = tracing.workflow_id_digest("erase/acme/lin-wei/r1")
    tracing.set_digest_key(b"k" * 32)
    try:
        keyed = tracing.workflow_id_digest("erase/acme/lin-wei/r1")
        assert keyed != before and keyed.startswith("erase/")
        assert tracing.workflow_id_digest("erase/acme/lin-wei/r1") == keyed
        assert tracing.workflow_id_digest("erase/acme/lin-wei/r2") != keyed
    finally:
        tracing.set_digest_key(secrets.token_bytes(32))


def test_a_log_line_in_a_span_carries_its_trace_and_span_ids(exported, monkeypatch):
    tracer, _ = exported
    monkeypatch.setattr(tracing, "_on", True)
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect()
    tracing.add_trace_context([handler])
    log = logging.getLogger("agent_memory.test_tracing")
    log.addHandler(handler)
    log.propagate = False
    try:
        with tracer.start_as_current_span("RunActivity:commit_consolidation") as span:
            log.warning("committed")
            context = span.get_span_context()
        log.warning("idle")
    finally:
        log.removeHandler(handler)
        log.propagate = True
    assert lines == [f"WARNING agent_memory.test_tracing: committed trace_id={context.trace_id:032x} "
                     f"span_id={context.span_id:016x}", "WARNING agent_memory.test_tracing: idle"]


# --- one trace, end to end ----------------------------------------------------------------------

class Collector:
    """An OTLP/HTTP receiver (POST /v1/traces, protobuf) and a webhook receiver (any other POST), on
    one free local port."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.hooks: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path == "/v1/traces":
                    collector.receive(ExportTraceServiceRequest.FromString(body))
                    answer = ExportTraceServiceResponse().SerializeToString()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/x-protobuf")
                else:
                    with collector.lock:
                        collector.hooks.append(json.loads(body))
                    answer = b""
                    self.send_response(200)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def receive(self, request: ExportTraceServiceRequest) -> None:
        for resource in request.resource_spans:
            service = {a.key: _value(a.value) for a in resource.resource.attributes}.get("service.name")
            for scope in resource.scope_spans:
                for span in scope.spans:
                    with self.lock:
                        self.spans.append({
                            "name": span.name, "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
                            "parent": span.parent_span_id.hex(), "service": service, "scope": scope.scope.name,
                            "attributes": {a.key: _value(a.value) for a in span.attributes},
                            "events": [{a.key: _value(a.value) for a in e.attributes} for e in span.events],
                            "status": span.status.message})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def _assert_private(name: str, attributes: dict[str, Any], secrets_: tuple[str, ...]) -> None:
    for secret in secrets_:
        assert secret not in name, (name, secret)
        for key, value in attributes.items():
            assert secret not in str(value), (name, key, value, secret)


def span_tree(spans: list[dict[str, Any]]) -> str:
    """The spans of a trace, each under its parent: name, service and attribute keys."""
    by_parent: dict[str, list[dict[str, Any]]] = {}
    ids = {s["span_id"] for s in spans}
    for span in spans:
        by_parent.setdefault(span["parent"] if span["parent"] in ids else "", []).append(span)
    lines: list[str] = []

    def walk(parent: str, depth: int) -> None:
        for span in by_parent.get(parent, []):
            lines.append(f"{'  ' * depth}{span['name']}  [{span['scope']}]  {sorted(span['attributes'])}")
            walk(span["span_id"], depth + 1)

    walk("", 0)
    return "\n".join(lines)


def _wait(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{what} not within {timeout} s")


@pytest.mark.stack
@pytest.mark.minutes(2)
def test_an_http_session_its_consolidation_and_webhook_form_one_trace(tmp_path):
    collector = Collector()
    home = tmp_path / "home"
    subject, session_id, tenant = "lin-wei", f"s{uuid.uuid4().hex[:6]}", f"t{uuid.uuid4().hex[:8]}"
    said = ["My gate code is 4711 and my dog is called Biscuit.", "I moved to Lisbon in March."]
    env = _clean_env(AGENT_MEMORY_HOME=str(home), AGENT_MEMORY_TASK_QUEUE=f"trace-{uuid.uuid4().hex[:8]}",
                     AGENT_MEMORY_WEBHOOK_ALLOW_HTTP="1", AGENT_MEMORY_WEBHOOK_ALLOW_PRIVATE="1",
                     OTEL_EXPORTER_OTLP_ENDPOINT=collector.url, OTEL_SERVICE_NAME="agent-memory-test",
                     OTEL_BSP_SCHEDULE_DELAY="200")
    stderr = tmp_path / "up.stderr"
    with open(stderr, "w") as err:
        up = subprocess.Popen([sys.executable, "-m", "workers.cli", "up", "--free-ports", "--api-port", "0"],
                              env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        assert up.stdout is not None
        api = None
        deadline = time.monotonic() + 240
        for line in up.stdout:
            if "HTTP API" in line:
                api = line.split("http://", 1)[1].split("/v1", 1)[0]
            if "Ctrl-C stops everything." in line or time.monotonic() > deadline:
                break
        assert api, stderr.read_text()[-3000:]
        threading.Thread(target=lambda: [None for _ in up.stdout or ()], daemon=True).start()
        created = subprocess.run([sys.executable, "-m", "workers.cli", "keys", "create", "--tenant", tenant,
                                  "--scope", "erase", "--json"], cwd=ROOT, capture_output=True, text=True,
                                 timeout=120, env=_clean_env(AGENT_MEMORY_HOME=str(home)))
        assert created.returncode == 0, created.stderr
        key = {"Authorization": f"Bearer {json.loads(created.stdout)['token']}"}

        # The caller's own trace: its id goes with both requests (W3C traceparent).
        trace_id = secrets.token_hex(16)
        with httpx.Client(base_url=f"http://{api}", timeout=30) as http:
            hook = http.post("/v1/webhooks", headers=key, json={"url": f"{collector.url}/hooks",
                                                                "events": ["consolidation.completed"]})
            assert hook.status_code == 200, hook.text
            t0 = datetime.now(UTC) - timedelta(minutes=5)
            messages = [{"message_id": f"{session_id}:{i}", "turn_index": i, "role": "user", "speaker": "Lin",
                         "content": text, "created_at": (t0 + timedelta(minutes=i)).isoformat()}
                        for i, text in enumerate(said)]
            appended = http.post(f"/v1/subjects/{subject}/sessions/{session_id}/messages", json={"messages": messages},
                                 headers={**key, "traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"})
            assert appended.status_code == 200, appended.text
            ended = http.post(f"/v1/subjects/{subject}/sessions/{session_id}/end",
                              headers={**key, "traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"})
            assert ended.status_code == 200, ended.text
        _wait(lambda: collector.hooks, 120, "the webhook delivery")

        def ours() -> list[dict[str, Any]]:
            with collector.lock:
                return [s for s in collector.spans if s["trace_id"] == trace_id]

        _wait(lambda: any(s["name"].startswith("RunActivity:deliver_webhook") for s in ours()) and any(
            s["scope"].startswith("opentelemetry.instrumentation.httpx") for s in ours()), 60, "the delivery's spans")
    finally:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(timeout=60)
        except subprocess.TimeoutExpired:
            up.kill()
        collector.close()

    spans = ours()
    tree = span_tree(spans)
    print(tree)
    if out := os.environ.get("AGENT_MEMORY_TRACE_SPANS_FILE"):  # an example trace, for the docs
        Path(out).write_text(tree + "\n")
    names = [s["name"] for s in spans]
    by_id = {s["span_id"]: s for s in spans}

    def ancestors(span: dict[str, Any]) -> list[str]:
        chain = []
        while span["parent"] in by_id:
            span = by_id[span["parent"]]
            chain.append(span["name"])
        return chain

    # From the HTTP requests (their route templates) through the run to its commit and the delivery.
    assert "POST /v1/subjects/{subject_id}/sessions/{session_id}/messages" in names, tree
    assert "POST /v1/subjects/{subject_id}/sessions/{session_id}/end" in names, tree
    assert "StartWorkflow:ConsolidationWorkflow" in names and "RunWorkflow:ConsolidationWorkflow" in names, tree
    # (Temporal's interceptor puts a run's activities under its start, beside its RunWorkflow span.)
    [commit] = [s for s in spans if s["name"] == "RunActivity:commit_consolidation"]
    assert "StartWorkflow:ConsolidationWorkflow" in ancestors(commit), tree
    assert "POST /v1/subjects/{subject_id}/sessions/{session_id}/end" in ancestors(commit), tree
    statements = [s for s in spans if s["parent"] == commit["span_id"] and s["attributes"].get("db.system")]
    assert statements and any(s["attributes"]["db.statement"].lstrip().upper().startswith(("INSERT", "UPDATE"))
                              for s in statements), tree
    [post] = [s for s in spans if s["scope"].startswith("opentelemetry.instrumentation.httpx")
              and "RunActivity:deliver_webhook" in ancestors(s)]
    assert "RunActivity:commit_consolidation" in ancestors(post), tree
    assert post["attributes"].get("http.status_code", post["attributes"].get("http.response.status_code")) == 200
    # Nothing private in any span: no subject, session or tenant id, no word said.
    workflow_ids = [s["attributes"]["temporalWorkflowID"] for s in spans if "temporalWorkflowID" in s["attributes"]]
    assert workflow_ids and all(w.split("/")[0] in ("consolidate", "idle", "webhook") or "/" not in w
                                for w in workflow_ids), workflow_ids
    private = (subject, session_id, tenant, "4711", "Biscuit", "Lisbon", "gate code")
    with collector.lock:
        everything = list(collector.spans)
    for span in everything:
        _assert_private(span["name"], {**span["attributes"], "status": span["status"],
                                       **{f"event{i}": e for i, e in enumerate(span["events"])}}, private)
    assert {s["service"] for s in spans} == {"agent-memory-test"}
