"""The Temporal UI's codec endpoint (`/codec` of `serve`), called as the UI calls it: a CORS
preflight from the UI's origin, then `POST /codec/decode` with `X-Namespace` and the payloads of a
real run's history as protobuf JSON, with the operator's key (header or cookie)."""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from google.protobuf.json_format import MessageToDict

from agent_memory.api.codec_server import COOKIE_NAME, UI_BINDING
from agent_memory.core.settings import Settings
from agent_memory.security.api_keys import create_key
from agent_memory.security.operator_keys import create_operator_key, revoke_operator_key
from agent_memory.security.payload_codec import ENCODING
from tests.api.test_http_api import MESSAGES, api, bearer
from workers.embedded import EmbeddedStack, Ports


def ui_origin(services) -> str:
    return services.settings.ui_url.rstrip("/")


def as_ui(services, **extra: str) -> dict[str, str]:
    return {"Origin": ui_origin(services), "Content-Type": "application/json",
            "X-Namespace": services.settings.temporal_namespace, **extra}


async def started_input(client, tenant, running_worker) -> list[dict]:
    """The start input of a finished consolidation, as the UI reads it from the history: ciphertext."""
    await client.append_messages(tenant, "lin", _session())
    handle = await client.end_session(tenant, "lin", "h1")
    async with running_worker():
        await client.consolidation_result(handle)
    history = await handle.fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    return MessageToDict(started.input)["payloads"]


def _session():
    from agent_memory.core.models import Session

    return Session(session_id="h1", messages=MESSAGES)


async def test_the_ui_decodes_a_run_with_an_operator_key_and_only_from_its_origin(client, services, tenant,
                                                                               running_worker):
    payloads = await started_input(client, tenant, running_worker)
    assert base64.b64decode(payloads[0]["metadata"]["encoding"]) == ENCODING
    operator = (await create_operator_key(services.pool, "codec-test")).token
    async with api(client) as http:
        # The preflight of the UI's origin is allowed, with credentials; any other origin is not.
        preflight = await http.options("/codec/decode", headers={
            "Origin": ui_origin(services), "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,x-namespace"})
        assert preflight.status_code == 204
        assert preflight.headers["access-control-allow-origin"] == ui_origin(services)
        assert preflight.headers["access-control-allow-credentials"] == "true"
        assert "x-namespace" in preflight.headers["access-control-allow-headers"].lower()
        elsewhere = await http.options("/codec/decode", headers={"Origin": "http://evil.example",
                                                                 "Access-Control-Request-Method": "POST"})
        assert elsewhere.status_code == 403 and "access-control-allow-origin" not in elsewhere.headers

        decoded = await http.post("/codec/decode", headers=as_ui(services, **bearer(operator)),
                                  json={"payloads": payloads})
        assert decoded.status_code == 200
        assert decoded.headers["access-control-allow-origin"] == ui_origin(services)
        plain = decoded.json()["payloads"][0]
        assert base64.b64decode(plain["metadata"]["encoding"]) == b"json/plain"
        assert json.loads(base64.b64decode(plain["data"]))["subject_id"] == "lin"
        # From another origin the answer carries no CORS header: a browser there cannot read it.
        foreign = await http.post("/codec/decode", headers={**as_ui(services, **bearer(operator)),
                                                            "Origin": "http://evil.example"},
                                  json={"payloads": payloads})
        assert "access-control-allow-origin" not in foreign.headers

        # The UI sends no header of its own: the operator cookie, set once through /codec/session.
        assert (await http.get("/codec")).status_code == 200
        login = await http.post("/codec/session", json={"key": operator})
        assert login.status_code == 200 and COOKIE_NAME in login.cookies
        cookie = login.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/codec" in cookie
        by_cookie = await http.post("/codec/decode", headers=as_ui(services), json={"payloads": payloads})
        assert by_cookie.json()["payloads"][0] == plain
        # A sign-in comes from the codec's own page or the UI; from a page elsewhere it is refused
        # before the key is read, and sets no cookie.
        own = str(http.base_url).rstrip("/")
        for origin in (own, ui_origin(services)):
            assert (await http.post("/codec/session", json={"key": operator},
                                    headers={"Origin": origin})).status_code == 200, origin
        http.cookies.clear()
        for origin in ("http://evil.example", "null", own + ".evil.example"):
            forged = await http.post("/codec/session", json={"key": operator}, headers={"Origin": origin})
            assert forged.status_code == 403, origin
            assert forged.headers["content-type"] == "application/problem+json"
            assert "Origin" in forged.json()["detail"] and COOKIE_NAME not in forged.cookies
        http.cookies.set(COOKIE_NAME, operator, domain="127.0.0.1", path="/codec")
        # A cookie whose key is revoked is refused once and removed.
        revoked = await create_operator_key(services.pool, "revoked")
        http.cookies.set(COOKIE_NAME, revoked.token, domain="127.0.0.1", path="/codec")
        await revoke_operator_key(services.pool, revoked.key.key_id)
        stale = await http.post("/codec/decode", headers=as_ui(services), json={"payloads": payloads})
        assert stale.status_code == 401 and "revoked" in stale.json()["detail"]
        assert COOKIE_NAME in stale.headers["set-cookie"] and "max-age=0" in stale.headers["set-cookie"].lower()
        http.cookies.clear()

        # Encode, then decode: bound to no workflow, so the UI reads it back and a worker refuses it.
        typed = {"metadata": {"encoding": base64.b64encode(b"json/plain").decode()},
                 "data": base64.b64encode(b'{"reason": "typed in the UI"}').decode()}
        encoded = await http.post("/codec/encode", headers=as_ui(services, **bearer(operator)),
                                  json={"payloads": [typed]})
        sealed = encoded.json()["payloads"][0]
        assert base64.b64decode(sealed["metadata"]["bound-to"]).decode() == UI_BINDING
        assert sealed["data"] != typed["data"]
        back = await http.post("/codec/decode", headers=as_ui(services, **bearer(operator)),
                               json={"payloads": [sealed]})
        assert back.json()["payloads"] == [typed]

        # No key, a wrong one, a tenant's: refused, and no payload leaves.
        tenant_key = (await create_key(services.pool, tenant, "erase")).token
        for headers, status in (({}, 401), (bearer(operator[:-4] + "AAAA"), 401), (bearer(tenant_key), 403)):
            refused = await http.post("/codec/decode", headers=as_ui(services, **headers),
                                      json={"payloads": payloads})
            assert refused.status_code == status, headers
            assert "access-control-allow-origin" not in refused.headers
            assert "subject_id" not in refused.text
        # A UI without the key asks on every page: that is no guess, and does not lock its address out.
        for _ in range(3 * services.settings.auth_failure_burst):
            assert (await http.post("/codec/decode", headers=as_ui(services), json={"payloads": payloads})
                    ).status_code == 401
        assert (await http.post("/codec/decode", headers=as_ui(services, **bearer(operator)),
                                json={"payloads": payloads})).status_code == 200
        assert (await http.get("/v1/subjects/lin/facts", headers=bearer(tenant_key))).status_code == 200
        wrong_login = await http.post("/codec/session", json={"key": tenant_key})
        assert wrong_login.status_code == 403 and COOKIE_NAME not in wrong_login.cookies
        other_namespace = await http.post("/codec/decode", headers=as_ui(services, **bearer(operator),
                                                                        **{"X-Namespace": "prod"}),
                                          json={"payloads": payloads})
        assert other_namespace.status_code == 404 and "X-Namespace" in other_namespace.json()["detail"]


@pytest.mark.stack
def test_the_dev_servers_ui_is_pointed_at_the_codec_endpoint(tmp_path):
    """What `up` does: the Temporal dev server it starts tells its UI where the codec is."""
    settings = Settings.from_env({"AGENT_MEMORY_HOME": str(tmp_path)})
    stack = EmbeddedStack(tmp_path, Ports.free(), ui_codec_endpoint="http://127.0.0.1:8765/codec")
    try:
        resolved = stack.start(settings, only=("temporal",))
        assert resolved.ui_url is not None
        ui_settings = httpx.get(f"{resolved.ui_url}/api/v1/settings", timeout=30).json()
        assert ui_settings["Codec"]["Endpoint"] == "http://127.0.0.1:8765/codec"
        assert Settings.from_env({"AGENT_MEMORY_HOME": str(tmp_path)}).with_services(
            ui_url=resolved.ui_url).ui_origins() >= {resolved.ui_url}
    finally:
        stack.stop()
