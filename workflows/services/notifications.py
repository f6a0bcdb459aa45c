"""Ticket notifications: who hears about an event, and the task per notifier that delivers it."""

from __future__ import annotations

import uuid

from integrations.notifiers import Notification, notifier_get, notifier_paths

from ..conf import workflows_setting
from ..models import Ticket


def recipients_for(ticket: Ticket) -> list[str]:
    """Email addresses of the requester, the assignee, the assignee group's members and the watchers."""
    users = [ticket.requester, ticket.assignee, *ticket.watchers.all()]
    if ticket.assignee_group_id:
        users += list(ticket.assignee_group.user_set.filter(is_active=True))
    return sorted({u.email for u in users if u is not None and u.is_active and u.email})


def notification_build(*, ticket: Ticket, event: str, message: str) -> Notification:
    base = str(workflows_setting("BASE_URL")).rstrip("/")
    return Notification(
        key=uuid.uuid4().hex, event=event, subject=message[:200],
        body=f"{message}\n\n{ticket.reference}: {ticket.title}", url=f"{base}{ticket.get_absolute_url()}",
        ticket_ref=ticket.reference, recipients=tuple(recipients_for(ticket)),
        data={"ticket_id": ticket.pk, "type": ticket.type, "state": ticket.state, "priority": ticket.priority})


def notifications_enqueue(*, ticket_id: int, event: str, message: str) -> int:
    """Queue one delivery task per configured notifier (called on commit). Returns how many were queued."""
    from ..tasks import notify_task

    ticket = Ticket.objects.filter(pk=ticket_id).select_related("requester", "assignee", "assignee_group").first()
    if ticket is None:
        return 0
    payload = notification_build(ticket=ticket, event=event, message=message).as_dict()
    paths = notifier_paths()
    for path in paths:
        notify_task.apply_async(args=[path, payload])
    return len(paths)


def notification_send(*, notifier_path: str, payload: dict) -> None:
    """Deliver one notification through one notifier (the task body). Errors propagate for the task to retry."""
    notifier_get(notifier_path).send(Notification.from_dict(payload))
