"""The memory console (/console of `agent-memory serve`) through a real HTTP client against a real
uvicorn server on the session's stack: the operator key and the sign-in cookie, a tenant key
refused, escaped content, facts as of a time, evidence, a candidate confirmed, a memory forgotten
and restored, erasure receipts naming the subject by digest, and 503 while Postgres is down."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from psycopg_pool import AsyncConnectionPool

from agent_memory.api.client import MemoryClient
from agent_memory.api.console import COOKIE
from agent_memory.api.http.server import serving
from agent_memory.core.models import Message, Session
from agent_memory.memory.write_policy import WritePolicy
from agent_memory.providers.offline import offline_providers
from agent_memory.security.api_keys import create_key
from agent_memory.security.operator_keys import create_operator_key, revoke_operator_key
from workers.schedules import PROJECTION_SWEEP_SCHEDULE, ensure_schedules

SUBJECT = "lin"
SCRIPT = "<script>alert('console')</script>"


def session(session_id: str, day: str, *texts: str) -> Session:
    return Session(session_id=session_id, messages=[
        Message(message_id=f"{session_id}:{i}", turn_index=i, role="user", content=text,
                created_at=f"2024-{day}T09:0{i}:00Z") for i, text in enumerate(texts)])


async def seed(client: MemoryClient, tenant: str) -> None:
    """Two consolidated sessions of one subject: a home city, then a new one held for confirmation
    (the tenant confirms home cities), and a message with markup."""
    await client.admin.set_write_policy(tenant, WritePolicy(confirm_keys=["location/home_city"]))
    for s in (session("s1", "05-01", "I live in Oslo.", f"My favourite snippet is {SCRIPT}"),
              session("s2", "06-01", "I live in Bergen.")):
        await client.append_messages(tenant, SUBJECT, s)
        await client.consolidation_result(await client.end_session(tenant, SUBJECT, s.session_id))


@asynccontextmanager
async def console(client: MemoryClient) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(client) as port, httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
        yield http


async def sign_in(http: httpx.AsyncClient, token: str) -> httpx.Response:
    return await http.post("/console/signin", data={"key": token, "next": "/console"})


def csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', page)
    assert found, "no form on the page"
    return found.group(1)


def link(page: str, pattern: str, attribute: str = "href") -> str:
    found = re.search(attribute + r'="(' + pattern + ')"', page)
    assert found, f"no link like {pattern!r}"
    return found.group(1).replace("&amp;", "&")


async def test_only_an_operator_key_opens_the_console(client, services, tenant):
    operator = (await create_operator_key(services.pool, "console-test")).token
    tenant_key = (await create_key(services.pool, tenant, "erase")).token
    async with console(client) as http:
        anonymous = await http.get("/console")
        assert anonymous.status_code == 401 and 'action="/console/signin"' in anonymous.text
        assert "default-src 'none'" in anonymous.headers["content-security-policy"]
        refused = await http.get("/console", headers={"Authorization": f"Bearer {tenant_key}"})
        assert refused.status_code == 403 and "operator key" in refused.text
        assert (await sign_in(http, tenant_key)).status_code == 403
        wrong = await sign_in(http, operator[:-4] + "AAAA")
        assert wrong.status_code == 401 and "unknown or revoked" in wrong.text
        assert COOKIE not in http.cookies
        # The operator key: a cookie the page's scripts cannot read, sent to the console only.
        signed = await sign_in(http, operator)
        assert signed.status_code == 303 and signed.headers["location"] == "/console"
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/console" in cookie
        assert "Secure" not in cookie  # plain http on loopback; https sets it
        home = await http.get("/console")
        assert home.status_code == 200 and "Tenants" in home.text and "Schedules" in home.text
        # Forms need the page's token and this origin; a sign-out with neither is refused.
        forged = await http.post("/console/signout", data={"csrf": "0" * 64})
        assert forged.status_code == 403 and "reload the page" in forged.text
        foreign = await http.post("/console/signout", data={"csrf": csrf(home.text)},
                                  headers={"Origin": "https://evil.example"})
        assert foreign.status_code == 403
        # The cookie with any Authorization header beside it still needs the token.
        for authorization in ("Basic Zm9vOmJhcg==", "Digest username=x", f"Bearer {operator}"):
            mixed = await http.post("/console/signout", data={"csrf": "0" * 64},
                                    headers={"Authorization": authorization})
            assert mixed.status_code == 403 and "reload the page" in mixed.text, authorization
        assert (await http.get("/console")).status_code == 200  # still signed in
        assert (await http.post("/console/signout", data={"csrf": csrf(home.text)})).status_code == 303
        assert (await http.get("/console")).status_code == 401
        # A script may send the key as a bearer token instead; without the cookie it needs no form token.
        assert (await http.get("/console", headers={"Authorization": f"Bearer {operator}"})).status_code == 200
        assert COOKIE not in http.cookies
        scripted = await http.post("/console/signout", headers={"Authorization": f"Bearer {operator}"})
        assert scripted.status_code == 303
        # A sign-in never sends the browser off the console.
        away = await http.post("/console/signin", data={"key": operator, "next": "//evil.example/console"})
        assert away.headers["location"] == "/console"
        # A revoked key's cookie opens nothing at its next request.
        await revoke_operator_key(services.pool, operator.split(":")[1])
        revoked = await http.get("/console")
        assert revoked.status_code == 401 and "unknown or revoked" in revoked.text
        # X-Forwarded-Proto from a peer that is no trusted proxy is ignored: plain http, no Secure.
        other = (await create_operator_key(services.pool)).token
        unproxied = await http.post("/console/signin", data={"key": other}, headers={"X-Forwarded-Proto": "https"})
        assert "Secure" not in unproxied.headers["set-cookie"]
    # Behind a trusted TLS proxy (AGENT_MEMORY_TRUSTED_PROXIES) the cookie is Secure.
    behind_proxy = MemoryClient(dataclasses.replace(services, settings=services.settings.with_services(
        trusted_proxies="127.0.0.1")), offline_providers().embedder, task_queue=client.task_queue)
    async with console(behind_proxy) as http:
        proxied = await http.post("/console/signin", data={"key": other}, headers={"X-Forwarded-Proto": "https"})
        assert "Secure" in proxied.headers["set-cookie"]


async def test_guessing_keys_at_the_sign_in_form_is_limited(client, services):
    guess = "amo:abcdef012345:" + "x" * 43
    async with console(client) as http:
        answers = [(await sign_in(http, guess)).status_code for _ in range(client.services.settings.auth_failure_burst)]
        assert set(answers) == {401}
        limited = await sign_in(http, guess)
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) > 0
        assert "too many failed authentications" in limited.text


async def test_a_subject_page_by_page_with_as_of_evidence_and_actions(client, services, tenant, running_worker):
    operator = (await create_operator_key(services.pool)).token
    async with running_worker():
        await seed(client, tenant)
    async with console(client) as http:
        await sign_in(http, operator)
        home = await http.get("/console")
        assert f'href="/console/t/{tenant}"' in home.text
        tenant_page = await http.get(f"/console/t/{tenant}")
        assert tenant_page.status_code == 200 and f'href="/console/t/{tenant}/s/{SUBJECT}"' in tenant_page.text
        assert "TenantId" in tenant_page.text  # the tenant's runs in the Temporal UI
        subject = await http.get(f"/console/t/{tenant}/s/{SUBJECT}")
        assert subject.status_code == 200
        ui = client.services.settings.workflow_url(f"consolidate/{tenant}/{SUBJECT}/s1")
        assert f'href="{ui}"' in subject.text  # each session links to its consolidation run
        assert "Bergen" in subject.text and "Candidates awaiting confirmation" in subject.text

        # Facts now, as of a time, and every interval; content is escaped everywhere.
        facts_url = f"/console/t/{tenant}/s/{SUBJECT}/facts"
        now = await http.get(facts_url)
        assert "Oslo" in now.text and "Bergen" not in now.text
        assert "last confirmed" in now.text and "rule-extractor/" in now.text  # and what wrote each fact
        assert (await http.get(facts_url, params={"as_of": "2024-04-01T00:00:00Z"})).text.count("Oslo") == 0
        assert "Oslo" in (await http.get(facts_url, params={"as_of": "2024-05-15"})).text
        bad = await http.get(facts_url, params={"as_of": "last week"})
        assert bad.status_code == 422 and "as_of" in bad.text and "ISO 8601" in bad.text

        # The fact's memory: its intervals and the message it cites.
        memory_url = link(now.text, f"/console/t/{tenant}/s/{SUBJECT}/m/[0-9a-f-]{{36}}")
        memory = await http.get(memory_url)
        assert memory.status_code == 200 and "I live in Oslo." in memory.text and "s1:0" in memory.text
        session_page = await http.get(f"/console/t/{tenant}/s/{SUBJECT}/sessions/s1")
        assert session_page.status_code == 200 and "consolidated" in session_page.text
        assert SCRIPT not in session_page.text and html_escaped(SCRIPT) in session_page.text
        assert "<script" not in session_page.text.lower()
        missing = await http.get(f"/console/t/{tenant}/s/{SUBJECT}/m/{uuid.uuid4()}")
        assert missing.status_code == 404 and "no memory" in missing.text

        # Confirm the candidate: it becomes the current fact.
        confirm_url = link(subject.text, f"/console/t/{tenant}/s/{SUBJECT}/candidates/[0-9a-f-]{{36}}/confirm",
                           attribute="action")
        confirmed = await http.post(confirm_url, data={"csrf": csrf(subject.text)})
        assert confirmed.status_code == 303, confirmed.text
        assert "Bergen" in (await http.get(facts_url)).text

        # Forget the current fact, then restore it.
        current = await http.get(facts_url)
        bergen_url = link(current.text, f"/console/t/{tenant}/s/{SUBJECT}/m/[0-9a-f-]{{36}}")
        page = await http.get(bergen_url)
        forgotten = await http.post(bergen_url + "/forget", data={"csrf": csrf(page.text), "reason": "ticket 7"})
        assert forgotten.status_code == 303
        after = await http.get(forgotten.headers["location"])
        assert "Forgotten: every read stops returning it" in after.text and "Restore" in after.text
        assert "Bergen" not in (await http.get(facts_url)).text
        restored = await http.post(bergen_url + "/restore", data={"csrf": csrf(after.text)})
        assert restored.status_code == 303
        assert "Bergen" in (await http.get(facts_url)).text
        again = await http.post(bergen_url + "/restore", data={"csrf": csrf(after.text)})
        assert again.status_code == 409 and "not forgotten" in again.text.lower()


def html_escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#39;")


async def test_erasure_receipts_name_the_subject_by_digest(client, services, tenant, running_worker):
    operator = (await create_operator_key(services.pool)).token
    erased = f"erasee-{uuid.uuid4().hex[:8]}"
    async with running_worker():
        await client.append_messages(tenant, erased, session("e1", "05-02", "I live in Lima."))
        handle = await client.admin.erase(tenant, erased, "art. 17 request", "req-console-1")
        receipt = await client.admin.erasure_receipt(handle)
    async with console(client) as http:
        await sign_in(http, operator)
        page = await http.get(f"/console/t/{tenant}")
        assert page.status_code == 200 and "req-console-1" in page.text and "completed" in page.text
        assert erased not in page.text  # a digest stands for the erased subject
        digest = services.keyring.subject_digest(tenant, erased)
        assert digest.removeprefix("erased:")[:16] in page.text and "residue 0" in page.text
        run = await http.get(f"/console/t/{tenant}/erasures/req-console-1/run")
        assert run.status_code == 303 and run.headers["location"] == client.services.settings.workflow_url(
            f"erase/{tenant}/{erased}/{receipt.request_id}")
        gone = await http.get(f"/console/t/{tenant}/s/{erased}")
        assert gone.status_code == 200 and "was erased" in gone.text
        assert (await http.get(f"/console/t/{tenant}/erasures/nope/run")).status_code == 404
        assert (await http.get("/console/t/bad%20tenant")).status_code == 422


async def test_postgres_down_is_a_503_page(services, task_queue):
    operator = (await create_operator_key(services.pool)).token
    # A pool on a port where no Postgres listens: what the server sees while its Postgres is down.
    dead = AsyncConnectionPool("postgresql://agent_memory_app@127.0.0.1:9/agent_memory", open=False, timeout=1.0,
                               min_size=0, max_size=1)
    await dead.open(wait=False)
    try:
        down = MemoryClient(dataclasses.replace(services, pool=dead), offline_providers().embedder,
                            task_queue=task_queue)
        async with console(down) as http:
            page = await http.get("/console", headers={"Authorization": f"Bearer {operator}"})
            assert page.status_code == 503 and page.headers["retry-after"] == "5"
            assert "Postgres is unavailable" in page.text and page.headers["content-type"].startswith("text/html")
    finally:
        await dead.close()


async def test_the_schedules_latest_runs_link_to_their_runs(client, services, task_queue, running_worker):
    operator = (await create_operator_key(services.pool)).token
    temporal = services.temporal
    with contextlib.suppress(Exception):  # a fresh one on this test's task queue
        await temporal.get_schedule_handle(PROJECTION_SWEEP_SCHEDULE).delete()
    created = [r.schedule_id for r in await ensure_schedules(temporal, task_queue, keys_rotatable=False)
               if r.outcome == "created"]
    try:
        schedule = temporal.get_schedule_handle(PROJECTION_SWEEP_SCHEDULE)
        async with running_worker():
            await schedule.trigger()
            for _ in range(300):
                recent = (await schedule.describe()).info.recent_actions
                if recent:
                    break
                await asyncio.sleep(0.1)
            run_id = recent[-1].action.workflow_id
            await temporal.get_workflow_handle(run_id).result()
        async with console(client) as http:
            await sign_in(http, operator)
            home = (await http.get("/console")).text
        start = home.rindex("<tr>", 0, home.index(PROJECTION_SWEEP_SCHEDULE))
        row = home[start:].split("</tr>")[0]
        assert client.services.settings.workflow_url(run_id).replace("&", "&amp;") in row
        assert "completed" in row and "1 h" in row and "/schedules/agent-memory%2Fprojection-sweep" in row
    finally:
        for schedule_id in created:
            with contextlib.suppress(Exception):
                await temporal.get_schedule_handle(schedule_id).delete()
