"""`/codec`: Temporal's remote codec protocol, so the Temporal UI (and `temporal workflow show
--codec-endpoint`) shows the decrypted inputs and results of runs to an operator.

- `POST /codec/decode` and `POST /codec/encode`, body `{"payloads": [...]}` (Payloads as protobuf
  JSON), answered the same way; the `X-Namespace` header must name the deployment's namespace
  (one payload key serves one namespace).
- **Operator key only:** `Authorization: Bearer amo:...` (the temporal CLI's `--codec-auth`), or the
  operator cookie that `POST /codec/session` sets (`GET /codec` is the page to paste the key into).
  The UI cannot add a header of its own: it sends the cookie when its codec setting "include
  cross-origin credentials" is on (`TEMPORAL_CODEC_INCLUDE_CREDENTIALS=true`). Without a key, 401;
  with a tenant key, 403; the UI then keeps showing ciphertext. A sign-in (`POST /codec/session`)
  whose `Origin` is neither this server nor a UI origin is refused (403) before its key is read.
- **CORS:** the preflight and the answers carry `Access-Control-Allow-Origin` (with credentials)
  for the configured UI origins only (`Settings.ui_origins`); another origin gets 403 and no CORS
  header, so a page elsewhere cannot read what it made a browser fetch.

Decoding reads the workflow a payload is bound to from its metadata (payload_codec.BOUND_TO_FIELD).
A payload that is not this deployment's ciphertext (plain search attributes, another key) is
returned unchanged. Encoding binds to `UI_BINDING`, which names no workflow: an input typed into
the UI decodes here, and a worker refuses it (a start or signal must come from the product's client).
"""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, HTTPException, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from pydantic import BaseModel, ConfigDict, Field
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.converter import WorkflowSerializationContext

from agent_memory.core.errors import Forbidden, InvalidInput, NotFound
from agent_memory.security.api_keys import ApiKeyError
from agent_memory.security.operator_keys import OperatorKey
from agent_memory.security.payload_codec import ENCODING, EncryptionCodec, PayloadRejectedError

CODEC_PATH = "/codec"
COOKIE_NAME = "agent_memory_operator"
COOKIE_MAX_AGE_SECONDS = 12 * 3600
# Encoded for no workflow: a worker refuses it, this endpoint decodes it.
UI_BINDING = "(temporal-ui)"
ALLOWED_HEADERS = "Content-Type, X-Namespace, Authorization"
PREFLIGHT_MAX_AGE_SECONDS = 600


class PayloadsBody(BaseModel):
    model_config = ConfigDict(extra="allow")  # protobuf JSON; parsed below by the Payloads message
    payloads: list[dict[str, Any]] = Field(max_length=10_000)


class OperatorLogin(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str = Field(min_length=1, max_length=512, description="an operator key, amo:...")


def cors_headers(request: Request) -> dict[str, str] | None:
    """The CORS headers for the request's origin, or None when the origin is not the UI's."""
    origin = request.headers.get("origin")
    if origin is None or origin.rstrip("/") not in request.app.state.client.services.settings.ui_origins():
        return None
    return {"Access-Control-Allow-Origin": origin, "Access-Control-Allow-Credentials": "true", "Vary": "Origin"}


def _login_origin(request: Request, origin: str) -> bool:
    """Whether a sign-in may come from `origin`: this server (the page at `/codec`) or the UI's."""
    allowed = request.app.state.client.services.settings.ui_origins() | {f"{request.url.scheme}://{request.url.netloc}"}
    return origin.rstrip("/") in allowed


def _token(request: Request, authorization: str | None) -> str | None:
    if authorization and authorization.startswith("Bearer "):
        return authorization.removeprefix("Bearer ").strip() or None
    return request.cookies.get(COOKIE_NAME) or None


# http.auth.checked_operator_key: the operator key behind the API's failure limiter.
OperatorCheck = Callable[[Any, Any, str | None, str | None], Awaitable[OperatorKey]]


def _codec(request: Request, namespace: str | None) -> EncryptionCodec:
    settings = request.app.state.client.services.settings
    if namespace is not None and namespace != settings.temporal_namespace:
        raise NotFound(f"X-Namespace: this codec serves namespace {settings.temporal_namespace!r}, not "
                       f"{namespace!r}: point the UI of that namespace at its own deployment's codec")
    # Read at each call: a rotated payload key is served without a restart.
    return EncryptionCodec(request.app.state.client.services.keyring.provider.payload_keys())


def _parse(body: PayloadsBody) -> list[Payload]:
    try:
        return list(ParseDict({"payloads": body.payloads}, Payloads()).payloads)
    except ParseError as exc:
        raise InvalidInput(f"payloads: not Temporal Payloads in protobuf JSON ({exc})") from None


def _answer(request: Request, payloads: list[Payload]) -> JSONResponse:
    body = MessageToDict(Payloads(payloads=payloads))
    return JSONResponse({"payloads": body.get("payloads", [])}, headers=cors_headers(request))


async def _decode_one(codec: EncryptionCodec, payload: Payload) -> Payload:
    if payload.metadata.get("encoding") != ENCODING:
        return payload
    try:
        return codec.decode_one(payload)
    except PayloadRejectedError:
        return payload  # not decodable here: the UI shows it as it is


def _forget_cookie() -> str:
    response = Response()
    response.delete_cookie(COOKIE_NAME, path=CODEC_PATH, httponly=True, samesite="strict")
    return response.headers["set-cookie"]


def build_codec_router(check_operator: OperatorCheck) -> APIRouter:
    router = APIRouter(prefix=CODEC_PATH, include_in_schema=False)

    async def operator(request: Request, token: str | None) -> OperatorKey:
        return await check_operator(request.app.state.auth_failures, request.app.state.client.services.pool,
                                    request.client.host if request.client else None, token)

    async def codec_operator(request: Request,
                             authorization: Annotated[str | None, Header()] = None) -> OperatorKey:
        token = _token(request, authorization)
        if token is None:
            # Not a guess, so not charged to the failure limiter: a UI without the key asks on
            # every page, and would otherwise lock its address (the agents' hooks on loopback) out.
            raise ApiKeyError(f"no operator key: paste one at {CODEC_PATH} (a cookie for this server) or send "
                              "`Authorization: Bearer amo:...` (agent-memory keys create-operator)")
        try:
            return await operator(request, token)
        except ApiKeyError as exc:
            if authorization and authorization.startswith("Bearer "):
                raise
            # A key left in the cookie (revoked, mistyped) is charged once and forgotten, not sent
            # again by the UI on every page.
            raise HTTPException(401, str(exc), headers={"Set-Cookie": _forget_cookie()}) from None

    # A default, not an Annotated alias: this module's annotations are strings, resolved globally.
    needs_operator = Depends(codec_operator)

    @router.options("/{action}")
    async def preflight(request: Request, action: str) -> Response:
        headers = cors_headers(request)
        if headers is None or action not in ("decode", "encode", "session"):
            return Response(status_code=403)
        return Response(status_code=204, headers={**headers, "Access-Control-Allow-Methods": "POST, OPTIONS",
                                                  "Access-Control-Allow-Headers": ALLOWED_HEADERS,
                                                  "Access-Control-Max-Age": str(PREFLIGHT_MAX_AGE_SECONDS)})

    @router.post("/decode")
    async def decode(request: Request, body: PayloadsBody, _: OperatorKey = needs_operator,
                     x_namespace: Annotated[str | None, Header()] = None) -> JSONResponse:
        codec = _codec(request, x_namespace)
        return _answer(request, [await _decode_one(codec, p) for p in _parse(body)])

    @router.post("/encode")
    async def encode(request: Request, body: PayloadsBody, _: OperatorKey = needs_operator,
                     x_namespace: Annotated[str | None, Header()] = None) -> JSONResponse:
        codec = _codec(request, x_namespace).with_context(
            WorkflowSerializationContext(namespace=request.app.state.client.services.settings.temporal_namespace,
                                         workflow_id=UI_BINDING))
        return _answer(request, await codec.encode(_parse(body)))

    @router.post("/session")
    async def login(request: Request, body: OperatorLogin) -> JSONResponse:
        origin = request.headers.get("origin")
        if origin is not None and not _login_origin(request, origin):
            # Before the key is looked at: a page elsewhere can neither set this browser's key nor
            # spend the failure limit of its address.
            raise Forbidden(f"Origin {origin[:100]!r} may not sign in to the codec: use its page at {CODEC_PATH} "
                            "or the Temporal UI (AGENT_MEMORY_UI_ORIGIN)")
        await operator(request, body.key.strip())
        response = JSONResponse({"status": "ok", "codec": str(request.url_for("decode")).removesuffix("/decode")})
        response.set_cookie(COOKIE_NAME, body.key.strip(), max_age=COOKIE_MAX_AGE_SECONDS, path=CODEC_PATH,
                            httponly=True, samesite="strict", secure=request.url.scheme == "https")
        return response

    @router.delete("/session")
    async def logout() -> JSONResponse:
        return JSONResponse({"status": "signed out"}, headers={"Set-Cookie": _forget_cookie()})

    @router.get("")
    async def page(request: Request) -> HTMLResponse:
        origins = ", ".join(sorted(request.app.state.client.services.settings.ui_origins())) or "(none)"
        return HTMLResponse(LOGIN_PAGE.replace("{origins}", html.escape(origins)),
                            headers={"Content-Security-Policy": "default-src 'none'; script-src 'unsafe-inline'; "
                                     "style-src 'unsafe-inline'; connect-src 'self'; form-action 'none'",
                                     "X-Frame-Options": "DENY"})

    return router


LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>agent-memory codec</title>
<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto;line-height:1.5}
input{width:100%;font-family:monospace;padding:.4rem}button{margin-top:.6rem;padding:.4rem 1rem}</style></head>
<body><h1>Temporal UI codec</h1>
<p>Paste an operator key (<code>agent-memory keys create-operator</code>). This browser then sends it,
as a cookie of this server only, when the Temporal UI decodes a run's payloads. Turn on
<em>Include cross-origin credentials</em> in the UI's codec settings. UI origins allowed: {origins}.</p>
<form id="f"><input id="key" type="password" autocomplete="off" placeholder="amo:..."><button>Use this key</button>
<button type="button" id="out">Forget the key</button></form><p id="status" role="status"></p>
<script>
const status = document.getElementById('status');
document.getElementById('f').addEventListener('submit', async (e) => {
  e.preventDefault();
  const r = await fetch('codec/session', {method: 'POST', headers: {'Content-Type': 'application/json'},
                        body: JSON.stringify({key: document.getElementById('key').value})});
  const body = await r.json();
  status.textContent = r.ok ? 'Key accepted: the Temporal UI can decode in this browser.' : (body.detail || r.status);
});
document.getElementById('out').addEventListener('click', async () => {
  await fetch('codec/session', {method: 'DELETE'});
  status.textContent = 'Key forgotten.';
});
</script></body></html>
"""
