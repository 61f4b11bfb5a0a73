"""The Temporal UI in a real headless Chromium, reading a consolidation run through `/codec`: with
the operator key (the cookie set on /codec, sent because the UI's codec setting includes
credentials) its input and result are shown decoded; without it, ciphertext. Screenshots go to
$AGENT_MEMORY_SHOTS (default: not kept)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from urllib.parse import quote

from playwright import async_api as playwright

from agent_memory.api.http.server import serving
from agent_memory.core.models import Session
from agent_memory.security.operator_keys import create_operator_key
from tests.api.test_console_browser import chromium
from tests.api.test_http_api import MESSAGES


async def set_codec_in_the_ui(page, endpoint: str) -> None:
    """What an operator does once per browser in the UI's codec dialog (the glasses icon): use the
    browser's setting, this endpoint, and include cross-origin credentials (the cookie)."""
    await page.locator("[data-testid^=data-encoder-status]").first.click()
    browser_setting = page.get_by_text("Use my browser setting and ignore Cluster-level setting.")
    if await browser_setting.count():
        await browser_setting.click()
    await page.get_by_placeholder("Paste your endpoint here").fill(endpoint)
    await page.get_by_text("Include cross-origin credentials").click()
    await page.get_by_role("button", name="Apply").click()


async def page_text(page) -> str:
    """The text of the page and of its frames (the UI renders user metadata's markdown in frames)."""
    texts = []
    for frame in page.frames:
        with contextlib.suppress(Exception):  # a frame being replaced
            texts.append(await frame.evaluate("document.body ? document.body.innerText : ''"))
    return "\n".join(texts)


async def shows(page, text: str, timeout: float = 30.0) -> None:
    """Waits until the page's text has `text` (polled: the UI's CSP forbids evaluated strings)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while text not in await page_text(page):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"the page never showed {text!r}; it shows: {(await page_text(page))[:2000]}")
        await asyncio.sleep(0.25)


async def test_the_temporal_ui_shows_a_run_decoded_only_with_the_operator_key(client, services, tenant,
                                                                            running_worker, tmp_path):
    shots = Path(os.environ.get("AGENT_MEMORY_SHOTS") or tmp_path)
    await asyncio.to_thread(shots.mkdir, parents=True, exist_ok=True)
    await client.append_messages(tenant, "lin", Session(session_id="s3", messages=MESSAGES))
    handle = await client.end_session(tenant, "lin", "s3")
    operator = (await create_operator_key(services.pool, "ui-check")).token
    ui = services.settings.ui_url.rstrip("/")
    run_page = f"{ui}/namespaces/{services.settings.temporal_namespace}/workflows/{quote(handle.id, safe='')}"
    async with running_worker(), serving(client) as port, playwright.async_playwright() as pw:
        result = await client.consolidation_result(handle)
        browser = await pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            # Without the key: the codec answers 401, the UI keeps the ciphertext.
            anonymous = await browser.new_context(viewport={"width": 1400, "height": 1000})
            page = await anonymous.new_page()
            await page.goto(run_page)
            await set_codec_in_the_ui(page, f"http://127.0.0.1:{port}/codec")
            await page.reload()
            await shows(page, "Codec Server could not connect")
            assert "facts_written" not in await page_text(page)
            await page.screenshot(path=str(shots / "ui-ciphertext.png"), full_page=True)
            await anonymous.close()

            # With it: pasted once on /codec, then the UI decodes input and result.
            context = await browser.new_context(viewport={"width": 1400, "height": 1000})
            page = await context.new_page()
            await page.goto(f"{ui}/namespaces/{services.settings.temporal_namespace}/workflows")
            await set_codec_in_the_ui(page, f"http://127.0.0.1:{port}/codec")
            await page.goto(f"http://127.0.0.1:{port}/codec")
            await page.fill("#key", operator)
            await page.click("text=Use this key")
            await shows(page, "Key accepted")
            await page.goto(run_page)
            try:
                await shows(page, "facts_written")
            finally:
                await page.screenshot(path=str(shots / "ui-decoded.png"), full_page=True)
            text = await page_text(page)
            assert f'"facts_written": {result.facts_written}' in text or f'"facts_written":{result.facts_written}' in text
            assert "Codec Server could not connect" not in text
            await page.screenshot(path=str(shots / "ui-decoded.png"), full_page=True)

            # The run's summary and details, in clear; its current details, the counts.
            await page.get_by_role("tab", name="User Metadata").click()
            await shows(page, f"consolidate {tenant}/lin/s3")
            await shows(page, f"{result.facts_written} facts, {int(result.episode_written)} episode")
            await page.screenshot(path=str(shots / "ui-metadata.png"), full_page=True)

            # The run list reads the summaries, no key needed for them.
            await page.goto(f"{ui}/namespaces/{services.settings.temporal_namespace}/workflows"
                            f"?query={quote(f'TenantId = {chr(39)}{tenant}{chr(39)}')}")
            await shows(page, handle.id)
            await page.screenshot(path=str(shots / "ui-list.png"), full_page=True)
        finally:
            await browser.close()
