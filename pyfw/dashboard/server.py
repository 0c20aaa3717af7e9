"""The dashboard's HTTP server: read-only, token-checked, in a background thread.

Routes (GET and HEAD only; anything else is 405): ``/`` the page, ``/static/*`` its script
and style, ``/api/state[?since=SEQ]`` the JSON, ``/metrics`` the Prometheus text format.
Every request must name this server in its Host header when it listens on a loopback
address (a web page that rebinds its own DNS name to 127.0.0.1 is refused), and carry the
token when one is set: ``Authorization: Bearer T``, ``?token=T`` (the page then sets a
cookie) or that cookie. A handler's error becomes a 4xx/5xx reply; nothing reaches the job.
"""
from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
import socket
import threading
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qs, urlsplit

__all__ = ["start", "is_loopback"]

COOKIE = "pyfw_token"
_STATIC = {"/": ("index.html", "text/html; charset=utf-8"),
           "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
           "/static/style.css": ("style.css", "text/css; charset=utf-8")}
_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store",
            "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
            "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                                       "img-src 'self' data:; frame-ancestors 'none'"}


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and names that resolve only to them (e.g. localhost)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0].split("%")[0]).is_loopback
                               for i in infos)


def static_file(name: str) -> bytes:
    """The bytes of a file shipped in the package's static/."""
    return resources.files(__package__).joinpath("static", name).read_bytes()


SCRIPT_TAG = '<script src="static/app.js"></script>'


def data_block(state: dict, block_id: str) -> str:
    """``state`` as an inert JSON ``<script>`` block (the page's script reads it; a browser
    never runs it, so the page's Content-Security-Policy allows it)."""
    data = json.dumps(state, separators=(",", ":"), allow_nan=False)
    data = data.replace("<", "\\u003c")   # no "</script>" or "<!--" can end the block early
    return f'<script type="application/json" id="{block_id}">{data}</script>'


def live_page(state: dict) -> bytes:
    """The page with the current state inlined: the first paint shows the job at once,
    without waiting for the script's first request (which then asks only for what is
    newer)."""
    page = static_file("index.html").decode()
    if SCRIPT_TAG not in page:
        raise RuntimeError("dashboard page template lacks its script tag")
    return page.replace(SCRIPT_TAG, data_block(state, "pyfw-initial") + "\n" + SCRIPT_TAG,
                        1).encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address) -> None:
        pass   # a broken connection is the client's business, never the job's


def _family(host: str):
    try:
        return socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        return socket.AF_INET


def start(hub, host: str, port: int, token: str | None):
    """Listen on ``host:port`` and serve ``hub`` from a daemon thread.

    Returns ``(server, url, token)``; the token is generated when the address is not a
    loopback one and none was given (None on a loopback address without one).
    """
    local = is_loopback(host)
    if not local and not token:
        token = secrets.token_urlsafe(18)
    server_cls = type("Server", (_Server,), {"address_family": _family(host)})
    handler = type("Handler", (_Handler,), {"hub": hub, "token": token, "local": local})
    server = server_cls((host, port), handler)
    handler.port = server.server_address[1]
    shown = host if local or host not in ("0.0.0.0", "::", "") else socket.gethostname()
    shown = f"[{shown}]" if ":" in shown else shown
    url = f"http://{shown}:{handler.port}/" + (f"?token={token}" if token else "")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.5},
                              name="pyfw-dashboard", daemon=True)
    thread.start()
    return server, url, token


class _Handler(BaseHTTPRequestHandler):
    hub = None
    token = None
    local = True
    port = 0
    _body = True
    timeout = 10          # a client that stalls mid-request loses its thread, not ours
    server_version = "pyfw-dashboard"
    sys_version = ""
    protocol_version = "HTTP/1.0"

    def log_message(self, format, *args) -> None:
        pass   # the job's stderr is the user's; no access log there

    def send_error(self, code, message=None, explain=None) -> None:
        if code == HTTPStatus.NOT_IMPLEMENTED:   # an unknown method is the client's error
            code, message = HTTPStatus.METHOD_NOT_ALLOWED, "read-only: GET and HEAD only"
        super().send_error(code, message, explain)

    def do_GET(self) -> None:
        self._handle(body=True)

    def do_HEAD(self) -> None:
        self._handle(body=False)

    def _refuse_method(self) -> None:
        self._reply(HTTPStatus.METHOD_NOT_ALLOWED, b"read-only: GET and HEAD only\n",
                    "text/plain; charset=utf-8", {"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = \
        _refuse_method

    # ---------------------------------------------------------------- dispatch
    def _handle(self, body: bool) -> None:
        self._body = body
        try:
            url = urlsplit(self.path)
            query = parse_qs(url.query, max_num_fields=16)
            if not self._allowed(query):
                return
            self._route(url.path, query)
        except Exception:  # noqa: BLE001 -- a bug here must not reach the job
            try:
                self._reply(HTTPStatus.INTERNAL_SERVER_ERROR, b"internal error\n",
                            "text/plain; charset=utf-8")
            except Exception:  # noqa: BLE001
                pass

    def _route(self, path: str, query: dict) -> None:
        if path in _STATIC:
            name, ctype = _STATIC[path]
            extra = {}
            if path == "/" and self.token and query.get("token"):
                extra["Set-Cookie"] = (f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; "
                                       f"Path=/")
            body = live_page(self.hub.state()) if path == "/" else static_file(name)
            self._reply(HTTPStatus.OK, body, ctype, extra)
        elif path == "/api/state":
            since = query.get("since", ["-1"])[-1]
            try:
                since = int(since)
            except ValueError:
                self._reply(HTTPStatus.BAD_REQUEST, b"since must be an integer\n",
                            "text/plain; charset=utf-8")
                return
            data = json.dumps(self.hub.state(since), separators=(",", ":"), allow_nan=False)
            self._reply(HTTPStatus.OK, data.encode(), "application/json")
        elif path == "/metrics":
            self._reply(HTTPStatus.OK, self.hub.metrics().encode(),
                        "text/plain; version=0.0.4; charset=utf-8")
        else:
            self._reply(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")

    # ---------------------------------------------------------------- checks
    def _allowed(self, query: dict) -> bool:
        if self.local and not self._host_ok():
            self._reply(HTTPStatus.FORBIDDEN, b"unexpected Host header\n",
                        "text/plain; charset=utf-8")
            return False
        if not self.token:
            return True
        given = self._given_token(query)
        if given is None:
            self._reply(HTTPStatus.UNAUTHORIZED, b"token required: open the URL printed by "
                        b"the job (it ends in ?token=...)\n", "text/plain; charset=utf-8",
                        {"WWW-Authenticate": 'Bearer realm="pyfw"'})
            return False
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            self._reply(HTTPStatus.FORBIDDEN, b"wrong token\n", "text/plain; charset=utf-8")
            return False
        return True

    def _host_ok(self) -> bool:
        host = (self.headers.get("Host") or "").strip().lower()
        names = ("127.0.0.1", "localhost", "[::1]")
        return host in names or host in {f"{n}:{self.port}" for n in names}

    def _given_token(self, query: dict) -> str | None:
        auth = self.headers.get("Authorization") or ""
        if auth.lower().startswith("bearer "):
            return auth[7:].strip()
        if query.get("token"):
            return query["token"][-1]
        cookie = self.headers.get("Cookie")
        if cookie:
            jar = SimpleCookie()
            try:
                jar.load(cookie)
            except Exception:  # noqa: BLE001 -- a malformed cookie is no token
                return None
            if COOKIE in jar:
                return jar[COOKIE].value
        return None

    def _reply(self, status, data: bytes, ctype: str, extra: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in {**_HEADERS, **(extra or {})}.items():
            self.send_header(k, v)
        self.end_headers()
        if self._body:
            self.wfile.write(data)
