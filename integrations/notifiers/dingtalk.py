"""DingTalk group robot ("custom robot"), signed ("加签" security setting).

DingTalk's documented check: string_to_sign = f"{timestamp}\\n{secret}" with the timestamp in *milliseconds*,
sign = urlencode(base64(HMAC-SHA256(key=secret, msg=string_to_sign))); both go in the query string next to
`access_token` (the robot's URL carries it). The reply is 200 with `{"errcode": 0, "errmsg": "ok"}` or an error
(310000 bad signature / stale timestamp / keyword missing, 300001 bad token, 410100 rate limited).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

import httpx

from .base import Notification
from .chat import ChatNotifier, ChatRequest, errcode_check, message_text

RATE_LIMITED = {410100, 130101}


def dingtalk_sign(timestamp_ms: int, secret: str) -> str:
    """The `sign` value before URL encoding (httpx encodes the query string: '+', '/', '=' become %2B, %2F, %3D)."""
    string_to_sign = f"{timestamp_ms}\n{secret}"
    digest = hmac.new(secret.encode(), string_to_sign.encode(), digestmod=hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


class DingTalkNotifier(ChatNotifier):
    """A markdown message: the subject as title and heading, the body, the ticket link."""

    peer = "dingtalk"

    def __init__(self, *, url: str, secret: str = "", **kwargs) -> None:
        super().__init__(url=url, **kwargs)
        self.secret = secret

    def build(self, notification: Notification, *, now: float | None = None) -> ChatRequest:
        text = message_text(notification, link=lambda label, url: f"[{label}]({url})")
        body = {"msgtype": "markdown", "markdown": {"title": notification.subject[:100], "text": f"### {text}"}}
        params: dict[str, str] = {}
        if self.secret:
            timestamp_ms = int((now if now is not None else time.time()) * 1000)
            params = {"timestamp": str(timestamp_ms), "sign": dingtalk_sign(timestamp_ms, self.secret)}
        return ChatRequest(url=self.url, json=body, params=params)

    def check_reply(self, response: httpx.Response) -> None:
        errcode_check(response, peer=self.peer, code_key="errcode", msg_key="errmsg", transient=RATE_LIMITED)


__all__ = ["DingTalkNotifier", "dingtalk_sign"]
