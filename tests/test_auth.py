"""With --auth, a visitor who has not logged in learns nothing of the studio (no endpoint list, no
workspace path, every route but the login page answers 401), a login opens the whole page, and
repeated wrong logins from one address are refused with 429 without slowing anybody else.
One real studio (`paddle-studio ui` with $PADDLE_STUDIO_AUTH) serves the whole module."""

from __future__ import annotations

import http.client
import json
import re
import time
import urllib.parse

import pytest

from studio.bind import LoginGate
from tests.browser import Studio
from tests.conftest import link_demo

USER, PASSWORD = "admin", "s3cret-pass"


@pytest.fixture(scope="module")
def studio(demo_home, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("auth")
    home = link_demo(tmp / "ws", demo_home)
    s = Studio(home, tmp / "studio.log", env={"PADDLE_STUDIO_AUTH": f"{USER}:{PASSWORD}", "PADDLE_STUDIO_WARM": "0"})
    s.home = home
    yield s
    s.close()


def request(studio, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
            source: str = "127.0.0.1", within: float = 30.0):
    """(status, headers, body) of one request to the studio from loopback address ``source``; of a
    body that is still streaming after ``within`` s (an event stream), what came until then."""
    c = http.client.HTTPConnection("127.0.0.1", studio.port, timeout=within, source_address=(source, 0))
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        chunks, deadline = [], time.monotonic() + within
        try:
            while time.monotonic() < deadline:
                chunk = r.read1(1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
        except (TimeoutError, OSError):
            pass
        return r.status, r.headers, b"".join(chunks)
    finally:
        c.close()


def login(studio, password: str, source: str):
    body = urllib.parse.urlencode({"username": USER, "password": password}).encode()
    return request(studio, "POST", "/login", body, {"Content-Type": "application/x-www-form-urlencoded"}, source)


def session_cookie(headers) -> str:
    return "; ".join(c.split(";", 1)[0] for c in headers.get_all("set-cookie") or [])


def api_info_of(page: bytes) -> dict:
    m = re.search(rb"window\.gradio_api_info = (.*?);</script>", page)
    assert m, "the page has no window.gradio_api_info"
    return json.loads(m.group(1))


def endpoint_names(studio) -> list[str]:
    status, headers, _ = login(studio, PASSWORD, "127.0.0.9")
    assert status == 200
    status, _, body = request(studio, "GET", "/gradio_api/info", headers={"Cookie": session_cookie(headers)},
                              source="127.0.0.9")
    assert status == 200
    return [n for n in json.loads(body)["named_endpoints"]]


def test_in_chromium_the_login_form_draws_and_opens_the_studio(studio):
    """The login page carries an empty endpoint list (not none: without one the page asks /info,
    gets 401 and never draws the form). In a real browser: the form is there, a login opens the
    studio, and the Train tab's live check refuses 1e9 epochs by their steps. First in the module:
    the browser logs in from 127.0.0.1, which no throttle test uses."""
    from playwright import sync_api as playwright

    from tests.browser import launch_browser, wait_text

    with playwright.sync_playwright() as p:
        browser = launch_browser(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1600})
            page.goto(studio.url)
            page.locator("input[type=password]").wait_for(timeout=30000)
            assert page.get_by_role("tab", name="Train").count() == 0
            page.locator("input:not([type=password])").first.fill(USER)
            page.locator("input[type=password]").fill(PASSWORD)
            page.get_by_role("button", name=re.compile("login", re.I)).click()
            page.get_by_role("tab", name="Train").click(timeout=60000)
            wait_text(page.locator("#train-check"), "No problems", 30)
            for elem, value in (("cfg-training-max_steps", -1), ("cfg-training-num_train_epochs", 1e9)):
                box = page.locator(f"#{elem} input[type=number]")
                box.fill(str(value))
                box.press("Tab")
            wait_text(page.locator("#train-check"), "optimizer steps", 30)
        finally:
            browser.close()


def test_the_login_page_names_no_endpoint_and_no_workspace_path(studio):
    status, _, page = request(studio, "GET", "/")
    assert status == 200 and b"window.gradio_config" in page  # the login form is drawn from it
    home = str(studio.home).encode()
    assert page.count(home) == 0
    assert api_info_of(page) == {"named_endpoints": {}, "unnamed_endpoints": {}}
    names = endpoint_names(studio)
    assert len(names) > 20  # the studio's own, seen after login
    leaked = [n for n in names if f'"{n}"'.encode() in page]
    assert not leaked, leaked
    assert len(page) < 20_000, len(page)  # Gradio 6.17.3 sent 462 KB


def gradio_routes() -> list[tuple[str, str]]:
    """(method, path) of every route Gradio registers for an app, path parameters filled in."""
    import gradio as gr
    from gradio.routes import App

    with gr.Blocks() as blocks:
        gr.Button("x").click(lambda: None)
    app = App.create_app(blocks)
    routes = []
    for r in app.routes:
        for rr in [r] if hasattr(r, "path") else r.original_router.routes:
            for m in sorted(getattr(rr, "methods", None) or []):
                routes.append((m, re.sub(r"\{[^}]*\}", "x", rr.path)))
    return sorted(set(routes))


def test_before_login_every_route_but_the_login_page_answers_401(studio):
    home = str(studio.home)
    routes = gradio_routes() + [("GET", f"/gradio_api/file={home}/datasets/demo/train.json"),
                                ("GET", "/gradio_api/info?all_endpoints=true"), ("GET", "/docs")]
    assert len(routes) > 60
    open_ = {"/", "/theme.css", "/gradio_api/theme.css", "/favicon.ico", "/manifest.json", "/robots.txt", "/logout"}
    wrong = []
    for method, path in routes:
        if path in ("/login", "/login/"):
            continue
        status, _, body = request(studio, method, path, body=b"" if method == "POST" else None, within=3.0)
        if home.encode() in body or b"named_endpoints\":{\"" in body:
            wrong.append((method, path, status, "leaks"))
        free = method in ("GET", "HEAD") and (path in open_ or path.startswith(("/assets/", "/static/", "/svelte/", "/pwa_icon")))
        if not free and status != 401:
            wrong.append((method, path, status))
    assert not wrong, wrong


def test_a_login_opens_the_whole_page(studio):
    status, headers, _ = login(studio, PASSWORD, "127.0.0.3")
    assert status == 200
    cookie = {"Cookie": session_cookie(headers)}
    status, _, page = request(studio, "GET", "/", headers=cookie, source="127.0.0.3")
    assert status == 200 and len(api_info_of(page)["named_endpoints"]) > 20
    assert str(studio.home).encode() in page  # the header names the workspace, for who logged in
    status, _, config = request(studio, "GET", "/config", headers=cookie, source="127.0.0.3")
    assert status == 200 and json.loads(config)["components"]
    status, _, _ = request(studio, "GET", "/gradio_api/app_id", headers=cookie, source="127.0.0.3")
    assert status == 200


def test_repeated_wrong_logins_are_refused_while_another_address_logs_in(studio):
    codes, slowest, retry = [], 0.0, None
    for _ in range(12):
        t0 = time.monotonic()
        status, headers, _ = login(studio, "wrong", "127.0.0.5")
        slowest = max(slowest, time.monotonic() - t0)
        codes.append(status)
        retry = headers.get("retry-after") or retry
    assert codes[:5] == [400] * 5, codes
    assert set(codes) <= {400, 429} and codes[9:] == [429] * 3, codes
    assert retry and int(retry) >= 1
    assert slowest < 2.0  # refused at once: nothing waits in the server
    # the locked address is refused whatever it sends; another logs in at once
    assert login(studio, PASSWORD, "127.0.0.5")[0] == 429
    t0 = time.monotonic()
    status, headers, _ = login(studio, PASSWORD, "127.0.0.6")
    assert status == 200 and time.monotonic() - t0 < 2.0
    status, _, _ = request(studio, "GET", "/config", headers={"Cookie": session_cookie(headers)}, source="127.0.0.6")
    assert status == 200


def test_the_lock_doubles_up_to_its_cap_and_is_forgotten_after_the_window():
    now = [1000.0]
    gate = LoginGate(None, free=3, window=300.0, max_lock=10.0, clock=lambda: now[0])
    for n, lock in [(2, 0.0), (3, 1.0), (4, 2.0), (5, 4.0), (6, 8.0), (7, 10.0), (9, 10.0)]:
        gate.failures["a"] = (n, now[0])
        assert gate.locked_for("a", now[0]) == lock, n
        assert gate.locked_for("b", now[0]) == 0.0
    now[0] += 301
    assert gate.locked_for("a", now[0]) == 0.0 and "a" not in gate.failures
