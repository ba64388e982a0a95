"""Helpers for the browser tests: start a real studio process and a headless Debian chromium."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("STUDIO_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Studio:
    """`paddle-studio ui` in a subprocess on a free loopback port, output to a log file."""

    def __init__(self, home: Path, log: Path, lang: str = "en", args: tuple = (), env: dict | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log = open(log, "wb")
        env = {**os.environ, "PADDLE_STUDIO_HOME": str(home), **(env or {})}
        self.started = time.time()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "core.cli", "ui", "--port", str(self.port), "--lang", lang, *args],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"studio exited with {self.proc.returncode}: {Path(log).read_text()[-2000:]}")
            try:
                urllib.request.urlopen(self.url, timeout=1)
                self.answered_s = time.time() - self.started
                return
            except OSError:
                time.sleep(0.2)
        raise TimeoutError("studio did not answer within 60 s")

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@contextmanager
def studio_page(home: Path, log: Path, lang: str = "en", env: dict | None = None, width: int = 1280,
                height: int = 1600):
    """A studio on ``home`` and one chromium page open on it, (studio, page); both closed after."""
    from playwright.sync_api import sync_playwright

    s = Studio(home, log, lang=lang, env=env)
    try:
        with sync_playwright() as p:
            browser = launch_browser(p)
            try:
                page = browser.new_page(viewport={"width": width, "height": height})
                page.goto(s.url)
                yield s, page
            finally:
                browser.close()
    finally:
        s.close()


def launch_browser(p):
    return p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)


def wait_text(locator, text: str, timeout: float = 20.0) -> str:
    """Wait until ``text`` appears in the element's visible text (whitespace collapsed)."""
    deadline = time.time() + timeout
    seen = ""
    while time.time() < deadline:
        try:
            seen = " ".join(locator.inner_text(timeout=1000).split())
        except Exception:  # noqa: BLE001 - element not rendered yet
            seen = ""
        if text in seen:
            return seen
        time.sleep(0.1)
    raise AssertionError(f"{text!r} did not appear; last text: {seen[:500]!r}\n{page_state(locator.page)}")


def page_state(page) -> str:
    """What the page says about its jobs and actions (every job status line, progress text, note and
    message shown), for the message of a failed wait: which step stopped, and where."""
    try:
        rows = page.evaluate(
            "() => [...document.querySelectorAll('[id$=-job-status], [id$=-job-progress], [id$=-note], [id$=-msg],"
            " [id$=-status]')].map(e => e.id + ': ' + e.innerText.replace(/\\s+/g, ' ').trim().slice(0, 200))"
            ".filter(r => !r.endsWith(': '))")
    except Exception as e:  # noqa: BLE001 - a closed page has no state to tell
        return f"(page state unavailable: {e})"
    try:
        tabs = page.evaluate("() => [document.querySelector('#studio-tabs [role=tab][aria-selected=true]')?.id,"
                             " window.__studioLive]")
        rows.append(f"tab shown: {tabs[0]}; timers on for: {tabs[1]}")
    except Exception:  # noqa: BLE001
        pass
    return "page state:\n  " + "\n  ".join(rows or ["(no status shown)"])


def plotly_charts(page) -> tuple[int, int]:
    """(Plotly charts the page still keeps alive, charts in the document): a chart's responsive
    config puts a "resize" listener on window until Plotly.purge, so a chart dropped without purge
    stays alive (with its whole tree) for as long as the page is open."""
    cdp = page.context.new_cdp_session(page)
    try:
        scripts = {}
        cdp.on("Debugger.scriptParsed", lambda e: scripts.__setitem__(e["scriptId"], e.get("url", "")))
        cdp.send("Debugger.enable")  # reports every script already parsed, with its URL
        cdp.send("Debugger.disable")
        cdp.send("HeapProfiler.collectGarbage")
        win = cdp.send("Runtime.evaluate", {"expression": "window"})["result"]["objectId"]
        listeners = cdp.send("DOMDebugger.getEventListeners", {"objectId": win})["listeners"]
        # Gradio's Plotly chart module (its file name says so) adds one per chart
        alive = sum(1 for x in listeners if x["type"] == "resize" and "PlotlyPlot" in scripts.get(x["scriptId"], ""))
    finally:
        cdp.detach()
    return alive, page.evaluate("() => document.querySelectorAll('.js-plotly-plot').length")


# Console messages of Gradio 6.17's own client that no code of ours causes or can avoid (regex on
# the message as ConsoleLog writes it -> why it is allowed).
GRADIO_CONSOLE_NOISE = {
    r"^console\.warning: Method not implemented\. \(index-\w+\.js": (
        "the Upload component closes its upload-progress stream with close() of the client's fetch-based "
        "EventSource stand-in, which only warns (@gradio/client stream(): close: console.warn); every upload"),
    r"^console\.error: AbortError: signal is aborted without reason\s+at \w+ \(\S*index-\w+\.js": (
        "the client aborts its /queue/data fetch when the server says close_stream (no event of the session "
        "pending) and the stand-in's .catch logs that AbortError with console.error; a race with the "
        "response's end, so 0 or 1 per queue stream"),
}


class ConsoleLog(list):
    """Every console error/warning and uncaught page error of ``page``, as "kind: text (url:line)".
    ``console_errors(page)`` attaches the listeners; read it (a list) at any time; ``counts()`` gives
    each distinct message with how often it came."""

    def counts(self) -> list[tuple[int, str]]:
        import collections

        return sorted(((n, m) for m, n in collections.Counter(self).items()), reverse=True)

    def unexpected(self, allowed: dict = GRADIO_CONSOLE_NOISE) -> list[str]:
        """The messages no pattern of ``allowed`` explains."""
        import re

        return [m for m in self if not any(re.search(p, m) for p in allowed)]

    def summary(self) -> str:
        return "\n".join(f"{n:4d}x {m}" for n, m in self.counts()) or "(no console errors or warnings)"


def console_errors(page, kinds: tuple = ("error", "warning")) -> ConsoleLog:
    """Collect ``page``'s console messages of ``kinds`` and its uncaught errors (exceptions and
    unhandled promise rejections) from now on, in the returned list."""
    log = ConsoleLog()

    def on_console(msg):
        if msg.type in kinds:
            loc = msg.location or {}
            where = f" ({loc.get('url', '').rsplit('/', 1)[-1]}:{loc.get('lineNumber', '')})" if loc.get("url") else ""
            log.append(f"console.{msg.type}: {msg.text[:400]}{where}")

    def on_pageerror(err):
        stack = (getattr(err, "stack", None) or "").splitlines()[:4]
        log.append(f"pageerror: {err.message[:400]} | {' / '.join(s.strip() for s in stack[1:4])}")

    page.on("console", on_console)
    page.on("pageerror", on_pageerror)
    return log
