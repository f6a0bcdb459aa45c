"""A real HTTP server on loopback, in a thread, standing in for a webhook receiver or a chat robot.

Each test gives it a `check(request) -> (status, body)` that validates what the real service validates (the body
shape, the signature) and answers like it; every request is recorded.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Received:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Peer:
    url: str
    check: Callable[[Received], tuple[int, Any]]
    received: list[Received] = field(default_factory=list)


@contextmanager
def local_peer(check: Callable[[Received], tuple[int, Any]]) -> Iterator[Peer]:
    peer = Peer(url="", check=check)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            request = Received(
                method="POST",
                path=parts.path,
                query={k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()},
                headers={k.lower(): v for k, v in self.headers.items()},
                body=self.rfile.read(length),
            )
            peer.received.append(request)
            status, answer = peer.check(request)
            raw = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain" if isinstance(answer, bytes) else "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as url:
        peer.url = url
        yield peer


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve `handler` on a free loopback port in a thread; yields the base URL. Used by every test HTTP peer."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.timeout = 0.1  # handle_request() returns at least this often, so the loop sees `stop`
    stop = threading.Event()

    def serve() -> None:
        # Not serve_forever(): its shutdown() waits with no timeout (a test once hung there); this loop ends
        # within server.timeout of `stop`, and the join below is bounded.
        while not stop.is_set():
            server.handle_request()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        stop.set()
        thread.join(5)
        server.server_close()
