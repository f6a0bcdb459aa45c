"""Contract test of the webhook OS installer against a real HTTP server on loopback (the install system's API),
and of the callback signature."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from integrations.exceptions import PermanentError, TransientError
from integrations.os_install import OsInstallRequest
from integrations.os_install.webhook import WebhookOsInstaller, callback_signature, callback_verify


class PxeApi(BaseHTTPRequestHandler):
    """A tiny install system: jobs in memory, idempotent by key, one 503 on demand."""

    jobs: dict[str, dict] = {}
    keys: dict[str, str] = {}
    seen_auth: list[str] = []
    fail_next: list[int] = []

    def log_message(self, *args):  # keep test output quiet
        pass

    def _send(self, code: int, body: dict | None = None) -> None:
        data = json.dumps(body or {}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        self.seen_auth.append(self.headers.get("Authorization", ""))
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.fail_next:
            return self._send(self.fail_next.pop())
        if self.path == "/api/installs":
            if not body.get("hostname"):
                return self._send(422, {"error": "hostname required"})
            key = self.headers.get("Idempotency-Key", "")
            if key in self.keys:
                return self._send(200, self.jobs[self.keys[key]])
            ref = f"job-{len(self.jobs) + 1}"
            self.jobs[ref] = {"id": ref, "status": "queued", "message": f"PXE {body['hostname']} {body['image']}"}
            self.keys[key] = ref
            return self._send(201, self.jobs[ref])
        if self.path.endswith("/cancel"):
            ref = self.path.split("/")[-2]
            if ref not in self.jobs:
                return self._send(404)
            self.jobs[ref]["status"] = "cancelled"
            return self._send(202, self.jobs[ref])
        return self._send(404)

    def do_GET(self):
        ref = self.path.rsplit("/", 1)[-1]
        if ref == "garbled":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"<html>")
            return None
        return self._send(200, self.jobs[ref]) if ref in self.jobs else self._send(404)


@pytest.fixture
def pxe(monkeypatch):
    PxeApi.jobs, PxeApi.keys, PxeApi.seen_auth, PxeApi.fail_next = {}, {}, [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), PxeApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("TEST_PXE_TOKEN", "s3cret-token")
    try:
        yield WebhookOsInstaller(
            base_url=f"http://127.0.0.1:{server.server_port}/api", token_env="TEST_PXE_TOKEN", timeout_s=5
        )
    finally:
        server.shutdown()


REQUEST = OsInstallRequest(
    hostname="sh1-h100-0024",
    serial="NVH100000024",
    image="ubuntu-22.04-gpu",
    macs=("b8:3f:d2:00:18:00",),
    callback_url="https://gpuops/cb",
    idempotency_key="prov:7:os",
)


def test_start_status_cancel(pxe):
    job = pxe.start(REQUEST)
    assert job.status == "queued" and job.ref == "job-1" and "ubuntu-22.04-gpu" in job.message
    assert PxeApi.seen_auth[-1] == "Bearer s3cret-token"
    assert pxe.start(REQUEST).ref == "job-1"  # a retried start returns the same job
    PxeApi.jobs["job-1"]["status"] = "succeeded"
    assert pxe.status("job-1").succeeded
    pxe.cancel("job-1")
    assert PxeApi.jobs["job-1"]["status"] == "cancelled"
    pxe.cancel("job-404")  # unknown: nothing to cancel, no error


def test_error_classes(pxe):
    PxeApi.fail_next.append(503)
    with pytest.raises(TransientError, match="HTTP 503"):
        pxe.start(REQUEST)
    with pytest.raises(PermanentError, match="HTTP 422"):
        pxe.start(OsInstallRequest(hostname="", serial="x", image="y"))
    with pytest.raises(PermanentError, match="unreadable reply"):
        pxe.status("garbled")
    with pytest.raises(PermanentError, match="HTTP 404"):
        pxe.status("job-404")


def test_unreachable_is_transient():
    installer = WebhookOsInstaller(base_url="http://127.0.0.1:9/api", timeout_s=1)
    with pytest.raises(TransientError):
        installer.status("job-1")


def test_callback_signature():
    body = json.dumps({"id": "job-1", "status": "succeeded"}).encode()
    signature = callback_signature(body, "shared")
    assert callback_verify(body, signature, "shared")
    assert not callback_verify(body + b" ", signature, "shared")
    assert not callback_verify(body, signature, "")  # no secret configured: refuse everything
