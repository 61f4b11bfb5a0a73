"""Bring up what a command needs: the embedded stack (or configured services), migrations,
connections, and optionally an in-process worker."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from agent_memory.api.services import Services, check_schema, migrate
from agent_memory.core.errors import ServiceUnavailable
from agent_memory.core.settings import Settings, default_home
from workers.embedded import EmbeddedStack, Ports


class StackNotRunningError(ServiceUnavailable):
    pass


@asynccontextmanager
async def open_stack(settings: Settings, *, start: bool, ports: Ports | None = None,
                     stack: EmbeddedStack | None = None,
                     ui_codec_endpoint: str | None = None, scratch: bool = False) -> AsyncIterator[Services]:
    """Services on the configured URLs, else on the embedded stack under settings.home.

    With start=False only an already running stack is used and nothing is migrated: a schema
    behind the code is refused (run `agent-memory migrate`). With start=True (`up`, demo, tests,
    scratch stacks) pending migrations are applied first. Servers this call started are stopped
    when it ends; servers it reused are left running (unless `stack` adopts them). A Temporal dev
    server it starts shows payloads through `ui_codec_endpoint` in its UI. A `scratch` stack is thrown
    away with its home: it starts from the cached migrated template and stops without draining."""
    stack = stack or EmbeddedStack(settings.home, ports or Ports(), ui_codec_endpoint=ui_codec_endpoint,
                                   scratch=scratch)
    try:
        resolved = await asyncio.to_thread(stack.start if start else stack.running, settings)
        if resolved is None:
            raise StackNotRunningError(
                f"no agent-memory stack is running under {settings.home} (AGENT_MEMORY_HOME, default "
                f"{default_home()}): start one with `agent-memory up` in another terminal, point AGENT_MEMORY_HOME "
                "at the home `up` printed, or set TEMPORAL_ADDRESS, DATABASE_URL and REDIS_URL")
        if start:
            await migrate(resolved, app_password=stack.app_password)
        await check_schema(resolved)
        services = await Services.open(resolved)
        try:
            yield services
        finally:
            with contextlib.suppress(TimeoutError):  # bounded: a stop must not hang on a server that is down
                await asyncio.wait_for(services.close(), timeout=10)
    finally:
        await asyncio.to_thread(stack.stop)


async def migrate_database(settings: Settings) -> list[str]:
    """`agent-memory migrate`: apply pending migrations as the owner role (DATABASE_ADMIN_URL),
    or on the embedded PostgreSQL under settings.home (reused if running, else started and
    stopped again), whose app role also gets its password. Returns the migrations applied."""
    if settings.database_url or settings.database_admin_url:
        if not settings.database_admin_url:
            raise ServiceUnavailable("DATABASE_ADMIN_URL is not set: migrations run as the owner role; set it to the "
                                     "owner's URL for `agent-memory migrate`")
        applied = await migrate(settings)
        if settings.database_url:
            await check_schema(settings)  # the app role logs in and sees the schema current
        return applied
    stack = EmbeddedStack(settings.home, Ports())
    try:
        resolved = await asyncio.to_thread(stack.start, settings, only=("postgres",))
        applied = await migrate(resolved, app_password=stack.app_password)
        await check_schema(resolved)
        return applied
    finally:
        await asyncio.to_thread(stack.stop)


def scratch_settings(settings: Settings, home: Path, *, embedded_only: bool = False) -> Settings:
    """Settings of a private stack under `home`: never the configured services (a one-off job
    must not write into a live store). The providers stay as configured (an eval measures the
    deployment's embedder) unless `embedded_only`, which keeps nothing but the home."""
    if embedded_only:
        return Settings.from_env({"AGENT_MEMORY_HOME": str(home)})
    temporal = {name: field.get_default(call_default_factory=True) for name, field in Settings.model_fields.items()
                if name.startswith("temporal_")}
    return settings.with_services(home=home, **temporal, ui_url=None, database_url=None, database_admin_url=None,
                                  redis_url=None, key_dir=None, master_key=None, identifier_key=None, payload_key=None)


@asynccontextmanager
async def scratch_stack(settings: Settings, purpose: str, *, embedded_only: bool = False) -> AsyncIterator[Services]:
    """A private stack for a one-off job (eval, probes, benchmarks, chaos): its own temporary
    home (removed afterwards), free ports, its own embedded servers and keys, so it never
    touches a running `agent-memory up` or a configured deployment, whatever AGENT_MEMORY_HOME
    or the service URLs say."""
    temp_home = Path(tempfile.mkdtemp(prefix=f"agent-memory-{purpose}-"))
    try:
        async with open_stack(scratch_settings(settings, temp_home, embedded_only=embedded_only), start=True,
                              ports=Ports.free(), scratch=True) as services:
            yield services
    finally:
        shutil.rmtree(temp_home, ignore_errors=True)
