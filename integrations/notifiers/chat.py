"""Chat notifiers: the part every chat robot shares (one signed JSON POST per notification, the reply checked).

Each adapter (slack, feishu, dingtalk, wecom) only says how a notification becomes its service's request
(`build`) and how the service says "refused" in a 200 reply (`check_reply`). Only this module talks HTTP.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from integrations.exceptions import PermanentError, TransientError

from .base import Notification


@dataclass(frozen=True)
class ChatRequest:
    """What one notification sends: a POST of `json` to `url` with `params`."""

    url: str
    json: dict[str, Any]
    params: dict[str, str] = field(default_factory=dict)


def message_text(notification: Notification, *, link: Callable[[str, str], str] | None = None) -> str:
    """The notification as lines of text: subject, body, then the ticket link (in the service's link syntax)."""
    lines = [notification.subject]
    if notification.body and notification.body != notification.subject:
        lines.append(notification.body)
    if notification.url:
        label = notification.ticket_ref or "Open"
        lines.append(link(label, notification.url) if link else notification.url)
    return "\n\n".join(lines)


class ChatNotifier:
    """Base of the chat adapters: POST the built request; timeouts, connection errors, 429 and 5xx are transient,
    other 4xx permanent, and a 200 whose body reports an error is classified by `check_reply`."""

    peer = "chat"

    def __init__(self, *, url: str, timeout_s: float = 5.0, client: httpx.Client | None = None) -> None:
        if not url:
            raise PermanentError(f"{self.peer} notifier needs a url")
        self.url, self.timeout_s = url, timeout_s
        self._client = client

    # --- what each adapter defines ---------------------------------------------------------------------------

    def build(self, notification: Notification, *, now: float | None = None) -> ChatRequest:
        raise NotImplementedError

    def check_reply(self, response: httpx.Response) -> None:
        """Raise when a 2xx reply still says the message was refused (most robots answer 200 + an error code)."""

    # --- shared ----------------------------------------------------------------------------------------------

    def send(self, notification: Notification) -> None:
        request = self.build(notification, now=time.time())
        headers = {"User-Agent": "gpuops-notifier", "Idempotency-Key": notification.key}
        client = self._client or httpx
        # Merged into the URL's own query (httpx's `params=` would drop a token already in the robot's URL).
        url = httpx.URL(request.url).copy_merge_params(request.params) if request.params else request.url
        try:
            response = client.post(url, json=request.json, headers=headers, timeout=self.timeout_s)
        except httpx.TimeoutException as exc:
            raise TransientError(f"{self.peer} timed out after {self.timeout_s} s", peer=self.peer) from exc
        except httpx.TransportError as exc:
            raise TransientError(f"{self.peer} unreachable: {exc}", peer=self.peer) from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise TransientError(f"{self.peer} answered {response.status_code}", peer=self.peer)
        if response.status_code >= 400:
            raise PermanentError(f"{self.peer} refused: {response.status_code} {response.text[:200]}", peer=self.peer)
        self.check_reply(response)


def reply_json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def errcode_check(response: httpx.Response, *, peer: str, code_key: str, msg_key: str, transient: set[int]) -> None:
    """Robots that answer `{code_key: 0, msg_key: "ok"}`: non-zero is an error, transient for the rate limits."""
    body = reply_json(response)
    code = body.get(code_key, 0)
    if code in (0, None):
        return
    message = f"{peer} error {code}: {str(body.get(msg_key, ''))[:200]}"
    if code in transient:
        raise TransientError(message, peer=peer)
    raise PermanentError(message, peer=peer)


__all__ = ["ChatNotifier", "ChatRequest", "errcode_check", "message_text", "reply_json"]
