"""The console's templates without a server: every page that shows memory text renders hostile text
(markup, an attribute break-out) as text; no template marks data safe or styles inline; the
templates and the stylesheet ship with the package."""

from __future__ import annotations

import re
import tomllib
import uuid
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from agent_memory.api.console import data
from agent_memory.api.console.frame import SECURITY_HEADERS, TEMPLATES, Links, render
from agent_memory.core.models import FactRow, TokenBudgetState
from agent_memory.core.projection_models import ProjectionLag
from agent_memory.core.settings import Settings
from agent_memory.lifecycle.forgetting import ForgottenMemory
from agent_memory.memory.stale_marks import StaleMark
from agent_memory.recall.context import AssembledContext, ContextItem, ItemExplanation, ProfileRank, RouteHit
from agent_memory.store.inventory import ImportanceSpread

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = ROOT / "agent_memory" / "api" / "console"
HOSTILE = "<script>alert(1)</script>\"><img src=x onerror=alert(2)>'"
# Tags the console's pages are made of: anything else on a page came from the data.
PAGE_TAGS = {"html", "head", "meta", "title", "link", "body", "header", "nav", "main", "section", "span", "a", "b",
             "br", "h1", "h2", "p", "div", "code", "table", "thead", "tbody", "tr", "th", "td", "form", "input",
             "label", "button"}
NOW = datetime(2024, 6, 1, 9, 0, tzinfo=UTC)
MEMORY_ID = str(uuid.uuid4())
# Tenants and subjects are identifiers (checked before any page renders); everything else carries HOSTILE.
TENANT, SUBJECT = "acme", "lin"


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def assert_shown_as_text(page: str) -> None:
    parser = Tags()
    parser.feed(page)
    tags = {tag for tag, _ in parser.tags}
    assert tags <= PAGE_TAGS, tags - PAGE_TAGS
    handlers = [(tag, name) for tag, attrs in parser.tags for name, _ in attrs if name.startswith("on")]
    assert handlers == []
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&gt;&lt;img src=x onerror=alert(2)&gt;&#39;" in page


def signed_in(**context: object) -> dict[str, object]:
    """What Page.render hands every signed-in template besides the page's own data."""
    return {"title": HOSTILE, "crumbs": [("tenants", "/console"), (HOSTILE, None)], "csrf": "0" * 64,
            "links": Links(Settings()), "operator": HOSTILE, "done": None, **context}


def fact_view(status: str = "active") -> data.FactView:
    fact = FactRow(fact_id=str(uuid.uuid4()), memory_id=MEMORY_ID, tenant_id="t1", subject_id=HOSTILE,
                   namespace=HOSTILE, key=HOSTILE, value=HOSTILE, version=1, interval_version=1, valid_from=NOW,
                   valid_to=None, recorded_at=NOW, confidence=0.9, claim_type="stated", permanence="stable",
                   source_kind="message", status=status, evidence_message_ids=["s1:0"], last_confirmed_at=NOW,
                   extracted_by=HOSTILE)
    return data.FactView(fact=fact, recorded_to=None, close_reason=HOSTILE, operation_id="consolidate/x",
                         session_id=HOSTILE)


def message() -> data.EvidenceMessage:
    return data.EvidenceMessage(session_id=HOSTILE, message_id=HOSTILE, turn_index=0, role="user", speaker=HOSTILE,
                                content=HOSTILE, created_at=NOW)


def forgotten() -> ForgottenMemory:
    return ForgottenMemory(memory_id=uuid.UUID(MEMORY_ID), subject_id=HOSTILE, memory_kind="fact", version=1,
                           state="forgotten", forgotten_at=NOW, actor=HOSTILE, actor_id=HOSTILE, swept_at=None,
                           residue=None)


def episode() -> data.EpisodeRow:
    return data.EpisodeRow(memory_id=uuid.UUID(MEMORY_ID), session_id=HOSTILE, summary=HOSTILE, importance=5,
                           happened_at=NOW, source_message_ids=[])


def context_item(**explanation: Any) -> ContextItem:
    return ContextItem(kind="episode", memory_id=MEMORY_ID, text=HOSTILE, content=HOSTILE, cited_message_ids=[],
                       score=0.5, explanation=ItemExplanation(score=0.5, **explanation))


def lag() -> ProjectionLag:
    return ProjectionLag(tenant_id=HOSTILE, pending=2, due=1, retrying=1, oldest_pending_age_seconds=3.0,
                         dead_letters=1)


def spread() -> ImportanceSpread:
    return ImportanceSpread.of({3: 2, 7: 1})


PAGES = {
    "signin.html": lambda: {"title": "Sign in", "next_path": HOSTILE, "message": HOSTILE},
    "error.html": lambda: {"title": HOSTILE, "detail": HOSTILE},
    "tenants.html": lambda: signed_in(
        tenants=[type("Row", (), {"tenant": TENANT, "lag": lag(), "spread": spread()})()], now=NOW,
        schedules=[data.ScheduleView(schedule_id=HOSTILE, exists=True, every_seconds=3600, next_run=NOW,
                                     recent=[data.ScheduleRun(workflow_id=HOSTILE, started_at=NOW, status=HOSTILE)]),
                   data.ScheduleView(schedule_id=HOSTILE, exists=False)]),
    "tenant.html": lambda: signed_in(
        tenant=TENANT, lag=lag(), spread=spread(), parked=[],
        subjects=[data.SubjectSummary(subject_id=HOSTILE, sessions=1, facts=2, candidates=1, forgotten=0,
                                      last_message_at=NOW)],
        erasures=[data.ErasureRow(request_id=HOSTILE, status="completed", requested_at=NOW, completed_at=NOW,
                                  subject_digest="erased:" + HOSTILE, receipt={"removed": {HOSTILE: 2},
                                  "residue_total": 0, "key_shredded": True}, redrive_count=1)],
        budget=TokenBudgetState(tenant_id=HOSTILE, daily_tokens=1000, source="tenant", day=NOW.date(),
                                used_tokens=1200),
        marks=[StaleMark(mark_id=HOSTILE, subject_id=HOSTILE, memory_id=HOSTILE, memory_kind="fact",
                         reason="stale", marked_at=NOW, state="open", in_force=True, version=1)]),
    "subject.html": lambda: signed_in(
        tenant=TENANT, subject=SUBJECT, lag=lag(), parked=set(),
        overview=data.SubjectOverview(
            erased=False, current_facts=1, episodes=[episode()], candidates=[fact_view("candidate")],
            sessions=[data.SessionSummary(session_id=HOSTILE, started_at=NOW, messages=2, last_message_at=NOW,
                                          consolidated_through=NOW, pending=1)],
            forgotten=[data.ForgottenView(memory=forgotten(), restorable_until=NOW + timedelta(days=7),
                                          content=[{"namespace": HOSTILE, "key": HOSTILE, "value": HOSTILE}])])),
    "facts.html": lambda: signed_in(tenant=TENANT, subject=SUBJECT, shown=HOSTILE, as_of=HOSTILE, erased=False,
                                    views=[fact_view(), fact_view("closed")]),
    "session.html": lambda: signed_in(
        tenant=TENANT, subject=SUBJECT, session_id=HOSTILE, messages=[message()],
        summary=data.SessionSummary(session_id=HOSTILE, started_at=NOW, messages=1, last_message_at=NOW,
                                    consolidated_through=None, pending=1)),
    "memory.html": lambda: signed_in(
        tenant=TENANT, subject=SUBJECT, name=HOSTILE, restorable_until=NOW,
        memory=data.MemoryDetail(memory_id=MEMORY_ID, facts=[fact_view("candidate")], episode=episode(),
                                 note=data.NoteRow(memory_id=uuid.UUID(MEMORY_ID), session_id=HOSTILE, text=HOSTILE,
                                                   happened_at=NOW, source_message_ids=[]),
                                 forgotten=forgotten(), evidence=[message()])),
    "explain.html": lambda: signed_in(
        tenant=TENANT, subject=SUBJECT, query=HOSTILE, budget=HOSTILE,
        assembled=AssembledContext(query=HOSTILE, items=[], text="", tokens=10, budget=400),
        items=[context_item(tier="episodic", admitted=True, fused=0.03, relevance=1.0, time_decay=0.9,
                            importance_term=1.1, access_term=1.0, neighbour_of=HOSTILE, neighbour_step=1,
                            routes={"lexical": RouteHit(rank=1, score=0.016, bm25=2.5),
                                    "vector": RouteHit(rank=2, score=0.015, similarity=0.8)}),
               context_item(tier="profile", admitted=True,
                            profile=ProfileRank(rank=1, of=2, shared_terms=[HOSTILE], namespace_order=None,
                                                confidence=0.9, task_local=True))],
        below=[context_item(tier="episodic", admitted=False, not_admitted="budget")]),
}


@pytest.mark.parametrize("template", sorted(PAGES))
def test_every_page_shows_hostile_text_as_text(template):
    assert_shown_as_text(render(template, **PAGES[template]()))


def test_every_page_template_is_rendered_above():
    pages = {name for name in TEMPLATES.list_templates() if name not in ("base.html", "page.html", "macros.html",
                                                                          "explain_form.html")}
    assert pages == set(PAGES)


def test_a_forgotten_memory_shows_what_it_held_escaped():
    page = render("subject.html", **PAGES["subject.html"]())
    row = page[page.index('id="forgotten"'):page.index("<h2>Episodes")]
    assert "&lt;script&gt;" in row and "Restore" in row


def test_no_template_marks_data_safe_and_every_one_escapes():
    assert TEMPLATES.autoescape is True
    for template in sorted((CONSOLE / "templates").glob("*.html")):
        text = template.read_text()
        assert not re.search(r"\|\s*safe\b|Markup|autoescape\s+false|\|\s*e\b", text), template.name
    for module in sorted(CONSOLE.glob("*.py")):
        assert "Markup" not in module.read_text() and "markupsafe" not in module.read_text(), module.name


def test_styles_come_from_the_stylesheet_only():
    policy = SECURITY_HEADERS["Content-Security-Policy"]
    assert "style-src 'self'" in policy and "unsafe-inline" not in policy and "script-src" not in policy
    for template in sorted((CONSOLE / "templates").glob("*.html")):
        text = template.read_text()
        assert "<style" not in text and "style=" not in text and "<script" not in text, template.name


def test_the_templates_and_the_stylesheet_ship_in_the_package():
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    globs = package_data["agent_memory.api.console"]
    shipped = {path for pattern in globs for path in CONSOLE.glob(pattern)}
    files = {path for folder in ("templates", "static") for path in (CONSOLE / folder).iterdir()}
    assert files and files <= shipped
