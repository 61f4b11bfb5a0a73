"""Task-local facts: a fact that holds only for the task at hand ("use the staging database for
this") is in the profile of a context or prompt read in the session it was stated in, and in no
other; permanent facts are in every one. A rebuild from the log keeps the session."""

from __future__ import annotations

from agent_memory.core.models import (
    ConflictPlan,
    ExtractedFact,
    ExtractionResult,
    ImportanceResult,
    SummaryResult,
)
from agent_memory.core.operation_keys import CommitKey
from agent_memory.memory.conflicts import decide
from agent_memory.memory.memory_store import commit_consolidation
from agent_memory.projection.rebuild import rebuild_subject
from tests.sessions import session


async def test_a_task_local_fact_is_recalled_only_in_its_session(client, services, tenant):
    s1 = session("deploy-1", "2024-05-01T09:00:00Z", "Use the staging database for this migration.",
                 "I live in Hangzhou.")
    await client.append_messages(tenant, "lin", s1)
    await client.append_messages(tenant, "lin", session("chat-2", "2024-05-02T09:00:00Z", "Hello again."))
    first, second = (m.message_id for m in s1.messages)
    facts = [ExtractedFact(namespace="task", key="database", value="staging", permanence="task_local",
                           confidence=0.9, evidence_message_ids=[first], observed_at=s1.messages[0].created_at),
             ExtractedFact(namespace="location", key="home_city", value="Hangzhou", confidence=0.9,
                           evidence_message_ids=[second], observed_at=s1.messages[1].created_at)]
    extraction = ExtractionResult(provider="test", extractor="written-out", extractor_version="1", facts=facts)
    request = {"session": "deploy-1"}
    await commit_consolidation(
        services.pool, services.keyring, tenant_id=tenant, subject_id="lin", session_id="deploy-1",
        key=CommitKey.for_request("deploy-1", request), request=request, extraction=extraction,
        plan=ConflictPlan(decisions=decide(facts, {})), importance=ImportanceResult(importance=5),
        summary=SummaryResult(sentences=[], token_count=0), happened_at=s1.messages[-1].created_at)
    stored = {f.value: f for f in await client.facts(tenant, "lin")}
    assert stored["staging"].task_session_id == "deploy-1" and stored["Hangzhou"].task_session_id is None

    async def profile(session_id: str | None) -> set[str]:
        context = await client.context(tenant, "lin", "Which database should I use?", session_id=session_id)
        return {item.content for item in context.profile_items}

    assert await profile("deploy-1") == {"staging", "Hangzhou"}
    assert await profile("chat-2") == {"Hangzhou"}
    assert await profile(None) == {"Hangzhou"}  # read outside any session: no task's facts
    for session_id, shown in (("deploy-1", True), ("chat-2", False)):
        built = await client.build_prompt(tenant, "lin", session_id, "Which database should I use?")
        text = "\n".join(m["content"] for m in built.chat_messages())
        assert "Hangzhou" in text and ("staging" in text) is shown
    assert (await rebuild_subject(services.pool, services.keyring, tenant, "lin")).equal
