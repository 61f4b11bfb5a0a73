"""A tenant's daily model-token budget, on the real stack with a remote model (a local server that
speaks the OpenAI API and reports its tokens): a tenant whose consolidations spent the budget has
them parked, not failed, visibly (`runs`, the CLI, the console); raising the budget releases them
at once; a tenant without a budget is not held; bad budgets are refused naming the field."""

from __future__ import annotations

import asyncio
import time

import pytest
from temporalio.client import WorkflowExecutionStatus

from agent_memory.core import contract
from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import ConsolidationProgress
from agent_memory.memory.token_budget import check_daily_tokens
from agent_memory.security.operator_keys import create_operator_key
from tests.api.test_console import console, sign_in
from tests.cli.runner import run_cli
from tests.providers.openai_server import FakeOpenAIServer
from tests.sessions import session
from tests.workflows.test_consolidation_openai import bundle_for, route

# The extraction reports 120 + 40 tokens, importance and the summary 11 + 7 each (the route's).
EXTRACTION_TOKENS = 160
# Four messages: a shorter session gets no episode and no summary call (the substance gate); S1's has both.
S1 = session("s-b1", "2024-03-01T09:00:00Z", "Hi, my name is Lin Wei.", "I live in Hangzhou.",
             ("assistant", "Which district of the city do you live in?"), "Can you suggest a tea house near the lake?")
S2 = session("s-b2", "2024-03-02T09:00:00Z", "Hi, my name is Lin Wei.", "I live in Hangzhou now.")


async def _until(predicate, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} within {timeout} s"
        await asyncio.sleep(0.2)


async def test_a_spent_budget_parks_the_consolidation_until_the_budget_is_raised(client, services, tenant,
                                                                                running_worker):
    other = f"{tenant}-free"  # no budget of its own, and no default: unlimited
    state = await client.admin.set_token_budget(tenant, 100)
    assert (state.daily_tokens, state.source, state.used_tokens, state.exhausted) == (100, "tenant", 0, False)
    with FakeOpenAIServer() as server:
        server.responder = route
        bundle = bundle_for(server)
        async with running_worker(providers=bundle):
            for who in (tenant, other):
                await client.append_messages(who, "lin", S1)
            parked = await client.end_session(tenant, "lin", S1.session_id)
            # The extraction ran (the budget had tokens left) and spent more than the budget: the
            # run parks before importance and the summary, and says so.
            await _until(lambda: client.admin.runs(tenant, "lin", parked=True), "the run listed as parked")
            [listed] = await client.admin.runs(tenant, "lin", parked=True)
            assert (listed.workflow_id, listed.status, listed.state) == (
                parked.id, "RUNNING", contract.PARKED_TOKEN_BUDGET)
            progress = await parked.query(contract.PROGRESS_QUERY, result_type=ConsolidationProgress)
            assert progress.step == contract.PARKED_TOKEN_BUDGET and progress.facts_extracted == 1
            assert (await parked.describe()).status == WorkflowExecutionStatus.RUNNING
            spent = await client.admin.get_token_budget(tenant)
            assert spent.used_tokens == EXTRACTION_TOKENS and spent.exhausted

            # Another tenant, on the same worker and model, is not held.
            free = await client.consolidation_result(await client.end_session(other, "lin", S1.session_id))
            assert free.facts_written == 1 and free.episode_written
            assert not await client.admin.runs(other, parked=True)
            assert (await client.admin.get_token_budget(other)).daily_tokens is None

            # What an operator sees: the CLI's runs, the budget, the console's tenant page.
            cli = run_cli(services, "runs", "--tenant", tenant, "--parked")
            assert cli.returncode == 0 and f"[{contract.PARKED_TOKEN_BUDGET}]" in cli.stdout and parked.id in cli.stdout
            shown = run_cli(services, "token-budget", "show", "--tenant", tenant)
            assert "daily_tokens = 100 (set for the tenant)" in shown.stdout and "exhausted" in shown.stdout
            operator = (await create_operator_key(services.pool, "budget-test")).token
            async with console(client) as http:
                await sign_in(http, operator)
                page = (await http.get(f"/console/t/{tenant}")).text
                subject_page = (await http.get(f"/console/t/{tenant}/s/lin")).text
            assert "Consolidations parked on the token budget" in page and parked.id in page
            assert f"{EXTRACTION_TOKENS} of 100: spent" in page
            assert contract.PARKED_TOKEN_BUDGET in subject_page

            # Raising the budget releases it at once (a signal), well before any recheck timer.
            started = time.monotonic()
            raised = run_cli(services, "token-budget", "set", "--tenant", tenant, "--daily-tokens", "1000000")
            assert raised.returncode == 0, raised.stderr
            result = await asyncio.wait_for(client.consolidation_result(parked), timeout=60)
            assert time.monotonic() - started < 60
            assert result.facts_written == 1 and result.episode_written and result.refused_reason is None
            # The run list is Temporal's visibility store, which catches up with the close shortly after.
            async def closed_run():
                return [r for r in await client.admin.runs(tenant, "lin")
                        if r.workflow_id == parked.id and r.status == "COMPLETED"]

            [closed] = await _until(closed_run, "the run listed as completed")
            assert closed.state is None
            assert not await client.admin.runs(tenant, parked=True)
        await bundle.aclose()
    assert (await client.admin.get_token_budget(tenant)).used_tokens > EXTRACTION_TOKENS  # importance, summary, embedding


async def test_budget_left_is_not_parked_and_reset_goes_back_to_the_default(client, services, tenant,
                                                                           running_worker):
    await client.admin.set_token_budget(tenant, 1_000_000)
    with FakeOpenAIServer() as server:
        server.responder = route
        bundle = bundle_for(server)
        async with running_worker(providers=bundle):
            await client.append_messages(tenant, "lin", S2)
            handle = await client.end_session(tenant, "lin", S2.session_id)
            result = await asyncio.wait_for(client.consolidation_result(handle), timeout=60)
        await bundle.aclose()
    assert result.facts_written == 1
    history = await handle.fetch_history()
    assert not any(e.HasField("timer_started_event_attributes") for e in history.events)  # never parked
    state = await client.admin.set_token_budget(tenant, None, reset=True)
    assert (state.daily_tokens, state.source) == (None, "default") and state.used_tokens > EXTRACTION_TOKENS


@pytest.mark.parametrize(("value", "problem"), [
    (-5, "at least 1"), (0, "at least 1"), ("-5", "at least 1"), ("abc", "whole number"), (1.5, "whole number"),
    (True, "whole number"), (10**16, "at most"),
])
def test_a_bad_budget_is_refused_naming_the_field(value, problem):
    with pytest.raises(InvalidInput, match=f"daily_tokens.*{problem}"):
        check_daily_tokens(value)


def test_unlimited_and_numbers_are_budgets():
    assert check_daily_tokens("unlimited") is None and check_daily_tokens(None) is None
    assert check_daily_tokens("2_000_000") == check_daily_tokens(" 2,000,000 ") == check_daily_tokens(2_000_000)


async def test_the_command_line_refuses_a_negative_budget_and_keeps_the_old_one(client, services, tenant):
    await client.admin.set_token_budget(tenant, 500)
    for value in ("-5", "0", "lots"):
        refused = run_cli(services, "token-budget", "set", "--tenant", tenant, f"--daily-tokens={value}")
        assert refused.returncode == 2 and "daily_tokens" in refused.stderr, (value, refused.stderr)
    assert (await client.admin.get_token_budget(tenant)).daily_tokens == 500
    with pytest.raises(InvalidInput, match="daily_tokens"):
        await client.admin.set_token_budget(tenant, -1)
    unlimited = run_cli(services, "token-budget", "set", "--tenant", tenant, "--daily-tokens", "unlimited", "--json")
    assert unlimited.returncode == 0 and '"daily_tokens": null' in unlimited.stdout
