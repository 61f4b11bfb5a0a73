"""OpenTelemetry traces for operators: one trace from an HTTP request through the Temporal runs it
starts (client start and signal, workflow, activities) to the SQL they run and the webhooks they
deliver, exported by OTLP over HTTP.

Off unless the standard OpenTelemetry variables turn it on: `OTEL_TRACES_EXPORTER=otlp`, or an OTLP
endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) with no
`OTEL_TRACES_EXPORTER`; `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` keeps it off.
`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` and `OTEL_BSP_*` mean what
the SDK says. Off, nothing of OpenTelemetry is imported: every import is inside a function.

What leaves the process is scrubbed first (`ScrubbingSpanProcessor`, ahead of the batch exporter,
whatever the sampler): HTTP spans carry the route template, never the path with its subject and
session ids; a Temporal workflow id (it holds the tenant, subject and session) becomes its kind and
a keyed digest (HMAC under a key derived from the deployment's identifier key), so the spans of one
run still join; SQL statements keep their placeholders and lose any quoted literal; exception
messages and status descriptions are dropped (they may quote a value). Memory text and message
content never reach a span: no body, header or parameter is captured.

A log line written while a span is current ends in `trace_id=… span_id=…` (`TraceContextFilter`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from agent_memory.core.errors import InvalidInput, ServiceUnavailable

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

OTEL_EXTRA = "pip install 'agent-memory[otel]'"
DEFAULT_SERVICE_NAME = "agent-memory"

_lock = threading.Lock()
_on = False
# The key of the workflow ids' digests: derived from the identifier key once the keys are read
# (set_digest_key); until then a random one, so digests join within the process only.
_digest_key = secrets.token_bytes(32)


def tracing_requested(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the OpenTelemetry variables ask for traces (see the module's docstring)."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = {name.strip().lower() for name in env.get("OTEL_TRACES_EXPORTER", "").split(",") if name.strip()}
    if exporters - {"otlp", "none"}:
        raise InvalidInput(f"OTEL_TRACES_EXPORTER={env['OTEL_TRACES_EXPORTER']}: agent-memory exports traces by "
                           "'otlp' (OTLP over HTTP) or 'none'")
    if not exporters:
        on = bool(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
    else:
        on = "otlp" in exporters
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
    if on and protocol and protocol.strip() != "http/protobuf":
        raise InvalidInput(f"OTLP protocol {protocol.strip()!r}: agent-memory exports traces by http/protobuf "
                           "(OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf, a collector's port 4318)")
    return on


def configure_tracing(environ: Mapping[str, str] | None = None) -> bool:
    """Set up the process's tracer provider, once, when the variables ask for traces (asked again
    at each call until they do); whether tracing is on. Raises ServiceUnavailable naming the
    `otel` extra when traces are asked for and a package of it is missing."""
    global _on
    with _lock:
        if _on:
            return True
        if not tracing_requested(environ):
            return False
        try:
            from opentelemetry import trace
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.instrumentation import fastapi, psycopg  # noqa: F401  (used later; here: installed)
            from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
            from opentelemetry.sdk.resources import SERVICE_NAME, Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:
            raise ServiceUnavailable(f"tracing is on (OTEL_* variables) but OpenTelemetry is not installed "
                                     f"({exc.name}): {OTEL_EXTRA}") from None
        env = os.environ if environ is None else environ
        # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win; the product's name otherwise.
        named = bool(env.get("OTEL_SERVICE_NAME")) or "service.name=" in env.get("OTEL_RESOURCE_ATTRIBUTES", "")
        provider = TracerProvider(resource=Resource.create({} if named else {SERVICE_NAME: DEFAULT_SERVICE_NAME}))
        # Scrubbed before the batch is queued: whatever the sampler keeps, nothing private is exported.
        provider.add_span_processor(cast("SpanProcessor", ScrubbingSpanProcessor(BatchSpanProcessor(OTLPSpanExporter()))))
        trace.set_tracer_provider(provider)
        # Outgoing HTTP (webhook deliveries, model calls): a client span each, the context sent on.
        HTTPXClientInstrumentor().instrument()
        _on = True
        return True


def tracing_on() -> bool:
    return _on


def flush_traces(timeout_seconds: float = 30.0) -> bool:
    """Export the spans still queued (blocking); whether all went."""
    if not _on:
        return True
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    return bool(getattr(provider, "force_flush", lambda _: True)(int(timeout_seconds * 1000)))


def set_digest_key(key: bytes) -> None:
    """The deployment's key for the workflow ids' digests (security.crypto.trace_digest_key)."""
    global _digest_key
    _digest_key = key


def temporal_interceptors() -> list[Any]:
    """The Temporal client's tracing interceptor when tracing is on (workers made from the client
    use it too): a span for each start, signal and query, the workflow's and each activity's, the
    context carried in the run's headers."""
    if not _on:
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor()]


# The workflow sandbox passes these through when tracing is on (the interceptor's workflow half
# uses the process's OpenTelemetry context, which must not be re-imported per run).
SANDBOX_PASSTHROUGH = ("opentelemetry",)


def sandbox_passthrough() -> tuple[str, ...]:
    return SANDBOX_PASSTHROUGH if _on else ()


def instrument_connection(conn: Any) -> None:
    """A span for each statement of a pooled psycopg connection (the pool's `configure`);
    parameters are never captured."""
    if _on:
        from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

        PsycopgInstrumentor.instrument_connection(conn)


def instrument_app(app: Any) -> None:
    """A server span for each request of the FastAPI app, named by its route template."""
    if _on:
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(app, exclude_spans=["receive", "send"])


# --- scrubbing ----------------------------------------------------------------------------------

# Attributes that may hold an id of the path or a value: never exported.
DROPPED = frozenset({"url.path", "url.query", "http.target", "exception.message", "exception.stacktrace",
                     "db.statement.parameters", "db.query.parameters", "enduser.id", "user.id", "session.id"})
DROPPED_PREFIXES = ("http.request.header.", "http.response.header.", "db.query.parameter.", "db.operation.parameter.",
                    "http.request.body", "http.response.body")
# A full URL keeps its scheme, host and port only.
URLS = frozenset({"url.full", "http.url"})
# Temporal ids that hold a workflow id: its kind and a keyed digest.
WORKFLOW_IDS = frozenset({"temporalWorkflowID", "temporalUpdateID"})
STATEMENTS = frozenset({"db.statement", "db.query.text"})
_QUOTED = re.compile(r"[EeBbXxUu]?'(?:[^']|'')*'")
_KINDS = re.compile(r"^[a-z][a-z-]{0,31}$")


def workflow_id_digest(workflow_id: str) -> str:
    """"consolidate/acme/lin-wei/s1" → "consolidate/3f9a…": the kind in clear, the rest a keyed
    digest (HMAC-SHA256, 16 hex digits)."""
    kind, _, _ = workflow_id.partition("/")
    digest = hmac.new(_digest_key, workflow_id.encode(), hashlib.sha256).hexdigest()[:16]
    return f"{kind}/{digest}" if _KINDS.match(kind) and kind != workflow_id else digest


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}"


def scrub_statement(statement: str) -> str:
    return _QUOTED.sub("'?'", statement)


def scrub_attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for key, value in (attributes or {}).items():
        if key in DROPPED or key.startswith(DROPPED_PREFIXES):
            continue
        if key in URLS and isinstance(value, str):
            kept[key] = origin(value)
        elif isinstance(value, str) and (key in WORKFLOW_IDS or (key == "temporalActivityID" and not value.isdigit())):
            kept[key] = workflow_id_digest(value)
        elif key in STATEMENTS and isinstance(value, str):
            kept[key] = scrub_statement(value)
        else:
            kept[key] = value
    return kept


def scrub_name(name: str, attributes: Mapping[str, Any] | None) -> str:
    """A name with a path keeps it only as the route template (`POST /v1/subjects/{subject_id}/…`);
    any other path in a name leaves its first word (the method). Names without one (`RunActivity:
    commit_consolidation`, `SELECT`) are static."""
    if not name:
        return "span"
    if "/" not in name:
        return name
    route = (attributes or {}).get("http.route")
    method, _, rest = name.partition(" ")
    if isinstance(route, str) and rest.split(" ")[0] == route:
        return name
    return method if "/" not in method else "span"


def scrub_span(span: ReadableSpan) -> ReadableSpan:
    """A copy of an ended span with nothing in it that names a subject, a session or a value."""
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.trace import Link, Status

    attributes = scrub_attributes(span.attributes)
    return ReadableSpan(
        name=scrub_name(span.name, span.attributes), context=span.context, parent=span.parent,
        resource=span.resource, attributes=attributes,
        events=[Event(event.name, scrub_attributes(event.attributes), event.timestamp) for event in span.events],
        links=[Link(link.context, scrub_attributes(link.attributes)) for link in span.links],
        kind=span.kind, status=Status(span.status.status_code), start_time=span.start_time,
        end_time=span.end_time, instrumentation_scope=span.instrumentation_scope)


class ScrubbingSpanProcessor:
    """Hands each ended span, scrubbed (`scrub_span`), to the processor that exports it."""

    def __init__(self, exporting: SpanProcessor) -> None:
        self.exporting = exporting

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.exporting.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        attributes = span.attributes or {}
        if "db.system" in attributes and not str(attributes.get("db.statement", "")).strip():
            return  # the pool's check of a connection as it is lent (an empty statement): not worth a span
        self.exporting.on_end(scrub_span(span))

    def _on_ending(self, span: Span) -> None:
        self.exporting._on_ending(span)

    def shutdown(self) -> None:
        self.exporting.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporting.force_flush(timeout_millis)


# --- logs ---------------------------------------------------------------------------------------

class TraceContextFilter(logging.Filter):
    """Gives every record `trace_id` and `span_id` (the current span's, hex; "" outside one) and
    `trace_context` (" trace_id=… span_id=…", or "") for the log format."""

    def filter(self, record: logging.LogRecord) -> bool:
        trace_id = span_id = ""
        if _on:
            from opentelemetry import trace

            context = trace.get_current_span().get_span_context()
            if context.is_valid:
                trace_id, span_id = f"{context.trace_id:032x}", f"{context.span_id:016x}"
        record.trace_id, record.span_id = trace_id, span_id
        record.trace_context = f" trace_id={trace_id} span_id={span_id}" if trace_id else ""
        return True


LOG_FORMAT = "%(levelname)s %(name)s: %(message)s%(trace_context)s"


def add_trace_context(handlers: Iterable[logging.Handler]) -> None:
    """The trace context on each handler's records, in LOG_FORMAT (once per handler)."""
    for handler in handlers:
        if not any(isinstance(f, TraceContextFilter) for f in handler.filters):
            handler.addFilter(TraceContextFilter())
            handler.setFormatter(logging.Formatter(LOG_FORMAT))
