"""Feishu / Lark custom bot, with its signing secret ("signature verification" in the bot's security settings).

Feishu's documented check: string_to_sign = f"{timestamp}\\n{secret}", sign = base64(HMAC-SHA256 with
string_to_sign as the *key* over an empty message); `timestamp` (seconds) and `sign` go in the JSON body and the
timestamp must be within an hour of Feishu's clock. The reply is 200 with `{"code": 0}` or an error code
(19021 bad signature or stale timestamp, 9499 bad request, 11232 rate limited).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

import httpx

from .base import Notification
from .chat import ChatNotifier, ChatRequest, errcode_check

RATE_LIMITED = {11232, 11233}


def feishu_sign(timestamp: int, secret: str) -> str:
    string_to_sign = f"{timestamp}\n{secret}"
    digest = hmac.new(string_to_sign.encode(), b"", digestmod=hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


class FeishuNotifier(ChatNotifier):
    """A rich-text ("post") message: the subject as title, the body, the ticket link."""

    peer = "feishu"

    def __init__(self, *, url: str, secret: str = "", **kwargs) -> None:
        super().__init__(url=url, **kwargs)
        self.secret = secret

    def build(self, notification: Notification, *, now: float | None = None) -> ChatRequest:
        lines = [[{"tag": "text", "text": notification.body or notification.subject}]]
        if notification.url:
            lines.append([{"tag": "a", "text": notification.ticket_ref or "Open", "href": notification.url}])
        body: dict = {
            "msg_type": "post",
            "content": {"post": {"zh_cn": {"title": notification.subject, "content": lines}}},
        }
        if self.secret:
            timestamp = int(now if now is not None else time.time())
            body = {"timestamp": str(timestamp), "sign": feishu_sign(timestamp, self.secret), **body}
        return ChatRequest(url=self.url, json=body)

    def check_reply(self, response: httpx.Response) -> None:
        # Newer replies say {"code", "msg"}; older ones {"StatusCode", "StatusMessage"}.
        errcode_check(response, peer=self.peer, code_key="code", msg_key="msg", transient=RATE_LIMITED)
        errcode_check(response, peer=self.peer, code_key="StatusCode", msg_key="StatusMessage", transient=set())


__all__ = ["FeishuNotifier", "feishu_sign"]
