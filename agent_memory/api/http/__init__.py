"""The HTTP API (`agent-memory serve`): the hooks and reads an agent runtime in any language calls.

FastAPI, because the OpenAPI document (`/v1/openapi.json`) and request validation come from the
same pydantic models the library already uses. The server is uvicorn. Every route is versioned
under `/v1`.

- **Authentication:** `Authorization: Bearer amk:...`, an API key from `agent-memory keys create`.
  The tenant comes from the key, never from the URL or the body. Row-level security still
  applies underneath, because every call runs in the key's tenant. Scopes nest: `read`, then
  `write` (append, end a session), then `erase` (forget, restore, erasure).
- **Errors:** RFC 9457 problem+json, `{type, title, status, detail, errors?}`; `type` is
  `/v1/problems#<kind>`, served by the API (`problems.PROBLEM_TYPES`, docs/problems.md). The detail names
  the field and the fix; no traceback ever reaches a caller.
- **Limits:** request bodies over 1 MB are refused with 413 before they are read. Failed
  authentications are limited per client address and per key id, in Redis across the API's
  processes (429 with `Retry-After`; agent_memory.security.failure_limits); a valid key is always
  served. Forwarded client addresses count only from `AGENT_MEMORY_TRUSTED_PROXIES`. A connection must send a request's headers within the header timeout and
  may not stall a body longer than the body timeout (`EdgeH11Protocol`); an idle keep-alive
  connection is closed after uvicorn's keep-alive timeout.
- **Degraded mode:** a dependency that is down or stalls (Postgres, Redis, Temporal) is answered
  503 problem+json naming it, with `Retry-After`, within the dependency deadline; any other failure is a 500 problem+json with an
  `error_id`, under which the server's log holds the traceback (agent_memory.core.errors).
- **MCP:** `/mcp` serves the MCP tools over streamable HTTP behind the same keys (`WithMcp`).

Modules: `app` (the FastAPI app: error handlers and routers), `problems` (problem+json answers),
`openapi` (what the OpenAPI document states: the key scheme, each operation's problems, id rules),
`auth` (the key dependencies behind the failure limiter), `deps` (the client and the subject of a
route), `routes/` (a router per resource: health, sessions, memory, erasure), `edge` (the body
limit and the connection's read timeouts), `deadline` (a stalled dependency answered 503 within its
deadline), `server` (`/mcp`, uvicorn, serving in a loop).
"""

from agent_memory.api.http.app import create_app
from agent_memory.api.http.server import serve_app, serving

__all__ = ["create_app", "serve_app", "serving"]
