"""Settings from environment variables. Every variable docker-compose sets is read here."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent_memory.errors import InvalidInput, ServiceUnavailable

# Variables this module reads; the compose test checks docker-compose.yml sets no others.
ENV_VARS = (
    "AGENT_MEMORY_HOME",
    "AGENT_MEMORY_TASK_QUEUE",
    "AGENT_MEMORY_MASTER_KEY",
    "AGENT_MEMORY_IDENTIFIER_KEY",
    "AGENT_MEMORY_PAYLOAD_KEY",
    "AGENT_MEMORY_ACCEPT_PLAINTEXT_PAYLOADS",
    "AGENT_MEMORY_KEY_DIR",
    "AGENT_MEMORY_UI_URL",
    "AGENT_MEMORY_UI_ORIGIN",
    "TEMPORAL_ADDRESS",
    "TEMPORAL_NAMESPACE",
    # Temporal's standard client variables (temporalio.envconfig, the temporal CLI), and the older
    # TEMPORAL_TLS_CERT / _KEY / _CA this module also reads.
    "TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
    "TEMPORAL_TLS_CERT", "TEMPORAL_TLS_KEY", "TEMPORAL_TLS_CA", "TEMPORAL_TLS_SERVER_NAME",
    "TEMPORAL_API_KEY",
    "DATABASE_URL",
    "DATABASE_ADMIN_URL",
    "REDIS_URL",
    "AGENT_MEMORY_PROVIDER", "OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENT_MEMORY_CHAT_MODEL",
    "AGENT_MEMORY_EMBEDDING_MODEL", "AGENT_MEMORY_EMBEDDER", "AGENT_MEMORY_PROVIDER_TIMEOUT",
    "AGENT_MEMORY_INPUT_PRICE_PER_1K", "AGENT_MEMORY_OUTPUT_PRICE_PER_1K",
    "AGENT_MEMORY_FORGET_GRACE_SECONDS", "AGENT_MEMORY_EMBEDDING_DIMENSIONS", "AGENT_MEMORY_API_KEY",
    "AGENT_MEMORY_FUTURE_TOLERANCE_SECONDS",
)


def _seconds(env: dict[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InvalidInput(f"{name}={raw!r} is not a number of seconds: set e.g. {name}={int(default)}") from None
    if value < 0:
        raise InvalidInput(f"{name}={raw!r} is negative: set a number of seconds >= 0, e.g. {name}={int(default)}")
    return value


# The mTLS file variables: (Temporal's standard name, the older name read as its alias).
TEMPORAL_TLS_FILE_VARS = {
    "temporal_tls_cert": ("TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CERT"),
    "temporal_tls_key": ("TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_KEY"),
    "temporal_tls_ca": ("TEMPORAL_TLS_SERVER_CA_CERT_PATH", "TEMPORAL_TLS_CA"),
}


def _tls_file(env: dict[str, str], field_name: str) -> str | None:
    standard, alias = TEMPORAL_TLS_FILE_VARS[field_name]
    value, legacy = env.get(standard) or None, env.get(alias) or None
    if value and legacy and value != legacy:
        raise InvalidInput(f"{standard}={value!r} and {alias}={legacy!r} name different files: set only {standard}")
    return value or legacy


def _count(env: dict[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if not raw:
        return default
    if not raw.strip().isdigit() or int(raw) < 1:
        raise InvalidInput(f"{name}={raw!r} is not a positive whole number: set e.g. {name}={default}")
    return int(raw)


def _rate(env: dict[str, str], name: str) -> float | None:
    raw = env.get(name)
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise InvalidInput(f"{name}={raw!r} is not a positive number of activities per second: set e.g. {name}=5, "
                           "or leave it unset for no limit")
    return value


def default_home(env: dict[str, str] | None = None) -> Path:
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


def _dimensions(env: dict[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if not raw:
        return default
    if not raw.strip().isdigit() or int(raw) < 1:
        raise InvalidInput(f"{name}={raw!r} is not a positive whole number: set the embedding model's width, "
                           f"e.g. {name}={default}")
    return int(raw)


@dataclass(frozen=True)
class Settings:
    home: Path
    task_queue: str = "agent-memory"
    temporal_address: str | None = None  # None: the embedded dev server
    temporal_namespace: str = "default"
    # A hosted or compose Temporal: mTLS client certificate and key (PEM file paths, both or
    # neither), the CA and server name to verify it by, and/or an API key (sent over TLS).
    temporal_tls_cert: str | None = None
    temporal_tls_key: str | None = None
    temporal_tls_ca: str | None = None
    temporal_tls_server_name: str | None = None
    temporal_api_key: str | None = field(default=None, repr=False)
    ui_url: str | None = None
    # Browser origins (comma-separated) of the Temporal UI allowed to call the codec endpoint;
    # None: the origin of ui_url.
    ui_origin: str | None = None
    database_url: str | None = field(default=None, repr=False)  # the application role (RLS applies)
    database_admin_url: str | None = field(default=None, repr=False)  # owner role, used for migrations only
    redis_url: str | None = field(default=None, repr=False)
    # Key-encryption keys: AGENT_MEMORY_MASTER_KEY (`base64` or `id:base64,…`, with
    # AGENT_MEMORY_IDENTIFIER_KEY) or a private key directory (default home/keys; rotatable).
    master_key: str | None = field(default=None, repr=False)
    identifier_key: str | None = field(default=None, repr=False)
    payload_key: str | None = field(default=None, repr=False)  # encrypts Temporal payloads (environment keys)
    # Upgrade only: let workers decode runs started before payloads were encrypted.
    accept_plaintext_payloads: bool = False
    key_dir: Path | None = None
    provider: str = "offline"  # offline | openai-compatible
    openai_base_url: str | None = None  # None: https://api.openai.com/v1
    openai_api_key: str | None = field(default=None, repr=False)
    chat_model: str | None = None
    embedding_model: str | None = None
    embedder: str | None = None  # hashing | e5-small | remote (agent_memory.providers.embedders)
    embedding_dimensions: int = 384  # the remote embedding model's stored width
    provider_timeout_seconds: float = 60.0
    input_price_per_1k: float = 0.0  # USD, for the cost estimate
    output_price_per_1k: float = 0.0
    api_key: str | None = field(default=None, repr=False)  # the MCP server's API key (agent-memory mcp)
    # How long a forgotten memory can be restored before the sweeper removes it for good.
    forget_grace_seconds: float = 24 * 3600.0
    # How far ahead of this clock a message's created_at may be (clock skew between writers);
    # a later time is refused at ingest: it would close today's facts at a future date.
    future_tolerance_seconds: float = 300.0
    # The HTTP API's edge (agent_memory.http_api): failed authentications allowed per client
    # address and per key id before 429 (refilled at that many per window), and how long a
    # connection may take to send a request's headers, or stall between body chunks.
    auth_failure_burst: int = 10
    auth_failure_window_seconds: float = 60.0
    http_header_timeout_seconds: float = 10.0
    http_body_timeout_seconds: float = 30.0
    # A session's idle timer (workflows/session_idle.py), as the idle-timer sweep re-arms it.
    idle_timeout_seconds: float = 600.0
    # The model task queue (contract.model_task_queue): run its worker in this process, how many
    # calls at once, and the queue's rate limit in activities per second (None: none).
    model_worker: bool = True
    model_concurrency: int = 100
    model_activities_per_second: float | None = None

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        home = Path(env.get("AGENT_MEMORY_HOME") or default_home(env)).expanduser().resolve()
        return cls(
            home=home,
            task_queue=env.get("AGENT_MEMORY_TASK_QUEUE") or "agent-memory",
            temporal_address=env.get("TEMPORAL_ADDRESS") or None,
            temporal_namespace=env.get("TEMPORAL_NAMESPACE") or "default",
            temporal_tls_cert=_tls_file(env, "temporal_tls_cert"),
            temporal_tls_key=_tls_file(env, "temporal_tls_key"),
            temporal_tls_ca=_tls_file(env, "temporal_tls_ca"),
            temporal_tls_server_name=env.get("TEMPORAL_TLS_SERVER_NAME") or None,
            temporal_api_key=env.get("TEMPORAL_API_KEY") or None,
            ui_url=env.get("AGENT_MEMORY_UI_URL") or None,
            ui_origin=env.get("AGENT_MEMORY_UI_ORIGIN") or None,
            database_url=env.get("DATABASE_URL") or None,
            database_admin_url=env.get("DATABASE_ADMIN_URL") or None,
            redis_url=env.get("REDIS_URL") or None,
            master_key=env.get("AGENT_MEMORY_MASTER_KEY") or None,
            identifier_key=env.get("AGENT_MEMORY_IDENTIFIER_KEY") or None,
            payload_key=env.get("AGENT_MEMORY_PAYLOAD_KEY") or None,
            accept_plaintext_payloads=(env.get("AGENT_MEMORY_ACCEPT_PLAINTEXT_PAYLOADS") or "").lower() in ("1", "true",
                                                                                                          "yes"),
            key_dir=Path(env["AGENT_MEMORY_KEY_DIR"]).expanduser().resolve() if env.get("AGENT_MEMORY_KEY_DIR") else None,
            provider=env.get("AGENT_MEMORY_PROVIDER") or "offline",
            openai_base_url=env.get("OPENAI_BASE_URL") or None,
            openai_api_key=env.get("OPENAI_API_KEY") or None,
            chat_model=env.get("AGENT_MEMORY_CHAT_MODEL") or None,
            embedding_model=env.get("AGENT_MEMORY_EMBEDDING_MODEL") or None,
            embedder=env.get("AGENT_MEMORY_EMBEDDER") or None,
            embedding_dimensions=_dimensions(env, "AGENT_MEMORY_EMBEDDING_DIMENSIONS", 384),
            provider_timeout_seconds=float(env.get("AGENT_MEMORY_PROVIDER_TIMEOUT") or 60),
            input_price_per_1k=float(env.get("AGENT_MEMORY_INPUT_PRICE_PER_1K") or 0),
            output_price_per_1k=float(env.get("AGENT_MEMORY_OUTPUT_PRICE_PER_1K") or 0),
            api_key=env.get("AGENT_MEMORY_API_KEY") or None,
            forget_grace_seconds=_seconds(env, "AGENT_MEMORY_FORGET_GRACE_SECONDS", 24 * 3600.0),
            future_tolerance_seconds=_seconds(env, "AGENT_MEMORY_FUTURE_TOLERANCE_SECONDS", 300.0),
            auth_failure_burst=_count(env, "AGENT_MEMORY_AUTH_FAILURE_BURST", 10),
            auth_failure_window_seconds=_seconds(env, "AGENT_MEMORY_AUTH_FAILURE_WINDOW_SECONDS", 60.0),
            http_header_timeout_seconds=_seconds(env, "AGENT_MEMORY_HTTP_HEADER_TIMEOUT_SECONDS", 10.0),
            http_body_timeout_seconds=_seconds(env, "AGENT_MEMORY_HTTP_BODY_TIMEOUT_SECONDS", 30.0),
            idle_timeout_seconds=_seconds(env, "AGENT_MEMORY_IDLE_TIMEOUT_SECONDS", 600.0),
            model_worker=(env.get("AGENT_MEMORY_MODEL_WORKER") or "1").lower() not in ("0", "false", "no", "off"),
            model_concurrency=_count(env, "AGENT_MEMORY_MODEL_CONCURRENCY", 100),
            model_activities_per_second=_rate(env, "AGENT_MEMORY_MODEL_ACTIVITIES_PER_SECOND"),
        )

    def with_services(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    def with_running_stack(self) -> Settings:
        """These settings, with the service URLs they do not configure taken from the stack
        `agent-memory up` runs under the home (agent_memory.stack_connection); unchanged when
        every URL is configured. Raises ServiceUnavailable, naming the home, when one is missing."""
        if self.temporal_address and self.database_url and self.redis_url:
            return self
        from agent_memory.stack_connection import read_connection

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
