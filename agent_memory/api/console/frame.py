"""The console's frame, shared by every page group: access (the operator key, its cookie, the
forms' token, the same-origin check), the templates every page renders through (Jinja2, every
value escaped), and the pages of a failed request."""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from agent_memory.api.admin_client import visibility_query
from agent_memory.api.client import MemoryClient
from agent_memory.api.console.data import PAGE_ROWS
from agent_memory.api.outages import SERVICE, count_unavailable
from agent_memory.api.user_errors import user_error_status
from agent_memory.core import contract
from agent_memory.core.errors import InvalidInput, ServiceUnavailable, first_line, new_error_id
from agent_memory.core.projection_models import ProjectionLag
from agent_memory.core.settings import Settings
from agent_memory.security.api_keys import ApiKeyError, TooManyFailuresError
from agent_memory.security.failure_limits import SharedFailureLimiter
from agent_memory.security.operator_keys import OperatorKey

# http.auth.checked_operator_key (the operator key behind the API's failure limiter) and
# outages.dependency_down (the dependency an error is the outage of), handed in by create_app.
OperatorCheck = Callable[[SharedFailureLimiter, Any, str | None, str | None], Awaitable[OperatorKey]]
OutageOf = Callable[[BaseException], str | None]
# Retry-After of a 503 page, as the API's: a restarting server is usually back within seconds.
RETRY_AFTER_SECONDS = 5


@dataclass(frozen=True)
class Checks:
    operator: OperatorCheck
    outage: OutageOf


PREFIX = "/console"
COOKIE = "agent_memory_console"
COOKIE_MAX_AGE_SECONDS = 8 * 3600
MAX_FORM_BYTES = 16_000
# What a finished action says on the page it returns to (fixed texts: nothing from the request is echoed).
DONE = {"forgotten": "Forgotten: every read stops returning it; restorable within the grace period.",
        "restored": "Restored: its rows are back, its vectors follow through the projector.",
        "confirmed": "Confirmed: the candidate is the current fact."}

log = logging.getLogger(__name__)

# The one stylesheet, a file of the package served by the console (no inline style: the CSP allows
# none). Its URL names its digest, so a browser may keep it and still fetches a changed one.
STYLESHEET = resources.files(__package__).joinpath("static", "console.css").read_bytes()
STYLESHEET_PATH = PREFIX + "/static/console.css"
STYLESHEET_URL = f"{STYLESHEET_PATH}?v={hashlib.sha256(STYLESHEET).hexdigest()[:16]}"
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; "
                               "base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # The console's URLs name tenants and subjects: none is sent on to the Temporal UI's links
    # (same-origin, not no-referrer: with no-referrer a browser's form posts say `Origin: null`).
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def path(*parts: object) -> str:
    """A console URL, each part percent-encoded (a tenant, subject or id is one path segment)."""
    return PREFIX + "".join("/" + quote(str(p), safe="") for p in parts)


def utc_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def every(seconds: float | None) -> str:
    """A Schedule's interval in its largest whole unit: 1 h, 15 min, 1 d."""
    if seconds is None:
        return "–"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"


def thousands(value: int) -> str:
    return f"{value:,}"


STATUS_KINDS = {"active": "ok", "completed": "ok", "candidate": "warn", "started": "warn", "running": "warn",
                "forgotten": "warn", "closed": "", "voided": "bad", "failed": "bad", "promoted": ""}


# The columns of a table of facts' intervals (a last one, empty, for the actions).
FACT_HEADERS = ["fact", "value", "status", "valid from → to", "last confirmed", "recorded from → to", "version",
                "confidence", "evidence", "written by"]


def status_kind(status: str) -> str:
    """The pill a status is shown in: ok, warn, bad, or plain."""
    return STATUS_KINDS.get(status, "")


def lag_state(lag: ProjectionLag) -> tuple[str, str]:
    """A projection lag as text and its pill's kind."""
    if lag.pending == 0 and lag.dead_letters == 0:
        return "up to date", "ok"
    age = f", oldest {lag.oldest_pending_age_seconds:.0f} s" if lag.oldest_pending_age_seconds is not None else ""
    dead = f", {lag.dead_letters} dead-lettered" if lag.dead_letters else ""
    return f"{lag.pending} pending ({lag.retrying} retrying{age}){dead}", "bad" if lag.dead_letters else "warn"


def removed_counts(removed: dict[str, int]) -> str:
    """What an erasure receipt says it removed, table by table."""
    return ", ".join(f"{k} {v}" for k, v in sorted(removed.items()) if v) or "–"


def describe_content(content: list[dict[str, Any]]) -> str:
    """What a forgotten memory held, from its events' payloads: each value once, in order
    (events that carry no value, a promotion or an end, add nothing)."""
    said: list[str] = []
    for payload in content:
        if "key" in payload and payload.get("value"):
            text = f"{payload.get('namespace', '')}/{payload['key']} = {payload['value']}"
        else:
            text = next((str(payload[f]) for f in ("summary", "text") if isinstance(payload.get(f), str)), "")
        if text and text not in said:
            said.append(text)
    return "; ".join(said) or "–"


class Links:
    """Links into the Temporal UI (AGENT_MEMORY_UI_URL) for the runs an item came from."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.workflows = settings.workflow_url("").rstrip("/")  # …/namespaces/{ns}/workflows

    def run(self, workflow_id: str) -> str:
        return self.settings.workflow_url(workflow_id)

    def runs(self, query: str) -> str:
        return f"{self.workflows}?{urlencode({'query': query})}"

    def schedule(self, schedule_id: str) -> str:
        return self.workflows.removesuffix("/workflows") + "/schedules/" + quote(schedule_id, safe="")


# Every template escapes every value it prints (autoescape on for all of them, whatever their name);
# no template marks data safe (tests/api/test_console_templates.py checks both).
TEMPLATES = jinja2.Environment(loader=jinja2.PackageLoader(__package__, "templates"), autoescape=True,
                               undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
TEMPLATES.globals.update(path=path, prefix=PREFIX, stylesheet=STYLESHEET_URL, page_rows=PAGE_ROWS, contract=contract,
                         fact_headers=FACT_HEADERS, visibility_query=visibility_query, status_kind=status_kind,
                         lag_state=lag_state)
TEMPLATES.filters.update(utc_time=utc_time, every=every, thousands=thousands, removed_counts=removed_counts,
                         described=describe_content)


def render(template: str, **context: Any) -> str:
    """A page's HTML from its template (agent_memory/api/console/templates)."""
    return TEMPLATES.get_template(template).render(**context)


def document(template: str, status: int = 200, headers: dict[str, str] | None = None, **context: Any) -> HTMLResponse:
    return HTMLResponse(render(template, **context), status_code=status,
                        headers={**SECURITY_HEADERS, **(headers or {})})


def csrf_token(token: str) -> str:
    """The forms' token: derived from the operator key, which a cross-site page cannot read."""
    return hmac.new(token.encode(), b"agent-memory-console-form", hashlib.sha256).hexdigest()


class Page:
    """One signed-in request: its operator key, its CSRF token, and the page frame."""

    def __init__(self, request: Request, key: OperatorKey, token: str, checks: Checks):
        self.request, self.key, self.csrf, self.checks = request, key, csrf_token(token), checks
        self.client: MemoryClient = request.app.state.client
        self.links = Links(self.client.services.settings)

    def render(self, template: str, title: str, crumbs: Iterable[tuple[str, str | None]],
               **context: Any) -> HTMLResponse:
        """A signed-in page: the header (breadcrumbs, the key, Sign out), the flash of a finished
        action, and the template's content."""
        return document(template, title=title, crumbs=list(crumbs), csrf=self.csrf, links=self.links,
                        operator=self.key.name or self.key.key_id,
                        done=DONE.get(self.request.query_params.get("done", "")), **context)


def signin_page(next_path: str = PREFIX, message: str | None = None, status: int = 200,
                headers: dict[str, str] | None = None) -> HTMLResponse:
    return document("signin.html", status, headers, title="Sign in", next_path=next_path, message=message)


def error_page(status: int, title: str, detail: str, headers: dict[str, str] | None = None) -> HTMLResponse:
    return document("error.html", status, headers, title=title, detail=detail)


def failure_page(request: Request, exc: Exception, outage: OutageOf) -> HTMLResponse:
    """The page of a failed request: what went wrong and what to do, never a traceback."""
    if isinstance(exc, TooManyFailuresError):
        return signin_page(PREFIX, str(exc), 429, {"Retry-After": str(exc.retry_after)})
    if isinstance(exc, ApiKeyError):
        return signin_page(_next_path(request), str(exc), 401)
    dependency = outage(exc)
    if dependency is not None:
        log.warning("%s %s: %s is unavailable: %s", request.method, request.url.path, dependency, exc)
        count_unavailable(dependency)
        name = {"postgres": "Postgres", "redis": "Redis", "temporal": "Temporal"}.get(dependency, dependency)
        return error_page(503, "Dependency unavailable",
                          f"{name} is unavailable (down or restarting): reload in {RETRY_AFTER_SECONDS} s",
                          {"Retry-After": str(RETRY_AFTER_SECONDS)})
    known = user_error_status(exc)
    if known is not None:
        status, title, _ = known
        return error_page(status, title, first_line(exc, title))
    if isinstance(exc, ServiceUnavailable):
        log.warning("%s %s: a service is unavailable: %s", request.method, request.url.path, exc)
        count_unavailable(SERVICE)
        return error_page(503, "Service unavailable", f"a service the console needs is unavailable: reload in "
                          f"{RETRY_AFTER_SECONDS} s", {"Retry-After": str(RETRY_AFTER_SECONDS)})
    error_id = new_error_id()
    log.error("%s %s failed: internal error %s", request.method, request.url.path, error_id, exc_info=exc)
    return error_page(500, "Internal error", f"the page failed on the server: internal error {error_id}, logged there")


def _next_path(request: Request) -> str:
    path = request.url.path
    return path if request.method == "GET" else PREFIX


def _token(request: Request) -> str | None:
    authorization = request.headers.get("authorization")
    if authorization and authorization.startswith("Bearer "):
        return authorization.removeprefix("Bearer ").strip() or None
    return request.cookies.get(COOKIE) or None


async def verify(request: Request, token: str, check: OperatorCheck) -> OperatorKey:
    client: MemoryClient = request.app.state.client
    return await check(request.app.state.auth_failures, client.services.pool,
                       request.client.host if request.client else None, token)


async def read_form(request: Request) -> dict[str, str]:
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise InvalidInput(f"form: over {MAX_FORM_BYTES:,} bytes; send the form as the page shows it")
    return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}


def same_origin(request: Request) -> bool:
    """A browser names the page a POST comes from; it must be this server (missing: a script)."""
    origin = request.headers.get("origin")
    return origin is None or origin == f"{request.url.scheme}://{request.url.netloc}"


def local(path: str) -> bool:
    """A path of the console itself (a sign-in never sends the browser elsewhere)."""
    return (path == PREFIX or path.startswith(PREFIX + "/")) and "//" not in path and "\\" not in path


def back(location: str) -> Response:
    """The redirect after an action (or to a page elsewhere), with the console's headers."""
    return RedirectResponse(location, status_code=303, headers=SECURITY_HEADERS)


Handler = Callable[[Page], Awaitable[Response]]


async def signed_in(request: Request, checks: Checks, handler: Handler, *, action: bool = False) -> Response:
    """Run a page (or an action) for a signed-in operator; every failure becomes a page."""
    try:
        token = _token(request)
        if token is None:
            return signin_page(_next_path(request), "Sign in with an operator key to open the console.", 401)
        key = await verify(request, token, checks.operator)
        page = Page(request, key, token, checks)
        if action:
            form = await read_form(request)
            # A browser sends the cookie by itself, whatever Authorization header it adds: a request
            # carrying the cookie needs the form's token. A script's `Bearer` key without the cookie
            # is no browser's ambient credential, and needs none.
            with_cookie = COOKIE in request.cookies
            if not same_origin(request) or (with_cookie and not hmac.compare_digest(form.get("csrf", ""),
                                                                                    page.csrf)):
                return error_page(403, "Forbidden", "the form is stale or from another site: reload the page and "
                                                    "submit it again")
            request.state.form = form
        return await handler(page)
    except Exception as exc:
        return failure_page(request, exc, checks.outage)
