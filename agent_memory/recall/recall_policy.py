"""The recall policy: how a prompt's memory is chosen — time decay, importance, recall window and
the token budgets of its tiers. One per tenant (table `recall_policies`); a tenant without a row
gets the shipped default, `DEFAULT_POLICY`.

Episodic items (episode summaries and notes) are scored

    relevance × exp(−Δt / τ) × (importance_base + importance_slope · importance)

    × (1 + access_weight · activation)

with Δt from the item's time to the as-of time of the read and importance 1–10 from
consolidation; items older than `window_days` before the as-of time, or with a relevance below
`min_relevance`, are not candidates. The access term rewards what was recalled often and
recently (`access_activation`): in [0, 1), 0 for a memory never recalled, so the factor is 1 for
it (today's score), at most 1 + access_weight for any; `access_weight=0` turns it off. Facts are
the profile: current facts above `profile_min_confidence`, not decayed, in their own tier.

Budgets (tokens): profile ≤ `profile_tokens`, episodic ≤ `episodic_tokens` (at most
`max_episodes` summaries of ≤ `episode_tokens` each, plus notes), both together ≤
`total_tokens`; what the profile leaves unused flows to the episodic tier. A read with another
total (`context --budget N`) scales every tier by N / total_tokens. The live session's recent
turns have their own budget (`recent_tokens`); older turns beyond it roll into a running summary,
the last `recent_turns` turns are kept verbatim.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Literal

import psycopg
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent_memory.core.errors import InvalidInput

PresetName = Literal["designed", "long-horizon"]
# The factor a memory marked by the daily review (agent_memory/lifecycle/review.py) weighs in recall
# and the context while its mark is in force: a marked fact's profile score, a duplicate note's
# episodic score. It stays readable; it is ranked (and packed) after what nothing doubts.
STALE_WEIGHT = 0.5


class RecallPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tau_days: float = Field(default=21.0, gt=0, description="time constant of the episodic decay, in days")
    window_days: float | None = Field(default=180.0, gt=0,
                                      description="episodic items older than this are not candidates (None: no window)")
    min_relevance: float = Field(default=0.0, ge=0, le=1,
                                 description="episodic items matching the query less than this (0–1) are not candidates")
    importance_base: float = Field(default=0.6, ge=0)
    importance_slope: float = Field(default=0.04, ge=0)
    profile_min_confidence: float = Field(default=0.6, ge=0, le=1)
    profile_tokens: int = Field(default=300, ge=0)
    episodic_tokens: int = Field(default=800, ge=0)
    max_episodes: int = Field(default=5, ge=0)
    episode_tokens: int = Field(default=160, ge=16)
    total_tokens: int = Field(default=1200, ge=1)
    recent_tokens: int = Field(default=1000, ge=0)
    recent_turns: int = Field(default=6, ge=1, description="the live session's last turns, always verbatim")
    access_weight: float = Field(default=0.2, ge=0, le=1,
                                 description="the largest boost of an episodic item recalled often and recently: "
                                             "score × (1 + access_weight · activation); 0: off")
    access_decay: float = Field(default=0.5, gt=0, lt=1,
                                description="ACT-R's decay d of each past recall's trace, t^−d with t in days")

    @model_validator(mode="after")
    def _tiers_fit(self) -> RecallPolicy:
        if self.profile_tokens > self.total_tokens:
            raise InvalidInput(f"profile_tokens ({self.profile_tokens}) must not exceed total_tokens "
                               f"({self.total_tokens})")
        return self

    def importance_factor(self, importance: int) -> float:
        return self.importance_base + self.importance_slope * importance

    def access_factor(self, count: int, first_at: datetime | None, last_at: datetime | None,
                      at: datetime) -> float:
        """1 + access_weight · access_activation: 1 when off or never recalled."""
        if self.access_weight == 0 or count <= 0 or first_at is None or last_at is None:
            return 1.0
        return 1.0 + self.access_weight * access_activation(count, first_at, last_at, at, self.access_decay)

    def scaled(self, total: int) -> RecallPolicy:
        """The same policy with every memory tier scaled to a total of `total` tokens."""
        if total == self.total_tokens:
            return self
        ratio = total / self.total_tokens
        return self.model_copy(update={
            "total_tokens": total, "profile_tokens": int(self.profile_tokens * ratio),
            "episodic_tokens": int(self.episodic_tokens * ratio),
            "episode_tokens": max(16, int(self.episode_tokens * ratio))})


# A recall's trace is counted at least this old (days): one just made weighs as one an hour old,
# so the strength stays finite.
MIN_ACCESS_AGE_DAYS = 1 / 24


def access_activation(count: int, first_at: datetime, last_at: datetime, at: datetime, decay: float) -> float:
    """How strongly past recalls speak for a memory at `at`, in [0, 1).

    ACT-R's base-level learning sums a trace per past recall, S = Σ t_j^−d (t_j the age of the
    j-th recall in days, activation B = ln S). Only the count n and the first and last times are
    kept, so S is Petrov's (2006) approximation: the last recall exactly, the other n − 1 spread
    evenly over the lifetime L since the first one,

        S ≈ t_n^−d + (n − 1) · (L^(1−d) − t_n^(1−d)) / ((1 − d) · (L − t_n)),

    and mapped to 1 − exp(−S) = 1 − exp(−e^B): 0 with no recall, toward 1 for many recent
    ones. One recall an hour ago gives 0.99, a day ago 0.63, a month ago 0.17; five spread over the
    last month, the latest a day ago, 0.89. Recalls recorded after `at` (an as-of read of the
    past) are not known apart from the others: when the first one is after `at` the memory counts
    as never recalled, otherwise every time is taken as at most `at`."""
    if count <= 0 or first_at > at:
        return 0.0
    t_last = max((at - min(last_at, at)).total_seconds() / 86400, MIN_ACCESS_AGE_DAYS)
    lifetime = max((at - first_at).total_seconds() / 86400, t_last)
    strength = t_last ** -decay
    if count > 1:
        if lifetime - t_last < 1e-9:  # every recall at one time
            strength += (count - 1) * t_last ** -decay
        else:
            strength += ((count - 1) * (lifetime ** (1 - decay) - t_last ** (1 - decay))
                         / ((1 - decay) * (lifetime - t_last)))
    return 1.0 - math.exp(-strength)


PRESETS: dict[PresetName, RecallPolicy] = {
    # The design as specified: three-week decay, a half-year window.
    "designed": RecallPolicy(),
    # Conversations that refer back many months (LoCoMo): no window, a decay of years that only
    # breaks ties between equally relevant items.
    # The episodic tier takes the 100 tokens the designed tiers leave unused in the 1,200 total.
    "long-horizon": RecallPolicy(tau_days=3650.0, window_days=None, episodic_tokens=900),
}
# The shipped default: chosen on locomo-dev beside the designed policy (docs/recall.md).
DEFAULT_PRESET: PresetName = "long-horizon"
DEFAULT_POLICY = PRESETS[DEFAULT_PRESET]


def policy_fields() -> list[str]:
    return list(RecallPolicy.model_fields)


async def read_policy(conn: psycopg.AsyncConnection, tenant_id: str) -> RecallPolicy:
    """The tenant's policy inside an open tenant transaction (row-level security scopes it)."""
    cur = await conn.execute("SELECT policy FROM recall_policies WHERE tenant_id = %s", (tenant_id,))
    row = await cur.fetchone()
    return DEFAULT_POLICY if row is None else RecallPolicy.model_validate(row[0])


async def write_policy(conn: psycopg.AsyncConnection, tenant_id: str, policy: RecallPolicy) -> None:
    await conn.execute(
        "INSERT INTO recall_policies (tenant_id, policy) VALUES (%s, %s::jsonb) "
        "ON CONFLICT (tenant_id) DO UPDATE SET policy = excluded.policy, updated_at = now()",
        (tenant_id, json.dumps(policy.model_dump(mode="json"))))


async def reset_policy(conn: psycopg.AsyncConnection, tenant_id: str) -> None:
    await conn.execute("DELETE FROM recall_policies WHERE tenant_id = %s", (tenant_id,))
