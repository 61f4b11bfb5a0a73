"""Which statement is newer follows the server's order of receipt, not the client's clock: a
client whose clock is behind still has its later statement win; statements received in one append
rank by their own times; an imported history (messages received long after the times they carry)
ranks by those times, so an old conversation imported today does not override what is known since."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent_memory.core.models import ExtractedFact
from agent_memory.memory.conflicts import BACKFILL_LAG, CurrentFact, arrival, decide
from tests.sessions import session

SUBJECT = "ola"
T0 = datetime(2024, 5, 1, 9, tzinfo=UTC)


def said(value: str, observed_at: datetime, message_id: str, **fields) -> ExtractedFact:
    return ExtractedFact(namespace="location", key="home_city", value=value, confidence=0.9,
                         evidence_message_ids=[message_id], observed_at=observed_at, **fields)


def oslo(received_at: datetime | None) -> dict[tuple[str, str], CurrentFact]:
    return {("location", "home_city"): CurrentFact("location", "home_city", "Oslo", 1, "explicit", 0.9, 1, T0,
                                                   received_at)}


def test_a_statement_received_later_is_newer_whatever_time_it_carries():
    bergen = said("Bergen", T0 - timedelta(hours=2), "m2")  # the client's clock is two hours behind
    (decision,) = decide([bergen], oslo(T0), received_at={"m2": T0 + timedelta(minutes=5)})
    assert decision.action == "supersede" and decision.value == "Bergen"
    # Without the order of receipt (unknown on either side) the statement's own time decides.
    assert decide([bergen], oslo(None), received_at={"m2": T0 + timedelta(minutes=5)})[0].action == "candidate"
    assert decide([bergen], oslo(T0))[0].action == "candidate"


def test_a_statement_received_earlier_is_older_whatever_time_it_carries():
    # A clock ahead cannot make an older statement win.
    bergen = said("Bergen", T0 + timedelta(hours=3), "m2")
    (decision,) = decide([bergen], oslo(T0), received_at={"m2": T0 - timedelta(minutes=5)})
    assert decision.action == "candidate"


def test_statements_received_together_rank_by_their_own_times():
    bergen = said("Bergen", T0 - timedelta(minutes=1), "m2")
    assert decide([bergen], oslo(T0), received_at={"m2": T0})[0].action == "candidate"
    later = said("Bergen", T0 + timedelta(minutes=1), "m2")
    assert decide([later], oslo(T0), received_at={"m2": T0})[0].action == "supersede"


def test_a_past_state_said_later_does_not_become_current():
    # "I lived in Trondheim from 2015 to 2019", said after Oslo: a closed interval, placed by its times.
    past = said("Trondheim", datetime(2015, 1, 1, tzinfo=UTC), "m2", valid_until=datetime(2019, 1, 1, tzinfo=UTC))
    assert decide([past], oslo(T0), received_at={"m2": T0 + timedelta(days=3)})[0].action == "candidate"


def test_a_backfilled_message_arrives_at_its_own_time():
    recorded = T0 + timedelta(days=400)
    assert arrival(T0, recorded) == T0  # imported: placed by its own time
    assert arrival(recorded - BACKFILL_LAG, recorded) == recorded  # a clock a day behind: still live
    assert arrival(recorded - timedelta(hours=3), recorded) == recorded


def test_later_facts_of_one_extraction_see_the_arrival_of_earlier_decisions():
    # Bergen (received later, clock behind) supersedes Oslo; Stavanger, said in the same append as
    # Bergen and earlier by its own time, is older than Bergen.
    facts = [said("Bergen", T0 - timedelta(hours=2), "m2"), said("Stavanger", T0 - timedelta(hours=3), "m3")]
    decisions = decide(facts, oslo(T0), received_at={"m2": T0 + timedelta(hours=1), "m3": T0 + timedelta(hours=1)})
    assert [d.action for d in decisions] == ["supersede", "candidate"]


async def _consolidate(client, tenant: str, s) -> None:
    await client.append_messages(tenant, SUBJECT, s)
    result = await client.consolidation_result(await client.end_session(tenant, SUBJECT, s.session_id))
    assert result.refused_reason is None


async def _home(client, tenant: str) -> tuple[str, list[str]]:
    facts = await client.facts(tenant, SUBJECT, candidates=True)
    current = [f.value for f in facts if f.key == "home_city" and f.status == "active"]
    held = sorted(f.value for f in facts if f.key == "home_city" and f.status == "candidate")
    assert len(current) == 1, facts
    return current[0], held


def _iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


async def test_a_client_whose_clock_is_behind_still_has_its_later_statement_win(client, tenant, running_worker):
    now = datetime.now(UTC).replace(microsecond=0)
    async with running_worker():
        await _consolidate(client, tenant, session("s1", _iso(now - timedelta(minutes=10)), "I live in Oslo."))
        # Received after s1, but its messages carry a time an hour before s1's.
        await _consolidate(client, tenant, session("s2", _iso(now - timedelta(minutes=70)), "I moved to Bergen."))
        assert await _home(client, tenant) == ("Bergen", [])


async def test_an_old_conversation_imported_later_does_not_override_what_is_known(client, tenant, running_worker):
    now = datetime.now(UTC).replace(microsecond=0)
    async with running_worker():
        await _consolidate(client, tenant, session("live", _iso(now - timedelta(minutes=10)), "I live in Bergen."))
        # A history imported afterwards, from a year ago: received later, but said before.
        await _consolidate(client, tenant, session("2023", _iso(now - timedelta(days=365)), "I live in Oslo."))
        assert await _home(client, tenant) == ("Bergen", ["Oslo"])
        # A history imported out of order ranks by its own times too: the older session is older.
        await _consolidate(client, tenant, session("2022", _iso(now - timedelta(days=730)), "I live in Tromsø."))
        assert await _home(client, tenant) == ("Bergen", ["Oslo", "Tromsø"])
        # And what the client says now, received last, is newest.
        await _consolidate(client, tenant, session("now", _iso(now - timedelta(minutes=1)), "I moved to Stavanger."))
        assert (await _home(client, tenant))[0] == "Stavanger"
