"""The documentation site as a reader sees it, in a real headless Chromium, at a laptop's width
(1280 px) and a phone's (390 px): no command block and no table hides its content behind a
horizontal scroll, the page itself does not run off the screen, and no code block's copy button
covers its text.

It loads every page of a built site (``mkdocs build``) in one Chromium, driven over the DevTools
protocol on a pipe (``--remote-debugging-pipe``: NUL-ended JSON on file descriptors 3 and 4, no
extra package), with the viewport set by ``Emulation.setDeviceMetricsOverride`` (a headless
window is never narrower than 500 px). Once Material's own script has run, a small script
measures every ``pre > code``, table and table wrapper (``scrollWidth > clientWidth``), the page
(``scrollWidth`` against the viewport) and each copy button against its block's text box.

Runs when ``MCP_APP_BRIDGE_SITE_DIR`` names the built site (``.ci/run`` builds it and sets it;
by hand: ``mkdocs build --site-dir /tmp/site``, then ``MCP_APP_BRIDGE_SITE_DIR=/tmp/site python -m
pytest tests/docs``); skipped otherwise. Needs ``chromium`` (Debian's package): skipped without
it, failed under ``CI=true``. ``python tests/docs/test_site_layout.py SITE OUT`` saves a
full-page screenshot of each page at both widths into OUT, to look at.
"""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SITE_VAR = "MCP_APP_BRIDGE_SITE_DIR"
WIDTHS = (1280, 390)
HEIGHT = 900
STEP_TIMEOUT_SECONDS = 30.0
"""Bound on each DevTools answer, a page load included."""
SETTLE_SECONDS = 0.3
"""After the load event: Material adds its copy buttons from its own script."""

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)

MEASURE = r"""
(() => {
  const found = [];
  const name = (el) => el.tagName.toLowerCase() + ": " + (el.innerText || "").trim().split("\n")[0].slice(0, 70);
  const over = (el, what) => {
    if (el.scrollWidth > el.clientWidth + 1) found.push({what, where: name(el), scroll: el.scrollWidth, client: el.clientWidth});
  };
  document.querySelectorAll(".md-content pre > code").forEach((el) => over(el, "code block scrolls"));
  document.querySelectorAll(".md-content .md-typeset__scrollwrap, .md-content table").forEach((el) => over(el, "table scrolls"));
  const page = document.documentElement;
  if (page.scrollWidth > window.innerWidth + 1) {
    found.push({what: "page scrolls sideways", where: "html", scroll: page.scrollWidth, client: window.innerWidth});
  }
  let buttons = 0;
  document.querySelectorAll(".md-content pre > code").forEach((code) => {
    const button = code.parentElement.querySelector(".md-code__nav, .md-clipboard");
    if (!button) return;
    buttons += 1;
    const box = code.getBoundingClientRect();
    const right = box.right - parseFloat(getComputedStyle(code).paddingRight);
    const b = button.getBoundingClientRect();
    if (b.width > 0 && right > b.left + 1) {
      found.push({what: "copy button covers text", where: name(code), scroll: Math.round(right), client: Math.round(b.left)});
    }
  });
  const blocks = document.querySelectorAll(".md-content pre > code").length;
  return JSON.stringify({found, blocks, buttons, width: window.innerWidth});
})()
"""


class Browser:
    """One headless Chromium and one page, over the DevTools protocol on a pipe."""

    def __init__(self, chromium: str, profile: Path) -> None:
        to_chrome_read, self._write = os.pipe()
        self._read, from_chrome_write = os.pipe()
        os.set_inheritable(to_chrome_read, True)
        os.set_inheritable(from_chrome_write, True)

        def child_fds() -> None:  # Chromium reads commands on fd 3 and writes on fd 4
            commands, replies = os.dup(to_chrome_read), os.dup(from_chrome_write)  # above 4 by now
            os.dup2(commands, 3)
            os.dup2(replies, 4)

        self.process = subprocess.Popen(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=child_fds,  # noqa: PLW1509 - a single-threaded test process
            pass_fds=(3, 4, to_chrome_read, from_chrome_write),
        )
        os.close(to_chrome_read)
        os.close(from_chrome_write)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable", session=True)

    def _message(self, deadline: float) -> dict[str, Any]:
        import select

        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self._read], [], [], max(0.0, remaining))
            if not ready:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise EOFError("Chromium exited")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(line)
        return message

    def call(self, method: str, params: dict[str, Any] | None = None, *, session: bool = False) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + STEP_TIMEOUT_SECONDS
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self.events.append(reply)

    def open(self, url: str, width: int) -> None:
        """Load `url` with a `width`-pixel viewport (a phone's is a touch screen), until its load event."""
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": width < 600},
            session=True,
        )
        self.events.clear()
        self.call("Page.navigate", {"url": url}, session=True)
        deadline = time.monotonic() + STEP_TIMEOUT_SECONDS
        while not any(event.get("method") == "Page.loadEventFired" for event in self.events):
            self.events.append(self._message(deadline))
        time.sleep(SETTLE_SECONDS)

    def evaluate(self, expression: str) -> Any:
        reply = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True)
        return reply["result"].get("value")

    def screenshot(self, path: Path) -> None:
        height = int(self.evaluate("document.documentElement.scrollHeight"))
        width = int(self.evaluate("window.innerWidth"))
        shot = self.call(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True, "clip": {"x": 0, "y": 0, "width": width, "height": min(height, 6000), "scale": 1}},
            session=True,
        )
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (OSError, EOFError, TimeoutError, RuntimeError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._write)
        os.close(self._read)


def _site() -> Path:
    value = os.environ.get(SITE_VAR)
    if not value:
        pytest.skip(f"{SITE_VAR} names no built site (mkdocs build --site-dir DIR, then {SITE_VAR}=DIR)")
    site = Path(value)
    assert (site / "index.html").is_file(), f"{SITE_VAR}={value}: no index.html there"
    return site


def find_chromium() -> str | None:
    return next((found for name in ("chromium", "chromium-browser", "google-chrome") if (found := shutil.which(name))), None)


def _chromium() -> str:
    found = find_chromium()
    if found:
        return found
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail("CI=true: chromium is not installed (apt-get install chromium)", pytrace=False)
    pytest.skip("chromium is not installed (Debian: apt-get install chromium)")


@contextlib.contextmanager
def served(site: Path) -> Iterator[str]:
    """The site served over HTTP on 127.0.0.1 (as a reader gets it: Material's script needs a
    secure context for its copy buttons, which file:// is not); yields the base URL."""
    import functools
    import http.server
    import threading

    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


def pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("index.html") if not {"search", "assets"} & set(p.relative_to(site).parts))


@pytest.mark.process  # (it starts Chromium)
@pytest.mark.posix_only("Chromium's DevTools pipe is file descriptors 3 and 4")
@pytest.mark.timeout(300)
def test_no_code_block_or_table_scrolls_sideways_at_1280_and_390_px(tmp_path: Path) -> None:
    site = _site()
    browser = Browser(_chromium(), tmp_path / "profile")
    problems: list[str] = []
    blocks = buttons = 0
    try:
        found_pages = pages(site)
        assert len(found_pages) >= 10, found_pages
        with served(site) as base:
          for page in found_pages:
            for width in WIDTHS:
                browser.open(base + page.relative_to(site).parent.as_posix() + "/", width)
                report = json.loads(browser.evaluate(MEASURE))
                assert report["width"] == width, (page, report)
                blocks += report["blocks"]
                buttons += report["buttons"]
                label = str(page.parent.relative_to(site)) if page.parent != site else "home"
                problems += [
                    f"{label} @ {width}px: {item['what']} ({item['scroll']} > {item['client']}): {item['where']}"
                    for item in report["found"]
                ]
    finally:
        browser.close()
    assert blocks > 30 and buttons == blocks, f"the measure saw {blocks} code blocks and {buttons} copy buttons"
    assert not problems, f"{len(problems)} layout problems:\n" + "\n".join(problems)


if __name__ == "__main__":
    site_dir, out_dir = Path(sys.argv[1]), Path(sys.argv[2])
    out_dir.mkdir(parents=True, exist_ok=True)
    chromium = find_chromium()
    assert chromium, "chromium is not installed"
    with tempfile.TemporaryDirectory() as profile:
        shots = Browser(chromium, Path(profile))
        try:
            with served(site_dir) as base:
              for page in pages(site_dir):
                label = str(page.parent.relative_to(site_dir)).replace(os.sep, "-") if page.parent != site_dir else "home"
                for width in WIDTHS:
                    shots.open(base + page.relative_to(site_dir).parent.as_posix() + "/", width)
                    shots.screenshot(out_dir / f"{label}-{width}.png")
                    print(label, width, json.loads(shots.evaluate(MEASURE))["found"])
        finally:
            shots.close()
