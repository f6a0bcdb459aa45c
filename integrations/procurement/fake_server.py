"""A tiny procurement system over HTTP (stdlib only), for contract tests of the real REST client and demos.

It implements the contract in adapter.py, honours `Idempotency-Key` like a real peer (a repeated create returns
the PO made the first time), checks the bearer token when given one, and can be told to misbehave:

    POST /_control/faults {"faults": ["timeout", "500", "429", "reset"]}
        the next requests to the purchase-order API fail in that order. "timeout" is the nasty one: the PO
        *is* created, then the answer is delayed past the client's timeout - the case an idempotency key exists
        for (the client retries a request that actually succeeded).
    GET  /_control/orders        every PO, and how many create requests each idempotency key received
    POST /_control/reset

Run it with `manage.py procurement_simulate serve --port 8099`, or in a thread with `FakeProcurementServer`.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeProcurementState:
    """The orders and scripted faults, shared by the handler threads."""

    def __init__(self, *, token: str = "", timeout_delay_s: float = 2.0) -> None:
        self.lock = threading.Lock()
        self.token = token
        self.timeout_delay_s = timeout_delay_s
        self.reset()

    def reset(self) -> None:
        self.orders: dict[str, dict[str, Any]] = {}
        self.by_key: dict[str, str] = {}
        self.key_hits: dict[str, int] = {}
        self.faults: list[str] = []
        self.numbers = itertools.count(5001)

    def order_create(self, body: dict[str, Any], key: str) -> tuple[dict[str, Any], bool]:
        with self.lock:
            self.key_hits[key] = self.key_hits.get(key, 0) + 1
            if key in self.by_key:
                return self.orders[self.by_key[key]], False
            number = f"PO-{next(self.numbers)}"
            order = {
                "po_number": number,
                "state": "created",
                "request_ref": body.get("request_ref", ""),
                "supplier": "Simulated Supplier GmbH",
                "lines": [
                    {
                        "line_ref": line.get("line_ref", ""),
                        "po_line_ref": f"{number}-{i}",
                        "quantity": line.get("quantity", 0),
                        "state": "created",
                        "sku": line.get("sku", ""),
                        "site": line.get("site", ""),
                    }
                    for i, line in enumerate(body.get("lines") or [], start=1)
                ],
            }
            self.orders[number] = order
            self.by_key[key] = number
            return order, True

    def next_fault(self) -> str | None:
        with self.lock:
            return self.faults.pop(0) if self.faults else None


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet unless asked
        if self.server.verbose:
            super().log_message(format, *args)

    def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        try:
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (the scripted timeout): nobody to answer

    def handle_one_request(self) -> None:
        self._raw_body = b""
        super().handle_one_request()

    def _read_body(self) -> None:
        # Always consume the body first: on a kept-alive connection an unread body would be parsed as the next
        # request line.
        length = int(self.headers.get("Content-Length") or 0)
        self._raw_body = self.rfile.read(length) if length else b""

    def _body(self) -> dict[str, Any]:
        return json.loads(self._raw_body or b"{}")

    def _authorised(self) -> bool:
        token = self.server.state.token
        return not token or self.headers.get("Authorization") == f"Bearer {token}"

    def _fault(self) -> bool:
        """Apply a scripted failure before the work. Returns True when the request was answered."""
        fault = self.server.state.next_fault()
        if fault is None or fault == "timeout":
            self._pending_timeout = fault == "timeout"
            return False
        if fault == "reset":
            self.close_connection = True
            self.connection.close()
            return True
        status = int(fault)
        self._send(status, {"error": f"scripted {status}"}, {"Retry-After": "0"} if status == 429 else None)
        return True

    def do_GET(self) -> None:
        state = self.server.state
        if self.path == "/_control/orders":
            with state.lock:
                self._send(200, {"orders": list(state.orders.values()), "key_hits": dict(state.key_hits)})
            return
        if not self.path.startswith("/api/v1/purchase-orders/"):
            self._send(404, {"error": "not found"})
            return
        if not self._authorised():
            self._send(401, {"error": "bad token"})
            return
        number = self.path.rsplit("/", 1)[-1]
        order = state.orders.get(number)
        if order:
            self._send(200, order)
        else:
            self._send(404, {"error": f"no PO {number}"})

    def do_POST(self) -> None:
        state = self.server.state
        self._read_body()
        if self.path == "/_control/faults":
            with state.lock:
                state.faults.extend(str(f) for f in self._body().get("faults", []))
            self._send(200, {"faults": state.faults})
            return
        if self.path == "/_control/reset":
            with state.lock:
                state.reset()
            self._send(200, {})
            return
        if not self._authorised():
            self._send(401, {"error": "bad token"})
            return
        self._pending_timeout = False
        if self._fault():
            return
        if self.path == "/api/v1/purchase-orders":
            key = self.headers.get("Idempotency-Key", "")
            if not key:
                self._send(400, {"error": "Idempotency-Key header required"})
                return
            order, created = state.order_create(self._body(), key)
            if self._pending_timeout:
                time.sleep(state.timeout_delay_s)  # the PO exists; the client gives up waiting for this answer
            self._send(201 if created else 200, order, None if created else {"Idempotent-Replayed": "true"})
            return
        if self.path.startswith("/api/v1/purchase-orders/") and self.path.endswith("/cancel"):
            number = self.path.split("/")[-2]
            with state.lock:
                order = state.orders.get(number)
                if order:
                    order["state"] = "cancelled"
            if order:
                self._send(200, order)
            else:
                self._send(404, {"error": f"no PO {number}"})
            return
        self._send(404, {"error": "not found"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: FakeProcurementState
    verbose: bool = False


class FakeProcurementServer:
    """Run the fake in a background thread: `with FakeProcurementServer() as fake: fake.url ...`."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str = "",
        timeout_delay_s: float = 2.0,
        verbose: bool = False,
    ) -> None:
        self.httpd = _Server((host, port), _Handler)
        self.httpd.state = FakeProcurementState(token=token, timeout_delay_s=timeout_delay_s)
        self.httpd.verbose = verbose
        self._thread: threading.Thread | None = None

    @property
    def state(self) -> FakeProcurementState:
        return self.httpd.state

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeProcurementServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="fake-procurement", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeProcurementServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["FakeProcurementServer", "FakeProcurementState"]
