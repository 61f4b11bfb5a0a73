"""Usage and cost of a provider call: the tokens a call spent, what they cost at the configured
per-1k-token prices, and the sum over a task sent in chunks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, TypeVar

from agent_memory.core.models import ProviderResult

R = TypeVar("R", bound=ProviderResult)


class TokenPrices(NamedTuple):
    input_per_1k: float = 0.0
    output_per_1k: float = 0.0


def estimate_cost(usage: Any, prices: TokenPrices | tuple[float, float]) -> float:
    """USD for a call's usage: an openai usage object (prompt/completion tokens), a ProviderResult
    (input/output tokens), a mapping with either naming, or None (no usage reported: 0)."""
    if usage is None:
        return 0.0

    def tokens(*names: str) -> int:
        for name in names:
            value = usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)
            if isinstance(value, (int, float)) and value > 0:
                return int(value)
        return 0

    input_per_1k, output_per_1k = prices
    cost = (tokens("input_tokens", "prompt_tokens") * input_per_1k
            + tokens("output_tokens", "completion_tokens") * output_per_1k) / 1000.0
    return round(cost, 10)


def with_cost(result_type: type[R], cost: float, **fields: Any) -> R:
    # A result type without `cost_usd` carries none (the call's cost is logged with its usage).
    if "cost_usd" in result_type.model_fields:
        fields["cost_usd"] = cost
    return result_type(**fields)


class Usage(NamedTuple):
    provider: str
    request_id: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: float


def merged_usage(usages: list[Usage]) -> Usage:
    """The usage of a task sent in chunks: tokens and cost summed, the first call's request id."""
    return Usage(usages[0].provider, next((u.request_id for u in usages if u.request_id), None),
                 sum(u.input_tokens for u in usages), sum(u.output_tokens for u in usages),
                 round(sum(u.cost_usd for u in usages), 10))
