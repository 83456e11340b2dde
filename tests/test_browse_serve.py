"""`cputrace browse --serve`: the same app served to web browsers, on a free loopback port.

The server runs as a real process. The page it serves is checked over HTTP, the app behind
its websocket by the terminal output it sends (the status line of the trace), and a real
browser, the system's headless Chromium, opens the page, shows the app and moves its cursor.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from cputrace.cli import cli

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`cputrace browse --serve` on the quicksort example; its URL."""
    where = tmp_path_factory.mktemp("serve")
    shutil.copy(ROOT / "examples" / "quicksort.tarmac", where / "quicksort.tarmac")
    store = where / "quicksort.ctrace"
    ingested = CliRunner().invoke(cli, ["ingest", str(where / "quicksort.tarmac"), "-o", str(store)])
    assert ingested.exit_code == 0, ingested.output
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "cputrace", "browse", str(store), "--serve", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        printed = ""
        deadline = time.monotonic() + 60
        while url not in printed:
            line = server.stdout.readline() if server.stdout else ""
            if (not line and server.poll() is not None) or time.monotonic() > deadline:
                pytest.fail(f"the server did not start: {printed}")
            printed += line
        while not _listening(port):  # the URL is printed as the server starts to listen
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the server did not listen: {printed}")
            time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        assert server.returncode is not None


def test_the_page_is_the_served_app(served):
    with urllib.request.urlopen(served + "/", timeout=30) as response:
        page = response.read().decode()
    assert response.status == 200
    assert 'data-session-websocket-url="ws://127.0.0.1:' in page and "/ws" in page
    assert "js/textual.js" in page


def _screen_shows(url: str, steps: list[tuple[str | None, str]]) -> list[str]:
    """Talk to the app behind the page's websocket as the page does: for each step, send its
    key (terminal input) if any, then read the app's terminal output until its text shows the
    step's words (or a minute passes); the texts read."""
    import aiohttp

    async def talk() -> list[str]:
        seen = []
        async with aiohttp.ClientSession() as client:
            ws_url = url.replace("http", "ws") + "/ws?width=140&height=40"
            async with client.ws_connect(ws_url) as ws:
                for key, words in steps:
                    if key is not None:
                        await ws.send_str(json.dumps(["stdin", key]))
                    text = ""
                    deadline = time.monotonic() + 60
                    while words not in text and time.monotonic() < deadline:
                        try:
                            message = await ws.receive(timeout=5)
                        except TimeoutError:
                            continue
                        if message.type == aiohttp.WSMsgType.BINARY:
                            text += _ESCAPES.sub("", message.data.decode("utf-8", "replace"))
                    seen.append(text)
        return seen

    return asyncio.run(talk())


def test_the_served_app_shows_the_trace_and_follows_keys(served):
    first, after_down = _screen_shows(served, [(None, "seq 0 "), ("\x1b[B", "seq 1 ")])
    assert "Registers" in first and "seq 0 " in first
    assert "seq 1 " in after_down


def test_chromium_shows_the_app_and_a_key_moves_the_cursor(served):
    if not CHROMIUM.exists():
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(f"{CHROMIUM} is missing in CI (.ci/run installs it)")
        pytest.skip(f"{CHROMIUM} is not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(served + "/")
            page.wait_for_selector("body.-first-byte", timeout=60_000)
            first = _screenshot_until(page, lambda shot: _colours(shot) > 4)
            page.mouse.click(300, 300)  # into the trace pane: the terminal has the keyboard
            shown = page.screenshot()
            page.keyboard.press("ArrowDown")
            moved = _screenshot_until(page, lambda shot: shot != shown)
        finally:
            browser.close()
    assert _colours(first) > 4, "the page is blank"
    assert moved != shown, "the key changed nothing on the screen"


def _screenshot_until(page, done, seconds: float = 60) -> bytes:
    """Screenshots of the page until one is `done` (or `seconds` pass): the last one."""
    deadline = time.monotonic() + seconds
    while True:
        shot = page.screenshot()
        if done(shot) or time.monotonic() > deadline:
            return shot
        page.wait_for_timeout(250)


def _colours(png: bytes) -> int:
    """Distinct colours in a screenshot (a blank page has one or two)."""
    from io import BytesIO

    from matplotlib.image import imread

    pixels = imread(BytesIO(png), format="png")
    flat = pixels.reshape(-1, pixels.shape[-1])
    return len({tuple(p) for p in flat[:: max(1, len(flat) // 20000)].tolist()})
