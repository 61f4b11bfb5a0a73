"""Registration of the search attributes every workflow carries (`agent-memory
register-search-attributes`, run once per deployment by the production compose file; the embedded
dev server registers them at start). The registry itself is agent_memory.core.contract's; its keys are
re-exported here for importers from before the contract module."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode

from agent_memory.api.services import connect_temporal
from agent_memory.core.contract import SEARCH_ATTRIBUTES, SESSION_ID, SUBJECT_ID, TENANT_ID, search_attribute_type_name
from agent_memory.core.errors import Conflict, ServiceUnavailable
from agent_memory.core.settings import Settings

__all__ = ["SEARCH_ATTRIBUTES", "SESSION_ID", "SUBJECT_ID", "TENANT_ID", "register_search_attributes",
           "register_search_attributes_command"]

# Right after the server starts its namespace may not exist yet (compose starts everything at once).
NAMESPACE_WAIT_SECONDS = 120.0
_WAITING = (RPCStatusCode.NOT_FOUND, RPCStatusCode.UNAVAILABLE)


async def _registered(client: Client, namespace: str) -> dict[str, int]:
    response = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
    return dict(response.custom_attributes)


async def register_search_attributes(client: Client, namespace: str,
                                     keys: Sequence[SearchAttributeKey[Any]] = SEARCH_ATTRIBUTES, *,
                                     wait_seconds: float = NAMESPACE_WAIT_SECONDS) -> list[str]:
    """Register the attributes the namespace lacks; returns their names (empty: all were there).
    Idempotent: an attribute already registered with the same type counts as done, one already
    registered with another type is an error (it cannot be changed in place)."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            existing = await _registered(client, namespace)
            break
        except RPCError as exc:  # the namespace is still being created, or the server still starting
            if exc.status not in _WAITING or time.monotonic() >= deadline:
                raise
            await asyncio.sleep(2)
    wrong = [f"{key.name} is {IndexedValueType.Name(IndexedValueType.ValueType(existing[key.name]))}, not "
             f"{search_attribute_type_name(key)}" for key in keys
             if key.name in existing and existing[key.name] != key.indexed_value_type]
    if wrong:
        raise Conflict(f"search attributes of namespace {namespace!r} have another type: {'; '.join(wrong)}")
    missing = {key.name: IndexedValueType.ValueType(key.indexed_value_type) for key in keys
               if key.name not in existing}
    if not missing:
        return []
    try:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=missing))
    except RPCError as exc:
        if exc.status != RPCStatusCode.ALREADY_EXISTS:
            raise
        # Registered meanwhile (another process): fine if with our types.
        existing = await _registered(client, namespace)
        if any(existing.get(name) != kind for name, kind in missing.items()):
            raise
    return sorted(missing)


async def register_search_attributes_command(settings: Settings) -> int:
    """`agent-memory register-search-attributes`: on the configured Temporal (TEMPORAL_ADDRESS,
    TLS and API key as every client uses them), in TEMPORAL_NAMESPACE."""
    if not settings.temporal_address:
        raise ServiceUnavailable("set TEMPORAL_ADDRESS (the embedded dev server of `agent-memory up` registers the search "
                                 "attributes itself)")
    client = await connect_temporal(settings, pydantic_data_converter)
    added = await register_search_attributes(client, settings.temporal_namespace)
    every = ", ".join(f"{key.name} ({search_attribute_type_name(key)})" for key in SEARCH_ATTRIBUTES)
    print(f"namespace {settings.temporal_namespace}: registered {', '.join(added)}; search attributes {every} present"
          if added else f"namespace {settings.temporal_namespace}: search attributes {every} already registered",
          flush=True)
    return 0
