"""Ticket events to webhook subscriptions, as one more notifier behind the workflows' notification outbox.

The outbox row (one per notification and notifier) guarantees the fan-out runs even when the broker was down at
commit; the fan-out is idempotent by the notification's key, so a retried notify task writes no second delivery.
"""

from __future__ import annotations

from ..notifiers.base import Notification
from .services import ticket_event_fan_out

PATH = "integrations.webhooks.notifier.SubscriptionsNotifier"


class SubscriptionsNotifier:
    """Writes one signed delivery per subscription that wants this ticket event (object type "ticket")."""

    def send(self, notification: Notification) -> None:
        data = {k: v for k, v in notification.as_dict().items() if k != "recipients"}  # no mail addresses out
        site_id = notification.data.get("site_id")
        ticket_event_fan_out(
            event_id=f"ticket-{notification.key}",
            event=notification.event,
            site_id=site_id if isinstance(site_id, int) else None,
            data=data,
        )


__all__ = ["PATH", "SubscriptionsNotifier"]
