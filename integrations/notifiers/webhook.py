"""A JSON POST to a webhook (chat bridge, incident tool) with a timeout and an Idempotency-Key."""

from __future__ import annotations

import httpx

from gpuops.metrics import WEBHOOK_DELIVERIES
from integrations.exceptions import PermanentError, TransientError

from .base import Notification


class WebhookNotifier:
    """POSTs the notification as JSON. Timeouts, connection errors, 429 and 5xx are transient; other 4xx are
    permanent (the receiver will not accept this payload however often we try)."""

    def __init__(
        self,
        *,
        url: str,
        timeout_s: float = 5.0,
        headers: dict[str, str] | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        if not url:
            raise PermanentError("webhook notifier needs a url")
        self.url, self.timeout_s, self.headers = url, timeout_s, dict(headers or {})
        self._client = client  # tests pass a client on an httpx.MockTransport

    def send(self, notification: Notification) -> None:
        """POST it; counted on /metrics (gpuops_webhook_deliveries) as delivered, transient or permanent."""
        try:
            self._send(notification)
        except TransientError:
            WEBHOOK_DELIVERIES.labels(kind="notifier", outcome="transient_error").inc()
            raise
        except PermanentError:
            WEBHOOK_DELIVERIES.labels(kind="notifier", outcome="permanent_error").inc()
            raise
        WEBHOOK_DELIVERIES.labels(kind="notifier", outcome="delivered").inc()

    def _send(self, notification: Notification) -> None:
        headers = {**self.headers, "Idempotency-Key": notification.key, "User-Agent": "gpuops-notifier"}
        try:
            if self._client is not None:
                response = self._client.post(
                    self.url, json=notification.as_dict(), headers=headers, timeout=self.timeout_s
                )
            else:
                response = httpx.post(self.url, json=notification.as_dict(), headers=headers, timeout=self.timeout_s)
        except httpx.TimeoutException as exc:
            raise TransientError(f"webhook timed out after {self.timeout_s} s", peer=self.url) from exc
        except httpx.TransportError as exc:
            raise TransientError(f"webhook unreachable: {exc}", peer=self.url) from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise TransientError(f"webhook answered {response.status_code}", peer=self.url)
        if response.status_code >= 400:
            raise PermanentError(f"webhook refused: {response.status_code} {response.text[:200]}", peer=self.url)


__all__ = ["WebhookNotifier"]
