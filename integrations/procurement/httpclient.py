"""A small JSON-over-HTTP client with bounded retries, shared by the procurement and WMS REST adapters.

The only module of both packages that imports httpx (besides the simulator, which impersonates a peer).
What is retried, and why:
- timeouts and transport errors (connect refused, reset, protocol errors): the request may or may not have
  reached the peer, which is exactly why every write carries an `Idempotency-Key` the peer deduplicates on;
- 5xx and 429 (honouring Retry-After up to the backoff cap): the peer asked us to come back later.
Everything else (4xx) is a PermanentError: retrying the same request cannot succeed.
Backoff is exponential with full jitter (AWS architecture blog, "Exponential Backoff And Jitter"), so many
workers retrying after an outage do not hit the peer in lockstep.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from integrations.exceptions import PermanentError, TransientError

logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class JsonHttp:
    """JSON requests to one base URL with timeouts, retries with backoff and an optional bearer token.

    Args:
        base_url: e.g. "https://procurement.example.com".
        token: sent as `Authorization: Bearer <token>` when not empty.
        attempts: tries per call, the first included (>= 1).
        backoff_s / backoff_max_s: base and cap of the exponential backoff.
        sleep: injectable for tests.
        transport: an httpx transport (tests may pass httpx.MockTransport); None for the network.
    """

    def __init__(
        self,
        *,
        base_url: str,
        token: str = "",
        connect_timeout_s: float = 3.0,
        timeout_s: float = 10.0,
        attempts: int = 3,
        backoff_s: float = 0.5,
        backoff_max_s: float = 8.0,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
        user_agent: str = "gpuops",
    ) -> None:
        headers = {"Accept": "application/json", "User-Agent": user_agent}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.base_url = base_url.rstrip("/")
        self.attempts = max(1, attempts)
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self._sleep = sleep
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            transport=transport,
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
        )

    def close(self) -> None:
        self._client.close()

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        cap = min(self.backoff_max_s, self.backoff_s * (2**attempt))
        if retry_after:
            try:
                return min(self.backoff_max_s, max(0.0, float(retry_after)))
            except ValueError:
                pass  # an HTTP-date: fall back to our own backoff
        return random.uniform(0, cap)  # jitter, not cryptography

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        idempotency_key: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Send one logical request (retried as needed); return the decoded JSON body (None when empty).

        Raises:
            TransientError: still failing after `attempts` tries with a retryable error.
            PermanentError: a 4xx other than 429, or a body that is not JSON.
        """
        sent_headers = dict(headers or {})
        if idempotency_key:
            sent_headers["Idempotency-Key"] = idempotency_key
        peer = f"{self.base_url}{path}"
        last: str = ""
        for attempt in range(self.attempts):
            retry_after: str | None = None
            try:
                response = self._client.request(method, path, json=json, headers=sent_headers)
            except httpx.TimeoutException as exc:
                last = f"timeout ({type(exc).__name__})"
            except httpx.TransportError as exc:
                last = f"transport error ({type(exc).__name__}: {exc})"
            else:
                if response.status_code < 400:
                    return self._decode(response, peer)
                if response.status_code not in RETRY_STATUSES:
                    raise PermanentError(f"{method} answered {response.status_code}: {response.text[:300]}", peer=peer)
                last = f"HTTP {response.status_code}"
                retry_after = response.headers.get("Retry-After")
            if attempt + 1 < self.attempts:
                delay = self._delay(attempt, retry_after)
                logger.warning(
                    "%s %s: %s; retry %d/%d in %.2fs (same Idempotency-Key)",
                    method,
                    peer,
                    last,
                    attempt + 1,
                    self.attempts - 1,
                    delay,
                )
                self._sleep(delay)
        raise TransientError(f"{method} failed after {self.attempts} attempts: {last}", peer=peer)

    @staticmethod
    def _decode(response: httpx.Response, peer: str) -> Any:
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise PermanentError(f"reply is not JSON: {response.text[:200]!r}", peer=peer) from exc


__all__ = ["RETRY_STATUSES", "JsonHttp"]
