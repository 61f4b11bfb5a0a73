"""The HTTP API keeps the contract its OpenAPI document states, through a real HTTP client against a
real uvicorn server on the session's stack: the bearer key scheme on the operations that need a
key, every answer a declared model and every error documented as problem+json, `Allow` on a 405, and errors that name the field,
the body as a whole included."""

from __future__ import annotations

from agent_memory.api.http.openapi import IDENTIFIER_SCHEMA_PATTERN
from agent_memory.security.api_keys import create_key
from tests.api.test_http_api import MESSAGES, api, bearer

PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}


async def test_the_openapi_document_states_the_key_scheme_and_the_problems(client):
    async with api(client) as http:
        spec = (await http.get("/v1/openapi.json")).json()
    assert spec["components"]["securitySchemes"]["ApiKey"]["scheme"] == "bearer"
    assert "amk:" in spec["components"]["securitySchemes"]["ApiKey"]["bearerFormat"]
    assert "1,000,000 bytes" in spec["info"]["description"]
    operations = {(method, path): op for path, ops in spec["paths"].items() for method, op in ops.items()}
    # Liveness and readiness need no key (an operator key adds readiness's detail, read from the header).
    assert "security" not in operations["get", "/v1/health"] and "security" not in operations["get", "/v1/ready"]
    assert "503" in operations["get", "/v1/ready"]["responses"]
    for (method, path), op in operations.items():
        assert op["summary"] and op.get("description"), (method, path)
        # The key travels in the security scheme, not as a header parameter of its own.
        assert all(p["name"].lower() != "authorization" for p in op.get("parameters", [])), (method, path)
        for status, response in op["responses"].items():
            if status != "200":
                assert response["content"] == {"application/problem+json": {"schema": PROBLEM_REF}}, (path, status)
        # A JSON answer is a declared model (or a list of one), never a free-form object.
        if answer := op["responses"]["200"].get("content", {}).get("application/json", {}).get("schema"):
            assert "$ref" in answer or "$ref" in answer.get("items", {}), (method, path, answer)
        if path not in ("/v1/health", "/v1/ready"):
            assert op["security"] == [{"ApiKey": []}], (method, path)
            assert {"401", "403", "429", "503"} <= set(op["responses"]), (method, path)
    append = operations["post", "/v1/subjects/{subject_id}/sessions/{session_id}/messages"]
    assert {"409", "413", "422"} <= set(append["responses"])
    assert "1,000,000 bytes" in append["description"]
    assert {p["name"]: p["schema"].get("pattern") for p in append["parameters"]} == {
        "subject_id": IDENTIFIER_SCHEMA_PATTERN, "session_id": IDENTIFIER_SCHEMA_PATTERN}
    assert "Retry-After" in append["responses"]["429"]["headers"]
    assert "404" in operations["post", "/v1/subjects/{subject_id}/sessions/{session_id}/end"]["responses"]
    schemas = spec["components"]["schemas"]
    assert {"type", "title", "status", "detail"} <= set(schemas["Problem"]["required"])
    assert "HTTPValidationError" not in schemas and "ValidationError" not in schemas


async def test_a_method_the_path_does_not_serve_is_answered_with_allow(client, services, tenant):
    reader = (await create_key(services.pool, tenant, "read")).token
    async with api(client) as http:
        put = await http.put("/v1/subjects/lin/recall", headers=bearer(reader), json={"query": "x"})
        assert put.status_code == 405 and put.headers["content-type"] == "application/problem+json"
        assert put.headers["allow"] == "POST"
        deleted = await http.delete("/v1/health")
        assert deleted.status_code == 405 and deleted.headers["allow"] == "GET"
        # A path served by two routes: Allow names the methods of both.
        signin = await http.put("/console/signin")
        assert signin.status_code == 405 and signin.headers["allow"] == "GET, POST"


async def test_a_missing_or_malformed_body_is_named_body(client, services, tenant):
    eraser = (await create_key(services.pool, tenant, "erase")).token
    async with api(client) as http:
        for path in ("/v1/subjects/lin/recall", "/v1/subjects/lin/context",
                     "/v1/subjects/lin/memories/8f6d2c54-3b1e-4f0a-9d2e-6a7b8c9d0e1f/forget",
                     "/v1/subjects/lin/memories/8f6d2c54-3b1e-4f0a-9d2e-6a7b8c9d0e1f/restore"):
            bodiless = await http.post(path, headers=bearer(eraser))
            assert bodiless.status_code == 422, path
            assert bodiless.json()["errors"] == [{"field": "body", "message": "the request needs a JSON body: send a "
                                                  "JSON object with `Content-Type: application/json`"}], path
            assert bodiless.json()["detail"].startswith("body: the request needs a JSON body"), path
        broken = await http.post("/v1/subjects/lin/recall", headers={**bearer(eraser),
                                                                     "content-type": "application/json"},
                                 content=b'{"query": "where?",\n "limit": 5,,}')
        assert broken.status_code == 422 and broken.headers["content-type"] == "application/problem+json"
        assert broken.json()["errors"][0]["field"] == "body"
        assert broken.json()["detail"] == ("body: the body is not valid JSON: Expecting property name enclosed in "
                                           "double quotes, at line 2 column 13")
        listed = await http.post("/v1/subjects/lin/recall", headers=bearer(eraser), json=["where?"])
        assert listed.status_code == 422 and listed.json()["detail"].startswith("body: the body must be a JSON object")


async def test_a_time_is_an_iso_8601_string_never_a_number(client, services, tenant):
    writer = (await create_key(services.pool, tenant, "write")).token
    async with api(client) as http:
        for as_of in (0, "0", 1714554000):
            refused = await http.post("/v1/subjects/lin/recall", headers=bearer(writer),
                                      json={"query": "where?", "as_of": as_of})
            assert refused.status_code == 422, as_of
            assert refused.json()["detail"].startswith("as_of: use an ISO 8601 date-time string"), as_of
        read = await http.post("/v1/subjects/lin/recall", headers=bearer(writer),
                               json={"query": "where?", "as_of": "2024-05-01T09:00:00Z"})
        assert read.status_code == 200
        query = await http.get("/v1/subjects/lin/facts", headers=bearer(writer), params={"as_of": "0"})
        assert query.status_code == 422 and query.json()["detail"].startswith("query.as_of: use an ISO 8601")
        stamped = await http.post("/v1/subjects/lin/sessions/h1/messages", headers=bearer(writer),
                                  json={"messages": [{**MESSAGES[0], "created_at": 1714554000}]})
        assert stamped.status_code == 422
        assert stamped.json()["detail"].startswith("messages.0.created_at: use an ISO 8601")
        started = await http.post("/v1/subjects/lin/sessions/h1/messages", headers=bearer(writer),
                                  json={"messages": MESSAGES, "started_at": 0})
        assert started.status_code == 422 and started.json()["detail"].startswith("started_at: use an ISO 8601")


async def test_a_body_that_is_no_utf_8_text_is_a_malformed_body(client, services, tenant):
    writer = (await create_key(services.pool, tenant, "write")).token
    async with api(client) as http:
        latin1 = await http.post("/v1/subjects/lin/recall", headers={**bearer(writer),
                                                                     "content-type": "application/json"},
                                 content='{"query": "Zürich"}'.encode("latin-1"))
        assert latin1.status_code == 422 and latin1.headers["content-type"] == "application/problem+json"
        assert latin1.json()["errors"] == [{"field": "body", "message": "the body is not valid JSON: it is not UTF-8 "
                                            "text: byte 0xfc at position 12 (send the JSON encoded as UTF-8)"}]


async def test_text_and_times_the_store_cannot_take_are_refused_naming_the_field(client, services, tenant):
    writer = (await create_key(services.pool, tenant, "write")).token
    async with api(client) as http:
        for path in ("/v1/subjects/lin/recall", "/v1/subjects/lin/context"):
            nul = await http.post(path, headers=bearer(writer), json={"query": "where\x00?"})
            assert nul.status_code == 422 and nul.json()["detail"].startswith("query contains a NUL"), path
        prompt = await http.post("/v1/subjects/lin/prompt", headers=bearer(writer),
                                 json={"session_id": "h1", "input": "hi\x00"})
        assert prompt.status_code == 422 and prompt.json()["detail"].startswith("input contains a NUL")
        # A UTC offset beyond ±15:59 is no zone's and cannot be stored.
        far = await http.post("/v1/subjects/lin/sessions/h1/messages", headers=bearer(writer),
                              json={"messages": [{**MESSAGES[0], "created_at": "2024-05-01T09:00:00-18:10"}]})
        assert far.status_code == 422
        assert far.json()["detail"] == "messages.0.created_at: use a UTC offset within ±15:59, such as +02:00 or Z"
        kiribati = await http.post("/v1/subjects/lin/sessions/h1/messages", headers=bearer(writer),
                                   json={"messages": [{**MESSAGES[0], "created_at": "2024-05-01T09:00:00+14:00"}]})
        assert kiribati.status_code == 200, kiribati.text
