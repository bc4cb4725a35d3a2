"""Look at the built docs site in headless Chromium, from disk (file://), as a reader would.

For each page: the main heading is the expected one, every image in the page has loaded
(``complete`` and ``naturalWidth > 0``), every table and code block fits the width it is given (no
column cut off, no sideways scroll) with no empty left navigation taking room, and a screenshot of it is
not blank. The search page finds
results from disk. Also, without the browser: every relative link of every page points to a file
that exists (a link to a folder does not open from disk).

Chromium and its WebDriver come from Debian (``apt-get install chromium chromium-driver``;
``scripts/test.sh`` installs them). The WebDriver protocol is spoken over the standard library's
HTTP client, so the check needs no Python package beyond Pillow (for the screenshots).

    python tests/docs/site_check.py docs/_build/html --shots /tmp/shots
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit


@dataclass(frozen=True)
class PageCheck:
    """One page of the site: its path in the build, the h1 it must show, the images it must have."""

    path: str
    heading: str
    min_images: int = 0
    fits: bool = True  # tables and code fit the page (docstring examples and notebook cells may scroll)


PAGES = (
    PageCheck("index.html", "gdsstore"),
    PageCheck("quickstart.html", "Quickstart"),
    PageCheck("performance.html", "Performance", min_images=1),
    PageCheck("reference/gdsstore.html", "gdsstore", fits=False),
    PageCheck("notebooks/benchmarks.html", "Benchmarks", min_images=1, fits=False),  # a plot made by the build
)
SEARCH_QUERY = "GDSStore"

_PAGE_STATE = """
const main = document.querySelector('main') || document.body;
const h1 = main.querySelector('h1');
const imgs = Array.from(main.querySelectorAll('img'));
const wide = Array.from(main.querySelectorAll('table, pre')).filter(
  e => e.scrollWidth > e.parentElement.clientWidth + 1 || e.scrollWidth > e.clientWidth + 1);
const nav = document.querySelector('.bd-sidebar-primary');
return {
  h1: h1 ? h1.textContent.replace(/[\\u00b6#]/g, '').trim() : null,
  images: imgs.map(i => ({src: i.getAttribute('src'), complete: i.complete, width: i.naturalWidth})),
  wide: wide.map(e => ({tag: e.tagName.toLowerCase(), text: e.textContent.trim().slice(0, 40),
                        width: e.scrollWidth, room: e.parentElement.clientWidth})),
  empty_nav: nav && nav.offsetWidth > 0 && !Array.from(nav.querySelectorAll('a')).some(a => a.offsetParent !== null) ? nav.offsetWidth : 0,
};
"""
_SEARCH_STATE = """
const items = document.querySelectorAll('#search-results li');
return {results: items.length, text: (document.getElementById('search-results') || {}).textContent || ''};
"""


def find_binary(env: str, *names: str) -> str | None:
    """The path of a program: ``$env`` if set, else the first of ``names`` on PATH."""
    if os.environ.get(env):
        return os.environ[env]
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class WebDriver:
    """The few W3C WebDriver commands this check needs, over ``urllib``."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.session = ""

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return json.loads(resp.read())["value"]
        except urllib.error.HTTPError as exc:  # WebDriver puts the reason in the body
            detail = exc.read().decode(errors="replace")[:500]
            raise RuntimeError(f"site_check: WebDriver {method} {path}: {exc.code} {detail}") from None

    def open_session(self, chromium: str) -> None:
        args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1000", "--hide-scrollbars"]
        caps = {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
            # Generous: CI machines are small and busy; a page from disk normally takes well under a second.
            "timeouts": {"script": 120_000, "pageLoad": 120_000},
        }
        self.session = self.call("POST", "/session", {"capabilities": {"alwaysMatch": caps}})["sessionId"]

    def get(self, url: str) -> None:
        self.call("POST", f"/session/{self.session}/url", {"url": url})

    def run(self, script: str) -> Any:
        return self.call("POST", f"/session/{self.session}/execute/sync", {"script": script, "args": []})

    def screenshot(self) -> bytes:
        return base64.b64decode(self.call("GET", f"/session/{self.session}/screenshot"))


@contextmanager
def browser(chromium: str, chromedriver: str) -> Iterator[WebDriver]:
    """A headless Chromium session driven through a chromedriver started for it (and stopped after)."""
    port = _free_port()
    proc = subprocess.Popen(
        [chromedriver, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    driver = WebDriver(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if driver.call("GET", "/status").get("ready"):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"site_check: {chromedriver} did not start on port {port}")
            time.sleep(0.1)
        driver.open_session(chromium)
        try:
            yield driver
        finally:
            driver.call("DELETE", f"/session/{driver.session}")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def blank_reason(png: bytes) -> str | None:
    """Why a screenshot looks blank (one colour over almost all of it), or None if it shows a page."""
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    if img.width < 100 or img.height < 100:
        return f"screenshot is {img.width}x{img.height}"
    small = img.resize((img.width // 4, img.height // 4))
    colours = small.getcolors(maxcolors=1 << 16) or []
    total = small.width * small.height
    top = max((count for count, _ in colours), default=total)
    if len(colours) < 8 or top > 0.98 * total:
        return f"{len(colours)} colours, the commonest on {top / total:.1%} of it"
    return None


def check_page(driver: WebDriver, site: Path, page: PageCheck, shots: Path | None) -> list[str]:
    """What is wrong with one page as the browser shows it (empty when nothing is)."""
    driver.get((site / page.path).as_uri())
    state = driver.run(_PAGE_STATE)
    problems = []
    if state["h1"] != page.heading:
        problems.append(f"{page.path}: h1 is {state['h1']!r}, expected {page.heading!r}")
    images = state["images"]
    if len(images) < page.min_images:
        problems.append(f"{page.path}: {len(images)} image(s), expected at least {page.min_images}")
    for img in images:
        if not (img["complete"] and img["width"] > 0):
            problems.append(f"{page.path}: image {img['src']} did not load (naturalWidth {img['width']})")
    # Tables and code fit the page at the window's width (no column cut off, no sideways scroll).
    for el in state["wide"] if page.fits else []:
        problems.append(
            f"{page.path}: a {el['tag']} is {el['width']} px wide in {el['room']} px ({el['text']!r}...)"
        )
    if state["empty_nav"]:
        problems.append(f"{page.path}: the empty left navigation takes {state['empty_nav']} px")
    png = driver.screenshot()
    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
        (shots / (page.path.replace("/", "_").removesuffix(".html") + ".png")).write_bytes(png)
    reason = blank_reason(png)
    if reason:
        problems.append(f"{page.path}: the screenshot looks blank ({reason})")
    return problems


def check_search(driver: WebDriver, site: Path) -> list[str]:
    """The search page finds ``SEARCH_QUERY`` from disk (its index is a script, no server needed)."""
    driver.get((site / "search.html").as_uri() + f"?q={SEARCH_QUERY}")
    deadline = time.monotonic() + 20
    state = driver.run(_SEARCH_STATE)
    while state["results"] == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
        state = driver.run(_SEARCH_STATE)
    if state["results"] == 0:
        return [f"search.html?q={SEARCH_QUERY}: no results from disk ({state['text'][:200]!r})"]
    return []


_HREF = re.compile(r"""(?:href|src)="([^"]+)\"""")


def check_links(site: Path) -> list[str]:
    """Every relative link of every page opens from disk: it names a file that exists."""
    problems = []
    for page in sorted(p for p in site.rglob("*.html") if "_static" not in p.relative_to(site).parts):
        for target in set(_HREF.findall(page.read_text(errors="replace"))):
            parts = urlsplit(target)
            if parts.scheme or target.startswith(("#", "//")) or not parts.path:
                continue
            resolved = (page.parent / unquote(parts.path)).resolve()
            if not resolved.is_file():
                problems.append(f"{page.relative_to(site)}: link {target!r} does not open from disk")
    return problems


def check_site(site: Path, chromium: str, chromedriver: str, shots: Path | None = None) -> list[str]:
    """Every problem found on the built ``site`` (an empty list means it passed)."""
    problems = check_links(site)
    with browser(chromium, chromedriver) as driver:
        for page in PAGES:
            problems += check_page(driver, site, page, shots)
        problems += check_search(driver, site)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", type=Path, help="the built HTML (docs/_build/html)")
    parser.add_argument("--shots", type=Path, help="write the screenshots here")
    args = parser.parse_args(argv)
    chromium = find_binary("CHROMIUM", "chromium", "chromium-browser", "google-chrome")
    chromedriver = find_binary("CHROMEDRIVER", "chromedriver")
    if not chromium or not chromedriver:
        print("site_check: needs chromium and chromedriver (apt-get install chromium chromium-driver)")
        return 2
    problems = check_site(args.site.resolve(), chromium, chromedriver, args.shots)
    for problem in problems:
        print(problem)
    print(f"site_check: {len(PAGES)} pages, search and links: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
