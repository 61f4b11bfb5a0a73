"""Which dependency an error is the outage of: PostgreSQL, Redis or Temporal. Every surface
(HTTP, MCP, the console) answers an outage as "unavailable, retry", naming the dependency,
and any other failure as an error. Each such answer is counted (`count_unavailable`)."""

from __future__ import annotations

import psycopg
from psycopg_pool import PoolTimeout
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from temporalio.service import RPCError, RPCStatusCode

from agent_memory.telemetry.metrics import UNAVAILABLE_RESPONSES
from agent_memory.telemetry.record import count

# Temporal answers these while its server cannot be reached (or is shutting down).
TEMPORAL_DOWN = (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED)


def dependency_down(exc: BaseException) -> str | None:
    """The dependency ("postgres", "redis", "temporal") whose outage `exc` is, or caused; None
    for any other error."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, PoolTimeout) or (isinstance(current, psycopg.OperationalError)
                                                 and _connection_lost(current.sqlstate)):
            return "postgres"
        if isinstance(current, (RedisConnectionError, RedisTimeoutError)):
            return "redis"
        if isinstance(current, RPCError) and current.status in TEMPORAL_DOWN:
            return "temporal"
        current = current.__cause__ or current.__context__
    return None


# The dependency label of an answer to a ServiceUnavailable: a service named only in its message
# (a key provider, a schema behind the code, a server not set up).
SERVICE = "service"


def count_unavailable(dependency: str) -> None:
    """One "unavailable, retry" answer (HTTP 503, the MCP tool's and the console's equivalent),
    by the dependency that is down: postgres, redis, temporal, or `SERVICE`."""
    count(UNAVAILABLE_RESPONSES, dependency=dependency)


def _connection_lost(sqlstate: str | None) -> bool:
    """A psycopg error of a server that cannot be reached (no SQLSTATE: the client's own), a
    connection exception (08), a server shutting down or starting (57P01-57P03), or a deadline
    the server enforced (57014 statement_timeout, 55P03 lock_timeout: it is too slow or blocked
    to answer in time); not one a live server answered about the statement itself (a
    serialization failure, a constraint)."""
    return sqlstate is None or sqlstate.startswith("08") or sqlstate in ("57P01", "57P02", "57P03", "57014", "55P03")
