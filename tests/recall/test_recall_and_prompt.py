"""The read path as designed, on the real stack: episodic scoring (relevance × decay × importance),
the recall window, the profile tier, tier budgets, the tenant's recall policy, and prompt assembly
with the live session's turns from working memory (or the messages table when Redis lost them)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import pytest

from agent_memory.memory.evidence import working_memory_key
from agent_memory.providers.base import estimate_tokens
from agent_memory.recall.context import (
    MESSAGE_OVERHEAD,
    ContextItem,
    episodic_score,
    normalise,
    pack_tiers,
    truncate_tokens,
)
from agent_memory.recall.recall_policy import DEFAULT_POLICY, PRESETS, RecallPolicy
from tests.cli.runner import run_cli
from tests.sessions import session

DESIGNED = PRESETS["designed"]
LONG = PRESETS["long-horizon"]


def at(day: str) -> datetime:
    return datetime.fromisoformat(day).replace(hour=12, tzinfo=UTC)


async def consolidate(client, tenant: str, subject: str, *sessions) -> None:
    for s in sessions:
        await client.append_messages(tenant, subject, s)
        await client.consolidation_result(await client.end_session(tenant, subject, s.session_id))
    await client.admin.wait_for_projection(tenant, subject)


def sessions_of(items: list[ContextItem]) -> list[str]:
    """The session of each episodic item, in rank order (message ids are '{session}:{n}')."""
    return [i.cited_message_ids[0].split(":")[0] for i in items if i.tier == "episodic"]


# --- the formula and the packing, as functions ------------------------------------------------------


def test_episodic_score_is_relevance_times_decay_times_importance():
    now = at("2024-06-01")
    score = episodic_score(0.8, now - timedelta(days=21), 5, now, DESIGNED)
    assert score == pytest.approx(0.8 * math.exp(-1) * (0.6 + 0.04 * 5))
    # Recency: equal relevance and importance, the newer item wins.
    assert episodic_score(1.0, now - timedelta(days=2), 5, now, DESIGNED) > episodic_score(
        1.0, now - timedelta(days=30), 5, now, DESIGNED)
    # Importance outweighs a few days of age, not months.
    assert episodic_score(1.0, now - timedelta(days=5), 10, now, DESIGNED) > episodic_score(
        1.0, now - timedelta(days=1), 2, now, DESIGNED)
    assert episodic_score(1.0, now - timedelta(days=60), 10, now, DESIGNED) < episodic_score(
        1.0, now - timedelta(days=1), 2, now, DESIGNED)
    # An item dated after the as-of time is not boosted above 'now'.
    assert episodic_score(1.0, now + timedelta(days=3), 5, now, DESIGNED) == episodic_score(1.0, now, 5, now, DESIGNED)


def test_relevance_is_normalised_so_first_in_both_lists_is_one():
    scores = normalise({("a", "episode", 1): 1.3 / 61, ("b", "observation", 1): 1.0 / 62})
    assert scores[("a", "episode", 1)] == pytest.approx(1.0)
    assert 0 < scores[("b", "observation", 1)] < 1


def _item(n: int, tier: str, kind: str, tokens: int, score: float = 1.0) -> ContextItem:
    text = "x" * (tokens * 4)
    return ContextItem(kind=kind, memory_id=f"m{n}", text=text, content=text, cited_message_ids=[f"s:{n}"],
                       score=score, tier=tier)  # type: ignore[arg-type]


def test_tiers_keep_their_budgets_and_unused_profile_budget_flows_to_episodic():
    policy = DESIGNED
    profile = [_item(i, "profile", "fact", 50) for i in range(10)]  # 10 x ~55 tokens: the profile overflows
    episodic = [_item(100 + i, "episodic", "observation", 90, score=1 - i / 100) for i in range(20)]
    chosen = pack_tiers(profile + episodic, policy)
    used = {tier: sum(estimate_tokens(i.line) + 1 for i in chosen if i.tier == tier) for tier in ("profile", "episodic")}
    assert used["profile"] <= policy.profile_tokens and used["episodic"] <= policy.episodic_tokens
    assert used["profile"] + used["episodic"] <= policy.total_tokens
    # A small profile leaves its budget to the episodic tier, within the total.
    chosen = pack_tiers(profile[:1] + episodic, policy)
    episodic_used = sum(estimate_tokens(i.line) + 1 for i in chosen if i.tier == "episodic")
    assert episodic_used > policy.episodic_tokens
    assert episodic_used + estimate_tokens(profile[0].line) + 1 <= policy.total_tokens
    # At most max_episodes summaries, however many fit.
    summaries = [_item(200 + i, "episodic", "episode", 20, score=1 - i / 100) for i in range(9)]
    assert sum(i.kind == "episode" for i in pack_tiers(summaries, policy)) == policy.max_episodes


def test_a_scaled_policy_scales_every_tier():
    half = DESIGNED.scaled(600)
    assert (half.total_tokens, half.profile_tokens, half.episodic_tokens, half.episode_tokens) == (600, 150, 400, 80)
    assert DESIGNED.scaled(1200) is DESIGNED


def test_truncation_keeps_the_cap():
    text = "word " * 400
    cut = truncate_tokens(text, 160)
    assert estimate_tokens(cut) <= 160 and cut.endswith("…") and truncate_tokens("short", 160) == "short"


# --- on the real stack ------------------------------------------------------------------------------


async def test_recency_importance_and_the_window_rank_episodic_memory(client, tenant, running_worker):
    old = session("s-old", "2023-09-01T09:00:00Z", "We went hiking at Mount Tam and the trail was muddy.")
    routine = session("s-routine", "2024-05-20T09:00:00Z", "Went hiking at Mount Tam again, the trail was fine.")
    recent = session("s-recent", "2024-05-29T09:00:00Z", "Hiking at Mount Tam today, the trail was dry and dusty.")
    async with running_worker():
        await consolidate(client, tenant, "lin", old, routine, recent)
    as_of = at("2024-06-01")
    designed = await client.context(tenant, "lin", "how was the trail at Mount Tam?", as_of=as_of, policy=DESIGNED)
    order = sessions_of(designed.items)
    assert order[0] == "s-recent" and "s-routine" in order
    assert "s-old" not in order  # 9 months before the as-of time: outside the 180-day window
    assert all(i.relevance is not None and 0 < i.relevance <= 1 for i in designed.episodic_items)
    assert [i.score for i in designed.episodic_items] == sorted((i.score for i in designed.episodic_items),
                                                              reverse=True)
    long = await client.context(tenant, "lin", "how was the trail at Mount Tam?", as_of=as_of, policy=LONG)
    assert "s-old" in sessions_of(long.items)  # no window in the long-horizon policy
    # As of a day before the newest session, it does not exist yet.
    earlier = await client.context(tenant, "lin", "how was the trail at Mount Tam?", as_of=at("2024-05-25"),
                                   policy=DESIGNED)
    assert sessions_of(earlier.items)[0] == "s-routine" and "s-recent" not in sessions_of(earlier.items)


async def test_an_important_episode_beats_a_slightly_newer_trivial_one(client, tenant, running_worker):
    # Four messages each: a shorter session gets no episode (the substance gate), and the episodes are compared.
    important = session("s-news", "2024-03-01T09:00:00Z",
                        "Big news about work: I got promoted to team lead and I'm thrilled, it was a huge "
                        "surprise after the layoffs last year.",
                        ("assistant", "Congratulations! When do you start the new role?"),
                        "Next month, and I will lead a team of six.",
                        ("assistant", "What will change most in your day-to-day work?"))
    trivial = session("s-lunch", "2024-03-04T09:00:00Z", "Lunch at work was a sandwich.",
                      ("assistant", "What kind of sandwich was it?"), "Cheese and tomato, nothing special.",
                      ("assistant", "Do you usually bring lunch from home?"))
    async with running_worker():
        await consolidate(client, tenant, "lin", important, trivial)
    ctx = await client.context(tenant, "lin", "anything new at work?", as_of=at("2024-03-05"), policy=DESIGNED)
    by_session = {sessions_of([i])[0]: i for i in ctx.episodic_items}
    assert by_session["s-news"].importance > by_session["s-lunch"].importance
    assert sessions_of(ctx.items)[0] == "s-news"


async def test_the_profile_holds_current_facts_whatever_the_query_and_however_old(client, tenant, running_worker):
    async with running_worker():
        await consolidate(client, tenant, "lin", session("p1", "2022-01-10T09:00:00Z", "I live in Oslo."),
                          session("p2", "2024-05-01T09:00:00Z", "Can you recommend a podcast about Rome?"))
    ctx = await client.context(tenant, "lin", "plan a weekend trip", as_of=at("2024-06-01"), policy=DESIGNED)
    assert [i.content for i in ctx.profile_items] == ["Oslo"]
    assert ctx.profile_text.startswith("What you know about the user") and "[p1:1]" in ctx.profile_text
    assert ctx.profile_tokens <= ctx.profile_budget and ctx.episodic_tokens <= ctx.episodic_budget
    assert ctx.profile_tokens + ctx.episodic_tokens <= ctx.budget
    # A smaller budget scales the tiers; the profile is cut last.
    small = await client.context(tenant, "lin", "plan a weekend trip", as_of=at("2024-06-01"), policy=DESIGNED,
                                 token_budget=200)
    assert small.budget == 200 and small.profile_budget == 50 and small.profile_items


async def test_the_tenant_policy_is_stored_under_row_level_security_and_read_by_context(client, tenant,
                                                                                        running_worker):
    async with running_worker():
        await consolidate(client, tenant, "lin", session("w1", "2023-01-05T09:00:00Z", "My bike got a flat tyre."))
    assert await client.admin.get_recall_policy(tenant) == DEFAULT_POLICY
    query, as_of = "flat tyre on my bike", at("2024-01-05")
    assert sessions_of((await client.context(tenant, "lin", query, as_of=as_of)).items) == (
        [] if DEFAULT_POLICY.window_days else ["w1"])
    await client.admin.set_recall_policy(tenant, DESIGNED.model_copy(update={"window_days": None}))
    assert sessions_of((await client.context(tenant, "lin", query, as_of=as_of)).items) == ["w1"]
    await client.admin.set_recall_policy(tenant, DESIGNED)
    assert sessions_of((await client.context(tenant, "lin", query, as_of=as_of)).items) == []
    # Another tenant sees its own (default) policy, not this one.
    assert await client.admin.get_recall_policy(f"{tenant}-other") == DEFAULT_POLICY
    assert await client.admin.set_recall_policy(tenant, None) == DEFAULT_POLICY


async def test_the_prompt_has_its_blocks_in_order_with_recent_turns_verbatim(client, services, tenant,
                                                                            running_worker):
    async with running_worker():
        await consolidate(client, tenant, "lin", session("past", "2024-04-01T09:00:00Z",
                                                         "I live in Oslo.", "My dog Rex hates the rain."))
    live = session("live", "2024-04-10T09:00:00Z", "Is it going to rain this weekend?",
                   ("assistant", "Showers on Saturday, Sunday looks dry."), "Then Sunday for the walk with Rex.")
    await client.append_messages(tenant, "lin", live)
    built = await client.build_prompt(tenant, "lin", "live", "Which park is best for the walk with Rex?",
                                      as_of=at("2024-04-10"))
    assert [b.name for b in built.blocks] == ["system", "profile", "episodic", "recent", "input"]
    blocks = {b.name: b for b in built.blocks}
    assert "Oslo" in blocks["profile"].messages[0].content and "Rex" in blocks["episodic"].messages[0].content
    assert [(m.role, m.content) for m in blocks["recent"].messages] == [
        ("user", "Is it going to rain this weekend?"), ("assistant", "Showers on Saturday, Sunday looks dry."),
        ("user", "Then Sunday for the walk with Rex.")]
    assert blocks["input"].messages[0].content == "Which park is best for the walk with Rex?"
    assert built.recent_source == "redis" and built.summarized_turns == 0
    for b in built.blocks:
        assert b.tokens == sum(estimate_tokens(m.content) + MESSAGE_OVERHEAD for m in b.messages)
        assert b.budget is None or b.tokens <= b.budget
    assert set(built.cited_item_ids) == set(blocks["profile"].item_ids) | set(blocks["episodic"].item_ids)
    assert built.chat_messages()[0]["role"] == "system" and built.chat_messages()[-1]["role"] == "user"
    # The input the runtime already appended is not repeated among the recent turns.
    await client.append_messages(tenant, "lin", session("live", "2024-04-10T09:00:00Z", *[
        (m.role, m.content) for m in live.messages], "Which park is best for the walk with Rex?"))
    again = await client.build_prompt(tenant, "lin", "live", "Which park is best for the walk with Rex?",
                                      as_of=at("2024-04-10"))
    assert len({b.name: b for b in again.blocks}["recent"].messages) == 3
    # Redis lost the session: the messages table has it.
    await services.redis.delete(working_memory_key(tenant, "lin", "live"))
    fallback = await client.build_prompt(tenant, "lin", "live", "Which park?", as_of=at("2024-04-10"))
    assert fallback.recent_source == "messages"
    assert [m.content for m in {b.name: b for b in fallback.blocks}["recent"].messages][-1] == (
        "Which park is best for the walk with Rex?")
    # Session ids are per subject: kim's "kims" is not lin's, and a new session has no recent turns.
    await client.append_messages(tenant, "kim", session("kims", "2024-04-10T09:00:00Z", "hello"))
    assert (await client.build_prompt(tenant, "lin", "kims", "hi")).recent_source == "none"
    fresh = await client.build_prompt(tenant, "lin", "brand new: session 2", "hi")  # any session id a Session takes
    assert fresh.recent_source == "none" and not {b.name: b for b in fresh.blocks}["recent"].messages
    with pytest.raises(ValueError, match="session"):
        await client.build_prompt(tenant, "lin", "", "hi")
    with pytest.raises(ValueError, match="user_input is empty"):
        await client.build_prompt(tenant, "lin", "live", "  ")


async def test_a_long_live_session_rolls_older_turns_into_a_running_summary(client, services, tenant):
    lines = [f"Turn {n}: the quarterly report needs chart number {n} redone in blue." for n in range(40)]
    await client.append_messages(tenant, "lin", session("long", "2024-04-10T09:00:00Z", *lines))
    policy = DESIGNED.model_copy(update={"recent_tokens": 300, "recent_turns": 4})
    built = await client.build_prompt(tenant, "lin", "long", "What is left to do?", policy=policy)
    recent = {b.name: b for b in built.blocks}["recent"]
    assert recent.tokens <= 300 and built.summarized_turns == 36
    assert recent.messages[0].role == "system" and recent.messages[0].content.startswith("Earlier in this session")
    assert [m.content for m in recent.messages[1:]] == lines[-4:]  # the last turns, verbatim
    # The summary is cached in working memory (under the subject's prefix, which erasure deletes).
    keys = [k async for k in services.redis.scan_iter(match=f"am:{tenant}:lin:wm-summary:*")]
    assert len(keys) == 1
    assert (await client.build_prompt(tenant, "lin", "long", "What is left to do?", policy=policy)).blocks == built.blocks


async def test_erased_subjects_get_an_empty_prompt_memory(client, tenant, running_worker):
    async with running_worker():
        await consolidate(client, tenant, "lin", session("e1", "2024-04-01T09:00:00Z", "I live in Oslo."))
        await client.admin.erasure_receipt(await client.admin.erase(tenant, "lin", "user request"))
    built = await client.build_prompt(tenant, "lin", "e1", "where do I live?")
    blocks = {b.name: b for b in built.blocks}
    assert not blocks["profile"].messages and not blocks["episodic"].messages and not blocks["recent"].messages


def test_the_prompt_and_policy_commands(services, tenant):
    shown = run_cli(services, "policy", "show", "--tenant", tenant, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == DEFAULT_POLICY.model_dump(mode="json")
    bad = run_cli(services, "policy", "set", "--tenant", tenant, "tau_dayz=3")
    assert bad.returncode == 2 and "tau_dayz" in bad.stderr and "Traceback" not in bad.stderr
    bad = run_cli(services, "policy", "set", "--tenant", tenant, "profile_tokens=5000")
    assert bad.returncode == 2 and "profile_tokens" in bad.stderr
    ok = run_cli(services, "policy", "set", "--tenant", tenant, "--preset", "designed", "window_days=none",
                 "tau_days=30", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == RecallPolicy(window_days=None, tau_days=30).model_dump(mode="json")
    prompt = run_cli(services, "prompt", "--tenant", tenant, "--subject", "lin", "--session", "new-s", "hello there",
                     "--json")
    assert prompt.returncode == 0, prompt.stderr
    data = json.loads(prompt.stdout)
    assert [b["name"] for b in data["blocks"]] == ["system", "profile", "episodic", "recent", "input"]
    assert data["messages"][-1] == {"role": "user", "content": "hello there"}
    assert all(b["budget"] is None or b["tokens"] <= b["budget"] for b in data["blocks"])
    assert run_cli(services, "policy", "reset", "--tenant", tenant).returncode == 0
