"""`agent-memory register-search-attributes` against the embedded Temporal: idempotent, and
refuses an attribute registered with another type."""

from __future__ import annotations

import uuid

import pytest
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.common import SearchAttributeKey

from agent_memory.api.search_attributes import register_search_attributes
from agent_memory.cli import build_cli
from agent_memory.core import contract
from agent_memory.core.errors import Conflict
from agent_memory.core.settings import ENV_VARS
from tests.cli.runner import invoke


async def _registered(services) -> dict[str, int]:
    response = await services.temporal.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=services.settings.temporal_namespace))
    return dict(response.custom_attributes)


async def test_registering_is_idempotent(services):
    namespace = services.settings.temporal_namespace
    # The dev server registered the registry at start: nothing to add.
    assert await register_search_attributes(services.temporal, namespace) == []
    extra = SearchAttributeKey.for_keyword(f"AgentMemoryTest{uuid.uuid4().hex[:8]}")
    keys = (*contract.SEARCH_ATTRIBUTES, extra)
    assert await register_search_attributes(services.temporal, namespace, keys) == [extra.name]
    assert await register_search_attributes(services.temporal, namespace, keys) == []
    assert (await _registered(services))[extra.name] == extra.indexed_value_type


async def test_an_attribute_of_another_type_is_an_error(services):
    with pytest.raises(Conflict, match="TenantId is INDEXED_VALUE_TYPE_KEYWORD, not Int"):
        await register_search_attributes(services.temporal, services.settings.temporal_namespace,
                                          [SearchAttributeKey.for_int("TenantId")])


async def test_the_command_needs_only_temporal(services, capsys):
    settings = services.settings.with_services(database_url=None, redis_url=None)
    def no_services(_settings):
        raise AssertionError("register-search-attributes opened the database and Redis")

    env: dict[str, str | None] = dict.fromkeys(ENV_VARS)
    env.update(AGENT_MEMORY_HOME=str(settings.home), TEMPORAL_ADDRESS=settings.temporal_address,
               TEMPORAL_NAMESPACE=settings.temporal_namespace)
    done = invoke(build_cli(open_services=no_services), ["register-search-attributes"], env)
    assert done.returncode == 0, done.stderr
    assert "TenantId (Keyword), SubjectId (Keyword), SessionId (Keyword) already registered" in done.stdout
