"""Helpers shared by the workflow tests (imported as tests.workflows.helpers)."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from cmdb import models as m
from cmdb.hooks import AcceleratorFailure, accelerator_failed
from workflows.engine import transition_apply
from workflows.models import Ticket


def ticket_fresh(ticket: Ticket) -> Ticket:
    return Ticket.objects.get(pk=ticket.pk)


def open_by_hook(wf, fleet, *, code: str = "79", is_repeat: bool = False) -> Ticket:
    failure = AcceleratorFailure(
        accelerator_id=fleet.failed.pk,
        node_id=fleet.node.pk,
        health_event_id=None,
        kind="xid",
        code=code,
        message="GPU has fallen off the bus",
        is_repeat=is_repeat,
    )
    wf.run(accelerator_failed, failure)
    return Ticket.objects.get(type="repair", dedup_key=f"repair:accelerator:{fleet.failed.pk}", is_open=True)


def take(wf, ticket: Ticket, name: str, user, **data) -> Ticket:
    wf.run(transition_apply, ticket=ticket_fresh(ticket), name=name, actor=user, data=data)
    return ticket_fresh(ticket)


def agent_reports_healthy(card: m.Accelerator) -> None:
    """What ingestion does when the node's agent reports the card healthy."""
    m.Accelerator.objects.filter(pk=card.pk).update(health="ok", last_seen_at=timezone.now() + dt.timedelta(seconds=1))
