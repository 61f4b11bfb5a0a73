"""Counting at the places where things happen: best effort, never in the operation's way.

Every site counts through these functions. A metric that cannot be counted (a wrong label, a
negative amount: a bug) is logged and the operation goes on; the tests of each site read the
registry, so such a bug fails them. Label values come from small fixed sets: a tenant id passes
through `tenant_label`, a model through the provider's configured name, an attempt through
`attempt_bucket`; never a subject, a session, memory text or an error message.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Literal

from prometheus_client import Counter, Histogram

from agent_memory.telemetry.metrics import (
    MODEL_CALLS,
    MODEL_COST,
    MODEL_TOKENS,
    RATE_LIMIT_WAITS,
    tenant_label,
)

log = logging.getLogger(__name__)

ModelPurpose = Literal["extract", "importance", "summarize", "embed", "query"]
ModelOutcome = Literal["ok", "error"]


def count(counter: Counter, amount: float = 1, **labels: str) -> None:
    """`counter` (with `labels`, if it has any) raised by `amount`."""
    try:
        (counter.labels(**labels) if labels else counter).inc(amount)
    except Exception:  # a bug of the site: logged, never the operation's failure
        log.exception("metric %s not counted", getattr(counter, "_name", counter))


def observe(histogram: Histogram, value: float, **labels: str) -> None:
    """One observation of `value` in `histogram` (with `labels`, if it has any)."""
    try:
        (histogram.labels(**labels) if labels else histogram).observe(value)
    except Exception:
        log.exception("metric %s not observed", getattr(histogram, "_name", histogram))


@contextlib.contextmanager
def timed(histogram: Histogram, **labels: str) -> Iterator[None]:
    """Observe how long the body took, when it succeeds (a failed call is not served)."""
    started = time.perf_counter()
    yield
    observe(histogram, time.perf_counter() - started, **labels)


def count_for_tenant(counter: Counter, tenant_id: str | None, amount: float = 1, **labels: str) -> None:
    """`count` under the tenant's bounded label (`tenant_label`)."""
    count(counter, amount, tenant=tenant_label(tenant_id), **labels)


def attempt_bucket(attempt: int) -> str:
    """An attempt's number as a label value: "1", "2", "3", or "4+" for any later one."""
    return "4+" if attempt > 3 else str(max(attempt, 1))


def count_model_call(tenant_id: str | None, model: str, purpose: ModelPurpose, outcome: ModelOutcome, *,
                     input_tokens: int = 0, output_tokens: int = 0, cost_usd: float = 0.0,
                     rate_limited: bool = False) -> None:
    """One provider call: its outcome, the tokens it reported in each direction and its
    estimated cost; `rate_limited` when the model answered 429 (the call is retried after it)."""
    tenant = tenant_label(tenant_id)
    count(MODEL_CALLS, tenant=tenant, model=model, purpose=purpose, outcome=outcome)
    for direction, tokens in (("input", input_tokens), ("output", output_tokens)):
        if tokens > 0:
            count(MODEL_TOKENS, tokens, tenant=tenant, model=model, direction=direction)
    if cost_usd > 0:
        count(MODEL_COST, cost_usd, tenant=tenant, model=model)
    if rate_limited:
        count(RATE_LIMIT_WAITS, tenant=tenant)
