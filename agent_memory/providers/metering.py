"""Every provider call counted for the operator: calls by outcome, tokens, estimated cost and the
model's rate-limit answers (agent_memory.telemetry.metrics), by tenant, model and purpose.

`metered` wraps the call where it is made (the consolidation's steps, the embeddings of the
projector, a rebuild and a re-embedding, a query's embedding): a result recorded earlier and
reused makes no call and is not counted. The model label is the provider's configured model
(`model_label`), one of the deployment's few, never anything a caller sent.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from agent_memory.providers.errors import ProviderRetryableError
from agent_memory.telemetry.record import ModelPurpose, count_model_call

T = TypeVar("T")
RATE_LIMITED = 429


def model_label(provider: object) -> str:
    """The model a provider calls as the metrics name it: its `model_label` (a remote provider:
    `openai-compatible:<model>`, as its results name it), else its name (the offline ones)."""
    label = getattr(provider, "model_label", None)
    if isinstance(label, str) and label:
        return label
    name = getattr(provider, "name", None)
    return name if isinstance(name, str) and name else type(provider).__name__


async def metered(tenant_id: str | None, provider: object, purpose: ModelPurpose, call: Awaitable[T]) -> T:
    """`await call`, a call of `provider` for `tenant_id`, counted: its outcome, and on success the
    tokens and cost its result reports (a ProviderResult's fields)."""
    model = model_label(provider)
    try:
        result = await call
    except Exception as exc:
        count_model_call(tenant_id, model, purpose, "error", rate_limited=isinstance(exc, ProviderRetryableError)
                         and exc.status_code == RATE_LIMITED)
        raise
    count_model_call(tenant_id, model, purpose, "ok", input_tokens=_int(result, "input_tokens"),
                     output_tokens=_int(result, "output_tokens"), cost_usd=_float(result, "cost_usd"))
    return result


def _int(result: object, name: str) -> int:
    value = getattr(result, name, 0)
    return value if isinstance(value, int) else 0


def _float(result: object, name: str) -> float:
    value = getattr(result, name, 0.0)
    return float(value) if isinstance(value, (int, float)) else 0.0
