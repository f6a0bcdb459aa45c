"""An in-memory notifier for tests: records what was sent, fails on demand."""

from __future__ import annotations

from dataclasses import dataclass, field

from integrations.exceptions import TransientError

from .base import Notification
from .chat import ChatNotifier, ChatRequest


@dataclass
class FakeNotifier:
    sent: list[Notification] = field(default_factory=list)
    fail_next: int = 0
    attempts: int = 0

    def send(self, notification: Notification) -> None:
        self.attempts += 1
        if self.fail_next > 0:
            self.fail_next -= 1
            raise TransientError("fake notifier: try later", peer="fake-notifier")
        self.sent.append(notification)

    def events(self) -> list[str]:
        return [n.event for n in self.sent]


@dataclass
class FakeChatNotifier:
    """A chat robot in memory: records the request the real adapter would send (its `build`), fails on demand.
    `adapter` is a configured chat adapter (SlackNotifier, FeishuNotifier, ...); nothing leaves the process."""

    adapter: ChatNotifier
    requests: list[ChatRequest] = field(default_factory=list)
    fail_next: int = 0

    def send(self, notification: Notification) -> None:
        if self.fail_next > 0:
            self.fail_next -= 1
            raise TransientError("fake chat: try later", peer=f"fake-{self.adapter.peer}")
        self.requests.append(self.adapter.build(notification))


__all__ = ["FakeChatNotifier", "FakeNotifier"]
