"""The tenants: every tenant with its projection lag and episode importance, and the Schedules'
latest runs (`/console`); one tenant's subjects, parked consolidations, erasure requests and
receipts, episode importance and review marks (`/console/t/{tenant}`); an erasure request's run."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import Response

from agent_memory.api.admin_client import ParkedRun
from agent_memory.api.console import data
from agent_memory.api.console.frame import PREFIX, Checks, Page, back, signed_in
from agent_memory.core.models import check_identifier
from agent_memory.core.projection_models import ProjectionLag
from agent_memory.store.inventory import ImportanceSpread


@dataclass(frozen=True)
class TenantRow:
    tenant: str
    lag: ProjectionLag
    spread: ImportanceSpread


def add_routes(routes: APIRouter, checks: Checks) -> None:
    """This group's pages, on the console's router (under PREFIX)."""

    @routes.get("")
    async def tenants(request: Request) -> Response:
        async def render(page: Page) -> Response:
            client = page.client
            rows = [TenantRow(tenant, await client.admin.projection_lag(tenant), await client.admin.importance_spread(tenant))
                    for tenant in (await data.list_tenants(client.services.pool))[:data.PAGE_ROWS]]
            return page.render("tenants.html", "Tenants", [("tenants", None)], tenants=rows,
                               schedules=await _schedules(page), now=datetime.now(UTC))
        return await signed_in(request, checks, render)

    @routes.get("/t/{tenant}")
    async def tenant_page(request: Request, tenant: str) -> Response:
        async def render(page: Page) -> Response:
            check_identifier("tenant", tenant)
            client = page.client
            pool = client.services.pool
            return page.render(
                "tenant.html", f"Tenant {tenant}", [("tenants", PREFIX), (tenant, None)], tenant=tenant,
                subjects=await data.list_subjects(pool, tenant), lag=await client.admin.projection_lag(tenant),
                erasures=await data.erasure_requests(pool, client.services.keyring, tenant),
                budget=await client.admin.get_token_budget(tenant), spread=await client.admin.importance_spread(tenant),
                parked=await _parked(page, tenant), marks=await client.admin.stale_marks(tenant, limit=data.PAGE_ROWS))
        return await signed_in(request, checks, render)

    @routes.get("/t/{tenant}/erasures/{request_id}/run")
    async def erasure_run(request: Request, tenant: str, request_id: str) -> Response:
        async def go(page: Page) -> Response:
            check_identifier("tenant", tenant)
            services = page.client.services
            workflow_id = await data.erasure_workflow_id(services.pool, services.temporal, tenant, request_id)
            return back(services.settings.workflow_url(workflow_id))
        return await signed_in(request, checks, go)



async def _parked(page: Page, tenant: str) -> list[ParkedRun] | None:
    """The tenant's consolidations waiting for its token budget (None: Temporal is down)."""
    try:
        return await page.client.admin.parked_consolidations(tenant)
    except Exception as exc:
        if page.checks.outage(exc) != "temporal":
            raise
        return None


async def _schedules(page: Page) -> list[data.ScheduleView] | None:
    """The deployment's Schedules with their latest runs (None: Temporal is down)."""
    try:
        return await data.describe_schedules(page.client.services.temporal)
    except Exception as exc:
        if page.checks.outage(exc) != "temporal":
            raise
        return None
