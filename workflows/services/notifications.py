"""Ticket notifications: who hears about an event, the outbox rows that owe it, and the task per notifier that
delivers it.

A notification is recorded as NotificationOutbox rows (one per notifier) in the transaction of the event and
published after commit; when the broker is down the rows stay unsent and the beat sweep
(`workflows.republish_unsent` -> `notifications_flush`) publishes them later. So a comment or a new ticket never
answers 500 because of its notification, and the notification is not lost either.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Sequence

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from gpuops.tasks import PUBLISH_ERRORS
from integrations.notifiers import Notification, notifier_get, notifier_paths

from ..conf import workflows_setting
from ..models import NotificationOutbox, Ticket

logger = logging.getLogger(__name__)

# A row this recent may still be in its on-commit dispatch; sent rows are kept this long for inspection.
UNSENT_GRACE = dt.timedelta(seconds=10)
SENT_RETENTION = dt.timedelta(days=7)
FLUSH_BATCH = 500


def recipients_for(ticket: Ticket) -> list[str]:
    """Email addresses of the requester, the assignee, the assignee group's members and the watchers."""
    users = [ticket.requester, ticket.assignee, *ticket.watchers.all()]
    if ticket.assignee_group_id:
        users += list(ticket.assignee_group.user_set.filter(is_active=True))
    return sorted({u.email for u in users if u is not None and u.is_active and u.email})


def notification_build(*, ticket: Ticket, event: str, message: str, key: str = "") -> Notification:
    base = str(workflows_setting("BASE_URL")).rstrip("/")
    return Notification(
        key=key or uuid.uuid4().hex,
        event=event,
        subject=message[:200],
        body=f"{message}\n\n{ticket.reference}: {ticket.title}",
        url=f"{base}{ticket.get_absolute_url()}",
        ticket_ref=ticket.reference,
        recipients=tuple(recipients_for(ticket)),
        data={
            "ticket_id": ticket.pk,
            "type": ticket.type,
            "state": ticket.state,
            "priority": ticket.priority,
            "site_id": ticket.site_id,
            "team": ticket.assignee_group.name if ticket.assignee_group_id else "",
        },
    )


def notifications_record(*, ticket: Ticket, event: str, message: str) -> list[int]:
    """Write the outbox rows of one notification (one per notifier: the configured ones, the chat channels of
    the ticket's team - its assignee group - and the webhook subscriptions) in the caller's transaction.
    Returns their ids, for `notifications_dispatch` after commit."""
    key = uuid.uuid4().hex
    rows = [
        NotificationOutbox.objects.create(ticket=ticket, event=event, message=message, notifier_path=path, key=key)
        for path in notifier_paths(team=lambda: ticket.assignee_group.name if ticket.assignee_group_id else None)
    ]
    return [row.pk for row in rows]


def notifications_dispatch(*, outbox_ids: Sequence[int]) -> int:
    """Publish one delivery task per unsent outbox row and mark it sent. Returns how many were sent.

    Each row is locked while it is published (SKIP LOCKED: the on-commit dispatch and a sweep never send the
    same row twice). A broker error is logged and leaves the row (and the rest) unsent for the next sweep;
    it never reaches the caller.
    """
    from ..tasks import notify_task

    payloads: dict[str, dict] = {}
    sent = 0
    for outbox_id in outbox_ids:
        with transaction.atomic():
            row = (
                NotificationOutbox.objects.select_for_update(skip_locked=True)
                .filter(pk=outbox_id, sent_at__isnull=True)
                .first()
            )
            if row is None:
                continue
            if row.key not in payloads:
                ticket = Ticket.objects.select_related("requester", "assignee", "assignee_group").get(pk=row.ticket_id)
                payloads[row.key] = notification_build(
                    ticket=ticket, event=row.event, message=row.message, key=row.key
                ).as_dict()
            try:
                notify_task.apply_async(args=[row.notifier_path, payloads[row.key]])
            except PUBLISH_ERRORS as exc:
                logger.warning(
                    "notification %s via %s: publish failed (%s); the sweep will send it",
                    row.key,
                    row.notifier_path,
                    exc,
                )
                NotificationOutbox.objects.filter(pk=row.pk).update(attempts=F("attempts") + 1, error=str(exc)[:500])
                return sent
            NotificationOutbox.objects.filter(pk=row.pk).update(
                sent_at=timezone.now(), attempts=F("attempts") + 1, error=""
            )
            sent += 1
    return sent


def notifications_flush(*, now: dt.datetime | None = None) -> int:
    """The outbox sweep for notifications (beat): publish rows still unsent, forget rows sent long ago.
    Returns how many were sent."""
    now = now or timezone.now()
    NotificationOutbox.objects.filter(sent_at__lt=now - SENT_RETENTION).delete()
    ids = list(
        NotificationOutbox.objects.filter(sent_at__isnull=True, created_at__lt=now - UNSENT_GRACE)
        .order_by("created_at", "id")
        .values_list("pk", flat=True)[:FLUSH_BATCH]
    )
    return notifications_dispatch(outbox_ids=ids) if ids else 0


def notification_send(*, notifier_path: str, payload: dict) -> None:
    """Deliver one notification through one notifier (the task body). Errors propagate for the task to retry."""
    notifier_get(notifier_path).send(Notification.from_dict(payload))
