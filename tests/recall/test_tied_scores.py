"""Equal scores are ordered by what the items are, not by their ids: memory ids are keyed per
subject, so two stores (or two subjects) holding the same conversation give the same context."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent_memory.core.models import Message, Session
from agent_memory.providers.offline import offline_providers
from agent_memory.recall.context import assemble_context
from tests.sessions import commit_notes

# An import: every message carries the session's time, and many notes match "tea" equally well.
AT = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
TURNS = [f"I had tea with {name} today." for name in ("Ana", "Bo", "Cai", "Dee", "Eli", "Fay", "Gus", "Hal")] + [
    "We talked about the garden.", "The tea shop moved downtown last spring."]


def _imported(session_id: str) -> Session:
    return Session(session_id=session_id, started_at=AT, messages=[
        Message(message_id=f"{session_id}:{n}", turn_index=n, role="user", speaker="Lin", content=text, created_at=AT)
        for n, text in enumerate(TURNS, 1)])


async def _commit(client, services, tenant, subject: str) -> None:
    for session_id in (f"{subject}/s1", f"{subject}/s2"):  # session ids are unique in a tenant
        await commit_notes(client, services, tenant, subject, _imported(session_id), AT)


async def test_two_subjects_with_one_conversation_get_the_same_context(client, services, tenant):
    for subject in ("lin-a", "lin-b"):
        await _commit(client, services, tenant, subject)
    embedder = offline_providers().embedder
    contexts = [await assemble_context(services.pool, services.keyring, embedder, tenant, subject,
                                       "Who did Lin have tea with?", as_of=AT + timedelta(days=1), token_budget=200)
                for subject in ("lin-a", "lin-b")]
    a, b = ([(i.text, [m.split("/")[1] for m in i.cited_message_ids], i.score) for i in c.episodic_items]
            for c in contexts)
    assert a == b
    # Not vacuous: the ids differ, and the budget cut through the sixteen equally matching notes,
    # which came in the order of their sessions and messages.
    assert {i.memory_id for i in contexts[0].items}.isdisjoint(i.memory_id for i in contexts[1].items)
    tied = [cited[0] for text, cited, _ in a if text.endswith(" today.")]
    assert 2 <= len(tied) < 16
    assert tied == sorted(tied)
