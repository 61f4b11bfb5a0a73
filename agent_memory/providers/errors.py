"""Provider failures, classified once so the activity layer can map them onto Temporal.

- ProviderRetryableError: the same request may succeed later (HTTP 408, 409, 429, 5xx, timeouts,
  connection failures). `retry_after` carries the server's Retry-After hint in seconds, if any.
- ProviderPermanentError: retrying the same request cannot help (other 4xx: bad request, bad key,
  no permission, unknown model, unprocessable).
- ProviderOutputInvalid: the call succeeded but its output is not what the task's schema asks for.
  `raw_text` keeps the model's output for debugging; it is deliberately left out of str(exc),
  because exception messages end up in Temporal histories and the operations table, and the
  output can repeat what the (encrypted, erasable) transcript says.

The client is built with max_retries=0: Temporal's retry policy owns every retry.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Mapping
from typing import Any

from agent_memory.core.errors import AgentMemoryError

RETRYABLE_STATUS = frozenset({408, 409, 429})
_MAX_DETAIL = 300


class ProviderError(AgentMemoryError):
    """Base class of every classified provider failure."""


class ProviderRetryableError(ProviderError):
    def __init__(self, message: str, retry_after: float | None = None, *, status_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after
        self.status_code = status_code

    def __reduce__(self):  # picklable with its keyword-only state
        return (_rebuild_retryable, (self.message, self.retry_after, self.status_code))


class ProviderPermanentError(ProviderError):
    def __init__(self, message: str, *, status_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.status_code = status_code

    def __reduce__(self):
        return (_rebuild_permanent, (self.message, self.status_code))


class ProviderOutputInvalid(ProviderError):
    def __init__(self, raw_text: str, errors: list[str] | str):
        self.raw_text = raw_text
        self.errors = [errors] if isinstance(errors, str) else list(errors)
        shown = "; ".join(self.errors[:5]) + (f"; ... {len(self.errors) - 5} more" if len(self.errors) > 5 else "")
        super().__init__(f"provider output invalid: {shown} ({len(raw_text)} characters of output)")

    def __reduce__(self):
        return (ProviderOutputInvalid, (self.raw_text, self.errors))


def _rebuild_retryable(message: str, retry_after: float | None, status_code: int | None) -> ProviderRetryableError:
    return ProviderRetryableError(message, retry_after, status_code=status_code)


def _rebuild_permanent(message: str, status_code: int | None) -> ProviderPermanentError:
    return ProviderPermanentError(message, status_code=status_code)


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, else `Retry-After` (delta-seconds or an HTTP-date)."""
    if not headers:
        return None
    get = headers.get
    raw_ms = get("retry-after-ms") or get("Retry-After-Ms")
    if raw_ms:
        try:
            ms = float(raw_ms)
            if math.isfinite(ms) and ms >= 0:
                return ms / 1000.0
        except ValueError:
            pass
    raw = get("retry-after") or get("Retry-After")
    if not raw:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    delta = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, delta)


def _detail(exc: Any) -> str:
    """The error type/code/message of an OpenAI-shaped error body, trimmed."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            parts = [str(err[k]) for k in ("type", "code", "message") if err.get(k)]
            if parts:
                return ": ".join(parts)[:_MAX_DETAIL]
        elif isinstance(err, str):
            return err[:_MAX_DETAIL]
    return str(getattr(exc, "message", "") or exc)[:_MAX_DETAIL]


def classify_openai_error(exc: BaseException) -> BaseException:
    """The ProviderError for an exception of the `openai` package; other exceptions unchanged."""
    import openai

    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, openai.APITimeoutError):  # subclass of APIConnectionError: test it first
        return ProviderRetryableError("provider request timed out", None)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        return ProviderRetryableError(f"provider connection failed: {type(cause).__name__ if cause else exc}", None)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = f"provider returned HTTP {status}: {_detail(exc)}"
        if status in RETRYABLE_STATUS or status >= 500:
            return ProviderRetryableError(message, parse_retry_after(exc.response.headers), status_code=status)
        if 400 <= status < 500:
            return ProviderPermanentError(message, status_code=status)
        return ProviderRetryableError(message, None, status_code=status)  # unexpected: let the policy decide
    if isinstance(exc, openai.APIResponseValidationError):
        return ProviderOutputInvalid(str(getattr(exc, "body", "") or ""), [f"response shape: {exc.message}"])
    return exc
