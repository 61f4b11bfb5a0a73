"""Why this item on every surface: `"explain": true` over HTTP, the MCP tools' `explain` argument,
`--explain` on the command line (a table, or the explanation in `--json`) and the console's form,
where the operator types a query and sees each item's terms and the candidates below the budget.
Without it, the responses carry neither `explanation` nor `below_budget`."""

from __future__ import annotations

import html
import json

from mcp.client import Client

from agent_memory.security.api_keys import create_key
from agent_memory.security.operator_keys import create_operator_key
from tests.api.test_console import console, csrf, sign_in
from tests.api.test_http_api import api, bearer
from tests.api.test_mcp_server import payload, server
from tests.cli.runner import run_cli
from tests.recall.test_explain import QUERY, SUBJECT, stock


async def test_http_mcp_and_the_command_line_explain_on_request(client, services, tenant, task_queue, running_worker):
    await stock(client, running_worker, tenant)
    reader = (await create_key(services.pool, tenant, "read")).token
    limited = (await create_key(services.pool, tenant, "read", agent_id="travel")).token
    async with api(client) as http:
        plain = await http.post(f"/v1/subjects/{SUBJECT}/context", headers=bearer(reader), json={"query": QUERY})
        assert plain.status_code == 200, plain.text
        assert "below_budget" not in plain.json() and all("explanation" not in i for i in plain.json()["items"])
        explained = await http.post(f"/v1/subjects/{SUBJECT}/context", headers=bearer(limited),
                                    json={"query": QUERY, "budget": 120, "explain": True})
        assert explained.status_code == 200, explained.text
        body = explained.json()
        assert body["below_budget"], "a small budget leaves candidates out"
        for item in body["items"]:
            assert item["explanation"]["admitted"] is True and item["explanation"]["score"] == item["score"]
        assert any("lexical" in i["explanation"]["routes"] for i in body["items"] if i["tier"] == "episodic")
        shown = [*body["items"], *body["below_budget"]]
        assert not [m for i in shown for m in i["cited_message_ids"] if m.startswith("support:")]
        recalled = await http.post(f"/v1/subjects/{SUBJECT}/recall", headers=bearer(reader),
                                   json={"query": QUERY, "explain": True})
        assert recalled.status_code == 200, recalled.text
        assert {x["kind"] for x in recalled.json()["explanations"]} == {"fact", "episode"}
        refused = await http.post(f"/v1/subjects/{SUBJECT}/context", headers=bearer(reader),
                                  json={"query": QUERY, "explain": "sometimes"})
        assert refused.status_code == 422 and "explain" in refused.text, refused.text

    async with Client(server(services, task_queue, reader)) as mcp:
        context = payload(await mcp.call_tool("context", {"subject": SUBJECT, "query": QUERY, "explain": True,
                                                          "budget": 120}))
        assert context["below_budget"] and all(i["explanation"]["admitted"] for i in context["items"])
        unexplained = payload(await mcp.call_tool("context", {"subject": SUBJECT, "query": QUERY}))
        assert "below_budget" not in unexplained and all("explanation" not in i for i in unexplained["items"])
        recall = payload(await mcp.call_tool("recall", {"subject": SUBJECT, "query": QUERY, "explain": True}))
        assert [x["memory_id"] for x in recall["explanations"] if x["kind"] == "episode"] == [
            e["memory_id"] for e in recall["episodes"]]

    out = run_cli(services, "context", "--tenant", tenant, "--subject", SUBJECT, QUERY, "--budget", "120",
                  "--explain", "--json")
    assert out.returncode == 0, out.stderr
    parsed = json.loads(out.stdout)
    assert parsed["below_budget"] and all(i["explanation"]["tier"] == i["tier"] for i in parsed["items"])
    table = run_cli(services, "context", "--tenant", tenant, "--subject", SUBJECT, QUERY, "--explain")
    assert table.returncode == 0, table.stderr
    [header] = [line for line in table.stdout.splitlines() if line.startswith("in ")]
    assert header.split()[:5] == ["in", "tier", "kind", "score", "lex"]
    assert any(line.startswith("yes ") and " episodic " in line for line in table.stdout.splitlines())
    recalled_cli = run_cli(services, "recall", "--tenant", tenant, "--subject", SUBJECT, QUERY, "--explain", "--json")
    assert recalled_cli.returncode == 0, recalled_cli.stderr
    assert json.loads(recalled_cli.stdout)["explanations"]
    assert "explanations" not in json.loads(
        run_cli(services, "recall", "--tenant", tenant, "--subject", SUBJECT, QUERY, "--json").stdout)


async def test_the_console_explains_the_context_of_a_typed_query(client, services, tenant, running_worker):
    await stock(client, running_worker, tenant)
    operator = (await create_operator_key(services.pool, "explain-console")).token
    url = f"/console/t/{tenant}/s/{SUBJECT}/explain"
    async with console(client) as http:
        assert (await sign_in(http, operator)).status_code == 303
        subject_page = (await http.get(f"/console/t/{tenant}/s/{SUBJECT}")).text
        assert 'id="explain"' in subject_page and f'action="{url}"' in subject_page
        token = csrf(subject_page)
        answered = await http.post(url, data={"csrf": token, "query": "<b>canoe</b> at the lake", "budget": "120"})
        assert answered.status_code == 200, answered.text
        page = answered.text
        assert "<b>canoe</b>" not in page and html.escape("<b>canoe</b>") in page  # typed text is escaped
        section, below = page.split("<h2>In the context</h2>", 1)[1].split("<h2>Below the budget</h2>", 1)
        assert "lexical" in section and "#1" in section and "canoe" in section
        assert "out: " in below  # the candidates that did not fit, with why
        # A post without the form's token is refused; a bad budget names the field.
        forged = await http.post(url, data={"query": QUERY})
        assert forged.status_code == 403
        bad = await http.post(url, data={"csrf": token, "query": QUERY, "budget": "lots"})
        assert bad.status_code == 422 and "budget" in bad.text
    async with console(client) as anonymous:  # not signed in: the sign-in page
        assert (await anonymous.post(url, data={"csrf": token, "query": QUERY})).status_code == 401
