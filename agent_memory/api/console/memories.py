"""One memory (its intervals, episode or note, and evidence) and the actions on memories that exist
behind the API's scopes: forget and restore a memory, confirm a candidate — through MemoryClient,
recorded with the operator key's id as actor."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from agent_memory.api.console import data
from agent_memory.api.console.frame import PREFIX, Checks, Page, back, path, signed_in


def add_routes(routes: APIRouter, checks: Checks) -> None:
    """This group's pages, on the console's router (under PREFIX)."""

    @routes.get("/t/{tenant}/s/{subject}/m/{memory_id}")
    async def memory_page(request: Request, tenant: str, subject: str, memory_id: str) -> Response:
        async def render(page: Page) -> Response:
            client = page.client
            memory = await data.memory_detail(client.services.pool, client.services.keyring, tenant, subject,
                                              memory_id)
            name = (f"{memory.facts[-1].fact.namespace}/{memory.facts[-1].fact.key}" if memory.facts
                    else "episode" if memory.episode else "note" if memory.note else "memory")
            crumbs = [("tenants", PREFIX), (tenant, path("t", tenant)), (subject, path("t", tenant, "s", subject)),
                      ("facts", path("t", tenant, "s", subject, "facts")), (name, None)]
            until = memory.forgotten.forgotten_at + client.admin.forget_grace if memory.forgotten is not None else None
            return page.render("memory.html", name, crumbs, tenant=tenant, subject=subject, name=name, memory=memory,
                               restorable_until=until)
        return await signed_in(request, checks, render)

    @routes.post("/t/{tenant}/s/{subject}/m/{memory_id}/forget")
    async def forget(request: Request, tenant: str, subject: str, memory_id: str) -> Response:
        async def act(page: Page) -> Response:
            reason = request.state.form.get("reason", "").strip() or None
            await page.client.forget(tenant, subject, memory_id, reason=reason, actor="operator",
                                     actor_id=f"operator-key:{page.key.key_id}")
            return back(path("t", tenant, "s", subject) + "?done=forgotten#forgotten")
        return await signed_in(request, checks, act, action=True)

    @routes.post("/t/{tenant}/s/{subject}/m/{memory_id}/restore")
    async def restore(request: Request, tenant: str, subject: str, memory_id: str) -> Response:
        async def act(page: Page) -> Response:
            reason = request.state.form.get("reason", "").strip() or None
            await page.client.restore(tenant, subject, memory_id, reason=reason, actor="operator",
                                      actor_id=f"operator-key:{page.key.key_id}")
            return back(path("t", tenant, "s", subject, "m", memory_id) + "?done=restored")
        return await signed_in(request, checks, act, action=True)

    @routes.post("/t/{tenant}/s/{subject}/candidates/{memory_id}/confirm")
    async def confirm(request: Request, tenant: str, subject: str, memory_id: str) -> Response:
        async def act(page: Page) -> Response:
            await page.client.admin.confirm_fact(tenant, subject, memory_id, actor="operator",
                                           actor_id=f"operator-key:{page.key.key_id}")
            return back(path("t", tenant, "s", subject) + "?done=confirmed#candidates")
        return await signed_in(request, checks, act, action=True)

