"""The two Python clients: MemoryClient holds the agent's calls only, AdminClient the operator's,
on the same services; an operator call reached through MemoryClient still works for one release,
with a DeprecationWarning naming its new place. Server-free: the services are never connected."""

import re
import warnings
from pathlib import Path

import pytest
from psycopg_pool import AsyncConnectionPool
from redis.asyncio import Redis
from temporalio.client import Client

from agent_memory.api.admin_client import AdminClient
from agent_memory.api.client import MOVED_TO_ADMIN, MemoryClient
from agent_memory.api.services import Services
from agent_memory.core.settings import Settings
from agent_memory.providers.offline import offline_providers
from agent_memory.security.crypto import key_provider_for
from agent_memory.security.keyring import KeyRing

ROOT = Path(__file__).resolve().parents[2]
PUBLIC_MAX = 20
# What an agent does through the client (README's Python section and the MCP server's tools).
AGENT_CALLS = {"append_messages", "end_session", "consolidation_result", "context", "build_prompt", "recall",
               "facts", "entities", "relations", "write_fact", "forget", "restore", "claim_tool_call",
               "record_tool_call", "tool_call"}


def public_names(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


@pytest.fixture
async def services(tmp_path):
    """Real Services whose connections are never opened: no call here reaches a server."""
    settings = Settings.from_env({"AGENT_MEMORY_HOME": str(tmp_path)})
    pool = AsyncConnectionPool("postgresql://127.0.0.1:1/none", open=False)
    redis = Redis(host="127.0.0.1", port=1)
    temporal = await Client.connect("127.0.0.1:1", lazy=True)
    keyring = KeyRing(key_provider_for(None, None, tmp_path))
    yield Services(settings=settings, pool=pool, redis=redis, temporal=temporal, keyring=keyring)
    await redis.aclose()


@pytest.fixture
def client(services) -> MemoryClient:
    return MemoryClient(services, offline_providers().embedder, task_queue="client-test")


def test_memory_client_has_the_agents_calls_only():
    names = public_names(MemoryClient)
    assert len(names) <= PUBLIC_MAX, sorted(names)
    assert names >= AGENT_CALLS
    assert not names & set(MOVED_TO_ADMIN), sorted(names & set(MOVED_TO_ADMIN))


def test_every_moved_call_is_the_admin_clients():
    admin = public_names(AdminClient)
    assert set(MOVED_TO_ADMIN.values()) <= admin, sorted(set(MOVED_TO_ADMIN.values()) - admin)
    assert not AGENT_CALLS & admin


def test_each_tenant_policy_is_read_and_set_by_its_own_name():
    for policy in ("recall_policy", "retention_policy", "provider_policy", "write_policy", "token_budget"):
        assert {f"get_{policy}", f"set_{policy}"} <= public_names(AdminClient), policy
        assert MOVED_TO_ADMIN[policy] == f"get_{policy}"


def test_admin_shares_the_clients_services_and_queue(client, services):
    admin = client.admin
    assert admin is client.admin  # one per client
    assert admin.services is services and admin.task_queue == "client-test" and admin.embedder is client.embedder
    alone = AdminClient(services)
    assert alone.services is services and alone.task_queue == services.settings.task_queue


def test_a_moved_call_through_memory_client_warns_and_reaches_the_admin_client(client):
    with pytest.warns(DeprecationWarning, match=r"MemoryClient\.admin\.erase\b") as caught:
        erase = client.erase
    assert erase == client.admin.erase
    assert caught[0].filename == __file__  # the warning points at the caller's line
    with pytest.warns(DeprecationWarning, match=r"MemoryClient\.admin\.get_recall_policy\b"):
        assert client.recall_policy == client.admin.get_recall_policy
    with pytest.warns(DeprecationWarning, match=r"MemoryClient\.admin\.forget_grace\b"):
        assert client.forget_grace == client.admin.forget_grace


def test_an_unknown_name_is_an_attribute_error_without_a_warning(client):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="no_such_call"):
            _ = client.no_such_call
        assert client.recall  # an agent call: no warning


def test_no_caller_in_the_project_takes_the_deprecated_path():
    """Every operator call in the project is made on the admin client (mypy checks the same for
    the packages: the forwarding is invisible to it)."""
    moved = "|".join(sorted(MOVED_TO_ADMIN, key=len, reverse=True))
    deprecated = re.compile(rf"\b\w*client\.({moved})\b")
    found = []
    for package in ("agent_memory", "activities", "workflows", "workers", "tools", "tests"):
        for path in (ROOT / package).rglob("*.py"):
            if path.name in ("client.py", "admin_client.py", "test_client.py"):
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if deprecated.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
