"""The day's model tokens of a tenant, counted as model results are recorded
(agent_memory/memory/operations.py) and read with its budget (agent_memory/memory/token_budget.py)."""

from __future__ import annotations

from types import SimpleNamespace

from agent_memory.core.models import ImportanceResult
from agent_memory.core.operation_keys import ProviderStepKey
from agent_memory.memory.operations import record_succeeded, record_succeeded_many
from agent_memory.memory.token_budget import read_token_budget, write_token_budget
from agent_memory.store.db import tenant_transaction

PROVIDER = SimpleNamespace(name="openai-compatible-importance", version="1")


def _key(session: str) -> ProviderStepKey:
    return ProviderStepKey.for_messages("importance", "lin", session, PROVIDER, "d" * 24)


def _scored(input_tokens: int, output_tokens: int) -> ImportanceResult:
    return ImportanceResult(importance=5, rationale="r", provider="openai-compatible:m",
                            input_tokens=input_tokens, output_tokens=output_tokens)


async def test_a_recorded_result_counts_its_tokens_once_and_none_counts_nothing(services, tenant):
    async with tenant_transaction(services.pool, tenant) as conn:
        await record_succeeded(conn, tenant_id=tenant, subject_id="lin", key=_key("s1"), req_hash="h1",
                               result=_scored(120, 40))
    async with tenant_transaction(services.pool, tenant) as conn:
        # Recorded again (a retry that found the call's result recorded meanwhile): not counted again.
        await record_succeeded(conn, tenant_id=tenant, subject_id="lin", key=_key("s1"), req_hash="h1",
                               result=_scored(120, 40))
        await record_succeeded_many(conn, tenant_id=tenant, subject_id="lin", records=[
            (_key("s2"), "h2", _scored(0, 0)), (_key("s3"), "h3", _scored(5, 5))])
    async with tenant_transaction(services.pool, tenant) as conn:
        state = await read_token_budget(conn, tenant, None)
        assert (state.daily_tokens, state.source, state.used_tokens, state.exhausted) == (None, "default", 170, False)
        assert (await read_token_budget(conn, tenant, 170)).exhausted  # the default applies, and is spent
        await write_token_budget(conn, tenant, 171)
        assert (await read_token_budget(conn, tenant, 170)).model_dump(include={"daily_tokens", "source"}) == {
            "daily_tokens": 171, "source": "tenant"}
        await write_token_budget(conn, tenant, None)  # unlimited, whatever the default
        assert (await read_token_budget(conn, tenant, 170)).daily_tokens is None
        await write_token_budget(conn, tenant, None, reset=True)
        assert (await read_token_budget(conn, tenant, 170)).source == "default"
    async with tenant_transaction(services.pool, f"{tenant}-other") as conn:
        assert (await read_token_budget(conn, f"{tenant}-other", None)).used_tokens == 0  # per tenant
