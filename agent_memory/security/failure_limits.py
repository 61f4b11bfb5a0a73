"""Failed authentications, limited without ever refusing a valid credential.

A request's credential is verified first, and only a failure is counted: a valid key is served
whatever its client address or its key id has been through. A failure counts under the client's
address (every failure: no key, a malformed, unknown or revoked key, a wrong secret) and under
the key id the token names (any well-formed id, whether it exists or not, so a limit reached
for an id tells nothing of whether it exists). A failure while one of its names is full is
answered 429 with `Retry-After` and not counted; any other is counted and answered 401. One
client guessing keys therefore gets ten 401s, then one every 6 s (the defaults), while an agent
with a valid key on the same address, and the real holder of the key id guessed at, are served.

Each name is a leaky bucket: a counted failure adds one, `burst` leak out per `window` seconds.
`SharedFailureLimiter` keeps the buckets in Redis, under the deployment's task queue, so every
API process of a deployment counts the same failures. When Redis does not answer within
`REDIS_TIMEOUT_SECONDS`, the process counts in its own memory (`FailureLimiter`) and asks Redis
again after `REDIS_RETRY_SECONDS`; a valid key touches neither.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from redis.exceptions import RedisError

from agent_memory.core.models import IDENTIFIER_PATTERN
from agent_memory.security.api_keys import OPERATOR_PREFIX, PREFIX, TooManyFailuresError

# How long a failure waits for Redis before it is counted in memory, and how long the process
# then counts in memory before asking Redis again.
REDIS_TIMEOUT_SECONDS = 1.0
REDIS_RETRY_SECONDS = 5.0

log = logging.getLogger(__name__)


def limited_names(address: str | None, token: str | None) -> dict[str, str]:
    """The names a failed authentication counts under ({name: what it is}): its client address
    and, when the token is well-formed, its key id (tenant and key id, or an operator key's id;
    never the secret)."""
    names = {f"address {address}": f"from {address}"} if address else {}
    parts = (token or "").split(":")
    if len(parts) == 4 and parts[0] == PREFIX and IDENTIFIER_PATTERN.match(parts[1]) and len(parts[2]) <= 64:
        names[f"key {parts[1]}:{parts[2]}"] = f"for key id {parts[2]}"
    elif len(parts) == 3 and parts[0] == OPERATOR_PREFIX and len(parts[1]) <= 64:
        names[f"operator key {parts[1]}"] = f"for operator key id {parts[1]}"
    return names


def _refusal(what: str, level: float, burst: int, window: float) -> TooManyFailuresError | None:
    over = level - burst + 1
    if over <= 0:
        return None
    return TooManyFailuresError(what, max(1, math.ceil(over * window / burst)))


class FailureLimiter:
    """The buckets in this process's memory: the fallback of `SharedFailureLimiter`, bounded to
    `max_names` names (the least recently failing dropped first; a dropped bucket is an empty one)."""

    def __init__(self, burst: int = 10, window: float = 60.0, *, max_names: int = 10_000,
                 clock: Callable[[], float] = time.monotonic):
        self.burst, self.window, self.max_names, self.clock = burst, window, max_names, clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # name -> (level, at)

    def _level(self, name: str, now: float) -> float:
        level, at = self._buckets.get(name, (0.0, now))
        return max(0.0, level - (now - at) * self.burst / self.window)

    def charge(self, names: dict[str, str]) -> None:
        """Count one failure under each of `names`, or, when one of them is full, raise
        TooManyFailuresError for it and count nothing."""
        now = self.clock()
        levels = {name: self._level(name, now) for name in names}
        for name, what in names.items():
            if (refusal := _refusal(what, levels[name], self.burst, self.window)) is not None:
                raise refusal
        for name, level in levels.items():
            self._buckets[name] = (level + 1, now)
            self._buckets.move_to_end(name)
        while len(self._buckets) > self.max_names:
            self._buckets.popitem(last=False)

    async def count(self, names: dict[str, str]) -> None:
        self.charge(names)

    def __len__(self) -> int:
        return len(self._buckets)


# KEYS: a bucket per name; ARGV: now (seconds), burst, window (seconds). Answers {0, ""} when the
# failure was counted under every name, else {the full name's position, its level} (counted
# nowhere). Levels travel as strings: Redis turns a Lua number into an integer.
_CHARGE = """
local now, burst, window = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local levels = {}
for i, key in ipairs(KEYS) do
  local held = redis.call('HMGET', key, 'level', 'at')
  local level, at = tonumber(held[1]) or 0, tonumber(held[2]) or now
  level = math.max(0, level - math.max(0, now - at) * burst / window)
  if level - burst + 1 > 0 then
    return {i, tostring(level)}
  end
  levels[i] = level
end
for i, key in ipairs(KEYS) do
  redis.call('HSET', key, 'level', tostring(levels[i] + 1), 'at', tostring(now))
  redis.call('PEXPIRE', key, math.ceil((levels[i] + 1) * window * 1000 / burst) + 1000)
end
return {0, ''}
"""


class SharedFailureLimiter:
    """The buckets in Redis, shared by the API processes whose `namespace` (the deployment's task
    queue) is the same. A bucket's Redis key is a digest of the namespace and the name, so no
    address or key id is written to Redis; it expires once it has leaked empty."""

    def __init__(self, redis: Any, namespace: str, burst: int = 10, window: float = 60.0, *,
                 clock: Callable[[], float] = time.time, fallback: FailureLimiter | None = None):
        self.redis, self.namespace, self.burst, self.window, self.clock = redis, namespace, burst, window, clock
        self.fallback = fallback if fallback is not None else FailureLimiter(burst, window)
        self._script = redis.register_script(_CHARGE)
        self._redis_again_at = 0.0

    def key(self, name: str) -> str:
        return "auth-failures:" + hashlib.sha256(f"{self.namespace}\x1f{name}".encode()).hexdigest()[:32]

    async def count(self, names: dict[str, str]) -> None:
        """Count one failure under each of `names`, or raise TooManyFailuresError for the first
        full one and count nothing."""
        if not names:
            return
        now = time.monotonic()
        if now >= self._redis_again_at:
            try:
                async with asyncio.timeout(REDIS_TIMEOUT_SECONDS):
                    full, level = await self._script(keys=[self.key(name) for name in names],
                                                     args=[repr(self.clock()), self.burst, repr(self.window)])
            except (RedisError, OSError, TimeoutError) as exc:
                log.warning("failed authentications are counted in this process for %.0f s: Redis did not "
                            "answer (%s)", REDIS_RETRY_SECONDS, exc)
                self._redis_again_at = now + REDIS_RETRY_SECONDS
            else:
                if int(full):
                    what = list(names.values())[int(full) - 1]
                    refusal = _refusal(what, float(level), self.burst, self.window)
                    raise refusal if refusal is not None else TooManyFailuresError(what, 1)
                return
        self.fallback.charge(names)
