"""A subject: its overview (sessions, candidates, forgotten memories, episodes), its facts now, as
of a time or every interval, and one session's messages."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import Response

from agent_memory.api.console import data
from agent_memory.api.console.frame import PREFIX, Checks, Page, path, signed_in
from agent_memory.core.errors import InvalidInput


def add_routes(routes: APIRouter, checks: Checks) -> None:
    """This group's pages, on the console's router (under PREFIX)."""

    @routes.get("/t/{tenant}/s/{subject}")
    async def subject_page(request: Request, tenant: str, subject: str) -> Response:
        async def render(page: Page) -> Response:
            client = page.client
            overview = await data.subject_overview(client.services.pool, client.services.keyring, tenant, subject,
                                                   client.admin.forget_grace)
            crumbs = [("tenants", PREFIX), (tenant, path("t", tenant)), (subject, None)]
            if overview.erased:
                return page.render("subject.html", f"Subject {subject}", crumbs, tenant=tenant, subject=subject,
                                   overview=overview)
            return page.render("subject.html", f"Subject {subject}", crumbs, tenant=tenant, subject=subject,
                               overview=overview, lag=await client.admin.projection_lag(tenant, subject),
                               parked=await _parked_ids(page, tenant, subject))
        return await signed_in(request, checks, render)

    @routes.get("/t/{tenant}/s/{subject}/facts")
    async def facts_page(request: Request, tenant: str, subject: str, as_of: str | None = None,
                         history: str | None = None) -> Response:
        async def render(page: Page) -> Response:
            client = page.client
            moment = _as_of(as_of)
            with_history = history not in (None, "", "0", "false")
            erased, views = await data.subject_facts(client.services.pool, client.services.keyring, tenant, subject,
                                                     as_of=moment, history=with_history)
            crumbs = [("tenants", PREFIX), (tenant, path("t", tenant)), (subject, path("t", tenant, "s", subject)),
                      ("facts", None)]
            shown = ("every interval, current and past" if with_history
                     else f"valid at {moment.isoformat()}" if moment else "valid now")
            return page.render("facts.html", f"Facts of {subject}", crumbs, tenant=tenant, subject=subject,
                               shown=shown, as_of=as_of or "", erased=erased, views=views)
        return await signed_in(request, checks, render)

    @routes.get("/t/{tenant}/s/{subject}/sessions/{session_id}")
    async def session_page(request: Request, tenant: str, subject: str, session_id: str) -> Response:
        async def render(page: Page) -> Response:
            client = page.client
            summary, messages = await data.session_messages(client.services.pool, client.services.keyring, tenant,
                                                            subject, session_id)
            crumbs = [("tenants", PREFIX), (tenant, path("t", tenant)), (subject, path("t", tenant, "s", subject)),
                      (f"session {session_id}", None)]
            return page.render("session.html", f"Session {session_id}", crumbs, tenant=tenant, subject=subject,
                               session_id=session_id, summary=summary, messages=messages)
        return await signed_in(request, checks, render)



def _as_of(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInput(f"as_of {value!r} is not a time: give an ISO 8601 time such as 2024-05-01T09:00:00Z "
                           "(or a date, 2024-05-01)") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


async def _parked_ids(page: Page, tenant: str, subject: str) -> set[str]:
    """The subject's consolidations parked on the token budget (none shown while Temporal is down)."""
    try:
        return {r.workflow_id for r in await page.client.admin.parked_consolidations(tenant, subject)}
    except Exception as exc:
        if page.checks.outage(exc) != "temporal":
            raise
        return set()
