""""Why this item" (a subject's `/explain`): the operator types a query and sees the context it would
get, each item with the terms of its score, and the best candidates below the budget. Posted like
an action (the typed query stays out of URLs and access logs); it records no access."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from agent_memory.api.console import data
from agent_memory.api.console.frame import PREFIX, Checks, Page, path, signed_in
from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import check_identifier


def add_routes(routes: APIRouter, checks: Checks) -> None:
    """This group's pages, on the console's router (under PREFIX)."""

    @routes.get("/t/{tenant}/s/{subject}/explain")
    async def explain_form(request: Request, tenant: str, subject: str) -> Response:
        async def render(page: Page) -> Response:
            check_identifier("tenant", tenant)
            check_identifier("subject", subject)
            return page.render("explain.html", f"Why this item · {subject}", _crumbs(tenant, subject), tenant=tenant,
                               subject=subject, query="", budget="", assembled=None)
        return await signed_in(request, checks, render)

    @routes.post("/t/{tenant}/s/{subject}/explain")
    async def explain(request: Request, tenant: str, subject: str) -> Response:
        async def render(page: Page) -> Response:
            form = request.state.form
            query, budget_field = form.get("query", ""), form.get("budget", "").strip()
            try:
                budget = int(budget_field) if budget_field else None
            except ValueError:
                raise InvalidInput(f"budget {budget_field!r} is not a number: give tokens, e.g. 400, or leave it "
                                   "empty") from None
            assembled = await data.explained_context(page.client, tenant, subject, query, budget)
            return page.render("explain.html", f"Why this item · {subject}", _crumbs(tenant, subject), tenant=tenant,
                               subject=subject, query=query, budget=budget_field, assembled=assembled,
                               items=[i for i in assembled.items if i.explanation is not None],
                               below=[i for i in assembled.below_budget or [] if i.explanation is not None])
        return await signed_in(request, checks, render, action=True)



def _crumbs(tenant: str, subject: str) -> list[tuple[str, str | None]]:
    return [("tenants", PREFIX), (tenant, path("t", tenant)), (subject, path("t", tenant, "s", subject)),
            ("why this item", None)]
