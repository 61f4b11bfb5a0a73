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
- **Reads:** `data`, tenant by tenant as the application role (RLS).
  "Why this item" (a subject's `/explain`): the operator types a query and sees the context it
  would get, each item with the terms of its score and the best candidates below the budget;
  posted like an action (the typed query stays out of URLs and access logs), it records no access.
- **Pages:** server-rendered HTML from Jinja2 templates (`templates/`) that escape every value;
  no script; the one stylesheet is a file the console serves (`static/console.css`), and the CSP
  allows stylesheets from this server only, none inline. Errors are pages too: 401 sign-in, 403,
  404, 422 naming the field, 429, and 503 naming the dependency that is down.

Modules: `frame` (access, the templates, error pages), a router per group of pages — `access`
(sign-in, sign-out, the stylesheet), `tenants`, `subjects`, `memories` (a memory and the actions),
`explain` — and `data` (the reads).
"""

from __future__ import annotations

from fastapi import APIRouter

from agent_memory.api.console import access, explain, memories, subjects, tenants
from agent_memory.api.console.frame import COOKIE, PREFIX, Checks, OperatorCheck, OutageOf

__all__ = ["COOKIE", "PREFIX", "build_console_router"]


def build_console_router(check_operator: OperatorCheck, outage: OutageOf) -> APIRouter:
    """The console's routes; `check_operator` verifies an operator key (http.auth.checked_operator_key),
    `outage` names the dependency an error is the outage of (outages.dependency_down)."""
    router = APIRouter(prefix=PREFIX, include_in_schema=False)
    checks = Checks(check_operator, outage)
    for group in (access, tenants, subjects, memories, explain):
        group.add_routes(router, checks)
    return router
