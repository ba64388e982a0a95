"""An OpenAI-compatible chat server over :class:`core.chat.engine.ChatEngine`, and the client helpers
the studio uses to run one as a worker subprocess (the studio never holds model weights).

``paddle-studio serve --model DIR [--adapter DIR] --port P`` serves, on 127.0.0.1 by default:

- ``POST /v1/chat/completions``: OpenAI chat completions, non-streaming or streaming (SSE
  ``chat.completion.chunk`` events: role first, content deltas, finish_reason, an optional
  usage chunk with ``stream_options.include_usage``, then ``data: [DONE]``). PaddleNLP
  flask_server's fields are accepted too: ``context`` + ``history``, ``max_length`` (new
  tokens), ``src_length``, ``top_k``, ``repetition_penalty``; extensions: ``seed``, ``ignore_eos``.
- ``GET /v1/models``; ``GET /health`` (no key needed): counters of queued / active /
  cancelled generations and the latest ones' token counts.

Bad requests get HTTP 4xx with ``{"error": {"message", "type", "param", "code"}}`` (400; 413 for
a body over 8 MiB, counted on the bytes read, chunked or not), never a 5xx. One generation runs at a
time; the others queue. A client that goes away cancels its generation at the next token: a stream
notices on its next write, a plain request by a look at its socket every 0.25 s. Binding beyond
loopback needs an API key; with a key, every endpoint but /health wants ``Authorization: Bearer KEY``.

A worker can have an *owner*, the process that asked for it (pid and start time, so a reused pid
is not mistaken for it): it ends by itself within a second or two of its owner's end, however
that ended (kill -9 included), and after ``idle_s`` without a request (default 30 min for an owned
worker, none otherwise). The studio's workers are owned by the studio (core.chat.workers, through
the job's params); :func:`start_worker` gives its caller as the owner. ``paddle-studio serve`` run
by a user has no owner and no idle timeout unless asked: $PADDLE_STUDIO_SERVE_OWNER ("PID" or
"PID:START") and $PADDLE_STUDIO_SERVE_IDLE_S (seconds; 0 turns it off). SIGTERM or Ctrl-C ends it
at once (the interpreter's teardown, 0.7-5 s with paddle loaded, is skipped). Run as a job, it
prints one JSON object on stdout when it ends by itself: ``{"ended": "owner_gone" | "idle" |
"signal", "reason", ...}``, and its "ready" line goes to the log.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from core import jobs, system

ROOT = Path(__file__).resolve().parents[2]
API_KEY_ENV = "PADDLE_STUDIO_API_KEY"
MAX_BODY_BYTES = 8 * 1024 * 1024
DRAIN_BYTES, DRAIN_S = 4 * MAX_BODY_BYTES, 2.0  # the most of an over-long body read (and dropped) to answer 413
MAX_MESSAGES = 512  # a longer conversation cannot fit any context the studio serves; refused before tokenizing
HEARTBEAT_ENV = "PADDLE_STUDIO_SERVE_HEARTBEAT_S"
HEARTBEAT_S = 1.0  # an SSE comment this often while a streamed answer waits for the model
OWNER_ENV = "PADDLE_STUDIO_SERVE_OWNER"  # "PID" or "PID:START" (jobs.proc_start): end when that process has
IDLE_ENV = "PADDLE_STUDIO_SERVE_IDLE_S"  # end after this many seconds without a request; 0: never
IDLE_S = 30 * 60  # an owned worker's default idle timeout
WATCH_S = 1.0  # how often a worker looks at its owner and its idle time
DISCONNECT_POLL_S = 0.25  # how often a plain (non-streamed) request looks whether its client is still there
log = logging.getLogger("paddle_studio.serve")


# ---------------------------------------------------------------- request -> engine


class ApiError(Exception):
    """An HTTP error with an OpenAI-style body."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 type_: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.type = status, message, param, code, type_

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


# request key -> GenParams field, in priority order where several name the same thing
_PARAM_KEYS = [
    ("max_tokens", "max_new_tokens"),
    ("max_completion_tokens", "max_new_tokens"),
    ("max_length", "max_new_tokens"),  # PaddleNLP flask_server: tokens to generate
    ("max_new_tokens", "max_new_tokens"),
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("top_k", "top_k"),
    ("repetition_penalty", "repetition_penalty"),
    ("seed", "seed"),
    ("src_length", "src_length"),
    ("stop", "stop"),
    ("ignore_eos", "ignore_eos"),
]


def parse_request(body, served_names: set[str], model_id: str | None = None) -> tuple[list[dict], dict, dict, bool, bool]:
    """(messages, GenParams keywords, {field: request key}, stream, include_usage) or ApiError 400.
    ``model_id`` is the name the error messages give for this server's model (never its path)."""
    from core.chat.engine import ChatError, brief, messages_from, normalize_messages

    if not isinstance(body, dict):
        raise ApiError(400, f"the request body must be a JSON object, got {json_type(body)}", None, "invalid_json")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ApiError(400, f"model: expected a string (the model id), got {json_type(model)}", "model",
                       "invalid_value")
    if model is not None and model not in served_names:
        raise ApiError(400, f"model: unknown model {brief(model)}; this server serves "
                            f"{model_id or min(served_names)!r}", "model", "model_not_found")
    n = body.get("n")
    if n is not None and (isinstance(n, bool) or n != 1):
        raise ApiError(400, f"n: only 1 choice per request is supported, got {brief(n)}", "n", "unsupported_value")
    for k in ("presence_penalty", "frequency_penalty"):
        v = body.get(k)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not -2 <= v <= 2:
            raise ApiError(400, f"{k}: expected a number in [-2, 2], got {brief(v)}", k, "invalid_value")
        if v != 0:
            raise ApiError(400, f"{k}: not supported (use repetition_penalty); only 0 is accepted", k,
                           "unsupported_value")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise ApiError(400, f"stream: expected true or false, got {brief(stream)}", "stream", "invalid_value")
    opts = body.get("stream_options")
    opts = {} if opts is None else opts
    if not isinstance(opts, dict):
        raise ApiError(400, f"stream_options: expected an object, got {json_type(opts)}", "stream_options",
                       "invalid_value")
    include_usage = opts.get("include_usage")
    include_usage = False if include_usage is None else include_usage
    if not isinstance(include_usage, bool):
        raise ApiError(400, f"stream_options.include_usage: expected true or false, got {brief(include_usage)}",
                       "stream_options.include_usage", "invalid_value")
    if isinstance(body.get("messages"), list) and len(body["messages"]) > MAX_MESSAGES:
        raise ApiError(400, f"messages: at most {MAX_MESSAGES} messages per request, got {len(body['messages'])}",
                       "messages", "invalid_value")
    try:
        if "messages" in body:
            messages = normalize_messages(body["messages"])
        elif "context" in body:
            messages = messages_from(body["context"], body.get("history"), body.get("system"))
        else:
            raise ApiError(400, "messages: required (or PaddleNLP's context and history)", "messages",
                           "missing_required_parameter")
    except ChatError as e:
        raise ApiError(400, e.message, e.param, e.code) from e
    if len(messages) > MAX_MESSAGES:  # PaddleNLP's history form
        raise ApiError(400, f"history: at most {MAX_MESSAGES} messages per request, got {len(messages)}",
                       "history", "invalid_value")
    for i, m in enumerate(messages):
        try:
            m["content"].encode("utf-8")
        except UnicodeEncodeError:
            raise ApiError(400, f"messages[{i}].content: holds an unpaired UTF-16 surrogate (\\ud800-\\udfff)",
                           f"messages[{i}].content", "invalid_value") from None
    params: dict = {}
    names: dict = {}
    for key, fld in _PARAM_KEYS:
        if body.get(key) is not None and fld not in params:
            params[fld] = body[key]
            names[fld] = key
    return messages, params, names, stream, include_usage


def json_type(v) -> str:
    """The JSON name of a parsed value's type, for error messages."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    return "an array" if isinstance(v, list) else "an object" if isinstance(v, dict) else type(v).__name__


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def parse_body(data: bytes):
    """The request body parsed as strict JSON (RFC 8259: no NaN or Infinity), or ApiError 400 saying
    what is wrong with it."""
    if not data.strip():
        raise ApiError(400, "the request body is empty: expected a JSON object", None, "invalid_json")
    try:
        return json.loads(data, parse_constant=_no_constant)
    except RecursionError:
        raise ApiError(400, "the request body is nested too deeply", None, "invalid_json") from None
    except UnicodeDecodeError as e:
        raise ApiError(400, f"the request body is not valid UTF-8 (byte {e.start})", None, "invalid_json") from None
    except ValueError as e:
        why = str(e)
        if "integer string conversion" in why:
            why = f"a number has more than {sys.get_int_max_str_digits()} digits"
        raise ApiError(400, f"the request body is not valid JSON: {why[:200]}", None, "invalid_json") from None


def read_body(environ) -> bytes:
    """The request body, at most MAX_BODY_BYTES of it, counted on the bytes read: a chunked body has
    no Content-Length for werkzeug to check (one with a Content-Length over the limit is refused by
    werkzeug before this); ApiError 413 past the limit."""
    from werkzeug.wsgi import get_content_length, get_input_stream

    if get_content_length(environ) is None and environ.get("wsgi.input_terminated"):
        stream = environ["wsgi.input"]  # de-chunked by the server, unlimited
    else:
        stream = get_input_stream(environ, max_content_length=MAX_BODY_BYTES)
    buf = bytearray()
    while True:
        try:
            chunk = stream.read(min(1 << 16, MAX_BODY_BYTES + 1 - len(buf)))
        except OSError as e:  # a malformed chunked body ("Invalid chunk header"), a broken connection
            raise ApiError(400, f"the request body could not be read: {e}", None, "invalid_body") from None
        if not chunk:
            return bytes(buf)
        buf += chunk
        if len(buf) > MAX_BODY_BYTES:
            # read on (a bounded while) so the client, still sending, gets to read the 413: a socket
            # closed with unread data resets the connection instead
            more, until = 0, time.monotonic() + DRAIN_S
            try:
                while more < DRAIN_BYTES and time.monotonic() < until and (chunk := stream.read(1 << 16)):
                    more += len(chunk)
            except OSError:
                pass
            raise ApiError(413, f"the request body is over {MAX_BODY_BYTES} bytes", None, "request_too_large")


def client_gone(sock) -> bool:
    """True when the peer of a connection whose request was read in full has closed it (or it broke).
    A client that half-closes after sending its request (rare; no common HTTP client does) looks gone."""
    try:
        p = select.poll()
        p.register(sock, select.POLLIN | select.POLLPRI)
        if not p.poll(0):
            return False
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except (OSError, ValueError):
        return True


# ---------------------------------------------------------------- the app


def create_app(engine, name: str | None = None, api_key: str | None = None, heartbeat_s: float = HEARTBEAT_S,
               watch: "Watch | None" = None):
    """The Flask app serving ``engine`` (a ChatEngine or anything with its start/snapshot/info).

    ``heartbeat_s``: while a streamed answer waits in the queue, an SSE comment goes out this
    often, so a client that has gone away is noticed (and its answer dropped) before it runs.
    ``watch``: told of every request but /health and every generation's end (the idle timeout).
    """
    from flask import Flask, Response, request
    from werkzeug.exceptions import HTTPException

    from core.chat.engine import ChatError

    app = Flask("paddle_studio_serve")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    name = name or engine.name
    served = {x for x in (name, engine.name, engine.model_dir, engine.adapter_dir) if x}
    model_id = name or engine.name
    started = int(time.time())
    t0 = time.time()

    def error(e: ApiError):
        try:
            data = json.dumps(e.body(), ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate echoed from the request
            data = json.dumps(e.body()).encode("ascii")
        return Response(data, status=e.status, mimetype="application/json")

    def ok(obj, status=200):
        return Response(json.dumps(obj, ensure_ascii=False), status=status, mimetype="application/json")

    @app.errorhandler(ApiError)
    def _api_error(e):
        return error(e)

    @app.errorhandler(HTTPException)
    def _http_error(e):
        code = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}.get(e.code, None)
        return error(ApiError(e.code or 400, f"{e.name}: {e.description}", None, code))

    @app.errorhandler(Exception)
    def _internal(e):
        log.exception("internal error")
        return error(ApiError(500, f"internal error: {type(e).__name__}: {e}", None, "internal_error", "server_error"))

    @app.before_request
    def _auth():
        if watch is not None and request.path != "/health":
            watch.touch()
        if api_key and request.path != "/health":
            got = request.headers.get("Authorization", "")
            if not hmac.compare_digest(got.encode(), f"Bearer {api_key}".encode()):
                raise ApiError(401, "missing or wrong API key: send Authorization: Bearer KEY", None,
                               "invalid_api_key")

    @app.get("/health")
    def _health():
        snap = engine.snapshot()
        return ok({"status": "ok", "model": name, "pid": os.getpid(), "uptime_s": round(time.time() - t0, 1), **snap})

    def model_card():
        return {"id": name, "object": "model", "created": started, "owned_by": "paddle-studio", "info": engine.info()}

    @app.get("/v1/models")
    def _models():
        return ok({"object": "list", "data": [model_card()]})

    @app.get("/v1/models/<path:mid>")
    def _model(mid):
        if mid not in served:
            raise ApiError(404, f"model: unknown model {mid!r}", "model", "model_not_found")
        return ok(model_card())

    @app.post("/v1/chat/completions")
    def _completions():
        body = parse_body(read_body(request.environ))
        cid = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        try:
            messages, params, names, stream, include_usage = parse_request(body, served, model_id)
            gen = engine.start(messages, params, gen_id=cid)
        except ChatError as e:
            param = names.get(e.param, e.param)
            msg = e.message if param == e.param else e.message.replace(e.param, param, 1)
            raise ApiError(400, msg, param, e.code) from e
        except RecursionError:
            raise ApiError(400, "a value in the request body is nested too deeply", None, "invalid_value") from None
        created = int(time.time())
        if not stream:
            # wait for the answer, looking now and then whether the client is still there: one that
            # left gets its generation cancelled (queued: it never runs) instead of holding the model
            sock = request.environ.get("werkzeug.socket")
            look_at = time.monotonic() + DISCONNECT_POLL_S
            gone = False
            try:
                while gen.next_delta(timeout=DISCONNECT_POLL_S) is not None:
                    if sock is not None and time.monotonic() >= look_at:
                        look_at = time.monotonic() + DISCONNECT_POLL_S
                        if client_gone(sock):
                            gone = True
                            gen.close()
                            log.info("%s: the client went away; generation cancelled", cid)
                            break
            finally:
                if watch is not None:
                    watch.touch()
            _log_done(gen)
            if gone:
                return Response(status=499)  # nobody reads it (nginx's "client closed request")
            return ok({
                "id": cid, "object": "chat.completion", "created": created, "model": name,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": gen.text},
                             "logprobs": None, "finish_reason": gen.finish_reason}],
                "usage": gen.usage, "system_fingerprint": None,
            })

        def chunk(delta: dict, finish=None) -> str:
            obj = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": name,
                   "system_fingerprint": None,
                   "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
            if include_usage:
                obj["usage"] = None
            return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"

        def events():
            try:
                yield chunk({"role": "assistant", "content": ""})
                while True:
                    d = gen.next_delta(timeout=heartbeat_s)
                    if d is None:
                        break
                    # an SSE comment while queued: a write that fails tells us the client left
                    yield chunk({"content": d}) if d else ": waiting\n\n"
                yield chunk({}, gen.finish_reason)
                if include_usage:
                    yield "data: " + json.dumps({"id": cid, "object": "chat.completion.chunk", "created": created,
                                                 "model": name, "system_fingerprint": None, "choices": [],
                                                 "usage": gen.usage}) + "\n\n"
                yield "data: [DONE]\n\n"
            except GeneratorExit:  # the client went away: werkzeug closed us after a failed write
                raise
            except Exception as e:  # noqa: BLE001 - report in-band, the status line is already sent
                log.exception("generation failed")
                err = ApiError(500, f"generation failed: {type(e).__name__}: {e}", None, "internal_error",
                               "server_error")
                yield f"data: {json.dumps(err.body())}\n\n"
                yield "data: [DONE]\n\n"
            finally:
                gen.close()
                _log_done(gen)
                if watch is not None:
                    watch.touch()

        return Response(events(), mimetype="text/event-stream",
                        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    return app


def _log_done(gen) -> None:
    log.info("%s %s prompt=%d completion=%d", gen.id, gen.finish_reason, gen.prompt_tokens, gen.completion_tokens)


# ---------------------------------------------------------------- serving


def check_bind(host: str, api_key: str | None) -> None:
    if not system.is_loopback(host) and not api_key:
        raise ValueError(f"refusing to serve on {host} without an API key: pass --api-key KEY "
                         f"(or set {API_KEY_ENV}), or bind 127.0.0.1")


def _write_json_atomic(path: Path, obj: dict) -> None:
    from core.workspace import write_text_atomic

    write_text_atomic(Path(path), json.dumps(obj))


class Watch:
    """When a worker should end by itself: its owner gone, or ``idle_s`` seconds without a request.

    ``owner`` is a pid and ``owner_start`` its start time (:func:`core.jobs.proc_start`), so a reused
    pid is not mistaken for the owner; ``clock`` is for tests.
    """

    def __init__(self, owner: int | None = None, owner_start: float | None = None, idle_s: float | None = None,
                 clock=time.monotonic):
        self.owner, self.owner_start, self.idle_s, self.clock = owner, owner_start, idle_s, clock
        self.last = clock()

    def touch(self) -> None:
        """A request came, or a generation ended: the idle time starts again."""
        self.last = self.clock()

    def why(self, busy: bool = False) -> tuple[str, str] | None:
        """("owner_gone" | "idle", reason) when the worker should end now; ``busy``: generations
        are queued or running (never idle then)."""
        if self.owner and not jobs.alive(self.owner, self.owner_start):
            return "owner_gone", f"its owner (pid {self.owner}) has ended"
        if busy:
            self.touch()
        elif self.idle_s and self.clock() - self.last >= self.idle_s:
            return "idle", f"no request for {self.idle_s:g} s"
        return None


def parse_owner(spec: str) -> tuple[int, float | None]:
    """(pid, start time or None) from "PID" or "PID:START" (as $PADDLE_STUDIO_SERVE_OWNER holds it)."""
    pid, _, start = str(spec).strip().partition(":")
    try:
        pid_i = int(pid)
        start_f = float(start) if start else None
    except ValueError:
        raise ValueError(f"{OWNER_ENV}: expected PID or PID:START, got {spec!r}") from None
    if pid_i <= 0:
        raise ValueError(f"{OWNER_ENV}: expected a pid > 0, got {spec!r}")
    return pid_i, start_f


def resolve_lifetime(owner: int | None = None, owner_start: float | None = None,
                     idle_s: float | None = None) -> tuple[int | None, float | None, float | None]:
    """(owner, owner start, idle seconds) of this worker: the arguments, else $PADDLE_STUDIO_SERVE_OWNER
    and $PADDLE_STUDIO_SERVE_IDLE_S, else (a job) the job's params "owner", "owner_start" and "idle_s".
    An owner without a start time is the process that has that pid now. Idle: IDLE_S for an owned
    worker, none for one without an owner; 0 turns it off."""
    params: dict = {}
    job_dir = os.environ.get("STUDIO_JOB_DIR")
    if job_dir:
        params = (jobs.read_json(Path(job_dir) / "job.json", {}) or {}).get("params") or {}
    if owner is None:
        if os.environ.get(OWNER_ENV):
            owner, owner_start = parse_owner(os.environ[OWNER_ENV])
        elif params.get("owner"):
            owner, owner_start = int(params["owner"]), params.get("owner_start")
    if owner and owner_start is None:
        owner_start = jobs.proc_start(owner)  # None: already gone, the worker ends at once
    if idle_s is None:
        raw = os.environ.get(IDLE_ENV)
        if raw:
            try:
                idle_s = float(raw)
            except ValueError:
                raise ValueError(f"{IDLE_ENV}: expected seconds, got {raw!r}") from None
        elif params.get("idle_s") is not None:
            idle_s = float(params["idle_s"])
        else:
            idle_s = IDLE_S if owner else None
    if idle_s is not None and idle_s < 0:
        raise ValueError(f"idle timeout: expected seconds >= 0, got {idle_s:g}")
    return owner or None, owner_start, idle_s or None


def serve(model: str | None, adapter: str | None = None, host: str = "127.0.0.1", port: int = 8000,
          api_key: str | None = None, name: str | None = None, ready_file: str | None = None,
          say=print, owner: int | None = None, owner_start: float | None = None, idle_s: float | None = None,
          exit_process: bool = True) -> int:
    """Load the model and serve until SIGTERM / Ctrl-C, the owner's end or the idle timeout (see
    :func:`resolve_lifetime`). ``port`` 0 picks a free port. ``exit_process``: end the process with
    ``os._exit`` once shut down (paddle's interpreter teardown takes seconds); False returns 0."""
    from werkzeug.serving import WSGIRequestHandler, make_server

    from core.chat.engine import ChatEngine, fold_table

    api_key = api_key or os.environ.get(API_KEY_ENV) or None
    check_bind(host, api_key)
    if not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"--port: expected 0..65535, got {port}")
    owner, owner_start, idle_s = resolve_lifetime(owner, owner_start, idle_s)
    job = bool(os.environ.get("STUDIO_JOB_DIR"))
    if job and say is print:  # a job's stdout is its one JSON result: the ready line goes to its log
        def say(*a, **k):
            print(*a, **{**k, "file": sys.stderr})
    if not log.handlers:  # its own handler: paddle's import gives the root logger one at WARNING
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    t0 = time.time()
    ended = {"ended": "signal", "reason": "stopped by a signal"}
    stopping = threading.Event()

    def _term(signum, frame):
        if stopping.is_set():  # already on the way out: let the cleanup finish
            return
        stopping.set()
        if ended["ended"] == "signal":
            ended["reason"] = f"stopped by {signal.Signals(signum).name}"
        raise KeyboardInterrupt

    import paddle  # noqa: F401 - first: importing it installs a SIGTERM handler of its own (a stack dump, then death)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _term)
    engine = srv = None
    watch = Watch(owner, owner_start, idle_s)
    ready = threading.Event()

    def _watch():
        while not stopping.wait(WATCH_S):
            busy = not ready.is_set()
            if engine is not None and not busy:
                snap = engine.snapshot()
                busy = snap["queued"] + snap["active"] > 0
            why = watch.why(busy)
            if why:
                ended["ended"], ended["reason"] = why
                log.info("ending: %s", why[1])
                os.kill(os.getpid(), signal.SIGTERM)  # the main thread shuts down as on SIGTERM
                return

    if owner or idle_s:
        threading.Thread(target=_watch, name="serve-watch", daemon=True).start()
    try:
        t = time.perf_counter()
        engine = ChatEngine(model, adapter, name=name)
        engine.chat([{"role": "user", "content": "hi"}], temperature=0, max_new_tokens=1)  # warm up the kernels
        if engine.max_token_chars:
            fold_table()  # built now (~0.3 s), not on the first over-long prompt
        for sig in (signal.SIGTERM, signal.SIGINT):  # again, should loading have set paddle's once more
            signal.signal(sig, _term)

        class Handler(WSGIRequestHandler):
            disable_nagle_algorithm = True  # a chunk is three small writes: no 40 ms Nagle/delayed-ACK stalls

            def log_request(self, *a, **k):  # one line per completion comes from the app instead
                pass

        heartbeat = float(os.environ.get(HEARTBEAT_ENV) or HEARTBEAT_S)
        app = create_app(engine, name, api_key, heartbeat_s=heartbeat, watch=watch)
        srv = make_server(host, port, app, threaded=True, request_handler=Handler)
        srv.daemon_threads = True
        real_port = srv.server_port
        url = f"http://{'[' + host + ']' if ':' in host else host}:{real_port}"
        if ready_file:
            _write_json_atomic(Path(ready_file), {"pid": os.getpid(), "port": real_port, "url": url, "host": host,
                                                  "model": engine.model_dir, "adapter": engine.adapter_dir,
                                                  "name": name or engine.name, "started": time.time(),
                                                  "owner": owner, "idle_s": idle_s})
        watch.touch()
        ready.set()
        life = "".join([f", owner pid {owner}" if owner else "", f", idle timeout {idle_s:g} s" if idle_s else ""])
        say(f"paddle-studio serve: ready on {url} (model {name or engine.name}, {engine.kind}, "
            f"loaded in {time.perf_counter() - t:.1f} s{life})", flush=True)
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        stopping.set()
        if engine is not None:
            engine.cancel_all(wait=10)  # stop the model between tokens before the process goes
        if srv is not None:
            srv.server_close()
        if ready_file:
            try:
                Path(ready_file).unlink()
            except OSError:
                pass
    log.info("paddle-studio serve: ended (%s)", ended["reason"])
    if job:
        snap = engine.snapshot() if engine is not None else {}
        print(json.dumps({**ended, "owner": owner, "idle_s": idle_s, "uptime_s": round(time.time() - t0, 1),
                          "generations": snap.get("generations", 0)}), flush=True)
    if exit_process:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


# ---------------------------------------------------------------- client helpers (no paddle, no gradio)


class ServeError(RuntimeError):
    """An error answer from the server (status, message, param, code) or a worker that would not start."""

    def __init__(self, message: str, status: int | None = None, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message, self.status, self.param, self.code = message, status, param, code


@dataclass
class Worker:
    """A running ``paddle-studio serve`` subprocess."""

    pid: int
    port: int
    url: str
    log_path: str
    ready_file: str
    model: str | None = None
    adapter: str | None = None
    name: str | None = None
    api_key: str | None = field(default=None, repr=False)
    proc: subprocess.Popen | None = field(default=None, repr=False, compare=False)

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        try:
            import psutil

            return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except Exception:  # noqa: BLE001
            return False

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("proc", None)
        d.pop("api_key", None)
        return d


def _tail(path, n=3000) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")[-n:]
    except OSError:
        return ""


def start_worker(model: str | None, adapter: str | None = None, port: int | None = None, host: str = "127.0.0.1",
                 name: str | None = None, api_key: str | None = None, log_path: str | None = None,
                 timeout: float = 300, python: str | None = None, env: dict | None = None,
                 owner: int | None = None, idle_s: float | None = None) -> Worker:
    """Start ``python -m core.cli serve`` and wait until it listens; port None picks a free one.

    Its stdout and stderr go to ``log_path`` (default: $PADDLE_STUDIO_HOME/serve/NAME-TIME.log);
    the API key travels in the environment, not on the command line. ``owner``: the process whose
    end ends the worker (default: this one; 0: none, the worker runs until stopped); ``idle_s``:
    seconds without a request before it ends (default: 30 min with an owner; 0: never).
    """
    from core import workspace

    stem = f"{name or Path(adapter or model or 'model').name}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    log_file = Path(log_path) if log_path else workspace.home() / "serve" / f"{stem}.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    ready = log_file.with_suffix(".ready.json")
    if ready.exists():
        ready.unlink()
    cmd = [python or sys.executable, "-m", "core.cli", "serve", "--host", host, "--port", str(port or 0),
           "--ready-file", str(ready)]
    if model:
        cmd += ["--model", str(model)]
    if adapter:
        cmd += ["--adapter", str(adapter)]
    if name:
        cmd += ["--name", name]
    child_env = {k: v for k, v in os.environ.items() if k not in jobs.SECRETS} | (env or {})
    child_env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [child_env.get("PYTHONPATH")] if p])
    if api_key:
        child_env[API_KEY_ENV] = api_key
    owner = os.getpid() if owner is None else owner
    child_env.pop(OWNER_ENV, None)
    if owner:
        start = jobs.proc_start(owner)
        if start is None:
            raise ServeError(f"the worker's owner (pid {owner}) is not running")
        child_env[OWNER_ENV] = f"{owner}:{start!r}"
    if idle_s is not None:
        child_env[IDLE_ENV] = repr(float(idle_s))
    with open(log_file, "ab") as out:
        proc = subprocess.Popen(cmd, cwd=str(ROOT), env=child_env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + timeout
    while time.time() < deadline:
        if ready.is_file():
            info = json.loads(ready.read_text(encoding="utf-8"))
            return Worker(pid=proc.pid, port=info["port"], url=info["url"], log_path=str(log_file),
                          ready_file=str(ready), model=model, adapter=adapter, name=info.get("name"),
                          api_key=api_key, proc=proc)
        if proc.poll() is not None:
            raise ServeError(f"the serve worker exited with code {proc.returncode}:\n{_tail(log_file)}")
        time.sleep(0.1)
    _stop_pid(proc.pid, proc)
    raise ServeError(f"the serve worker was not ready within {timeout:.0f} s:\n{_tail(log_file)}")


def attach_worker(ready_file: str, log_path: str | None = None, api_key: str | None = None) -> Worker | None:
    """The worker a ready file describes, if it still runs (e.g. after a studio restart)."""
    p = Path(ready_file)
    if not p.is_file():
        return None
    info = json.loads(p.read_text(encoding="utf-8"))
    w = Worker(pid=info["pid"], port=info["port"], url=info["url"], ready_file=str(p),
               log_path=log_path or str(p).replace(".ready.json", ".log"), model=info.get("model"),
               adapter=info.get("adapter"), name=info.get("name"), api_key=api_key)
    return w if w.alive() else None


def _stop_pid(pid: int, proc=None, timeout: float = 10) -> None:
    try:
        os.killpg(pid, signal.SIGTERM) if proc is not None else os.kill(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    if proc is not None:
        try:
            proc.wait(timeout)
            return
        except subprocess.TimeoutExpired:
            os.killpg(pid, signal.SIGKILL)
            proc.wait(5)
            return
    import psutil

    try:
        psutil.Process(pid).wait(timeout)
    except psutil.TimeoutExpired:
        os.kill(pid, signal.SIGKILL)
    except psutil.Error:
        pass


def stop_worker(handle: Worker, timeout: float = 10) -> None:
    """SIGTERM the worker (SIGKILL after ``timeout``) and remove its ready file."""
    _stop_pid(handle.pid, handle.proc, timeout)
    try:
        Path(handle.ready_file).unlink()
    except OSError:
        pass


def _headers(api_key: str | None) -> dict:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _raise_for(resp) -> None:
    if resp.status_code == 200:
        return
    try:
        err = resp.json()["error"]
        raise ServeError(err.get("message") or resp.text, resp.status_code, err.get("param"), err.get("code"))
    except (ValueError, KeyError, TypeError):
        raise ServeError(f"HTTP {resp.status_code}: {resp.text[:500]}", resp.status_code) from None


def health(url: str, timeout: float = 5) -> dict:
    import requests

    r = requests.get(url.rstrip("/") + "/health", timeout=timeout)
    _raise_for(r)
    return r.json()


def chat(url: str, messages: list[dict], api_key: str | None = None, timeout: float = 600, **params) -> dict:
    """One non-streaming completion; the OpenAI response object (ServeError on a 4xx/5xx)."""
    import requests

    r = requests.post(url.rstrip("/") + "/v1/chat/completions", json={"messages": messages, **params},
                      headers=_headers(api_key), timeout=timeout)
    _raise_for(r)
    return r.json()


class ChatStream:
    """Text deltas of one streamed answer; ``close()`` (or leaving a ``with``) stops the server's generation.

    After the loop: ``text``, ``finish_reason``, ``usage`` and ``id``. A ServeError is raised
    from the first ``next()`` when the server refuses the request, and from any ``next()`` when the
    worker cannot be reached (code "worker_unreachable") or the connection breaks mid-answer
    ("connection_lost"). A stream closed from another thread (the Chat tab's Stop) ends the loop
    quietly with ``finish_reason`` "cancelled": closing the response under a reading thread makes
    the reader fail inside urllib3 (``'NoneType' object has no attribute 'read'``), which is no error.
    """

    def __init__(self, url: str, messages: list[dict], api_key: str | None = None, timeout: float = 600,
                 **params):
        self.url = url.rstrip("/") + "/v1/chat/completions"
        self.body = {"messages": messages, **params, "stream": True, "stream_options": {"include_usage": True}}
        self.api_key, self.timeout = api_key, timeout
        self.id = self.finish_reason = self.usage = None
        self.text = ""
        self._resp = None
        self._it = None
        self._closed = False

    def __iter__(self):
        return self

    def __next__(self) -> str:
        if self._it is None:
            self._it = self._deltas()
        try:
            if self._closed:
                raise StopIteration
            return next(self._it)
        except StopIteration:
            if self._closed and self.finish_reason is None:
                self.finish_reason = "cancelled"
            raise
        except ServeError:
            raise
        except Exception as e:
            if self._closed:  # the reader of a stream closed under it: a cancel, not a failure
                if self.finish_reason is None:
                    self.finish_reason = "cancelled"
                raise StopIteration from None
            import requests

            if not isinstance(e, requests.RequestException):
                raise
            if self._resp is None:
                raise ServeError(f"could not reach the chat worker at {self.url} ({type(e).__name__})",
                                 code="worker_unreachable") from e
            raise ServeError(f"the connection to the chat worker at {self.url} broke mid-answer ({type(e).__name__})",
                             code="connection_lost") from e

    def _deltas(self):
        import requests

        self._resp = requests.post(self.url, json=self.body, headers=_headers(self.api_key), stream=True,
                                   timeout=(10, self.timeout))
        try:
            _raise_for(self._resp)
            for line in self._resp.iter_lines(chunk_size=None):
                if self._closed:  # closed from another thread, maybe before the response existed
                    return
                if not line or not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    return
                ev = json.loads(data)
                if "error" in ev:
                    e = ev["error"]
                    raise ServeError(e.get("message", "error"), 500, e.get("param"), e.get("code"))
                self.id = ev.get("id", self.id)
                if ev.get("usage"):
                    self.usage = ev["usage"]
                for ch in ev.get("choices") or []:
                    if ch.get("finish_reason"):
                        self.finish_reason = ch["finish_reason"]
                    d = (ch.get("delta") or {}).get("content")
                    if d:
                        self.text += d
                        yield d
            if not self._closed:  # the worker went away without the end of the stream ([DONE])
                raise ServeError(f"the chat worker at {self.url} ended the answer before its end",
                                 code="connection_lost")
        finally:
            self._resp.close()

    def close(self) -> None:
        """Stop reading; safe from another thread while one is iterating (the Chat tab's Stop)."""
        self._closed = True
        if self._it is not None:
            try:
                self._it.close()
            except ValueError:  # "generator already executing": the reading thread gets the closed socket
                pass
        if self._resp is not None:
            self._resp.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def stream_chat(url: str, messages: list[dict], api_key: str | None = None, timeout: float = 600,
                **params) -> ChatStream:
    """Stream an answer from a serve worker: iterate for text deltas; close() to cancel."""
    return ChatStream(url, messages, api_key, timeout, **params)
