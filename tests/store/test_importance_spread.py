"""Each tenant's spread of episode importance, on `agent-memory stats` (text and --json) and the
memory console: the count per score with min, median and max, and a warning when every episode of
a tenant got the same score (an importance provider answering one value for everything)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from agent_memory.core.models import (
    ConflictPlan,
    ExtractionResult,
    ImportanceResult,
    SummaryResult,
    SummarySentence,
)
from agent_memory.core.operation_keys import CommitKey
from agent_memory.memory.memory_store import commit_consolidation
from agent_memory.security.operator_keys import create_operator_key
from agent_memory.store.inventory import COLLAPSED_AT_EPISODES, ImportanceSpread
from tests.api.test_console import console, sign_in
from tests.cli.runner import run_cli

SUBJECT = "mia"


def test_the_spread_counts_every_score_and_flags_one_score_for_many_episodes():
    varied = ImportanceSpread.of({2: 1, 5: 2, 9: 1})
    assert varied.per_score == {1: 0, 2: 1, 3: 0, 4: 0, 5: 2, 6: 0, 7: 0, 8: 0, 9: 1, 10: 0}
    assert (varied.episodes, varied.min, varied.median, varied.max) == (4, 2, 5.0, 9)
    assert not varied.collapsed and varied.warning is None
    assert ImportanceSpread.of({3: 2, 4: 1}).median == 3.0 and ImportanceSpread.of({3: 1, 4: 1}).median == 3.5
    collapsed = ImportanceSpread.of({3: 42})
    assert collapsed.collapsed and collapsed.warning == (
        "importance collapsed to 3 for all 42 episodes: the importance provider may be broken")
    # Too few episodes to say: a tenant's first sessions may well score alike.
    assert not ImportanceSpread.of({3: COLLAPSED_AT_EPISODES - 1}).collapsed
    empty = ImportanceSpread.of({})
    assert (empty.episodes, empty.min, empty.median, empty.max, empty.collapsed) == (0, None, None, None, False)


async def _episodes(services, tenant: str, scores: list[int]) -> None:
    """One consolidated session per score, through the commit the workflow makes (each writes its episode)."""
    start = datetime(2024, 5, 1, 9, tzinfo=UTC)
    for n, score in enumerate(scores):
        session_id = f"s{n}"
        request = {"session": session_id, "importance": score}
        await commit_consolidation(
            services.pool, services.keyring, tenant_id=tenant, subject_id=SUBJECT, session_id=session_id,
            key=CommitKey.for_request(session_id, request), request=request,
            extraction=ExtractionResult(provider="test", extractor="written-out", extractor_version="1", facts=[]),
            plan=ConflictPlan(decisions=[]), importance=ImportanceResult(importance=score),
            summary=SummaryResult(sentences=[SummarySentence(text=f"Session {n}.", source_message_ids=[f"{n}:1"])],
                                  token_count=3),
            happened_at=start + timedelta(days=n))


async def test_stats_and_the_console_show_the_spread_and_flag_a_collapsed_tenant(client, services, tenant):
    varied, collapsed = tenant, f"{tenant}-c"
    await _episodes(services, varied, [2, 5, 5, 9, 7, 5])
    await _episodes(services, collapsed, [3] * 6)
    warning = "importance collapsed to 3 for all 6 episodes: the importance provider may be broken"

    text = run_cli(services, "stats", "--tenant", varied)
    assert text.returncode == 0, text.stderr
    assert "episode importance: 6 episodes, min 2, median 5, max 9  (score:episodes 2:1  5:3  7:1  9:1)" \
        in text.stdout
    assert "collapsed" not in text.stdout
    spread = json.loads(run_cli(services, "stats", "--tenant", varied, "--json").stdout)["episode_importance"]
    assert spread["per_score"] == {"1": 0, "2": 1, "3": 0, "4": 0, "5": 3, "6": 0, "7": 1, "8": 0, "9": 1, "10": 0}
    assert (spread["min"], spread["median"], spread["max"]) == (2, 5.0, 9)
    assert spread["collapsed"] is False and spread["warning"] is None

    text = run_cli(services, "stats", "--tenant", collapsed)
    assert f"warning: {warning}" in text.stdout.splitlines()
    spread = json.loads(run_cli(services, "stats", "--tenant", collapsed, "--json").stdout)["episode_importance"]
    assert spread["collapsed"] is True and spread["warning"] == warning and spread["per_score"]["3"] == 6

    operator = (await create_operator_key(services.pool)).token
    async with console(client) as http:
        await sign_in(http, operator)
        home = (await http.get("/console")).text
        row = next(line for line in home.split("<tr>") if f'href="/console/t/{collapsed}"' in line)
        assert "collapsed to 3 (6 episodes)" in row
        row = next(line for line in home.split("<tr>") if f'href="/console/t/{varied}"' in line)
        assert "2–9, median 5 (6 episodes)" in row and "collapsed" not in row
        page = await http.get(f"/console/t/{collapsed}")
        assert page.status_code == 200 and warning in page.text
        page = await http.get(f"/console/t/{varied}")
        assert page.status_code == 200 and "collapsed" not in page.text
        assert "<tr><td>5</td><td>3</td>" in page.text  # the count per score
