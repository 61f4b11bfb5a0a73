"""Two consolidations of one subject at once: optimistic versions make the loser re-read and
re-decide, so no update is lost or silently overwritten, and the outcome does not depend on
which commit wins the race."""

from __future__ import annotations

import asyncio

from tests.sessions import session
from workflows.consolidation import ConsolidationWorkflow


async def test_concurrent_sessions_of_one_subject_converge(client, tenant, running_worker):
    outcomes = []
    async with running_worker():
        for run in range(4):  # several races, each in its own subject
            subject = f"racer-{run}"
            older = session(f"{subject}-a", "2024-03-01T09:00:00Z", "I live in Hangzhou.", "I love jazz.")
            newer = session(f"{subject}-b", "2024-06-01T09:00:00Z", "I moved to Shanghai.", "I love jazz.")
            for s in (older, newer):
                await client.append_messages(tenant, subject, s)
            # Start both at once; which one commits first is up to the race.
            handles = await asyncio.gather(*(client.end_session(tenant, subject, s.session_id)
                                             for s in ((older, newer) if run % 2 else (newer, older))))
            results = await asyncio.gather(*(client.consolidation_result(h) for h in handles))
            assert all(r.refused_reason is None for r in results)
            retries = sum([(await h.query(ConsolidationWorkflow.progress)).conflict_retries for h in handles])
            current = {(f.namespace, f.key): f for f in await client.facts(tenant, subject)}
            history = await client.facts(tenant, subject, history=True)
            outcomes.append((current[("location", "home_city")].value, retries))
            # No lost update: both statements about jazz are evidence of one fact.
            assert sorted(current[("preference", "jazz")].evidence_message_ids) == [f"{subject}-a:2", f"{subject}-b:2"]
            # No silent overwrite: every row of the history has its own version.
            versions = [f.interval_version for f in history if f.key == "home_city"]
            assert len(versions) == len(set(versions))
    # The newer statement is current whichever commit won the race.
    assert {city for city, _ in outcomes} == {"Shanghai"}
    # The race was real: the losing commit hit a version conflict and re-decided.
    assert sum(retries for _, retries in outcomes) >= 1
