"""The substance gate through the real pipeline (embedded Temporal, Postgres, Redis): a session too
short or of nothing but small talk is consolidated with its facts and without an episode, a summary
call or an episode's embedding, and `agent-memory stats` counts it."""

from __future__ import annotations

import asyncio
import json

from agent_memory.memory.substance import gate_reason, small_talk_sentence
from agent_memory.store.db import tenant_transaction
from agent_memory.telemetry.metrics import REGISTRY, tenant_label
from tests.cli.runner import run_cli
from tests.providers.openai_server import FakeOpenAIServer
from tests.sessions import session
from tests.workflows.test_consolidation_openai import bundle_for, route

SHORT = session("s-short", "2024-03-01T09:00:00Z", "Hi! I live in Porto.", ("assistant", "Porto is lovely."),
                "Thanks!")
SMALL_TALK = session("s-chat", "2024-03-02T09:00:00Z", "Hi there!", ("assistant", "Hello! How are you doing?"),
                     "Good, thanks. And you?", ("assistant", "I'm great, thanks for asking 😊"), "lol ok",
                     ("assistant", "Have a nice day!"))
SMALL_TALK_ZH = session("s-zh", "2024-03-03T09:00:00Z", "你好！", ("assistant", "你好呀！"), "哈哈，谢谢",
                        ("assistant", "不客气～"), "好的 👍")
NORMAL = session("s-trip", "2024-03-04T09:00:00Z", "I'm flying to Lisbon next Friday for a conference.",
                 ("assistant", "How long will you stay?"), "Four days. I'm vegetarian, so I need restaurant tips.",
                 ("assistant", "You could try the vegetarian places in Príncipe Real."), "Great, I will book one.")


async def _rows(services, tenant, sql, *params):
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute(sql, params)
        return await cur.fetchall()


async def _consolidate(client, tenant, subject, s):
    await client.append_messages(tenant, subject, s)
    return await client.consolidation_result(await client.end_session(tenant, subject, s.session_id))


def _calls(server: FakeOpenAIServer) -> dict[str, int]:
    """Chat calls made to the model, by their response schema."""
    names = [r.body["response_format"]["json_schema"]["name"] for r in server.requests
             if r.path.endswith("chat/completions")]
    return {name: names.count(name) for name in sorted(set(names))}


def test_small_talk_is_judged_sentence_by_sentence():
    for chatter in ("Hi there!", "Thanks so much, Lin!", "ok lol 😂", "Good morning :)", "Sounds good, see you!",
                    "谢谢！", "哈哈哈", "好的，再见～", "I'm fine, thanks. And you?"):
        assert small_talk_sentence(chatter), chatter
    for said in ("Hi, I live in Porto.", "Thanks, I'll book the 9am train.", "ok, my cat is called Miso",
                 "谢谢，我明天去北京。", "好的，我下周三有空。", "I'm fine with sushi."):
        assert not small_talk_sentence(said), said
    assert gate_reason(SHORT.messages) == "too_short"
    assert gate_reason(SMALL_TALK.messages) == gate_reason(SMALL_TALK_ZH.messages) == "small_talk"
    assert gate_reason(NORMAL.messages) is None


async def test_gated_sessions_commit_their_facts_and_no_episode(client, services, tenant, running_worker):
    def counted(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(f"agent_memory_{name}", {"tenant": tenant_label(tenant), **labels}) or 0.0

    summaries_before = counted("model_calls_total", model="extractive-summarizer", purpose="summarize", outcome="ok")
    runs_before = {o: counted("consolidations_total", outcome=o) for o in ("committed", "no_substance")}
    async with running_worker():
        short = await _consolidate(client, tenant, "lin", SHORT)
        chat = await _consolidate(client, tenant, "lin", SMALL_TALK)
        chat_zh = await _consolidate(client, tenant, "lin", SMALL_TALK_ZH)
        normal = await _consolidate(client, tenant, "lin", NORMAL)
        await client.admin.wait_for_projection(tenant, "lin")
        # Consolidated again (a resumed session): the session is counted once.
        last = SMALL_TALK.messages[-1]
        bye = last.model_copy(update={"message_id": "s-chat:7", "turn_index": 6, "role": "user", "content": "Bye!"})
        await client.append_messages(tenant, "lin", SMALL_TALK.model_copy(update={"messages": [*SMALL_TALK.messages, bye]}))
        again = await client.consolidation_result(await client.end_session(tenant, "lin", "s-chat"))

    # The stated fact is committed; no episode for the gated sessions; the normal one has its episode.
    assert short.facts_written == 1 and not short.episode_written
    assert [(f.key, f.value) for f in await client.facts(tenant, "lin") if f.key == "home_city"] == [
        ("home_city", "Porto")]
    assert not chat.episode_written and not chat_zh.episode_written and not again.episode_written
    assert normal.episode_written
    episodes = await _rows(services, tenant, "SELECT session_id, summary FROM episodes WHERE tenant_id = %s", tenant)
    assert [e[0] for e in episodes] == ["s-trip"]
    assert "Lisbon" in episodes[0][1]  # the session's own words

    # No summary was made for the gated sessions: their summary step is the gate's record.
    summaries = dict(await _rows(services, tenant, "SELECT session_id, string_agg(DISTINCT model, ',') FROM operations "
                                 "WHERE tenant_id = %s AND kind = 'summary' GROUP BY session_id", tenant))
    assert summaries == {"s-short": "episode-gate", "s-chat": "episode-gate", "s-zh": "episode-gate",
                         "s-trip": "extractive-summarizer"}
    # Nothing embedded for an episode but the normal session's.
    embedded = await _rows(services, tenant, "SELECT e.session_id FROM memory_vectors v JOIN episodes e "
                           "USING (memory_id) WHERE v.tenant_id = %s AND v.memory_kind = 'episode'", tenant)
    assert embedded == [("s-trip",)]
    assert await client.recall(tenant, "lin", "Porto") is not None

    stats = json.loads((await asyncio.to_thread(run_cli, services, "stats", "--tenant", tenant, "--json")).stdout)
    assert stats["sessions_without_episode"] == {"total": 3, "too_short": 1, "small_talk": 2}
    text = (await asyncio.to_thread(run_cli, services, "stats", "--tenant", tenant)).stdout
    assert "sessions without an episode (substance gate): 3 (1 too short, 2 small talk)" in text
    # The operator's counters: a run of nothing but small talk is one of no substance (the short
    # session wrote its fact); one summary made, by the normal session's run.
    assert {o: counted("consolidations_total", outcome=o) - n for o, n in runs_before.items()} == {
        "committed": 2, "no_substance": 3}
    assert counted("model_calls_total", model="extractive-summarizer", purpose="summarize", outcome="ok") == (
        summaries_before + 1)


async def test_a_gated_session_makes_no_summary_call_to_a_model(client, services, tenant, running_worker):
    with FakeOpenAIServer() as server:
        server.responder = route
        bundle = bundle_for(server)
        async with running_worker(providers=bundle):
            short = await _consolidate(client, tenant, "lin", SHORT)
            before = _calls(server)
            normal = await _consolidate(client, tenant, "lin", NORMAL)
            after = _calls(server)
        await bundle.aclose()
    assert not short.episode_written
    assert before == {"fact_extraction": 1, "importance": 1}, "the facts are extracted, no summary is asked for"
    assert after["session_summary"] == 1
    assert normal.episode_written
