"""Settings from environment variables: one validated model, its reference table generated from it
(`python -m agent_memory.core.settings --write docs/operations.md`).

The Temporal connection is read as Temporal's own clients read it (temporalio.envconfig): the
standard TEMPORAL_* variables over an optional profile of a TOML client configuration file.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from agent_memory.core.errors import InvalidInput, ServiceUnavailable
from agent_memory.core.reference_docs import reference_command, with_table

if TYPE_CHECKING:
    from temporalio.envconfig import ClientConfigProfile

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Expect:
    """What a variable's value must be, for the one-line message that refuses a bad one."""

    what: str  # "is not <what>"
    below: str | None = None  # the problem and fix when under the bound; None: as any other bad value
    fix: str = "set e.g. {name}={example}"
    example: str | None = None  # None: the default


Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False),
                    _Expect("a number of seconds", below="is negative: set a number of seconds >= 0, e.g. {name}={example}")]
Count = Annotated[int, Field(ge=1), _Expect("a positive whole number")]
Price = Annotated[float, Field(ge=0, allow_inf_nan=False), _Expect("a price >= 0 in USD per 1,000 tokens", example="0.15")]
Switch = Annotated[bool, _Expect("a yes/no value", fix="set {name}=1 or {name}=0")]


def _networks(value: str | None) -> str | None:
    """A comma-separated list of IP addresses and networks (`10.0.0.0/8`), as given, or None."""
    if value is None:
        return None
    import ipaddress

    for entry in value.split(","):
        ipaddress.ip_network(entry.strip(), strict=False)  # a ValueError names a bad entry
    return value


TrustedProxies = Annotated[str | None, AfterValidator(_networks), _Expect(
    "a comma-separated list of IP addresses or networks", example="10.0.0.5,192.168.0.0/24")]


def _setting(variable: str, default: Any = ..., description: str = "", *, alias: str | None = None,
             shown_default: str | None = None, secret: bool = False) -> Any:
    """A field read from `variable`; `alias` is an older name read too (with a warning),
    `shown_default` the default as the reference table shows it when the value alone does not say it."""
    extra: dict[str, Any] = {}
    if alias:
        extra["deprecated_alias"] = alias
    if shown_default:
        extra["shown_default"] = shown_default
    return Field(default, validation_alias=variable, description=description, repr=not secret,
                 json_schema_extra=extra or None)


def default_home(env: Mapping[str, str] | None = None) -> Path:
    """The per-user home of the embedded stack, the same from every directory: the platform's
    data directory (Linux: $XDG_DATA_HOME or ~/.local/share; macOS: ~/Library/Application
    Support; Windows: %LOCALAPPDATA%) / agent-memory."""
    env = dict(os.environ if env is None else env)
    if sys.platform == "darwin":
        base = Path("~/Library/Application Support").expanduser()
    elif sys.platform == "win32":
        base = Path(env.get("LOCALAPPDATA") or Path("~/AppData/Local").expanduser())
    else:
        base = Path(env.get("XDG_DATA_HOME") or Path("~/.local/share").expanduser())
    return base / "agent-memory"


# The environment the settings are read from: the process's, or the mapping Settings.from_env was given.
_environment: ContextVar[Mapping[str, str] | None] = ContextVar("agent_memory_settings_environment", default=None)


class Settings(BaseSettings):
    """Every setting of a process, each read from one environment variable (empty counts as unset)."""

    model_config = SettingsConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    home: Path = _setting(
        "AGENT_MEMORY_HOME", description="data of the embedded stack, and its key directory `keys/` unless "
        "`AGENT_MEMORY_KEY_DIR` is set",
        shown_default="`$XDG_DATA_HOME/agent-memory`, i.e. `~/.local/share/agent-memory` on Linux; "
                      "`~/Library/Application Support/agent-memory` on macOS; `%LOCALAPPDATA%\\agent-memory` on Windows")
    task_queue: str = _setting("AGENT_MEMORY_TASK_QUEUE", "agent-memory",
                               "the task queue of the workflows and activities (the model calls use `<task queue>-model`)")
    # The Temporal connection (temporalio.envconfig). No address: the embedded dev server.
    temporal_address: str | None = _setting("TEMPORAL_ADDRESS", None,
                                            "an external Temporal's `host:port` (then none is started)")
    temporal_namespace: str = _setting("TEMPORAL_NAMESPACE", "default", "the Temporal namespace")
    temporal_profile: str | None = _setting(
        "TEMPORAL_PROFILE", None, "a profile of the Temporal client configuration file (TOML, as the `temporal` CLI "
        "writes it); the `TEMPORAL_*` variables override its values", shown_default="`default` when a file is read")
    temporal_config_file: str | None = _setting(
        "TEMPORAL_CONFIG_FILE", None, "the Temporal client configuration file; read only when it or `TEMPORAL_PROFILE` "
        "is set", shown_default="`~/.config/temporalio/temporal.toml`")
    temporal_tls: bool | None = _setting(
        "TEMPORAL_TLS", None, "`true`: TLS even with no other TLS setting (system roots); `false`: no TLS at all",
        shown_default="TLS when a TLS setting or an API key is set")
    # mTLS: the client certificate and its key, both or neither (a file, or the PEM itself).
    temporal_tls_cert: str | None = _setting(
        "TEMPORAL_TLS_CLIENT_CERT_PATH", None, "a Temporal with mTLS (compose's): the client certificate (PEM file); "
        "needs the key too", alias="TEMPORAL_TLS_CERT")
    temporal_tls_cert_data: str | None = _setting("TEMPORAL_TLS_CLIENT_CERT_DATA", None,
                                                  "the client certificate itself (PEM), instead of a file")
    temporal_tls_key: str | None = _setting("TEMPORAL_TLS_CLIENT_KEY_PATH", None,
                                            "the client certificate's private key (PEM file)", alias="TEMPORAL_TLS_KEY")
    temporal_tls_key_data: str | None = _setting("TEMPORAL_TLS_CLIENT_KEY_DATA", None,
                                                 "the private key itself (PEM), instead of a file", secret=True)
    temporal_tls_ca: str | None = _setting(
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH", None, "the CA to verify the Temporal server by (PEM file)",
        alias="TEMPORAL_TLS_CA", shown_default="the system roots")
    temporal_tls_ca_data: str | None = _setting("TEMPORAL_TLS_SERVER_CA_CERT_DATA", None,
                                                "the CA itself (PEM), instead of a file")
    temporal_tls_server_name: str | None = _setting("TEMPORAL_TLS_SERVER_NAME", None,
                                                    "the name to verify the Temporal server's certificate by",
                                                    shown_default="the address's host")
    temporal_api_key: str | None = _setting("TEMPORAL_API_KEY", None, "a hosted Temporal's API key (implies TLS)",
                                            secret=True)
    temporal_grpc_meta: dict[str, str] = Field(
        default_factory=dict, validation_alias="TEMPORAL_GRPC_META_*",
        description="gRPC headers sent on every call to Temporal (`TEMPORAL_GRPC_META_X_TENANT=a` sends `x-tenant: a`)",
        json_schema_extra={"shown_default": "none"})
    ui_url: str | None = _setting("AGENT_MEMORY_UI_URL", None, "the Temporal UI's base URL, for printed links",
                                  shown_default="`http://127.0.0.1:8233`")
    ui_origin: str | None = _setting(
        "AGENT_MEMORY_UI_ORIGIN", None, "the Temporal UI's browser origins (comma-separated) allowed to call the codec "
        "endpoint", shown_default="the origin of `AGENT_MEMORY_UI_URL`")
    database_url: str | None = _setting("DATABASE_URL", None, "the application role's URL, row-level security applies "
                                        "(then no embedded PostgreSQL is started)", secret=True)
    database_admin_url: str | None = _setting("DATABASE_ADMIN_URL", None, "the owner role's URL, used by "
                                              "`agent-memory migrate` (and `up`) only", secret=True)
    redis_url: str | None = _setting("REDIS_URL", None, "an external Redis", secret=True)
    master_key: str | None = _setting(
        "AGENT_MEMORY_MASTER_KEY", None, "key-encryption keys from the environment instead of a key directory: "
        "`base64` or `id:base64,…` (newest last); agent-memory cannot rotate these (no rotation Schedule then)",
        secret=True)
    identifier_key: str | None = _setting("AGENT_MEMORY_IDENTIFIER_KEY", None,
                                          "with `AGENT_MEMORY_MASTER_KEY`: the identifier key (base64)", secret=True)
    payload_key: str | None = _setting("AGENT_MEMORY_PAYLOAD_KEY", None, "with `AGENT_MEMORY_MASTER_KEY`: the key that "
                                       "encrypts Temporal payloads (base64)", secret=True)
    accept_plaintext_payloads: Switch = _setting(
        "AGENT_MEMORY_ACCEPT_PLAINTEXT_PAYLOADS", False, "`1` only while upgrading from a deployment whose Temporal "
        "payloads were not encrypted or not bound to their run (reopens input replay: turn it off after)")
    key_dir: Path | None = _setting("AGENT_MEMORY_KEY_DIR", None, "the private key directory (KEK files, identifier "
                                    "and payload keys)", shown_default="`$AGENT_MEMORY_HOME/keys`")
    provider: str = _setting("AGENT_MEMORY_PROVIDER", "offline", "`offline` or `openai-compatible` "
                             "([model providers](#model-providers))")
    openai_base_url: str | None = _setting("OPENAI_BASE_URL", None, "the OpenAI-compatible server",
                                           shown_default="`https://api.openai.com/v1`")
    openai_api_key: str | None = _setting("OPENAI_API_KEY", None, "the OpenAI-compatible server's key", secret=True)
    chat_model: str | None = _setting("AGENT_MEMORY_CHAT_MODEL", None,
                                      "the chat model for extraction, scoring and summaries")
    embedding_model: str | None = _setting("AGENT_MEMORY_EMBEDDING_MODEL", None,
                                           "the remote embedding model (`AGENT_MEMORY_EMBEDDER=remote`)")
    embedder: str | None = _setting(
        "AGENT_MEMORY_EMBEDDER", None, "`e5-small`, `hashing`, or `remote` (the OpenAI-compatible embedding model); "
        "see [recall.md](recall.md#embedders)", shown_default="`e5-small`")
    embedding_dimensions: Annotated[int, Field(ge=1), _Expect("a positive whole number",
                                                              fix="set the embedding model's width, e.g. {name}={example}")] = _setting(
        "AGENT_MEMORY_EMBEDDING_DIMENSIONS", 384, "the remote embedding model's stored width; a change re-embeds every "
        "memory")
    provider_timeout_seconds: Seconds = _setting(
        "AGENT_MEMORY_PROVIDER_TIMEOUT", 60.0, "seconds per model call (at most 300; the recorded operation's claim "
        "is renewed while a call runs)")
    input_price_per_1k: Price = _setting("AGENT_MEMORY_INPUT_PRICE_PER_1K", 0.0,
                                         "USD per 1,000 input tokens, for the cost recorded per operation")
    output_price_per_1k: Price = _setting("AGENT_MEMORY_OUTPUT_PRICE_PER_1K", 0.0, "USD per 1,000 output tokens")
    api_key: str | None = _setting("AGENT_MEMORY_API_KEY", None,
                                   "the API key `agent-memory mcp` acts with (its tenant and scope)", secret=True)
    forget_grace_seconds: Seconds = _setting(
        "AGENT_MEMORY_FORGET_GRACE_SECONDS", 24 * 3600.0, "how long a forgotten memory can be restored before the "
        "sweeper removes it; see [lifecycle.md](lifecycle.md)")
    operator_request_ttl_seconds: Seconds = _setting(
        "AGENT_MEMORY_OPERATOR_REQUEST_TTL_SECONDS", 900.0, "how long an operator's registration of a destructive "
        "run (a forced rotation, `compact --all`, `sweep --grace-seconds`, `rebuild --force`, `rederive`, "
        "`reembed`) waits for its run to claim it; unclaimed after that, it is refused "
        "([security.md](security.md#single-use-authorizations))")
    future_tolerance_seconds: Seconds = _setting(
        "AGENT_MEMORY_FUTURE_TOLERANCE_SECONDS", 300.0, "how far ahead of the server's clock a message may be dated "
        "(clock skew between writers); later ones are refused")
    auth_failure_burst: Count = _setting(
        "AGENT_MEMORY_AUTH_FAILURE_BURST", 10, "the HTTP API's failed authentications allowed per client address and "
        "per key id before `429` (refilled at that many per window)")
    auth_failure_window_seconds: Seconds = _setting("AGENT_MEMORY_AUTH_FAILURE_WINDOW_SECONDS", 60.0,
                                                    "the window of `AGENT_MEMORY_AUTH_FAILURE_BURST`")
    trusted_proxies: TrustedProxies = _setting(
        "AGENT_MEMORY_TRUSTED_PROXIES", None, "the reverse proxies (addresses or networks, comma-separated) whose "
        "`X-Forwarded-For` and `X-Forwarded-Proto` the HTTP API believes; from any other peer they are ignored and "
        "the connection's address is the client's", shown_default="none")
    http_header_timeout_seconds: Seconds = _setting(
        "AGENT_MEMORY_HTTP_HEADER_TIMEOUT_SECONDS", 10.0, "a connection that takes longer to send a request's headers "
        "is closed")
    http_body_timeout_seconds: Seconds = _setting(
        "AGENT_MEMORY_HTTP_BODY_TIMEOUT_SECONDS", 30.0, "a connection that stalls longer between body chunks is closed")
    # Deadlines of every call to a dependency: a server that stalls (neither answers nor refuses)
    # is answered 503 naming it, not waited on.
    dependency_deadline_seconds: Seconds = _setting(
        "AGENT_MEMORY_DEPENDENCY_DEADLINE_SECONDS", 6.0, "how long an HTTP request waits on one call to PostgreSQL, "
        "Redis or Temporal before it is answered `503` naming it (the call may still complete)")
    postgres_statement_timeout_seconds: Seconds = _setting(
        "AGENT_MEMORY_POSTGRES_STATEMENT_TIMEOUT_SECONDS", 30.0, "PostgreSQL's `statement_timeout` of the pooled "
        "connections (erasure, rebuild and re-embedding set a longer one for their own statements; 0: none)")
    postgres_lock_timeout_seconds: Seconds = _setting(
        "AGENT_MEMORY_POSTGRES_LOCK_TIMEOUT_SECONDS", 10.0, "PostgreSQL's `lock_timeout` of the pooled connections "
        "(0: none)")
    postgres_connect_timeout_seconds: Seconds = _setting(
        "AGENT_MEMORY_POSTGRES_CONNECT_TIMEOUT_SECONDS", 5.0, "how long opening a PostgreSQL connection may take")
    pool_timeout_seconds: Seconds = _setting(
        "AGENT_MEMORY_POOL_TIMEOUT_SECONDS", 15.0, "how long a caller waits for a pooled PostgreSQL connection before "
        "PostgreSQL is reported unavailable (a step that waits longer is retried, and a model's answer not yet "
        "recorded would be asked for again; an HTTP request answers 503 after its own deadline anyway)")
    redis_timeout_seconds: Seconds = _setting(
        "AGENT_MEMORY_REDIS_TIMEOUT_SECONDS", 2.0, "how long connecting to Redis, or one of its answers, may take; "
        "a command is retried within about three times that")
    temporal_rpc_timeout_seconds: Seconds = _setting(
        "AGENT_MEMORY_TEMPORAL_RPC_TIMEOUT_SECONDS", 5.0, "the deadline of each call to Temporal that is not a long "
        "poll (starts, signals, queries, descriptions, listings)")
    readiness_timeout_seconds: Seconds = _setting(
        "AGENT_MEMORY_READINESS_TIMEOUT_SECONDS", 2.0, "how long `GET /v1/ready` waits on each dependency (they "
        "are checked at once)")
    idle_timeout_seconds: Seconds = _setting(
        "AGENT_MEMORY_IDLE_TIMEOUT_SECONDS", 600.0, "the idle time after which the idle-timer sweep arms a session's "
        "lost timer")
    # Worker Versioning (workers/deployment.py): a worker with a build id runs as that version of
    # the Worker Deployment; without one it is unversioned.
    deployment_name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,200}$"), _Expect(
        "a Worker Deployment name (letters, digits, `-` and `_`)")] = _setting(
        "AGENT_MEMORY_DEPLOYMENT_NAME", "agent-memory", "the Worker Deployment the workers of `AGENT_MEMORY_BUILD_ID` "
        "belong to ([deploying new workflow code](#deploying-new-workflow-code))")
    build_id: Annotated[str | None, Field(pattern=r"^[A-Za-z0-9_.-]{1,200}$"), _Expect(
        "a build id (letters, digits, `.`, `-` and `_`, e.g. the image tag)", example="2026.12.1")] = _setting(
        "AGENT_MEMORY_BUILD_ID", None, "this worker's build id (e.g. the image tag): the worker runs as that version of "
        "the Worker Deployment, consolidations pinned to it; unset: an unversioned worker",
        shown_default="unset (unversioned)")
    model_worker: Switch = _setting("AGENT_MEMORY_MODEL_WORKER", True, "`0`: this process serves no model calls; "
                                    "another process's worker must ([the model task queue](#consolidation-steps-and-the-model-task-queue))")
    model_concurrency: Count = _setting("AGENT_MEMORY_MODEL_CONCURRENCY", 100, "model calls at once in this process")
    model_activities_per_second: Annotated[float | None, Field(gt=0, allow_inf_nan=False), _Expect(
        "a positive number of activities per second", fix="set e.g. {name}=5, or leave it unset for no limit")] = _setting(
        "AGENT_MEMORY_MODEL_ACTIVITIES_PER_SECOND", None, "the model queue's rate limit, for all its workers together "
        "(the server enforces it)", shown_default="no limit")
    daily_token_budget: Annotated[int, Field(ge=0), _Expect(
        "a whole number of tokens", below="is negative: set a number of tokens >= 0 (0: unlimited), e.g. {name}=2000000",
        fix="set e.g. {name}=2000000, or 0 for no budget")] = _setting(
        "AGENT_MEMORY_DAILY_TOKEN_BUDGET", 0, "the model tokens (input and output) a tenant's recorded model calls may "
        "spend per UTC day before its consolidations park, for a tenant without a budget of its own "
        "(`agent-memory token-budget`); 0: unlimited", shown_default="0 (unlimited)")
    webhook_allow_http: Switch = _setting(
        "AGENT_MEMORY_WEBHOOK_ALLOW_HTTP", False, "`1`: webhook endpoints may be plain `http://` URLs (a development "
        "stack); otherwise only `https://` ([webhooks](api.md#webhooks))")
    webhook_allow_private: Switch = _setting(
        "AGENT_MEMORY_WEBHOOK_ALLOW_PRIVATE", False, "`1`: webhooks may reach loopback, private, link-local and "
        "unique-local addresses (a development stack, or receivers inside the deployment's network); otherwise only "
        "public internet addresses. Metadata, multicast and unspecified addresses are refused either way "
        "([webhook targets](security.md#webhook-targets))")
    webhook_nameserver: Annotated[str | None, Field(pattern=r"^(\[[0-9A-Fa-f:.]+\]|[0-9.]+)(:[0-9]{1,5})?$"), _Expect(
        "a DNS server's address (IPv4, or IPv6 in brackets, with an optional port)", example="192.0.2.53:53")] = _setting(
        "AGENT_MEMORY_WEBHOOK_NAMESERVER", None, "the DNS server that resolves webhook hosts (`address` or "
        "`address:port`); unset: the system's resolver", shown_default="unset (the system's resolver)")
    webhook_ca_file: Path | None = _setting(
        "AGENT_MEMORY_WEBHOOK_CA_FILE", None, "a PEM file of the certificate authorities webhook receivers' "
        "certificates are verified against, instead of the public ones (certifi)", shown_default="unset (certifi)")
    webhook_max_attempts: Count = _setting(
        "AGENT_MEMORY_WEBHOOK_MAX_ATTEMPTS", 8, "POSTs of one webhook delivery before it is dead-lettered")
    webhook_initial_retry_seconds: Seconds = _setting(
        "AGENT_MEMORY_WEBHOOK_INITIAL_RETRY_SECONDS", 1.0, "the wait before a webhook delivery's second attempt; it "
        "doubles with each further one")
    webhook_max_retry_seconds: Seconds = _setting(
        "AGENT_MEMORY_WEBHOOK_MAX_RETRY_SECONDS", 600.0, "the longest wait between two attempts of a webhook delivery")
    webhook_timeout_seconds: Seconds = _setting(
        "AGENT_MEMORY_WEBHOOK_TIMEOUT_SECONDS", 10.0, "how long one webhook POST may take (connect, send, answer; at most 25)")
    # Metrics (docs/operations.md#metrics): the API serves them at /metrics; a worker-only process on a port.
    metrics_port: Annotated[int | None, Field(ge=0, le=65535), _Expect("a port number", example="9464")] = _setting(
        "AGENT_MEMORY_METRICS_PORT", None, "the port `agent-memory worker` serves its Prometheus metrics on "
        "(`/metrics`, no key: bind it where only Prometheus reaches); `up` and `serve` serve them at the API's "
        "`/metrics` (an operator key)", shown_default="unset (a worker serves no metrics)")
    metrics_host: str = _setting("AGENT_MEMORY_METRICS_HOST", "127.0.0.1",
                                 "the address the worker's metrics port binds to")
    metrics_tenant_cap: Annotated[int, Field(ge=0), _Expect("a whole number of tenants")] = _setting(
        "AGENT_MEMORY_METRICS_TENANT_CAP", 50, "tenants named in a metric's `tenant` label per process; the others "
        "count under `other`")
    metrics_tenant_labels: Switch = _setting(
        "AGENT_MEMORY_METRICS_TENANT_LABELS", True, "`0`: no metric names a tenant (every `tenant` label is `all`)")
    metrics_sample_seconds: Annotated[float, Field(gt=0, allow_inf_nan=False), _Expect("a number of seconds > 0")] = _setting(
        "AGENT_MEMORY_METRICS_SAMPLE_SECONDS", 15.0, "how often a worker samples the gauges (outbox depth, "
        "projection lag, erasures, task queue backlog, ...)")
    erasure_deadline_seconds: Seconds = _setting(
        "AGENT_MEMORY_ERASURE_DEADLINE_SECONDS", 3600.0, "how long an erasure may stay open before it counts as "
        "stuck (`stats`, the `agent_memory_erasures{state=\"stuck\"}` gauge; alerts compare against it)")

    @field_validator("home", "key_dir", "webhook_ca_file")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        return value.expanduser().resolve() if value is not None else None

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource) -> tuple[PydanticBaseSettingsSource, ...]:
        environment = _environment.get()
        return init_settings, _EnvironmentSource(settings_cls, os.environ if environment is None else environment)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """The settings `env` (default: the process's environment) gives. A bad value raises
        InvalidInput with one line naming its variable and the fix."""
        token = _environment.set(os.environ if env is None else env)
        try:
            return cls()
        except ValidationError as exc:
            raise InvalidInput(_one_line(exc)) from None
        finally:
            _environment.reset(token)

    def with_services(self, **changes: Any) -> Settings:
        """These settings with `changes` (field names) applied, unvalidated, as the embedded stack resolves them."""
        return self.model_copy(update=changes)

    def with_running_stack(self) -> Settings:
        """These settings, with the service URLs they do not configure taken from the stack
        `agent-memory up` runs under the home (agent_memory.core.stack_connection); unchanged when
        every URL is configured. Raises ServiceUnavailable, naming the home, when one is missing."""
        if self.temporal_address and self.database_url and self.redis_url:
            return self
        from agent_memory.core.stack_connection import read_connection

        running = read_connection(self.home)
        if running is None:
            raise ServiceUnavailable(f"no agent-memory stack is running under {self.home} (AGENT_MEMORY_HOME, default "
                                     f"{default_home()}): start one with `agent-memory up`, point AGENT_MEMORY_HOME at the "
                                     "home it printed, or set TEMPORAL_ADDRESS, DATABASE_URL and REDIS_URL")
        return self.with_services(**{k: v for k, v in running.items() if not getattr(self, k)})

    def ui_origins(self) -> set[str]:
        """The Temporal UI's browser origins the codec endpoint answers (scheme://host[:port]). A
        loopback UI is reached as localhost or 127.0.0.1 alike, so both are allowed."""
        from urllib.parse import urlsplit

        if self.ui_origin:
            return {o.strip().rstrip("/") for o in self.ui_origin.split(",") if o.strip()}
        url = urlsplit(self.ui_url or "http://127.0.0.1:8233")
        origins = {f"{url.scheme}://{url.netloc}"}
        if url.hostname in ("127.0.0.1", "localhost"):
            port = f":{url.port}" if url.port else ""
            origins |= {f"{url.scheme}://127.0.0.1{port}", f"{url.scheme}://localhost{port}"}
        return origins

    def workflow_url(self, workflow_id: str) -> str:
        from urllib.parse import quote

        base = (self.ui_url or "http://127.0.0.1:8233").rstrip("/")
        return f"{base}/namespaces/{self.temporal_namespace}/workflows/{quote(workflow_id, safe='')}"


def variable(field: FieldInfo) -> str:
    """The environment variable a field is read from."""
    assert isinstance(field.validation_alias, str)
    return field.validation_alias


def _extra(field: FieldInfo) -> dict[str, Any]:
    return field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}


# Fields whose values come from the Temporal client configuration (temporalio.envconfig), not from
# their variable alone: a profile file may set them too.
TEMPORAL_FIELDS = tuple(name for name in Settings.model_fields if name.startswith("temporal_")
                        and name not in ("temporal_profile", "temporal_config_file"))

# Older names of Temporal's standard variables, read as them with a warning: {older: standard}.
TEMPORAL_ALIASES = {str(_extra(f)["deprecated_alias"]): variable(f) for f in Settings.model_fields.values()
                    if "deprecated_alias" in _extra(f)}

# Every variable the settings read; the compose test checks docker-compose.yml sets no others.
ENV_VARS = tuple(name for field in Settings.model_fields.values()
                 for name in (variable(field), _extra(field).get("deprecated_alias")) if name and "*" not in name)


def temporal_environment(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without empty values, each older Temporal variable read as its standard name (with a
    warning); a standard name and its older one naming different files are refused."""
    env = {k: v for k, v in env.items() if v}
    for older, standard in TEMPORAL_ALIASES.items():
        value = env.pop(older, None)
        if value is None:
            continue
        if env.get(standard, value) != value:
            raise InvalidInput(f"{standard}={env[standard]!r} and {older}={value!r} name different files: set only {standard}")
        log.warning("%s is deprecated: set %s, Temporal's standard name, instead", older, standard)
        env[standard] = value
    return env


def load_temporal_profile(env: Mapping[str, str]) -> ClientConfigProfile:
    """The Temporal client profile `env` configures (temporalio.envconfig): the TEMPORAL_* variables
    over the profile TEMPORAL_PROFILE names in TEMPORAL_CONFIG_FILE. The file is read only when one
    of those two is set, so a `temporal` CLI configuration of the user never redirects the embedded
    stack."""
    from temporalio.envconfig import ClientConfigProfile  # the SDK's native core: loaded only when needed

    env = temporal_environment(env)
    profile, config_file = env.get("TEMPORAL_PROFILE"), env.get("TEMPORAL_CONFIG_FILE")
    try:
        return ClientConfigProfile.load(profile, disable_file=not (profile or config_file), override_env_vars=env)
    except RuntimeError as exc:  # the SDK's ConfigError: a missing profile, a malformed file or variable
        where = f"TEMPORAL_CONFIG_FILE={config_file!r}" if config_file else "the default Temporal configuration file"
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InvalidInput(f"the Temporal client configuration (TEMPORAL_PROFILE={profile or 'default'!r}, {where}) "
                           f"cannot be used: {reason}: fix the file or the TEMPORAL_* variables") from None


def _pem_text(source: Path | str | bytes | None) -> tuple[str | None, str | None]:
    """(path, data) of one of a profile's PEM sources."""
    if source is None:
        return None, None
    if isinstance(source, Path):
        return str(source), None
    return None, source.decode() if isinstance(source, bytes) else source


def _temporal_values(env: Mapping[str, str]) -> dict[str, Any]:
    """The Temporal fields' values, keyed by variable, from the profile `env` configures (none
    without a TEMPORAL_* variable: the embedded dev server)."""
    if not any(name.startswith("TEMPORAL_") for name in env):
        return {}
    profile = load_temporal_profile(env)
    tls = profile.tls
    values: dict[str, Any] = {"TEMPORAL_ADDRESS": profile.address or None, "TEMPORAL_NAMESPACE": profile.namespace or None,
                              "TEMPORAL_API_KEY": profile.api_key or None,
                              "TEMPORAL_GRPC_META_*": dict(profile.grpc_meta) or None}
    if tls is not None:
        values["TEMPORAL_TLS"] = None if tls.disabled is None else not tls.disabled
        values["TEMPORAL_TLS_SERVER_NAME"] = tls.server_name or None
        for source, prefix in ((tls.client_cert, "TEMPORAL_TLS_CLIENT_CERT"), (tls.client_private_key, "TEMPORAL_TLS_CLIENT_KEY"),
                               (tls.server_root_ca_cert, "TEMPORAL_TLS_SERVER_CA_CERT")):
            values[f"{prefix}_PATH"], values[f"{prefix}_DATA"] = _pem_text(source)
    return {k: v for k, v in values.items() if v is not None}


class _EnvironmentSource(PydanticBaseSettingsSource):
    """The settings one environment mapping gives: each field's variable (empty counts as unset),
    the Temporal fields through temporalio.envconfig, and the platform's default home."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str]):
        super().__init__(settings_cls)
        self.env = {k: v for k, v in env.items() if v}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        value = self.env.get(variable(field))
        return value, variable(field), False

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, field in self.settings_cls.model_fields.items():
            value, key, _ = self.get_field_value(field, name)
            if value is not None and name not in TEMPORAL_FIELDS:
                values[key] = value
        values["AGENT_MEMORY_HOME"] = self.env.get("AGENT_MEMORY_HOME") or str(default_home(self.env))
        return values | _temporal_values(self.env)


def _example(field: FieldInfo, expect: _Expect) -> str:
    if expect.example is not None:
        return expect.example
    default = field.default
    return str(int(default)) if isinstance(default, float) and default.is_integer() else str(default)


def _one_line(exc: ValidationError) -> str:
    """The first problem of a ValidationError as one line: the variable, its value, and the fix."""
    error = exc.errors()[0]
    name = str(error["loc"][0]) if error["loc"] else "?"
    raw = error.get("input")
    fields = {variable(f): f for f in Settings.model_fields.values()}
    field = fields.get(name)
    expect = next((m for m in field.metadata if isinstance(m, _Expect)), None) if field else None
    if field is None or expect is None:
        return f"{name}={raw!r} is not valid ({error['msg']})"
    bound = error["type"] in ("greater_than", "greater_than_equal", "less_than", "less_than_equal")
    problem = expect.below if bound and expect.below else f"is not {expect.what}: {expect.fix}"
    return f"{name}={raw!r} {problem.format(name=name, example=_example(field, expect))}"


def _shown_default(field: FieldInfo) -> str:
    extra = _extra(field)
    if "shown_default" in extra:
        return str(extra["shown_default"])
    default = field.default
    if default is None:
        return "unset"
    if isinstance(default, bool):
        return "`1`" if default else "`0`"
    if isinstance(default, float) and default.is_integer():
        default = int(default)
    return f"`{default}`"


def reference_table() -> str:
    """The Markdown table of every setting: its variable, default and meaning."""
    rows = ["| variable | default | meaning |", "| --- | --- | --- |"]
    for field in Settings.model_fields.values():
        names = f"`{variable(field)}`"
        if alias := _extra(field).get("deprecated_alias"):
            names += f" (`{alias}` is read too, with a deprecation warning)"
        rows.append(f"| {names} | {_shown_default(field)} | {field.description} |")
    return "\n".join(rows) + "\n"


REFERENCE_START = "<!-- settings reference: generated by `python -m agent_memory.core.settings --write docs/operations.md` -->\n"
REFERENCE_END = "<!-- end of the settings reference -->\n"


def with_reference(document: str) -> str:
    """`document` with the text between the reference markers replaced by reference_table()."""
    return with_table(document, REFERENCE_START, REFERENCE_END, reference_table(), "settings")


def main(argv: list[str] | None = None) -> int:
    return reference_command(argv, module="agent_memory.core.settings", rewritten=with_reference,
                             table=reference_table)


if __name__ == "__main__":
    sys.exit(main())
