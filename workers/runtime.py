"""Bring up what a command needs: the embedded stack (or configured services), migrations,
connections, and optionally an in-process worker."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

from agent_memory.services import Services, migrate
from agent_memory.settings import Settings
from workers.embedded import EmbeddedStack, Ports


class StackNotRunningError(RuntimeError):
    pass


@asynccontextmanager
async def open_stack(settings: Settings, *, start: bool, ports: Ports | None = None) -> AsyncIterator[Services]:
    """Services on the configured URLs, else on the embedded stack under settings.home.

    With start=False only an already running stack is used. Servers this call started are
    stopped when it ends; servers it reused are left running."""
    stack = EmbeddedStack(settings.home, ports or Ports())
    try:
        resolved = await asyncio.to_thread(stack.start if start else stack.running, settings)
        if resolved is None:
            raise StackNotRunningError(
                "no agent-memory stack is running here: start one with `agent-memory up` in another terminal, "
                "or set TEMPORAL_ADDRESS, DATABASE_URL and REDIS_URL")
        await migrate(resolved, app_password=stack.app_password)
        services = await Services.open(resolved)
        try:
            yield services
        finally:
            await services.close()
    finally:
        await asyncio.to_thread(stack.stop)


@asynccontextmanager
async def scratch_stack(settings: Settings, purpose: str, *, embedded_only: bool = False) -> AsyncIterator[Services]:
    """A stack for a one-off job (eval, probes, chaos): free ports, so it never collides with a
    running `agent-memory up`, under a temporary home removed afterwards unless
    AGENT_MEMORY_HOME is set. embedded_only ignores configured service URLs."""
    temp_home = None if os.environ.get("AGENT_MEMORY_HOME") else Path(tempfile.mkdtemp(prefix=f"agent-memory-{purpose}-"))
    home = temp_home or settings.home
    own = Settings.from_env({"AGENT_MEMORY_HOME": str(home)}) if embedded_only else settings.with_services(home=home)
    try:
        async with open_stack(own, start=True, ports=Ports.free()) as services:
            yield services
    finally:
        if temp_home is not None:
            shutil.rmtree(temp_home, ignore_errors=True)
