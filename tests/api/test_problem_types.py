"""Each problem's `type` points at documentation that exists: every title the HTTP API can answer
with has a kind, whose anchor is in docs/problems.md and on the page the server serves at
`/v1/problems`, which a problem's `type` resolves to against the request's URL."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import agent_memory.api.http.app  # noqa: F401 - loads every error class the API raises
from agent_memory.api.http.problems import PROBLEM_TYPES, problem_type
from agent_memory.core.errors import AgentMemoryError
from agent_memory.security.api_keys import create_key
from tests.api.test_http_api import api, bearer

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "problems.md"


def error_titles() -> set[str]:
    """The titles of every error class the product raises on purpose."""
    found, todo = set(), [AgentMemoryError]
    while todo:
        cls = todo.pop()
        found.add(cls.title)
        todo.extend(cls.__subclasses__())
    return found


def literal_titles() -> set[str]:
    """The titles written out in the API's code: `problem(status, "Title", ...)` and the titles
    of HTTP statuses (a dict of status to title)."""
    found = set()
    for path in (ROOT / "agent_memory" / "api").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "problem"
                    and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)):
                found.add(node.args[1].value)
            if (isinstance(node, ast.Dict) and node.keys
                    and all(isinstance(k, ast.Constant) and isinstance(k.value, int) and 400 <= k.value < 600
                            for k in node.keys)
                    and all(isinstance(v, ast.Constant) and isinstance(v.value, str) for v in node.values)):
                found |= {v.value for v in node.values if isinstance(v, ast.Constant)}
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                    and len(node.args) == 2 and isinstance(node.args[1], ast.Constant)
                    and node.args[1].value == "HTTP error"):
                found.add("HTTP error")
    return found


def test_every_title_the_api_answers_with_has_a_kind_documented_under_its_anchor():
    titles = error_titles() | literal_titles()
    assert {"Unauthorized", "Too many failed authentications", "Request body too large", "Method not allowed",
            "Dependency unavailable", "HTTP error"} <= titles  # the scan sees the code
    doc_anchors = set(re.findall(r'<a id="([a-z0-9-]+)"></a>', DOC.read_text(encoding="utf-8")))
    for title in titles:
        kind = problem_type(title)
        assert kind.startswith("/v1/problems#"), f"{title!r} has no problem type"
        assert kind.split("#", 1)[1] in doc_anchors, f"{kind} has no anchor in docs/problems.md"
    assert {k.anchor for k in PROBLEM_TYPES} == doc_anchors
    assert len({k.title for k in PROBLEM_TYPES}) == len(PROBLEM_TYPES)
    assert problem_type("a title of no kind") == "about:blank"


async def test_a_problems_type_resolves_to_its_anchor_on_the_servers_page(client, services, tenant):
    reader = bearer((await create_key(services.pool, tenant, "read")).token)
    async with api(client) as http:
        page = await http.get("/v1/problems")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        served = set(re.findall(r'<section id="([a-z0-9-]+)">', page.text))
        assert served == {k.anchor for k in PROBLEM_TYPES}
        answers = {
            "unauthorized": await http.get("/v1/subjects/lin/facts"),
            "forbidden": await http.post("/v1/subjects/lin/tool-calls/c1/claim", headers=reader,
                                         json={"tool": "t", "request": {}}),
            "not-found": await http.get("/v1/no-such-route"),
            "method-not-allowed": await http.delete("/v1/health"),
            "invalid-input": await http.get("/v1/subjects/bad%20id/facts", headers=reader),
        }
        mcp = await http.post("/mcp", json={})
        answers["unauthorized-mcp"] = mcp
        for expected, answer in answers.items():
            assert answer.headers["content-type"] == "application/problem+json", expected
            resolved = urlsplit(urljoin(str(answer.request.url), answer.json()["type"]))
            assert (resolved.netloc, resolved.path) == (answer.request.url.netloc.decode(), "/v1/problems")
            assert resolved.fragment == expected.removesuffix("-mcp") and resolved.fragment in served
