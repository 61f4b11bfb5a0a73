"""Signing in and out, and the stylesheet every page links (served to anyone: it holds no data)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from agent_memory.api.console.frame import (
    COOKIE,
    COOKIE_MAX_AGE_SECONDS,
    PREFIX,
    SECURITY_HEADERS,
    STYLESHEET,
    STYLESHEET_PATH,
    Checks,
    Page,
    failure_page,
    local,
    read_form,
    same_origin,
    signed_in,
    signin_page,
    verify,
)


def add_routes(routes: APIRouter, checks: Checks) -> None:
    """This group's pages, on the console's router (under PREFIX)."""

    @routes.get("/signin")
    async def signin_form(request: Request, next: str = PREFIX) -> Response:
        return signin_page(next if local(next) else PREFIX)

    @routes.post("/signin")
    async def signin(request: Request) -> Response:
        try:
            form = await read_form(request)
            next_path = form.get("next", PREFIX)
            next_path = next_path if local(next_path) else PREFIX
            if not same_origin(request):
                return signin_page(PREFIX, "the sign-in form came from another site: open the console's own page",
                                   403)
            token = form.get("key", "").strip()
            if not token:
                return signin_page(next_path, "no key: paste the operator key (amo:…)", 401)
            await verify(request, token, checks.operator)
        except Exception as exc:
            return failure_page(request, exc, checks.outage)
        response = RedirectResponse(next_path, status_code=303, headers=SECURITY_HEADERS)
        response.set_cookie(COOKIE, token, max_age=COOKIE_MAX_AGE_SECONDS, path=PREFIX, httponly=True,
                            samesite="strict", secure=request.url.scheme == "https")
        return response

    @routes.post("/signout")
    async def signout(request: Request) -> Response:
        async def done(_: Page) -> Response:
            response = RedirectResponse(PREFIX + "/signin", status_code=303, headers=SECURITY_HEADERS)
            response.delete_cookie(COOKIE, path=PREFIX, httponly=True, samesite="strict",
                                   secure=request.url.scheme == "https")
            return response
        return await signed_in(request, checks, done, action=True)

    @routes.get(STYLESHEET_PATH.removeprefix(PREFIX))
    async def stylesheet() -> Response:
        # Its URL names its digest (frame.STYLESHEET_URL): a browser may keep it for a day.
        return Response(STYLESHEET, media_type="text/css; charset=utf-8",
                        headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "public, max-age=86400"})

