"""The keys a route needs: a tenant's API key of a scope (`ReadKey`, `WriteKey`, `EraseKey`; scopes
nest) or an operator key (`OperatorAccess`: the codec endpoint and the console). A key is verified
first; only a failure meets the failure limiter (agent_memory/security/failure_limits.py), the
app's (`app.state.auth_failures`), shared with `/mcp`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, Header, Request, Security
from fastapi.security import HTTPAuthorizationCredentials

from agent_memory.api.client import MemoryClient
from agent_memory.api.http.openapi import bearer_key
from agent_memory.core.errors import Forbidden
from agent_memory.security.api_keys import ApiKey, ApiKeyError, KeyScope, TooManyFailuresError, verify_key
from agent_memory.security.failure_limits import FailureLimiter, SharedFailureLimiter, limited_names
from agent_memory.security.operator_keys import OperatorKey, verify_operator_key
from agent_memory.store.db import enter_key_limits
from agent_memory.telemetry.metrics import AUTH_FAILURES
from agent_memory.telemetry.record import count

Limiter = FailureLimiter | SharedFailureLimiter


async def checked_key(limiter: Limiter, pool: Any, address: str | None, token: str | None,
                      needed: KeyScope) -> ApiKey:
    """The key of a bearer token. A valid key is served whatever the limiter holds; a failure (no
    key, a malformed, unknown or revoked one, a wrong secret) is counted under the client address
    and the key id, or refused with 429 when one of them is full (TooManyFailuresError)."""
    try:
        if token is None:
            raise ApiKeyError("no API key: send `Authorization: Bearer amk:...` (agent-memory keys create)", "missing")
        key = await verify_key(pool, token, needed)
    except ApiKeyError as exc:
        await _charged(limiter, address, token, exc)
        raise
    except Forbidden:
        count(AUTH_FAILURES, reason="scope")
        raise
    # The rest of the request reads and writes within the key's limits (an agent, an app), if any.
    enter_key_limits(key.agent_id, key.app_id)
    return key


async def checked_operator_key(limiter: Limiter, pool: Any, address: str | None, token: str | None) -> OperatorKey:
    """An operator key, verified and limited as tenant keys are."""
    try:
        if token is None:
            raise ApiKeyError("no operator key: send `Authorization: Bearer amo:...` "
                              "(agent-memory keys create-operator)", "missing")
        return await verify_operator_key(pool, token)
    except ApiKeyError as exc:
        await _charged(limiter, address, token, exc)
        raise


async def _charged(limiter: Limiter, address: str | None, token: str | None, exc: ApiKeyError) -> None:
    """A refused credential charged to the limiter and counted (agent_memory_auth_failures_total):
    by its reason, or as `limited` when the limiter refuses the caller (429) instead."""
    try:
        await limiter.count(limited_names(address, token))
    except TooManyFailuresError:
        count(AUTH_FAILURES, reason="limited")
        raise
    count(AUTH_FAILURES, reason=exc.reason)


def _key(needed: KeyScope) -> Callable[..., Awaitable[ApiKey]]:
    # The key through the documented bearer scheme (`bearer_key`): the OpenAPI document declares
    # it and marks every operation that takes a key with it.
    async def dependency(request: Request,
                         credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer_key)]) -> ApiKey:
        token = credentials.credentials.strip() if credentials else None
        client: MemoryClient = request.app.state.client
        return await checked_key(request.app.state.auth_failures, client.services.pool,
                                 request.client.host if request.client else None, token, needed)
    return dependency


async def _operator_key(request: Request, authorization: Annotated[str | None, Header()] = None) -> OperatorKey:
    token = (authorization.removeprefix("Bearer ").strip()
             if authorization and authorization.startswith("Bearer ") else None)
    client: MemoryClient = request.app.state.client
    return await checked_operator_key(request.app.state.auth_failures, client.services.pool,
                                      request.client.host if request.client else None, token)


ReadKey = Annotated[ApiKey, Depends(_key("read"))]
WriteKey = Annotated[ApiKey, Depends(_key("write"))]
EraseKey = Annotated[ApiKey, Depends(_key("erase"))]
# The operator-facing surfaces (codec endpoint, console, metrics): an operator key, not a tenant's.
OperatorAccess = Annotated[OperatorKey, Depends(_operator_key)]
