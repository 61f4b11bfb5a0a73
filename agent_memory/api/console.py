"""The memory console: `/console` of `agent-memory serve`, web pages of what memory holds.

Tenants → subjects → a subject's sessions (consolidated or not), facts with their validity and
recorded intervals (now, as of a time, or the whole history), each memory with its evidence
messages, candidates awaiting confirmation, forgotten memories in their grace period; per tenant
the erasure requests and receipts (the subject as its keyed digest) and the projection lag; the
Schedules' latest runs. Every item links to its run in the Temporal UI (AGENT_MEMORY_UI_URL).

- **Access:** an operator key (`agent-memory keys create-operator`), never a tenant's (403). A
  browser signs in with a form that posts the key; the key is then kept in an HttpOnly,
  SameSite=Strict cookie scoped to /console (Secure over https) and verified on every request,
  behind the same failure limiter as the API. A script may send `Authorization: Bearer amo:...`.
- **Actions:** only those that exist behind scopes already — confirm a candidate, forget and
  restore a memory — through MemoryClient, recorded with the operator key's id as actor. Each
  form carries a token derived from the key (CSRF); a cross-site request carries no cookie
  (SameSite=Strict) and no token, and a foreign Origin is refused.
- **Reads:** agent_memory.api.console_data, tenant by tenant as the application role (RLS).
  "Why this item" (a subject's `/explain`): the operator types a query and sees the context it
  would get, each item with the terms of its score and the best candidates below the budget;
  posted like an action (the typed query stays out of URLs and access logs), it records no access.
- **Pages:** server-rendered HTML, every value escaped; no script; a CSP allows the one inline
  stylesheet only. Errors are pages too: 401 sign-in, 403, 404, 422 naming the field, 429, and
  503 naming the dependency that is down.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from agent_memory.api import console_data as data
from agent_memory.api.client import MemoryClient, visibility_query
from agent_memory.api.outages import SERVICE, count_unavailable
from agent_memory.api.user_errors import user_error_status
from agent_memory.core import contract
from agent_memory.core.errors import InvalidInput, ServiceUnavailable, first_line, new_error_id
from agent_memory.core.models import TokenBudgetState, check_identifier
from agent_memory.security.api_keys import ApiKeyError, TooManyFailuresError
from agent_memory.security.failure_limits import SharedFailureLimiter
from agent_memory.security.operator_keys import OperatorKey
from agent_memory.store.inventory import ImportanceSpread

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

CSS = """
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;background:#f4f6f9}
header{display:flex;align-items:center;gap:18px;padding:10px 22px;background:#1f2a44;color:#fff}
header a{color:#fff;text-decoration:none}
.brand{font-weight:600;letter-spacing:.2px}
nav{flex:1;color:#aab6d3}
nav a{color:#dfe6f5}
nav .sep{margin:0 6px;color:#6f7fa6}
main{max-width:1200px;margin:0 auto;padding:18px 22px 40px}
h1{font-size:22px;margin:4px 0 14px}
h2{font-size:16px;margin:26px 0 8px;color:#2d3a5c}
section{background:#fff;border:1px solid #dde3ee;border-radius:8px;padding:12px 16px;margin:14px 0}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #edf0f5;vertical-align:top}
th{font-size:12px;text-transform:uppercase;letter-spacing:.4px;color:#5b6785;background:#f8f9fc}
tr:hover td{background:#fafbfe}
.time{white-space:nowrap}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
a{color:#2456c9}
.muted{color:#6b7690}
.pill{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;background:#e8ecf5;color:#34405e}
.ok{background:#dff3e6;color:#17613a}
.warn{background:#fff1d6;color:#7a4b00}
.bad{background:#fde2e1;color:#8a1f1a}
.flash{padding:10px 14px;border-radius:6px;background:#dff3e6;color:#17613a;margin:10px 0}
.error{padding:12px 16px;border-radius:6px;background:#fde2e1;color:#8a1f1a;margin:10px 0}
.cards{display:flex;gap:12px;flex-wrap:wrap}
.card{background:#fff;border:1px solid #dde3ee;border-radius:8px;padding:10px 14px;min-width:150px}
.card b{display:block;font-size:20px}
form.inline{display:inline}
input[type=text],input[type=password],input[type=datetime-local]{padding:6px 8px;border:1px solid #c5cee0;border-radius:5px;font:inherit}
button{padding:5px 12px;border:1px solid #2456c9;background:#2456c9;color:#fff;border-radius:5px;font:inherit;cursor:pointer}
button.secondary{background:#fff;color:#2456c9}
header button{background:transparent;border-color:#6f7fa6;color:#dfe6f5}
.signin{max-width:460px;margin:70px auto}
.signin input{width:100%;margin:8px 0 12px}
.message{white-space:pre-wrap;overflow-wrap:break-word;min-width:8em}
"""
STYLE_HASH = base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()
SECURITY_HEADERS = {
    "Content-Security-Policy": f"default-src 'none'; style-src 'sha256-{STYLE_HASH}'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # The console's URLs name tenants and subjects: none is sent on to the Temporal UI's links
    # (same-origin, not no-referrer: with no-referrer a browser's form posts say `Origin: null`).
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def when(value: datetime | None) -> str:
    if value is None:
        return '<span class="muted">–</span>'
    return f'<span class="mono time">{esc(value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S"))}Z</span>'


def csrf_token(token: str) -> str:
    """The forms' token: derived from the operator key, which a cross-site page cannot read."""
    return hmac.new(token.encode(), b"agent-memory-console-form", hashlib.sha256).hexdigest()


def _path(*parts: str) -> str:
    return PREFIX + "".join("/" + quote(p, safe="") for p in parts)


class Links:
    """Links into the Temporal UI (AGENT_MEMORY_UI_URL) for the runs an item came from."""

    def __init__(self, client: MemoryClient):
        self.settings = client.services.settings
        self.workflows = self.settings.workflow_url("").rstrip("/")  # …/namespaces/{ns}/workflows

    def run(self, workflow_id: str, label: str = "run") -> str:
        return f'<a href="{esc(self.settings.workflow_url(workflow_id))}" rel="noreferrer">{esc(label)} ↗</a>'

    def runs(self, query: str, label: str) -> str:
        return f'<a href="{esc(self.workflows)}?{esc(urlencode({"query": query}))}" rel="noreferrer">{esc(label)} ↗</a>'

    def schedule(self, schedule_id: str) -> str:
        url = self.workflows.removesuffix("/workflows") + "/schedules/" + quote(schedule_id, safe="")
        return f'<a href="{esc(url)}" rel="noreferrer">{esc(schedule_id)} ↗</a>'


class Page:
    """One signed-in request: its operator key, its CSRF token, and the page frame."""

    def __init__(self, request: Request, key: OperatorKey, token: str, checks: Checks):
        self.request, self.key, self.csrf, self.checks = request, key, csrf_token(token), checks
        self.client: MemoryClient = request.app.state.client
        self.links = Links(self.client)

    def form(self, action: str, label: str, *, reason: bool = False, secondary: bool = False) -> str:
        field = '<input type="text" name="reason" placeholder="reason (optional)" maxlength="1000"> ' if reason else ""
        css = ' class="secondary"' if secondary else ""
        return (f'<form class="inline" method="post" action="{esc(action)}">'
                f'<input type="hidden" name="csrf" value="{esc(self.csrf)}">{field}<button{css}>{esc(label)}</button>'
                "</form>")

    def render(self, title: str, crumbs: Iterable[tuple[str, str | None]], body: str, status: int = 200) -> HTMLResponse:
        done = DONE.get(self.request.query_params.get("done", ""))
        flash = f'<div class="flash" role="status">{esc(done)}</div>' if done else ""
        trail = '<span class="sep">/</span>'.join(
            f'<a href="{esc(href)}">{esc(text)}</a>' if href else esc(text) for text, href in crumbs)
        signout = self.form(PREFIX + "/signout", "Sign out")
        header = (f'<header><a class="brand" href="{PREFIX}">agent-memory console</a><nav>{trail}</nav>'
                  f'<span class="muted">key {esc(self.key.name or self.key.key_id)}</span>{signout}</header>')
        return document(title, header + f"<main>{flash}{body}</main>", status)


def document(title: str, content: str, status: int = 200, headers: dict[str, str] | None = None) -> HTMLResponse:
    page = (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)} · agent-memory console</title><style>{CSS}</style></head>"
            f"<body>{content}</body></html>")
    return HTMLResponse(page, status_code=status, headers={**SECURITY_HEADERS, **(headers or {})})


def signin_page(next_path: str = PREFIX, message: str | None = None, status: int = 200,
                headers: dict[str, str] | None = None) -> HTMLResponse:
    error = f'<div class="error" role="alert">{esc(message)}</div>' if message else ""
    body = (f'<header><span class="brand">agent-memory console</span></header><main><section class="signin">'
            f"<h1>Sign in</h1>{error}"
            '<p class="muted">The console needs an operator key: <code>agent-memory keys create-operator</code>. '
            "A tenant's API key does not open it.</p>"
            f'<form method="post" action="{PREFIX}/signin"><label for="key">Operator key</label>'
            '<input id="key" type="password" name="key" autocomplete="off" placeholder="amo:…" required autofocus>'
            f'<input type="hidden" name="next" value="{esc(next_path)}"><button>Sign in</button></form>'
            "</section></main>")
    return document("Sign in", body, status, headers)


def error_page(status: int, title: str, detail: str, headers: dict[str, str] | None = None) -> HTMLResponse:
    body = (f'<header><a class="brand" href="{PREFIX}">agent-memory console</a></header><main>'
            f'<h1>{esc(title)}</h1><div class="error" role="alert">{esc(detail)}</div>'
            f'<p><a href="{PREFIX}">Back to the tenants</a></p></main>')
    return document(title, body, status, headers)


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


async def _verify(request: Request, token: str, check: OperatorCheck) -> OperatorKey:
    client: MemoryClient = request.app.state.client
    return await check(request.app.state.auth_failures, client.services.pool,
                       request.client.host if request.client else None, token)


async def _form(request: Request) -> dict[str, str]:
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise InvalidInput(f"form: over {MAX_FORM_BYTES:,} bytes; send the form as the page shows it")
    return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}


def _same_origin(request: Request) -> bool:
    """A browser names the page a POST comes from; it must be this server (missing: a script)."""
    origin = request.headers.get("origin")
    return origin is None or origin == f"{request.url.scheme}://{request.url.netloc}"


Handler = Callable[[Page], Awaitable[Response]]


async def signed_in(request: Request, checks: Checks, handler: Handler, *, action: bool = False) -> Response:
    """Run a page (or an action) for a signed-in operator; every failure becomes a page."""
    try:
        token = _token(request)
        if token is None:
            return signin_page(_next_path(request), "Sign in with an operator key to open the console.", 401)
        key = await _verify(request, token, checks.operator)
        page = Page(request, key, token, checks)
        if action:
            form = await _form(request)
            # A browser sends the cookie by itself, whatever Authorization header it adds: a request
            # carrying the cookie needs the form's token. A script's `Bearer` key without the cookie
            # is no browser's ambient credential, and needs none.
            with_cookie = COOKIE in request.cookies
            if not _same_origin(request) or (with_cookie and not hmac.compare_digest(form.get("csrf", ""),
                                                                                     page.csrf)):
                return error_page(403, "Forbidden", "the form is stale or from another site: reload the page and "
                                                    "submit it again")
            request.state.form = form
        return await handler(page)
    except Exception as exc:
        return failure_page(request, exc, checks.outage)


def _as_of(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInput(f"as_of {value!r} is not a time: give an ISO 8601 time such as 2024-05-01T09:00:00Z "
                           "(or a date, 2024-05-01)") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _pill(text: str, kind: str = "") -> str:
    return f'<span class="pill {esc(kind)}">{esc(text)}</span>'


def _table(headers: list[str], rows: list[str], empty: str) -> str:
    if not rows:
        return f'<p class="muted">{esc(empty)}</p>'
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    more = (f'<p class="muted">The first {data.PAGE_ROWS} are listed.</p>' if len(rows) >= data.PAGE_ROWS else "")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{more}"


def _lag(lag: Any) -> str:
    if lag.pending == 0 and lag.dead_letters == 0:
        return _pill("up to date", "ok")
    age = f", oldest {lag.oldest_pending_age_seconds:.0f} s" if lag.oldest_pending_age_seconds is not None else ""
    dead = f", {lag.dead_letters} dead-lettered" if lag.dead_letters else ""
    return _pill(f"{lag.pending} pending ({lag.retrying} retrying{age}){dead}", "bad" if lag.dead_letters else "warn")


def _review_marks(tenant: str, marks: list[Any]) -> str:
    """The daily review's marks in force (docs/lifecycle.md, "Review"): ids and reasons, no text."""
    rows = [f'<tr><td><a href="{esc(_path("t", tenant, "s", m.subject_id))}">{esc(m.subject_id)}</a></td>'
            f"<td>{esc(m.memory_kind)}</td><td><code>{esc(m.memory_id)}</code></td><td>{_pill(m.reason, 'warn')}</td>"
            f"<td>{len(m.related_memory_ids)}</td><td>{when(m.marked_at)}</td><td><code>{esc(m.mark_id)}</code></td></tr>"
            for m in marks]
    return _table(["subject", "kind", "memory", "reason", "related", "marked", "mark"], rows,
                  "Nothing marked: the daily review found nothing stale, or every mark is resolved.")


def _status_pill(status: str) -> str:
    kind = {"active": "ok", "completed": "ok", "candidate": "warn", "started": "warn", "running": "warn",
            "forgotten": "warn", "closed": "", "voided": "bad", "failed": "bad", "promoted": ""}.get(status, "")
    return _pill(status, kind)


def _fact_rows(page: Page, tenant: str, subject: str, views: list[data.FactView], *, memory_link: bool = True,
               actions: bool = False) -> list[str]:
    rows = []
    for view in views:
        f = view.fact
        run = (page.links.run(contract.consolidation_workflow_id(tenant, subject, view.session_id),
                              f"session {view.session_id}") if view.session_id
               else f'<span class="muted">{esc(view.operation_id.split("/", 1)[0] or "live")} write</span>')
        name = f"{f.namespace}/{f.key}"
        label = (f'<a href="{esc(_path("t", tenant, "s", subject, "m", f.memory_id))}">{esc(name)}</a>'
                 if memory_link else esc(name))
        evidence = f'{len(f.evidence_message_ids)} message{"s" if len(f.evidence_message_ids) != 1 else ""}'
        action = ""
        if actions and f.status == "candidate":
            action = page.form(_path("t", tenant, "s", subject, "candidates", f.memory_id, "confirm"), "Confirm")
        reason = f'<br><span class="muted">{esc(view.close_reason)}</span>' if view.close_reason else ""
        valid_to = when(f.valid_to) if f.valid_to else '<span class="muted">open</span>'
        writer = f'<br><span class="muted mono">{esc(f.extracted_by)}</span>' if f.extracted_by else ""
        recorded_to = when(view.recorded_to) if view.recorded_to else '<span class="muted">now</span>'
        rows.append(
            f'<tr><td>{label}</td><td class="message">{esc(f.value)}</td><td>{_status_pill(f.status)}{reason}</td>'
            f"<td>{when(f.valid_from)} → {valid_to}</td><td>{when(f.last_confirmed_at)}</td>"
            f"<td>{when(f.recorded_at)} → {recorded_to}</td>"
            f"<td>v{f.version}</td><td>{f.confidence:.2f}</td><td>{esc(evidence)}</td><td>{run}{writer}</td>"
            + (f"<td>{action}</td>" if actions else "") + "</tr>")
    return rows


FACT_HEADERS = ["fact", "value", "status", "valid from → to", "last confirmed", "recorded from → to", "version",
                "confidence", "evidence", "written by"]


def _messages_table(messages: list[data.EvidenceMessage], tenant: str, subject: str, *, session_link: bool) -> str:
    rows = []
    for m in messages:
        session = (f'<a href="{esc(_path("t", tenant, "s", subject, "sessions", m.session_id))}">{esc(m.session_id)}</a>'
                   if session_link else esc(m.session_id))
        who = esc(m.speaker or m.role)
        rows.append(f"<tr><td class=\"mono\">{esc(m.message_id)}</td><td>{session}</td><td>{who}</td>"
                    f"<td class=\"message\">{esc(m.content)}</td><td>{when(m.created_at)}</td></tr>")
    return _table(["message", "session", "speaker", "content", "written"], rows, "No message is cited.")


def build_console_router(check_operator: OperatorCheck, outage: OutageOf) -> APIRouter:
    """The console's routes; `check_operator` verifies an operator key (http.auth.checked_operator_key),
    `outage` names the dependency an error is the outage of (outages.dependency_down)."""
    router = APIRouter(prefix=PREFIX, include_in_schema=False)
    checks = Checks(check_operator, outage)

    @router.get("/signin")
    async def signin_form(request: Request, next: str = PREFIX) -> Response:
        return signin_page(next if _local(next) else PREFIX)

    @router.post("/signin")
    async def signin(request: Request) -> Response:
        try:
            form = await _form(request)
            next_path = form.get("next", PREFIX)
            next_path = next_path if _local(next_path) else PREFIX
            if not _same_origin(request):
                return signin_page(PREFIX, "the sign-in form came from another site: open the console's own page",
                                   403)
            token = form.get("key", "").strip()
            if not token:
                return signin_page(next_path, "no key: paste the operator key (amo:…)", 401)
            await _verify(request, token, checks.operator)
        except Exception as exc:
            return failure_page(request, exc, checks.outage)
        response = RedirectResponse(next_path, status_code=303, headers=SECURITY_HEADERS)
        response.set_cookie(COOKIE, token, max_age=COOKIE_MAX_AGE_SECONDS, path=PREFIX, httponly=True,
                            samesite="strict", secure=request.url.scheme == "https")
        return response

    @router.post("/signout")
    async def signout(request: Request) -> Response:
        async def done(_: Page) -> Response:
            response = RedirectResponse(PREFIX + "/signin", status_code=303, headers=SECURITY_HEADERS)
            response.delete_cookie(COOKIE, path=PREFIX, httponly=True, samesite="strict",
                                   secure=request.url.scheme == "https")
            return response
        return await signed_in(request, checks, done, action=True)

    @router.get("")
    async def tenants(request: Request) -> Response:
        async def render(page: Page) -> Response:
            client = page.client
            rows = []
            for tenant in (await data.list_tenants(client.services.pool))[:data.PAGE_ROWS]:
                lag = await client.projection_lag(tenant)
                spread = await client.importance_spread(tenant)
                rows.append(f'<tr><td><a href="{esc(_path("t", tenant))}">{esc(tenant)}</a></td><td>{_lag(lag)}</td>'
                            f"<td>{_importance_summary(spread)}</td>"
                            f"<td>{page.links.runs(visibility_query(tenant), 'runs')}</td></tr>")
            body = ("<h1>Tenants</h1><section>"
                    + _table(["tenant", "projection", "episode importance", "Temporal"], rows,
                             "No tenant has stored anything yet.")
                    + "</section><h2>Schedules</h2><section>" + await _schedules(page) + "</section>")
            return page.render("Tenants", [("tenants", None)], body)
        return await signed_in(request, checks, render)

    @router.get("/t/{tenant}")
    async def tenant_page(request: Request, tenant: str) -> Response:
        async def render(page: Page) -> Response:
            check_identifier("tenant", tenant)
            client = page.client
            subjects = await data.list_subjects(client.services.pool, tenant)
            lag = await client.projection_lag(tenant)
            erasures = await data.erasure_requests(client.services.pool, client.services.keyring, tenant)
            budget = await client.token_budget(tenant)
            spread = await client.importance_spread(tenant)
            rows = [f'<tr><td><a href="{esc(_path("t", tenant, "s", s.subject_id))}">{esc(s.subject_id)}</a></td>'
                    f"<td>{s.sessions}</td><td>{s.facts}</td>"
                    f"<td>{_pill(str(s.candidates), 'warn') if s.candidates else 0}</td>"
                    f"<td>{s.forgotten}</td><td>{when(s.last_message_at)}</td></tr>" for s in subjects]
            body = (f"<h1>Tenant {esc(tenant)}</h1>"
                    f'<div class="cards"><div class="card"><span class="muted">subjects</span><b>{len(subjects)}</b></div>'
                    f'<div class="card"><span class="muted">projection</span><br>{_lag(lag)}</div>'
                    f'<div class="card"><span class="muted">model tokens today (UTC)</span><br>{_budget(budget)}</div>'
                    f'<div class="card"><span class="muted">episode importance</span><br>'
                    f'<a href="#importance">{_importance_summary(spread)}</a></div>'
                    f'<div class="card"><span class="muted">Temporal</span><br>'
                    f"{page.links.runs(visibility_query(tenant), 'every run of the tenant')}</div></div>"
                    "<h2>Subjects</h2><section>"
                    + _table(["subject", "sessions", "current facts", "candidates", "forgotten", "last message"],
                             rows, "No subject in this tenant.")
                    + '</section><h2 id="parked">Consolidations parked on the token budget</h2><section>'
                    + await _parked(page, tenant)
                    + '</section><h2 id="erasures">Erasure requests and receipts</h2><section>'
                    + _erasures(tenant, erasures) + "</section>"
                    + '<h2 id="importance">Episode importance</h2><section>' + _importance(spread) + "</section>"
                    + '<h2 id="review">Review marks</h2><section>'
                    + _review_marks(tenant, await client.stale_marks(tenant, limit=data.PAGE_ROWS)) + "</section>")
            return page.render(f"Tenant {tenant}", [("tenants", PREFIX), (tenant, None)], body)
        return await signed_in(request, checks, render)

    @router.get("/t/{tenant}/erasures/{request_id}/run")
    async def erasure_run(request: Request, tenant: str, request_id: str) -> Response:
        async def go(page: Page) -> Response:
            check_identifier("tenant", tenant)
            services = page.client.services
            workflow_id = await data.erasure_workflow_id(services.pool, services.temporal, tenant, request_id)
            return RedirectResponse(services.settings.workflow_url(workflow_id), status_code=303,
                                    headers=SECURITY_HEADERS)
        return await signed_in(request, checks, go)

    @router.get("/t/{tenant}/s/{subject}")
    async def subject_page(request: Request, tenant: str, subject: str) -> Response:
        async def render(page: Page) -> Response:
            client = page.client
            overview = await data.subject_overview(client.services.pool, client.services.keyring, tenant, subject,
                                                   client.forget_grace)
            crumbs = [("tenants", PREFIX), (tenant, _path("t", tenant)), (subject, None)]
            if overview.erased:
                body = (f"<h1>Subject {esc(subject)}</h1><div class=\"error\">This subject was erased: nothing of it "
                        f'is kept but its receipt (<a href="{esc(_path("t", tenant))}#erasures">erasure requests</a>).'
                        "</div>")
                return page.render(f"Subject {subject}", crumbs, body)
            lag = await client.projection_lag(tenant, subject)
            links = page.links
            parked = await _parked_ids(page, tenant, subject)
            sessions = []
            for s in overview.sessions:
                state = (_pill("consolidated", "ok") if s.consolidated_through and not s.pending
                         else _pill(f"{s.pending} not consolidated", "warn") if s.consolidated_through
                         else _pill("not consolidated", "warn"))
                if contract.consolidation_workflow_id(tenant, subject, s.session_id) in parked:
                    state += " " + _pill(contract.PARKED_TOKEN_BUDGET, "warn")
                sessions.append(
                    f'<tr><td><a href="{esc(_path("t", tenant, "s", subject, "sessions", s.session_id))}">'
                    f"{esc(s.session_id)}</a></td><td>{s.messages}</td><td>{state}</td>"
                    f"<td>{when(s.last_message_at)}</td><td>{when(s.consolidated_through)}</td>"
                    f"<td>{links.run(contract.consolidation_workflow_id(tenant, subject, s.session_id), 'consolidation')}"
                    f" · {links.run(contract.idle_workflow_id(tenant, subject, s.session_id), 'idle timer')}</td></tr>")
            episodes = [f'<tr><td><a href="{esc(_path("t", tenant, "s", subject, "m", str(e.memory_id)))}">'
                        f"{esc(e.session_id)}</a></td><td class=\"message\">{esc(e.summary)}</td><td>{e.importance}</td>"
                        f"<td>{when(e.happened_at)}</td></tr>" for e in overview.episodes]
            forgotten = []
            for f in overview.forgotten:
                content = _describe_content(f.content)
                forgotten.append(
                    f'<tr><td class="mono"><a href="{esc(_path("t", tenant, "s", subject, "m", str(f.memory.memory_id)))}">'
                    f"{esc(str(f.memory.memory_id)[:8])}</a></td><td>{esc(f.memory.memory_kind)}</td>"
                    f'<td class="message">{esc(content)}</td><td>{when(f.memory.forgotten_at)}</td>'
                    f"<td>{esc(f.memory.actor)}{' (' + esc(f.memory.actor_id) + ')' if f.memory.actor_id else ''}</td>"
                    f"<td>{when(f.restorable_until)}</td>"
                    f"<td>{page.form(_path('t', tenant, 's', subject, 'm', str(f.memory.memory_id), 'restore'), 'Restore')}"
                    "</td></tr>")
            facts_url = _path("t", tenant, "s", subject, "facts")
            body = (f"<h1>Subject {esc(subject)}</h1>"
                    f'<div class="cards"><div class="card"><span class="muted">current facts</span>'
                    f'<b><a href="{esc(facts_url)}">{overview.current_facts}</a></b></div>'
                    f'<div class="card"><span class="muted">sessions</span><b>{len(overview.sessions)}</b></div>'
                    f'<div class="card"><span class="muted">candidates</span><b>{len(overview.candidates)}</b></div>'
                    f'<div class="card"><span class="muted">forgotten, in grace</span><b>{len(overview.forgotten)}</b></div>'
                    f'<div class="card"><span class="muted">projection</span><br>{_lag(lag)}<br>'
                    f"{links.run(contract.projector_workflow_id(tenant, subject), 'projector')}</div>"
                    f'<div class="card"><span class="muted">Temporal</span><br>'
                    f"{links.runs(visibility_query(tenant, subject), 'every run of the subject')}</div></div>"
                    f'<p><a href="{esc(facts_url)}">Facts now</a> · '
                    f'<a href="{esc(facts_url)}?history=1">every interval (history)</a></p>'
                    "<h2>Sessions</h2><section>"
                    + _table(["session", "messages", "consolidation", "last message", "consolidated through", "runs"],
                             sessions, "No session.")
                    + '</section><h2 id="candidates">Candidates awaiting confirmation</h2><section>'
                    + _table([*FACT_HEADERS, ""], _fact_rows(page, tenant, subject, overview.candidates, actions=True),
                             "No candidate waits for confirmation.")
                    + '</section><h2 id="forgotten">Forgotten memories in their grace period</h2><section>'
                    + _table(["memory", "kind", "what it held", "forgotten", "by", "restorable until", ""], forgotten,
                             "No memory is forgotten.")
                    + "</section><h2>Episodes</h2><section>"
                    + _table(["session", "summary", "importance", "happened"], episodes, "No episode.") + "</section>"
                    + f'<h2 id="explain">Why this item</h2><section>{_explain_form(page, tenant, subject)}</section>')
            return page.render(f"Subject {subject}", crumbs, body)
        return await signed_in(request, checks, render)

    @router.get("/t/{tenant}/s/{subject}/explain")
    async def explain_form(request: Request, tenant: str, subject: str) -> Response:
        async def render(page: Page) -> Response:
            check_identifier("tenant", tenant)
            check_identifier("subject", subject)
            return page.render(f"Why this item · {subject}", _explain_crumbs(tenant, subject),
                               f"<h1>Why this item <span class=\"muted\">— {esc(subject)}</span></h1>"
                               f"<section>{_explain_form(page, tenant, subject)}</section>")
        return await signed_in(request, checks, render)

    @router.post("/t/{tenant}/s/{subject}/explain")
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
            body = (f"<h1>Why this item <span class=\"muted\">— {esc(subject)}</span></h1>"
                    f"<section>{_explain_form(page, tenant, subject, query, budget_field)}</section>"
                    + _explanation_tables(tenant, subject, assembled))
            return page.render(f"Why this item · {subject}", _explain_crumbs(tenant, subject), body)
        return await signed_in(request, checks, render, action=True)

    @router.get("/t/{tenant}/s/{subject}/facts")
    async def facts_page(request: Request, tenant: str, subject: str, as_of: str | None = None,
                         history: str | None = None) -> Response:
        async def render(page: Page) -> Response:
            client = page.client
            moment = _as_of(as_of)
            with_history = history not in (None, "", "0", "false")
            erased, views = await data.subject_facts(client.services.pool, client.services.keyring, tenant, subject,
                                                     as_of=moment, history=with_history)
            crumbs = [("tenants", PREFIX), (tenant, _path("t", tenant)), (subject, _path("t", tenant, "s", subject)),
                      ("facts", None)]
            url = _path("t", tenant, "s", subject, "facts")
            shown = ("every interval, current and past" if with_history
                     else f"valid at {moment.isoformat()}" if moment else "valid now")
            controls = (f'<form method="get" action="{esc(url)}">'
                        f'<label for="as_of">As of </label><input id="as_of" type="text" name="as_of" '
                        f'placeholder="2024-05-01T09:00:00Z" value="{esc(as_of or "")}"> <button>Show</button> '
                        f'<a href="{esc(url)}">now</a> · <a href="{esc(url)}?history=1">history</a></form>')
            table = ('<div class="error">This subject was erased.</div>' if erased else
                     _table(FACT_HEADERS, _fact_rows(page, tenant, subject, views), "No fact."))
            body = (f"<h1>Facts of {esc(subject)} <span class=\"muted\">— {esc(shown)}</span></h1>"
                    f"<section>{controls}</section><section>{table}</section>"
                    '<p class="muted">Valid: when it was true. Recorded: when memory held it (to: when a later '
                    "write superseded it).</p>")
            return page.render(f"Facts of {subject}", crumbs, body)
        return await signed_in(request, checks, render)

    @router.get("/t/{tenant}/s/{subject}/sessions/{session_id}")
    async def session_page(request: Request, tenant: str, subject: str, session_id: str) -> Response:
        async def render(page: Page) -> Response:
            client = page.client
            summary, messages = await data.session_messages(client.services.pool, client.services.keyring, tenant,
                                                            subject, session_id)
            state = ("consolidated" if summary.consolidated_through and not summary.pending
                     else f"{summary.pending} message(s) not consolidated")
            body = (f"<h1>Session {esc(session_id)} <span class=\"muted\">of {esc(subject)}</span></h1>"
                    f"<p>{_pill(state, 'ok' if state == 'consolidated' else 'warn')} · consolidated through "
                    f"{when(summary.consolidated_through)} · "
                    f"{page.links.run(contract.consolidation_workflow_id(tenant, subject, session_id), 'consolidation')}"
                    f" · {page.links.run(contract.idle_workflow_id(tenant, subject, session_id), 'idle timer')}</p>"
                    f"<section>{_messages_table(messages, tenant, subject, session_link=False)}</section>")
            crumbs = [("tenants", PREFIX), (tenant, _path("t", tenant)), (subject, _path("t", tenant, "s", subject)),
                      (f"session {session_id}", None)]
            return page.render(f"Session {session_id}", crumbs, body)
        return await signed_in(request, checks, render)

    @router.get("/t/{tenant}/s/{subject}/m/{memory_id}")
    async def memory_page(request: Request, tenant: str, subject: str, memory_id: str) -> Response:
        async def render(page: Page) -> Response:
            client = page.client
            memory = await data.memory_detail(client.services.pool, client.services.keyring, tenant, subject,
                                              memory_id)
            parts = []
            name = (f"{memory.facts[-1].fact.namespace}/{memory.facts[-1].fact.key}" if memory.facts
                    else "episode" if memory.episode else "note" if memory.note else "memory")
            if memory.forgotten is not None:
                until = memory.forgotten.forgotten_at + client.forget_grace
                parts.append(f'<div class="error">Forgotten {when(memory.forgotten.forgotten_at)} by '
                             f"{esc(memory.forgotten.actor)} ({esc(memory.forgotten.state)}); restorable until "
                             f"{when(until)} "
                             + (page.form(_path("t", tenant, "s", subject, "m", memory.memory_id, "restore"), "Restore")
                                if memory.forgotten.state == "forgotten" else "") + "</div>")
            else:
                parts.append("<section>" + page.form(_path("t", tenant, "s", subject, "m", memory.memory_id, "forget"),
                                                     "Forget this memory", reason=True)
                             + ' <span class="muted">Restorable within the grace period.</span></section>')
            if memory.facts:
                parts.append("<h2>Intervals</h2><section>"
                             + _table([*FACT_HEADERS, ""], _fact_rows(page, tenant, subject, memory.facts,
                                                                      memory_link=False, actions=True), "") + "</section>")
            for kind, item in (("Episode", memory.episode), ("Note", memory.note)):
                if item is None:
                    continue
                text = getattr(item, "summary", None) or getattr(item, "text", "")
                parts.append(f"<h2>{kind}</h2><section><p class=\"message\">{esc(text)}</p><p>session "
                             f'<a href="{esc(_path("t", tenant, "s", subject, "sessions", item.session_id))}">'
                             f"{esc(item.session_id)}</a> · happened {when(item.happened_at)} · "
                             f"{page.links.run(contract.consolidation_workflow_id(tenant, subject, item.session_id), 'consolidation')}"
                             "</p></section>")
            parts.append("<h2>Evidence</h2><section>"
                         + _messages_table(memory.evidence, tenant, subject, session_link=True) + "</section>")
            crumbs = [("tenants", PREFIX), (tenant, _path("t", tenant)), (subject, _path("t", tenant, "s", subject)),
                      ("facts", _path("t", tenant, "s", subject, "facts")), (name, None)]
            body = (f"<h1>{esc(name)} <span class=\"muted mono\">{esc(memory.memory_id)}</span></h1>" + "".join(parts))
            return page.render(name, crumbs, body)
        return await signed_in(request, checks, render)

    @router.post("/t/{tenant}/s/{subject}/m/{memory_id}/forget")
    async def forget(request: Request, tenant: str, subject: str, memory_id: str) -> Response:
        async def act(page: Page) -> Response:
            reason = request.state.form.get("reason", "").strip() or None
            await page.client.forget(tenant, subject, memory_id, reason=reason, actor="operator",
                                     actor_id=f"operator-key:{page.key.key_id}")
            return _back(_path("t", tenant, "s", subject) + "?done=forgotten#forgotten")
        return await signed_in(request, checks, act, action=True)

    @router.post("/t/{tenant}/s/{subject}/m/{memory_id}/restore")
    async def restore(request: Request, tenant: str, subject: str, memory_id: str) -> Response:
        async def act(page: Page) -> Response:
            reason = request.state.form.get("reason", "").strip() or None
            await page.client.restore(tenant, subject, memory_id, reason=reason, actor="operator",
                                      actor_id=f"operator-key:{page.key.key_id}")
            return _back(_path("t", tenant, "s", subject, "m", memory_id) + "?done=restored")
        return await signed_in(request, checks, act, action=True)

    @router.post("/t/{tenant}/s/{subject}/candidates/{memory_id}/confirm")
    async def confirm(request: Request, tenant: str, subject: str, memory_id: str) -> Response:
        async def act(page: Page) -> Response:
            await page.client.confirm_fact(tenant, subject, memory_id, actor="operator",
                                           actor_id=f"operator-key:{page.key.key_id}")
            return _back(_path("t", tenant, "s", subject) + "?done=confirmed#candidates")
        return await signed_in(request, checks, act, action=True)

    return router


def _explain_crumbs(tenant: str, subject: str) -> list[tuple[str, str | None]]:
    return [("tenants", PREFIX), (tenant, _path("t", tenant)), (subject, _path("t", tenant, "s", subject)),
            ("why this item", None)]


def _explain_form(page: Page, tenant: str, subject: str, query: str = "", budget: str = "") -> str:
    return (f'<form method="post" action="{esc(_path("t", tenant, "s", subject, "explain"))}">'
            f'<input type="hidden" name="csrf" value="{esc(page.csrf)}">'
            '<label for="query">Query </label><input id="query" type="text" name="query" required '
            f'maxlength="4000" size="60" placeholder="what an agent would ask" value="{esc(query)}"> '
            '<label for="budget">budget </label><input id="budget" type="text" name="budget" inputmode="numeric" '
            f'size="6" placeholder="policy" value="{esc(budget)}"> <button>Explain the context</button></form>'
            '<p class="muted">The context this query gets, each item with the terms of its score, and the best '
            "candidates that did not fit. Nothing is recorded as read.</p>")


def _num(value: float | None, digits: int = 3) -> str:
    return '<span class="muted">–</span>' if value is None else f"{value:.{digits}f}"


def _route(x: Any, name: str) -> str:
    hit = x.routes.get(name)
    if hit is None:
        return '<span class="muted">–</span>'
    extra = (f" · bm25 {hit.bm25:.2f}" if hit.bm25 is not None else "") + (
        f" · sim {hit.similarity:.3f}" if hit.similarity is not None else "")
    return f"#{hit.rank} <span class=\"muted\">({hit.score:.4f}{extra})</span>"


def _explanation_tables(tenant: str, subject: str, assembled: Any) -> str:
    """The context's items, then the candidates below the budget, each with its explanation."""
    def rows(items: list[Any]) -> list[str]:
        out = []
        for item in items:
            x = item.explanation
            if x is None:
                continue
            state = _pill("in", "ok") if x.admitted else _pill(f"out: {x.not_admitted}", "warn")
            if x.profile is not None:
                p = x.profile
                why = (f"profile rank {p.rank} of {p.of}; shares {esc(', '.join(p.shared_terms)) or 'no query word'}"
                       + ("; task-local, read in its session" if p.task_local else ""))
                terms = f'<td colspan="4">{why}</td><td colspan="5" class="muted">confidence {p.confidence:.2f}</td>'
            else:
                neighbour = (f'<br><span class="muted">next in time to {esc(x.neighbour_of[:8])}, step '
                             f"{x.neighbour_step}</span>" if x.neighbour_of else "")
                terms = (f"<td>{_route(x, 'lexical')}</td><td>{_route(x, 'vector')}</td><td>{_route(x, 'entity')}</td>"
                         f"<td>{_num(x.fused, 4)}</td><td>{_num(x.relevance)}{neighbour}</td><td>{_num(x.time_decay)}</td>"
                         f"<td>{_num(x.importance_term, 2)}</td><td>{_num(x.access_term)}</td>"
                         f"<td>{_num(x.staleness_term, 2)}</td>")
            link = _path("t", tenant, "s", subject, "m", item.memory_id)
            out.append(f"<tr><td>{state}</td><td>{esc(x.tier)} · {esc(item.kind)}</td>"
                       f'<td class="message"><a href="{esc(link)}">{esc(item.text)}</a></td>'
                       f"<td><b>{x.score:.4f}</b></td>{terms}</tr>")
        return out

    headers = ["", "tier · kind", "item", "score", "lexical", "vector", "entity", "fused", "relevance", "time decay",
               "importance", "access", "staleness"]
    return ("<h2>In the context</h2><section>"
            + _table(headers, rows(assembled.items), "Nothing in memory matches: the context is empty.")
            + f'<p class="muted">{len(assembled.items)} items, ~{assembled.tokens} of {assembled.budget} tokens. An '
            "episodic item's score is relevance × time decay × importance × staleness × access; a route's figure "
            "in brackets is its share of the fused score.</p></section>"
            "<h2>Below the budget</h2><section>"
            + _table(headers, rows(assembled.below_budget or []), "Every candidate fit.") + "</section>")


def _local(path: str) -> bool:
    """A path of the console itself (a sign-in never sends the browser elsewhere)."""
    return (path == PREFIX or path.startswith(PREFIX + "/")) and "//" not in path and "\\" not in path


def _back(location: str) -> Response:
    return RedirectResponse(location, status_code=303, headers=SECURITY_HEADERS)


def _describe_content(content: list[dict[str, Any]]) -> str:
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


def _erasures(tenant: str, erasures: list[data.ErasureRow]) -> str:
    rows = []
    for e in erasures:
        receipt = e.receipt or {}
        removed = receipt.get("removed") or {}
        removed_text = ", ".join(f"{k} {v}" for k, v in sorted(removed.items()) if v) or "–"
        residue = receipt.get("residue_total")
        checks = ("" if not receipt or e.status != "completed" else
                  _pill("residue 0", "ok") if residue == 0 else _pill(f"residue {residue}", "bad"))
        if receipt.get("key_shredded"):
            checks += " " + _pill("key shredded", "ok")
        digest = e.subject_digest.removeprefix("erased:")
        rows.append(f"<tr><td class=\"mono\">{esc(e.request_id)}</td>"
                    f'<td class="mono" title="{esc(e.subject_digest)}">erased:{esc(digest[:16])}…</td>'
                    f"<td>{_status_pill(e.status)}{' · re-driven ' + str(e.redrive_count) + '×' if e.redrive_count else ''}"
                    f"</td><td>{when(e.requested_at)}</td><td>{when(e.completed_at)}</td>"
                    f"<td>{esc(removed_text)}</td><td>{checks}</td>"
                    f'<td><a href="{esc(_path("t", tenant, "erasures", e.request_id, "run"))}">run ↗</a></td></tr>')
    return _table(["request", "subject (digest)", "status", "requested", "completed", "removed", "receipt", "Temporal"],
                  rows, "No erasure request.")


def _importance_summary(spread: ImportanceSpread) -> str:
    if spread.collapsed:
        return _pill(f"collapsed to {spread.min} ({spread.episodes} episodes)", "bad")
    if not spread.episodes:
        return '<span class="muted">no episodes</span>'
    return esc(f"{spread.min}–{spread.max}, median {spread.median:g} ({spread.episodes} episodes)")


def _importance(spread: ImportanceSpread) -> str:
    """Episodes per importance score as a bar per score (text: the page's policy allows no inline style)."""
    if not spread.episodes:
        return '<p class="muted">No episode yet.</p>'
    widest = max(spread.per_score.values())
    rows = [f'<tr><td>{score}</td><td>{n}</td><td class="mono">{"█" * round(30 * n / widest)}</td></tr>'
            for score, n in spread.per_score.items()]
    warning = f'<p class="error">{esc(spread.warning)}</p>' if spread.warning else ""
    return (warning + f'<p class="muted">{spread.episodes} episodes: min {spread.min}, median {spread.median:g}, '
            f"max {spread.max}.</p>" + _table(["score", "episodes", ""], rows, ""))


def _budget(budget: TokenBudgetState) -> str:
    if budget.daily_tokens is None:
        return f"{budget.used_tokens:,} (no budget)"
    text = f"{budget.used_tokens:,} of {budget.daily_tokens:,}"
    return _pill(f"{text}: spent", "warn") if budget.exhausted else esc(text)


async def _parked_ids(page: Page, tenant: str, subject: str) -> set[str]:
    """The subject's consolidations parked on the token budget (none shown while Temporal is down)."""
    try:
        return {r.workflow_id for r in await page.client.parked_consolidations(tenant, subject)}
    except Exception as exc:
        if page.checks.outage(exc) != "temporal":
            raise
        return set()


async def _parked(page: Page, tenant: str) -> str:
    """The tenant's consolidations waiting for its token budget, with how to release them."""
    try:
        parked = await page.client.parked_consolidations(tenant)
    except Exception as exc:
        if page.checks.outage(exc) != "temporal":
            raise
        return '<div class="error">Temporal is unavailable: the parked runs cannot be read (reload in a few seconds).</div>'
    rows = [f"<tr><td>{page.links.run(r.workflow_id, r.workflow_id)}</td><td>{_pill(contract.PARKED_TOKEN_BUDGET, 'warn')}"
            f"</td><td>{when(r.started_at)}</td></tr>" for r in parked]
    hint = ('<p class="muted">They resume at the next UTC day, or at once when the budget is raised: '
            f"<code>agent-memory token-budget set --tenant {esc(tenant)} --daily-tokens N</code>.</p>") if parked else ""
    return _table(["consolidation", "state", "started"], rows, "No consolidation is parked.") + hint


async def _schedules(page: Page) -> str:
    try:
        schedules = await data.describe_schedules(page.client.services.temporal)
    except Exception as exc:
        if page.checks.outage(exc) != "temporal":
            raise
        return '<div class="error">Temporal is unavailable: the Schedules cannot be read (reload in a few seconds).</div>'
    rows = []
    for s in schedules:
        if not s.exists:
            rows.append(f"<tr><td>{esc(s.schedule_id)}</td><td colspan=\"4\" class=\"muted\">not created (a worker "
                        "creates the Schedules when it starts)</td></tr>")
            continue
        runs = " ".join(f"{page.links.run(r.workflow_id, (r.started_at or datetime.now(UTC)).strftime('%m-%d %H:%M'))} "
                        f"{_status_pill(r.status) if r.status else ''}" for r in s.recent) or '<span class="muted">none yet</span>'
        rows.append(f"<tr><td>{page.links.schedule(s.schedule_id)}</td><td>{esc(_every(s.every_seconds))}"
                    f"{' ' + _pill('paused', 'warn') if s.paused else ''}</td><td>{runs}</td><td>{when(s.next_run)}</td></tr>")
    return _table(["schedule", "every", "latest runs", "next run"], rows, "")


def _every(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"
