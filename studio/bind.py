"""Who may reach the studio: the bind rule, and with --auth the gate in front of Gradio's routes.

Light on purpose (the standard library and core.system only): `paddle-studio ui` checks the bind
rule with this module before it imports gradio and the tabs (~3 s, 11-15 s on a loaded machine),
so a refused --host is said at once.

The gate works around Gradio 6.17.3's auth (measured on the demo workspace, issue 30):
- its page route renders `/` for a visitor who has not logged in with ``window.gradio_api_info``
  inlined: 462 KB naming every endpoint and its parameters, the dropdown choices among them
  (326 absolute workspace paths), while `/gradio_api/info` itself answers 401;
- a dozen routes answer without a login (``/gradio_api/app_id``, ``/gradio_api/startup-events``,
  ``/monitoring/summary``, ``/gradio_api/heartbeat/…``, ``/gradio_api/upload_progress``, …);
- `/login` answers 30 wrong passwords in 0.1 s, with no slowdown.
So, with auth on, a visitor without a valid session cookie reaches only what the login form
needs (the page, its static files, `/login`, `/logout`) and gets `/` with an empty API list;
everything else answers 401. Failed logins are counted per client address: after ``FREE`` of
them within ``WINDOW`` s, that address is refused with 429 for 1 s, then 2, 4, … up to
``MAX_LOCK`` s after each further failure, whatever it sends, without waiting in the server
(other requests and other addresses are not slowed; Gradio's login form shows nothing on a 429,
only "Incorrect Credentials" on a 400). The session check reads Gradio's own ``App.tokens`` and
``App.cookie_id`` (``scope["app"]``), as its ``get_current_user`` does.
"""

from __future__ import annotations

import json
import math
import time

FREE = 5  # failed logins from one address answered at once
WINDOW = 300.0  # s after its last failure that an address's count is forgotten
MAX_LOCK = 60.0  # s, the longest an address waits between two checked attempts

# what the login form needs before a login (found by recording what the page loads)
OPEN_PREFIXES = ("/assets/", "/static/", "/svelte/", "/pwa_icon")
OPEN_PATHS = {"/", "/theme.css", "/gradio_api/theme.css", "/favicon.ico", "/manifest.json", "/robots.txt", "/logout"}
LOGIN_PATHS = {"/login", "/login/"}
STARTUP = "/gradio_api/startup-events"  # Gradio's launch() calls it, without a cookie, once at start
API_INFO = b"<script>window.gradio_api_info = "
EMPTY_API_INFO = b'{"named_endpoints":{},"unnamed_endpoints":{}}'


def check_bind(host: str, auth: str | None) -> tuple[str, str] | None:
    """Return the (user, password) pair; refuse a non-loopback bind without auth (ValueError)."""
    from core import system

    pair = None
    if auth:
        user, sep, password = auth.partition(":")
        if not sep or not user or not password:
            raise ValueError("--auth must be USER:PASS with both parts non-empty")
        pair = (user, password)
    if not system.is_loopback(host) and pair is None:
        raise ValueError(
            f"refusing to bind {host}: the studio can start training and read files, so binding beyond "
            "loopback needs --auth USER:PASS (or use --host 127.0.0.1 and an SSH tunnel)"
        )
    return pair


def cookies(scope) -> dict:
    out = {}
    for k, v in scope.get("headers") or []:
        if k.lower() == b"cookie":
            for part in v.decode("latin-1").split(";"):
                name, sep, value = part.strip().partition("=")
                if sep:
                    out.setdefault(name.strip(), value.strip().strip('"'))
    return out


def logged_in(scope) -> bool:
    """Whether the request carries a session cookie Gradio issued (as ``get_current_user`` reads it)."""
    app = scope["app"]
    c = cookies(scope)
    tokens = app.tokens
    return any(c.get(f"{name}-{app.cookie_id}") in tokens for name in ("access-token", "access-token-unsecure"))


async def answer(send, status: int, detail: str, headers: tuple = ()) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


def without_api_info(body: bytes) -> bytes:
    """The login page with ``window.gradio_api_info`` emptied (Gradio escapes ``<`` inside the JSON,
    so the first ``</script>`` after it is its end). The page's client reads no endpoint on the
    login form, but without the variable it asks /info (401) and never draws the form."""
    i = body.find(API_INFO)
    j = body.find(b";</script>", i)
    if i < 0 or j < 0:
        return body
    return body[: i + len(API_INFO)] + EMPTY_API_INFO + body[j:]


class LoginGate:
    """ASGI middleware, added only with --auth: see the module's docstring."""

    def __init__(self, app, free: int = FREE, window: float = WINDOW, max_lock: float = MAX_LOCK, clock=time.monotonic):
        self.app, self.free, self.window, self.max_lock, self.clock = app, free, window, max_lock, clock
        self.failures: dict[str, tuple[int, float]] = {}  # address -> (attempts not yet proven good, last one)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)  # lifespan; websockets: Gradio 6 uses none
        path, method = scope.get("path", ""), scope.get("method")
        if path in LOGIN_PATHS and method == "POST":
            return await self.login(scope, receive, send)
        if logged_in(scope) or path == STARTUP and not getattr(scope["app"], "startup_events_triggered", True):
            return await self.app(scope, receive, send)
        if method not in ("GET", "HEAD") or not (path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)):
            return await answer(send, 401, "Not authenticated")
        if path != "/" or method != "GET":
            return await self.app(scope, receive, send)
        start, chunks = None, []

        async def strip(message):  # the login page: buffer it, empty its API list
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                return None
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return None
            body = without_api_info(b"".join(chunks))
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, strip)

    def locked_for(self, addr: str, now: float) -> float:
        """Seconds ``addr`` must still wait before its next login is checked (0: none)."""
        n, last = self.failures.get(addr, (0, 0.0))
        if n and now - last > self.window:
            self.failures.pop(addr, None)
            return 0.0
        if n < self.free:
            return 0.0
        return max(0.0, last + min(2.0 ** (n - self.free), self.max_lock) - now)

    async def login(self, scope, receive, send):
        addr = (scope.get("client") or ("?",))[0]
        now = self.clock()
        wait = self.locked_for(addr, now)
        if wait > 0:
            secs = math.ceil(wait)
            return await answer(send, 429, f"Too many failed logins from this address; try again in {secs} s.",
                                ((b"retry-after", str(secs).encode()),))
        if len(self.failures) > 4096:  # forget addresses whose window is over
            for a in [a for a, (_, t) in self.failures.items() if now - t > self.window]:
                self.failures.pop(a, None)
        # counted before it is checked (so a burst in parallel is counted too); a success forgets it
        n, _ = self.failures.get(addr, (0, 0.0))
        self.failures[addr] = (n + 1, now)
        status = None

        async def watch(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        await self.app(scope, receive, watch)
        if status == 200:
            self.failures.pop(addr, None)
