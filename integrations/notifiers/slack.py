"""Slack-compatible incoming webhook (Slack, Mattermost, Rocket.Chat): `{"text": ...}` in mrkdwn."""

from __future__ import annotations

import httpx

from integrations.exceptions import PermanentError

from .base import Notification
from .chat import ChatNotifier, ChatRequest, message_text


class SlackNotifier(ChatNotifier):
    """POSTs `{"text", "blocks"}` to the incoming-webhook URL (the URL is the secret). Slack answers `ok` as plain
    text; errors are 4xx with a reason (`invalid_payload`, `no_service`, `channel_is_archived`)."""

    peer = "slack"

    def build(self, notification: Notification, *, now: float | None = None) -> ChatRequest:
        text = message_text(notification, link=lambda label, url: f"<{url}|{label}>")
        return ChatRequest(
            url=self.url,
            json={"text": text, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}]},
        )

    def check_reply(self, response: httpx.Response) -> None:
        # Mattermost answers an empty 200; Slack "ok". Anything else in a 200 is a proxy page, not a delivery.
        if response.text.strip() not in ("", "ok") and not response.headers.get("content-type", "").startswith(
            "application/json"
        ):
            raise PermanentError(f"slack: unexpected reply {response.text[:200]!r}", peer=self.peer)


__all__ = ["SlackNotifier"]
