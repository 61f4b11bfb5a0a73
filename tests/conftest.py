"""One real embedded stack (Temporal dev server, PostgreSQL + pgvector, Redis) for the whole
test session, on free ports in a temporary directory; each test gets its own task queue.

Every test that needs a server carries the `stack` marker: those using the session's stack get it
here; those that start servers of their own are marked in their module. `pytest -m "not stack"`
runs the rest, which needs no server."""

from __future__ import annotations

import uuid
from contextlib import asynccontextmanager

import pytest

from agent_memory.api.client import MemoryClient
from agent_memory.core.settings import Settings
from agent_memory.providers.offline import offline_providers
from workers.embedded import Ports
from workers.runtime import open_stack
from workers.worker import build_worker


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "services" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.stack)
    # The longest files first (`minutes(n)`): each runs whole on one worker (`--dist loadfile`
    # hands files out in this order), and one started last would be the suite's tail alone.
    items.sort(key=lambda item: -(marker.args[0] if (marker := item.get_closest_marker("minutes")) else 0))


@pytest.fixture(scope="session")
async def services(tmp_path_factory):
    home = tmp_path_factory.mktemp("agent-memory-home")
    # Only the embedded services: ignore any URLs of the developer's environment.
    settings = Settings.from_env({"AGENT_MEMORY_HOME": str(home)})
    async with open_stack(settings, start=True, ports=Ports.free(), scratch=True) as services:
        # Reads' access counts are flushed when a test asks (services.access.flush()): a periodic
        # flush would move them between two looks at Redis (tests/recall/test_access.py runs one).
        services.access.flush_seconds = None
        yield services


@pytest.fixture
def task_queue() -> str:
    return f"test-{uuid.uuid4()}"


@pytest.fixture
def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def client(services, task_queue) -> MemoryClient:
    return MemoryClient(services, offline_providers().embedder, task_queue=task_queue)


@pytest.fixture
def running_worker(services, task_queue):
    """`async with running_worker():` runs a worker on this test's task queue."""

    @asynccontextmanager
    async def run(**kwargs):
        worker = build_worker(services, task_queue=task_queue, **kwargs)
        async with worker:
            yield worker

    return run
