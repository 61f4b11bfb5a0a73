"""The recall policy: how a prompt's memory is chosen — time decay, importance, recall window and
the token budgets of its tiers. One per tenant (table `recall_policies`); a tenant without a row
gets the shipped default, `DEFAULT_POLICY`.

Episodic items (episode summaries and notes) are scored

    relevance × exp(−Δt / τ) × (importance_base + importance_slope · importance)

with Δt from the item's time to the as-of time of the read and importance 1–10 from
consolidation; items older than `window_days` before the as-of time, or with a relevance below
`min_relevance`, are not candidates. Facts are
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

    @model_validator(mode="after")
    def _tiers_fit(self) -> RecallPolicy:
        if self.profile_tokens > self.total_tokens:
            raise InvalidInput(f"profile_tokens ({self.profile_tokens}) must not exceed total_tokens "
                               f"({self.total_tokens})")
        return self

    def importance_factor(self, importance: int) -> float:
        return self.importance_base + self.importance_slope * importance

    def scaled(self, total: int) -> RecallPolicy:
        """The same policy with every memory tier scaled to a total of `total` tokens."""
        if total == self.total_tokens:
            return self
        ratio = total / self.total_tokens
        return self.model_copy(update={
            "total_tokens": total, "profile_tokens": int(self.profile_tokens * ratio),
            "episodic_tokens": int(self.episodic_tokens * ratio),
            "episode_tokens": max(16, int(self.episode_tokens * ratio))})


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
