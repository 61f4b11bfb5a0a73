"""Connections to the configured services, opened and closed explicitly."""

from __future__ import annotations

import logging
import socket
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from temporalio import client
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter
from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    PrometheusConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_exponential

from agent_memory.core import contract
from agent_memory.core.deadlines import waiting_on
from agent_memory.core.errors import InvalidInput, ServiceUnavailable, first_line
from agent_memory.core.run_metadata import RunMetadataInterceptor
from agent_memory.core.settings import TEMPORAL_ALIASES, Settings, variable
from agent_memory.security.crypto import KeyProvider, key_provider_for, trace_digest_key
from agent_memory.security.keyring import KeyRing
from agent_memory.security.operator_requests import count_refusal
from agent_memory.security.payload_codec import RejectionSink, encrypted_data_converter
from agent_memory.store.access import AccessRecorder
from agent_memory.store.counters import add_counts_if_known
from agent_memory.store.db import (
    DatabaseDeadlines,
    apply_migrations,
    open_pool,
    pending_migrations,
    set_app_role_password,
)
from agent_memory.telemetry import tracing


def _retrying() -> AsyncRetrying:
    # Services may still be starting (compose, restarts): retry connecting, then fail clearly.
    return AsyncRetrying(stop=stop_after_delay(45), wait=wait_exponential(multiplier=0.2, max=5),
                         retry=retry_if_exception_type((OSError, RuntimeError, psycopg.OperationalError, PoolTimeout)),
                         reraise=True)


def _read_pem(variable: str, path: str | None) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise InvalidInput(f"{variable} = {path} cannot be read ({exc.strerror}): point it at a PEM file") from None


def _tls_var(field_name: str) -> str:
    standard = variable(Settings.model_fields[field_name])
    older = next(old for old, new in TEMPORAL_ALIASES.items() if new == standard)
    return f"{standard} (or {older})"


def _pem(settings: Settings, field_name: str) -> bytes | None:
    """One of the TLS PEMs: given inline (the *_DATA variable) or read from its file."""
    data: str | None = getattr(settings, f"{field_name}_data")
    return data.encode() if data else _read_pem(_tls_var(field_name), getattr(settings, field_name))


def temporal_profile(settings: Settings) -> ClientConfigProfile:
    """The settings' Temporal connection as temporalio.envconfig's client profile, its PEM files
    read (a missing or unreadable one is named by its variable)."""
    cert = settings.temporal_tls_cert or settings.temporal_tls_cert_data
    key = settings.temporal_tls_key or settings.temporal_tls_key_data
    if bool(cert) != bool(key):
        given, missing = ("temporal_tls_cert", "temporal_tls_key") if cert else ("temporal_tls_key", "temporal_tls_cert")
        raise InvalidInput(f"{_tls_var(given)} is set but {_tls_var(missing)} is not: mTLS needs both the client "
                           "certificate and its key")
    ca = settings.temporal_tls_ca or settings.temporal_tls_ca_data
    tls = None
    if settings.temporal_tls is not None or cert or ca or settings.temporal_tls_server_name:
        tls = ClientConfigTLS(disabled=None if settings.temporal_tls is None else not settings.temporal_tls,
                              server_name=settings.temporal_tls_server_name,
                              server_root_ca_cert=_pem(settings, "temporal_tls_ca"),
                              client_cert=_pem(settings, "temporal_tls_cert"),
                              client_private_key=_pem(settings, "temporal_tls_key"))
    return ClientConfigProfile(address=settings.temporal_address, namespace=settings.temporal_namespace,
                               api_key=settings.temporal_api_key, tls=tls, grpc_meta=settings.temporal_grpc_meta)


def temporal_connect_options(settings: Settings,
                             data_converter: DataConverter = pydantic_data_converter) -> dict[str, Any]:
    """Keyword arguments for Client.connect but the address: the namespace, TLS (mTLS, the CA
    and server name), the API key (which turns TLS on: it is never sent in the clear) and gRPC
    metadata, as temporalio.envconfig turns a profile into them. Reads the PEM files; opens no
    connection."""
    config: dict[str, Any] = dict(temporal_profile(settings).to_client_connect_config())
    config.pop("target_host", None)
    # Every start (and a workflow's child starts) gets its summary and details in clear, and every
    # call that is no long poll a deadline; with tracing on, every call and run a span (workers
    # made from the client trace their workflows and activities too).
    interceptors: list[Any] = [RunMetadataInterceptor()]
    if settings.temporal_rpc_timeout_seconds:
        interceptors.append(RpcDeadlineInterceptor(timedelta(seconds=settings.temporal_rpc_timeout_seconds)))
    tracing.configure_tracing()
    interceptors += tracing.temporal_interceptors()
    return {**config, "data_converter": data_converter, "interceptors": interceptors}


class _DeadlineOutbound(client.OutboundInterceptor):
    def __init__(self, next: client.OutboundInterceptor, timeout: timedelta) -> None:
        super().__init__(next)
        self.timeout = timeout

    def _bounded(self, input: Any) -> Any:
        if input.rpc_timeout is None:
            input.rpc_timeout = self.timeout
        return input

    async def start_workflow(self, input: client.StartWorkflowInput) -> client.WorkflowHandle[Any, Any]:
        with waiting_on("temporal"):
            return await super().start_workflow(self._bounded(input))

    async def signal_workflow(self, input: client.SignalWorkflowInput) -> None:
        with waiting_on("temporal"):
            await super().signal_workflow(self._bounded(input))

    async def describe_workflow(self, input: client.DescribeWorkflowInput) -> client.WorkflowExecutionDescription:
        with waiting_on("temporal"):
            return await super().describe_workflow(self._bounded(input))

    async def query_workflow(self, input: client.QueryWorkflowInput) -> Any:
        with waiting_on("temporal"):
            return await super().query_workflow(self._bounded(input))

    async def cancel_workflow(self, input: client.CancelWorkflowInput) -> None:
        with waiting_on("temporal"):
            await super().cancel_workflow(self._bounded(input))

    async def terminate_workflow(self, input: client.TerminateWorkflowInput) -> None:
        with waiting_on("temporal"):
            await super().terminate_workflow(self._bounded(input))

    async def count_workflows(self, input: client.CountWorkflowsInput) -> client.WorkflowExecutionCount:
        with waiting_on("temporal"):
            return await super().count_workflows(self._bounded(input))

    def list_workflows(self, input: client.ListWorkflowsInput) -> client.WorkflowExecutionAsyncIterator:
        return super().list_workflows(self._bounded(input))


class RpcDeadlineInterceptor(client.Interceptor):
    """A deadline on each call to Temporal that is no long poll (starts, signals, descriptions,
    queries, cancels, listings; not a wait for a result or an update): a Temporal that stalls
    fails the call with DEADLINE_EXCEEDED, which the HTTP API answers 503 naming Temporal. A call
    that gives its own `rpc_timeout` keeps it."""

    def __init__(self, timeout: timedelta) -> None:
        self.timeout = timeout

    def intercept_client(self, next: client.OutboundInterceptor) -> client.OutboundInterceptor:
        return _DeadlineOutbound(next, self.timeout)


def payload_converter(settings: Settings, provider: KeyProvider, *,
                      on_rejected: RejectionSink | None = None) -> DataConverter:
    """The strict pydantic converter with every payload encrypted under the deployment's payload key
    and bound to its workflow; a payload under a key rotated since (another process's `keys
    rotate-payload`) reloads the provider's keys."""
    return encrypted_data_converter(provider.payload_keys(), accept_legacy=settings.accept_plaintext_payloads,
                                    on_rejected=on_rejected, reload=provider.payload_keys)


def rejection_counter(pool: AsyncConnectionPool) -> RejectionSink:
    """Counts each refused Temporal payload in `agent-memory stats` (`refused:payload`) of the
    tenant its workflow id names, when that tenant exists (a forged id naming no tenant is only
    logged), and in agent_memory_refused_workflow_inputs_total{reason="payload"} in any case."""

    async def count(workflow_id: str, reason: str) -> None:
        count_refusal("payload")
        tenant_id = contract.workflow_id_tenant(workflow_id)
        if tenant_id is not None:
            await add_counts_if_known(pool, tenant_id, {"refused:payload": 1})

    return count


_temporal_runtime: Runtime | None = None
_runtime_metrics_address: str | None = None


def serve_runtime_metrics() -> str | None:
    """Have the process's Temporal runtime export the SDK's own metrics (workflow and activity
    completions, task latencies, pollers, slots) on a free loopback port, which the process's
    metrics page reads (agent_memory.telemetry.exposition); returns its `host:port`. Called by the
    processes that serve metrics (`up`, `serve`, a worker) before they connect; None when the
    runtime was made already without it."""
    global _runtime_metrics_address
    if _temporal_runtime is None and _runtime_metrics_address is None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            _runtime_metrics_address = f"127.0.0.1:{probe.getsockname()[1]}"
    return _runtime_metrics_address


def runtime_metrics_address() -> str | None:
    """Where the runtime's SDK metrics are served (`host:port`), when they are."""
    return _runtime_metrics_address


def temporal_runtime() -> Runtime:
    """The process's Temporal runtime, made once: the SDK core's own log lines (warnings such as
    "Failing workflow task" or "workflow task duration exceeded"; errors of other crates) go to
    the Python logger `temporalio.core` — so to stderr or the process's log file, as plain text —
    instead of to stdout with terminal colour codes, where they would break a command's output
    (the JSON of --json). It is also the default runtime, for anything that connects without it.
    After `serve_runtime_metrics`, it also exports the SDK's metrics in Prometheus' conventions
    (counters end in `_total`, durations in seconds)."""
    global _temporal_runtime
    if _temporal_runtime is None:
        metrics = (PrometheusConfig(bind_address=_runtime_metrics_address, counters_total_suffix=True,
                                    durations_as_seconds=True) if _runtime_metrics_address else None)
        _temporal_runtime = Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(
            filter=TelemetryFilter(core_level="WARN", other_level="ERROR"),
            forwarding=LogForwardingConfig(logger=logging.getLogger("temporalio.core"), append_target_to_name=False)),
            metrics=metrics))
        Runtime.set_default(_temporal_runtime, error_if_already_set=False)
    return _temporal_runtime


async def connect_temporal(settings: Settings, data_converter: DataConverter) -> Client:
    if not settings.temporal_address:
        raise ServiceUnavailable("TEMPORAL_ADDRESS is not set and no embedded server was started")
    options = temporal_connect_options(settings, data_converter)
    try:
        async for attempt in _retrying():
            with attempt:
                return await Client.connect(settings.temporal_address, runtime=temporal_runtime(), **options)
    except RuntimeError as exc:  # the SDK's "Failed client connect": Temporal is down or unreachable
        if isinstance(exc, ServiceUnavailable):
            raise
        raise ServiceUnavailable(f"Temporal at {settings.temporal_address} cannot be reached: {first_line(exc)}") from exc
    raise AssertionError("unreachable")


def database_deadlines(settings: Settings) -> DatabaseDeadlines:
    return DatabaseDeadlines(statement_seconds=settings.postgres_statement_timeout_seconds,
                             lock_seconds=settings.postgres_lock_timeout_seconds,
                             connect_seconds=settings.postgres_connect_timeout_seconds,
                             pool_wait_seconds=settings.pool_timeout_seconds)


async def connect_pool(settings: Settings, *, max_size: int = 8) -> AsyncConnectionPool:
    if not settings.database_url:
        raise ServiceUnavailable("DATABASE_URL is not set and no embedded PostgreSQL was started")
    async for attempt in _retrying():
        with attempt:
            return await open_pool(settings.database_url, max_size=max_size, deadlines=database_deadlines(settings))
    raise AssertionError("unreachable")


async def migrate(settings: Settings, *, app_password: str | None = None) -> list[str]:
    """Apply migrations with the owner role (DATABASE_ADMIN_URL); the app role cannot.
    The embedded stack also passes the app role's password so it can log in."""
    if not settings.database_admin_url:
        return []
    async for attempt in _retrying():
        with attempt:
            applied = await apply_migrations(settings.database_admin_url)
    if app_password:
        await set_app_role_password(settings.database_admin_url, app_password)
    return applied


async def check_schema(settings: Settings) -> None:
    """Refuse to run on a schema older than this code: compares schema_migrations (read as the
    app role) with the packaged migrations. Only `agent-memory migrate` (or `up`) applies them."""
    if not settings.database_url:
        raise ServiceUnavailable("DATABASE_URL is not set and no embedded PostgreSQL was started")
    async for attempt in _retrying():
        with attempt:
            pending = await pending_migrations(settings.database_url)
    if pending:
        raise ServiceUnavailable(f"the database schema is behind this agent-memory ({len(pending)} migration(s) not "
                                 f"applied: {', '.join(pending)}): run `agent-memory migrate`")


class BoundedRetry(Retry):
    """Redis's retry with backoff, given up `budget` seconds after the first attempt: a command
    that meets a restarting Redis is retried until it is back, and one that meets a Redis that
    stalls fails within a few timeouts instead of one per attempt."""

    def __init__(self, backoff: ExponentialBackoff, retries: int, budget: float) -> None:
        super().__init__(backoff, retries)
        self.budget = budget

    async def call_with_retry(self, do: Any, fail: Any, is_retryable: Any = None,
                              with_failure_count: bool = False) -> Any:
        started = time.monotonic()

        def in_budget(error: Exception) -> bool:
            return time.monotonic() - started < self.budget and (is_retryable is None or is_retryable(error))

        return await super().call_with_retry(do, fail, in_budget, with_failure_count)


class TrackedRedis(Redis):
    """A Redis client whose every command counts as a wait on Redis for the request that sends it
    (agent_memory.core.deadlines)."""

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        with waiting_on("redis"):
            return await super().execute_command(*args, **options)


def connect_redis(settings: Settings) -> Redis:
    """A client whose pooled connections survive a Redis restart: a command that meets a dead
    connection (or none yet) reconnects and is retried with backoff, an idle connection is
    checked before use, and connecting or each answer gives up after AGENT_MEMORY_REDIS_TIMEOUT_SECONDS,
    a command's retries after twice that (then the HTTP API answers 503 naming Redis)."""
    if not settings.redis_url:
        raise ServiceUnavailable("REDIS_URL is not set and no embedded Redis was started")
    timeout = settings.redis_timeout_seconds or None
    return TrackedRedis.from_url(settings.redis_url, decode_responses=True,
                          retry=BoundedRetry(ExponentialBackoff(cap=1.0, base=0.05), 6,
                                             budget=2 * (timeout or 3.0)),
                          retry_on_error=[RedisConnectionError, RedisTimeoutError, ConnectionResetError],
                          health_check_interval=5, socket_connect_timeout=timeout, socket_timeout=timeout)


@dataclass
class Services:
    settings: Settings
    pool: AsyncConnectionPool
    redis: Redis
    temporal: Client
    keyring: KeyRing
    # Reads' accesses, recorded in Redis off their latency and flushed to Postgres (store/access.py).
    access: AccessRecorder = field(init=False)

    def __post_init__(self) -> None:
        self.access = AccessRecorder(self.pool, self.redis, self.keyring)

    @classmethod
    async def open(cls, settings: Settings) -> Services:
        tracing.configure_tracing()  # before the pool: its connections trace their statements
        pool = await connect_pool(settings)
        redis = connect_redis(settings)
        await redis.ping()
        provider = key_provider_for(settings.master_key, settings.key_dir, settings.home, settings.identifier_key,
                                    settings.payload_key)
        temporal = await connect_temporal(settings, payload_converter(settings, provider,
                                                                      on_rejected=rejection_counter(pool)))
        keyring = KeyRing(provider)
        try:
            await keyring.ensure_ready(pool)  # refuses to start without the keys the database needs
        except BaseException:
            await redis.aclose()
            await pool.close()
            raise
        if tracing.tracing_on():
            tracing.set_digest_key(trace_digest_key(keyring.identifier_key()))
        return cls(settings=settings, pool=pool, redis=redis, temporal=temporal, keyring=keyring)

    async def close(self) -> None:
        await self.access.close()
        await self.redis.aclose()
        await self.pool.close()
