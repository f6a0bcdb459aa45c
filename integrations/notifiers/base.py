"""The notifier seam: tell people (email) or systems (a webhook) that something happened to a ticket."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Notification:
    """One message about one ticket event. JSON-serialisable (it travels as a task argument).

    `key` is unique per notification and sent as the webhook's Idempotency-Key, so a retried delivery can be
    recognised by the receiver.
    """

    key: str
    event: str  # opened, assigned, comment, step_failed, <state entered>, ...
    subject: str
    body: str
    url: str = ""
    ticket_ref: str = ""
    recipients: tuple[str, ...] = ()  # email addresses
    data: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "recipients": list(self.recipients)}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Notification:
        return cls(**{**raw, "recipients": tuple(raw.get("recipients", ()))})


@runtime_checkable
class Notifier(Protocol):
    def send(self, notification: Notification) -> None:
        """Deliver it. Raise TransientError when a later try may succeed, PermanentError when not."""
        ...


__all__ = ["Notification", "Notifier"]
