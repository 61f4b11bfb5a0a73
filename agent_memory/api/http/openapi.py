"""The OpenAPI document of `/v1` (`/v1/openapi.json`) says what the server does, so that a client
generator or a fuzzer driven by it meets no surprise: the bearer key scheme on the operations that
need a key, every status an operation answers with the problem+json document it carries (`Problem`,
in place of FastAPI's own 422 schema), the identifier rule on path parameters, and the body limit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import FastAPI, Path
from fastapi.openapi.utils import get_openapi
from fastapi.security import HTTPBearer
from pydantic import BaseModel, Field

from agent_memory.api.http.edge import MAX_BODY_BYTES
from agent_memory.core.models import IDENTIFIER_PATTERN, IDENTIFIER_RULE

PROBLEM_MEDIA_TYPE = "application/problem+json"
# The identifier rule as an ECMA-262 pattern (JSON Schema's dialect): there "$" ends the string,
# where Python's `re` needs "\Z".
IDENTIFIER_SCHEMA_PATTERN = IDENTIFIER_PATTERN.pattern.removesuffix(r"\Z") + "$"
BODY_LIMIT = f"A request body over {MAX_BODY_BYTES:,} bytes (1 MB) is refused with 413 before it is read."

API_DESCRIPTION = f"""Long-term memory for AI agents: the hooks an agent runtime calls (append a session's
messages, end a session) and the reads it makes (facts, recall, context, prompt, export), forgetting
a memory and erasing a subject.

**Keys.** Every route but `GET /v1/health` (liveness) and `GET /v1/ready` (readiness) needs `Authorization: Bearer amk:...`, an API key from
`agent-memory keys create`. The tenant comes from the key. Scopes nest: `read`, then `write`, then `erase`.

**Errors** are RFC 9457 `application/problem+json` documents (`Problem`): the detail is one line
naming the field and the fix, and `errors` lists every invalid field of a request.

**Identifiers** (subject, session and request ids): {IDENTIFIER_RULE}.

**Limits.** {BODY_LIMIT} Too many failed authentications from one address or for one key id are
answered 429 with `Retry-After`."""


class ProblemField(BaseModel):
    """One invalid field of a request."""

    field: str = Field(description="the field: a dotted path into the body ('messages.0.turn_index'), 'body' "
                                   "for the body as a whole, or 'query.<name>', 'path.<name>'")
    message: str = Field(description="what is wrong with it and how to fix it")


class Problem(BaseModel):
    """An RFC 9457 problem document: every error the API answers."""

    type: str = Field(description="a link to the documentation of the API's errors")
    title: str = Field(description="the kind of error, e.g. 'Invalid input'")
    status: int = Field(description="the HTTP status")
    detail: str = Field(description="one line naming the field and the fix")
    errors: list[ProblemField] | None = Field(default=None, description="every invalid field (422)")
    dependency: str | None = Field(default=None, description="the dependency that is down (503)")
    dependencies: dict[str, str] | None = Field(
        default=None, description="`GET /v1/ready` with an operator key: each dependency's state, `ok` or why not")
    error_id: str | None = Field(default=None, description="the server log's id of the failure (500)")


bearer_key = HTTPBearer(
    auto_error=False, scheme_name="ApiKey", bearerFormat="amk:{tenant}:{key id}:{secret}",
    description="An API key from `agent-memory keys create`, sent as `Authorization: Bearer amk:...`.")

_RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "integer"}}}
_STATUSES: dict[int, tuple[str, dict[str, Any] | None]] = {
    401: ("Unauthorized: no API key, or a malformed, unknown or revoked one", None),
    403: ("Forbidden: the key's scope does not allow this", None),
    404: ("Not found in the key's tenant", None),
    409: ("Conflict: a version, session or id that moved on or is taken, or an erased subject", None),
    413: (f"Request body too large: over {MAX_BODY_BYTES:,} bytes", None),
    422: ("Invalid input: the detail and `errors` name the field", None),
    429: ("Too many failed authentications: retry after `Retry-After` seconds", _RETRY_AFTER),
    500: ("Internal error: the detail quotes the `error_id` the server logged", None),
    503: ("A dependency (PostgreSQL, Redis, Temporal) is unavailable: retry after `Retry-After` seconds",
          _RETRY_AFTER),
}


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The `responses` of an operation: each status with its description and a problem+json
    `Problem` (a 500 is added to every operation)."""
    documented: dict[int | str, dict[str, Any]] = {}
    for status in sorted({*statuses, 500}):
        description, headers = _STATUSES[status]
        documented[status] = {"description": description,
                               "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
                               **({"headers": headers} if headers else {})}
    return documented


def keyed(*statuses: int, body: bool = False) -> dict[int | str, dict[str, Any]]:
    """The problems of an operation behind a key: its own statuses, and a key's 401, 403 and 429,
    a body's 413 and 422, a dependency's 503."""
    return problems(*statuses, 401, 403, 429, 503, *((413, 422) if body else ()))


SubjectId = Annotated[str, Path(description=f"the subject: {IDENTIFIER_RULE}",
                                json_schema_extra={"pattern": IDENTIFIER_SCHEMA_PATTERN})]
SessionId = Annotated[str, Path(description=f"the session: {IDENTIFIER_RULE}",
                                json_schema_extra={"pattern": IDENTIFIER_SCHEMA_PATTERN})]
RequestId = Annotated[str, Path(description=f"the erasure request: {IDENTIFIER_RULE}",
                                json_schema_extra={"pattern": IDENTIFIER_SCHEMA_PATTERN})]
MemoryId = Annotated[str, Path(description="the memory's UUID, as the facts and recall name it (`memory_id`)",
                               json_schema_extra={"format": "uuid"})]
WorkflowId = Annotated[str, Path(description="a run's workflow id, as ending a session or starting an erasure "
                                             "answers it (`workflow_id`, slashes included)")]


def document_problems(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """The app's `openapi()`: FastAPI's document with the `Problem` schema in its components, and
    FastAPI's own 422 (`HTTPValidationError`, which the server never answers) replaced by it on any
    operation that does not document its problems."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(title=app.title, version=app.version, description=app.description,
                                   routes=app.routes)
            invalid = problems(422)[422]
            for operations in document.get("paths", {}).values():
                for operation in operations.values():
                    responses = operation.get("responses", {})
                    if "application/json" in responses.get("422", {}).get("content", {}):
                        responses["422"] = invalid
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            schemas.pop("HTTPValidationError", None)
            schemas.pop("ValidationError", None)
            problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(problem.pop("$defs", {}))
            schemas["Problem"] = problem
            app.openapi_schema = document
        return app.openapi_schema

    return openapi
