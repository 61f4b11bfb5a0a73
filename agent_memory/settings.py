"""Settings from environment variables. Every variable docker-compose sets is read here."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

# Variables this module reads; the compose test checks docker-compose.yml sets no others.
ENV_VARS = (
    "AGENT_MEMORY_HOME",
    "AGENT_MEMORY_TASK_QUEUE",
    "AGENT_MEMORY_MASTER_KEY",
    "AGENT_MEMORY_UI_URL",
    "TEMPORAL_ADDRESS",
    "TEMPORAL_NAMESPACE",
    "DATABASE_URL",
    "DATABASE_ADMIN_URL",
    "REDIS_URL",
)


@dataclass(frozen=True)
class Settings:
    home: Path
    task_queue: str = "agent-memory"
    temporal_address: str | None = None  # None: the embedded dev server
    temporal_namespace: str = "default"
    ui_url: str | None = None
    database_url: str | None = None  # the application role (RLS applies)
    database_admin_url: str | None = None  # owner role, used for migrations only
    redis_url: str | None = None
    master_key: str | None = None  # base64 32 bytes wrapping the per-subject keys
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "Settings":
        env = dict(os.environ if env is None else env)
        home = Path(env.get("AGENT_MEMORY_HOME") or "./.agent-memory").expanduser().resolve()
        return cls(
            home=home,
            task_queue=env.get("AGENT_MEMORY_TASK_QUEUE") or "agent-memory",
            temporal_address=env.get("TEMPORAL_ADDRESS") or None,
            temporal_namespace=env.get("TEMPORAL_NAMESPACE") or "default",
            ui_url=env.get("AGENT_MEMORY_UI_URL") or None,
            database_url=env.get("DATABASE_URL") or None,
            database_admin_url=env.get("DATABASE_ADMIN_URL") or None,
            redis_url=env.get("REDIS_URL") or None,
            master_key=env.get("AGENT_MEMORY_MASTER_KEY") or None,
        )

    def with_services(self, **changes) -> "Settings":
        return replace(self, **changes)

    def workflow_url(self, workflow_id: str) -> str:
        from urllib.parse import quote

        base = (self.ui_url or "http://127.0.0.1:8233").rstrip("/")
        return f"{base}/namespaces/{self.temporal_namespace}/workflows/{quote(workflow_id, safe='')}"
