"""The OS installer of a PXE/OS-install system with an HTTP API (httpx), and the signed callback it sends back.

API expected of the install system (a thin shim in front of Foreman, MAAS, xCAT or an in-house PXE service):

    POST {base_url}/installs            body: OsInstallRequest as JSON; header Idempotency-Key
                                        -> 200/201/202 {"id": "...", "status": "queued|running|...", "message": ""}
    GET  {base_url}/installs/{id}       -> 200 {"id", "status", "message"}
    POST {base_url}/installs/{id}/cancel -> 200/202/204 (404 for an unknown job is fine: nothing to cancel)

When the job finishes, the system POSTs {"id", "status", "message"} to the request's `callback_url`, signed
with HMAC-SHA256 over the raw body under a shared secret: header `X-Gpuops-Signature: sha256=<hex>`. Without
a callback, provisioning polls `status`.

Only this module imports httpx. Errors: timeouts, connection errors and 5xx/429 -> TransientError; other 4xx and
unreadable replies -> PermanentError. The bearer token and the callback secret come from environment variables
named in the options, never from settings values.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import asdict
from typing import Any

import httpx

from integrations.exceptions import PermanentError, TransientError

from .base import JOB_STATUSES, OsInstallJob, OsInstallRequest

SIGNATURE_HEADER = "X-Gpuops-Signature"


def callback_signature(body: bytes, secret: str) -> str:
    """The header value the install system sends for `body`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def callback_verify(body: bytes, signature: str, secret: str) -> bool:
    """Constant-time check of a callback's signature. An empty secret verifies nothing (refuse all)."""
    if not secret or not signature:
        return False
    return hmac.compare_digest(callback_signature(body, secret), signature.strip())


def callback_secret(env: str = "GPUOPS_OS_INSTALL_CALLBACK_SECRET") -> str:
    return os.environ.get(env, "")


class WebhookOsInstaller:
    """OsInstaller over the HTTP API above.

    Args:
        base_url: the install system's API root, e.g. "https://pxe.dc1.example/api/v1".
        token_env: environment variable holding a bearer token (empty: no Authorization header).
        timeout_s: per request.
        transport: an httpx transport (tests use httpx.MockTransport or a local server).
    """

    def __init__(
        self,
        *,
        base_url: str,
        token_env: str = "GPUOPS_OS_INSTALL_TOKEN",
        timeout_s: float = 15.0,
        verify_tls: bool = True,
        transport: httpx.BaseTransport | None = None,
        **_options: object,
    ) -> None:
        if not base_url:
            raise PermanentError("the OS install webhook needs a base_url")
        self.base_url = base_url.rstrip("/")
        self.token_env, self.timeout_s = token_env, timeout_s
        self.verify_tls, self.transport = verify_tls, transport

    def __repr__(self) -> str:
        return f"WebhookOsInstaller({self.base_url})"

    def _client(self) -> httpx.Client:
        headers = {"Accept": "application/json"}
        token = os.environ.get(self.token_env, "") if self.token_env else ""
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=self.timeout_s,
            verify=self.verify_tls,
            transport=self.transport,
        )

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            with self._client() as client:
                response = client.request(method, path, **kwargs)
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            raise TransientError(f"{method} {path}: {exc.__class__.__name__}: {exc}", peer=self.base_url) from exc
        if response.status_code >= 500 or response.status_code == 429:
            raise TransientError(f"{method} {path}: HTTP {response.status_code}", peer=self.base_url)
        return response

    def _job(self, response: httpx.Response, what: str) -> OsInstallJob:
        if response.status_code >= 400:
            raise PermanentError(f"{what}: HTTP {response.status_code}: {response.text[:300]}", peer=self.base_url)
        try:
            data = response.json()
            job = OsInstallJob(ref=str(data["id"]), status=str(data["status"]), message=str(data.get("message", "")))
        except (ValueError, KeyError, TypeError) as exc:
            raise PermanentError(f"{what}: unreadable reply {response.text[:200]!r}", peer=self.base_url) from exc
        if job.status not in JOB_STATUSES:
            raise PermanentError(f"{what}: unknown job status {job.status!r}", peer=self.base_url)
        return job

    def start(self, request: OsInstallRequest) -> OsInstallJob:
        body = {**asdict(request), "macs": list(request.macs)}
        headers = {"Idempotency-Key": request.idempotency_key} if request.idempotency_key else {}
        response = self._request(
            "POST", "/installs", content=json.dumps(body), headers={**headers, "Content-Type": "application/json"}
        )
        return self._job(response, f"start install of {request.hostname}")

    def status(self, ref: str) -> OsInstallJob:
        return self._job(self._request("GET", f"/installs/{ref}"), f"status of install {ref}")

    def cancel(self, ref: str) -> None:
        response = self._request("POST", f"/installs/{ref}/cancel")
        if response.status_code >= 400 and response.status_code != 404:
            raise PermanentError(f"cancel install {ref}: HTTP {response.status_code}", peer=self.base_url)


__all__ = ["SIGNATURE_HEADER", "WebhookOsInstaller", "callback_secret", "callback_signature", "callback_verify"]
