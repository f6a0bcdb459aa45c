"""WeCom (WeChat Work) group robot: the robot's `key` is in its URL (`.../cgi-bin/webhook/send?key=...`), the body a
markdown message (at most 4096 bytes). The reply is 200 with `{"errcode": 0, "errmsg": "ok"}` or an error
(93000 bad key, 45009 rate limited: 20 messages a minute per robot)."""

from __future__ import annotations

import httpx

from .base import Notification
from .chat import ChatNotifier, ChatRequest, errcode_check

RATE_LIMITED = {45009, -1}  # -1: "system busy"
MAX_BYTES = 4096


class WeComNotifier(ChatNotifier):
    peer = "wecom"

    def build(self, notification: Notification, *, now: float | None = None) -> ChatRequest:
        lines = [f"**{notification.subject}**"]
        if notification.body and notification.body != notification.subject:
            lines.append(notification.body)
        if notification.url:
            lines.append(f"[{notification.ticket_ref or 'Open'}]({notification.url})")
        content = "\n".join(lines)
        encoded = content.encode()
        if len(encoded) > MAX_BYTES:
            content = encoded[: MAX_BYTES - 3].decode(errors="ignore") + "..."
        return ChatRequest(url=self.url, json={"msgtype": "markdown", "markdown": {"content": content}})

    def check_reply(self, response: httpx.Response) -> None:
        errcode_check(response, peer=self.peer, code_key="errcode", msg_key="errmsg", transient=RATE_LIMITED)


__all__ = ["WeComNotifier"]
