"""The memory console in a real headless browser: Chromium from the OS packages, driven by
Playwright. An operator signs in and walks tenant → subject → facts → a fact's evidence; the
message with markup shows as text and runs nothing, and so does a query typed into the subject's
"Why this item" form. A screenshot of every page is saved
(AGENT_MEMORY_SCREENSHOTS: a directory; default the test's temporary one).

Chromium must be installed (`apt-get install chromium`): the test fails, never skips, without it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from playwright.async_api import Page, async_playwright

from agent_memory.api.http.server import serving
from agent_memory.security.operator_keys import create_operator_key
from tests.api.test_console import SCRIPT, SUBJECT, seed, session

CHROMIUM = os.environ.get("AGENT_MEMORY_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


def screenshot_dir(default: Path) -> Path:
    shots = Path(os.environ.get("AGENT_MEMORY_SCREENSHOTS") or default)
    shots.mkdir(parents=True, exist_ok=True)
    return shots


def chromium() -> str:
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"Chromium is not installed (looked for {CHROMIUM}): install the OS package with "
                    "`apt-get install chromium` (or set AGENT_MEMORY_CHROMIUM to its path); Playwright drives it, "
                    "it downloads no browser", pytrace=False)
    return CHROMIUM


async def test_an_operator_walks_from_a_tenant_to_a_facts_evidence(client, services, tenant, running_worker,
                                                                   tmp_path):
    executable = chromium()
    shots = screenshot_dir(tmp_path)
    operator = (await create_operator_key(services.pool, "browser-test")).token
    async with running_worker():
        await seed(client, tenant)
        await client.append_messages(tenant, "noor", session("n1", "05-03", "I live in Cairo."))
        await client.admin.erasure_receipt(await client.admin.erase(tenant, "noor", "ticket 4411", "req-4411"))
    dialogs: list[str] = []

    async def shot(page: Page, name: str) -> None:
        await page.screenshot(path=str(shots / f"console-{name}.png"), full_page=True)

    async with serving(client) as port, async_playwright() as playwright:
        # As root (CI, containers) Chromium runs only without its sandbox.
        browser = await playwright.chromium.launch(executable_path=executable,
                                                   args=["--no-sandbox"] if os.geteuid() == 0 else [])
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 860})
            page.on("dialog", lambda dialog: dialogs.append(dialog.message))
            signin = await page.goto(f"http://127.0.0.1:{port}/console")
            assert signin is not None and signin.status == 401
            await shot(page, "1-signin")
            await page.fill("#key", operator)
            async with page.expect_navigation():
                await page.click("button:has-text('Sign in')")
            assert await page.locator("h1").inner_text() == "Tenants"
            await shot(page, "2-tenants")

            await page.click(f"a[href='/console/t/{tenant}']")
            await page.wait_for_url(f"**/console/t/{tenant}")
            receipts = await page.locator("#erasures + section").inner_text()
            assert "req-4411" in receipts and "noor" not in receipts and "residue 0" in receipts
            await shot(page, "3-tenant")
            await page.click(f"a[href='/console/t/{tenant}/s/{SUBJECT}']")
            await page.wait_for_url(f"**/console/t/{tenant}/s/{SUBJECT}")
            assert "Bergen" in await page.locator("#candidates ~ section").first.inner_text()
            await shot(page, "4-subject")
            async with page.expect_navigation():
                await page.click("#candidates ~ section button:has-text('Confirm')")
            assert "Confirmed" in await page.locator(".flash").inner_text()
            await shot(page, "4-confirmed")

            await page.click("text=Facts now")
            await page.wait_for_url("**/facts")
            assert "Bergen" in await page.locator("table").inner_text()
            await shot(page, "5-facts")
            await page.click("text=history")
            await page.wait_for_url("**/facts?history=1")
            assert "Oslo" in await page.locator("table").inner_text()
            await shot(page, "5-history")
            await page.click("a:has-text('location/home_city') >> nth=0")
            await page.wait_for_url(f"**/console/t/{tenant}/s/{SUBJECT}/m/*")
            evidence = await page.locator("h2:has-text('Evidence') + section").inner_text()
            assert "I live in Oslo." in evidence or "I live in Bergen." in evidence
            await shot(page, "6-evidence")
            await page.fill("input[name=reason]", "asked by the user")
            async with page.expect_navigation():
                await page.click("button:has-text('Forget this memory')")
            assert "Restore" in await page.locator("#forgotten + section").inner_text()
            await page.locator("#forgotten").scroll_into_view_if_needed()
            await shot(page, "8-forgotten")

            await page.goto(f"http://127.0.0.1:{port}/console/t/{tenant}/s/{SUBJECT}/sessions/s1")
            assert SCRIPT in await page.locator("table").inner_text()  # shown as text
            await shot(page, "7-session")

            # Why this item: the operator types a query on the subject's page and sees its context explained.
            await page.goto(f"http://127.0.0.1:{port}/console/t/{tenant}/s/{SUBJECT}")
            await page.fill("#query", f"favourite snippet {SCRIPT}")
            async with page.expect_navigation():
                await page.click("button:has-text('Explain the context')")
            await page.wait_for_url(f"**/console/t/{tenant}/s/{SUBJECT}/explain")
            await shot(page, "9-explain")
            explained = await page.locator("h2:has-text('In the context') + section").inner_text()
            assert "snippet" in explained and "#1" in explained and "bm25" in explained and "sim " in explained
            assert await page.locator("#query").input_value() == f"favourite snippet {SCRIPT}"
        finally:
            await browser.close()
    assert dialogs == []  # the message's script never ran
