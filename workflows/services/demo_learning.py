"""Demo data for postmortems: one closed incident with its postmortem and an action item, on the node whose
slot keeps killing cards (cmdb.services.demo_history). Idempotent; run by `workflows_bootstrap --demo-learning`."""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.utils import timezone

from cmdb.models import Accelerator, Node
from cmdb.services.demo_history import OFFENDER_HOST, OFFENDER_SLOT
from gpuops.context import ChangeSource, change_context

from ..models import LinkRole, Postmortem, PostmortemAction, RootCauseCategory, Ticket, TimelineEntry

DEMO_TITLE = f"Training jobs restarting on {OFFENDER_HOST}"


@transaction.atomic
def demo_incident_load(*, now: dt.datetime | None = None) -> Ticket | None:
    """Open, work, resolve and close the demo incident with a complete postmortem (None: already there, or the
    demo fleet is not loaded)."""
    from ..engine import ticket_create, transition_apply

    node = Node.objects.filter(hostname=OFFENDER_HOST).first()
    if node is None or Ticket.objects.filter(type="incident", title=DEMO_TITLE).exists():
        return None
    now = now or timezone.now()
    failed = Accelerator.objects.filter(serial=f"{OFFENDER_HOST}-rma-2").first()
    start = now - dt.timedelta(days=6) + dt.timedelta(minutes=30)
    with change_context(source=ChangeSource.SYSTEM):
        links = [(LinkRole.RELATED, failed)] if failed else []
        ticket = ticket_create(
            type_="incident",
            title=DEMO_TITLE,
            requester=None,
            priority="high",
            description="Three NCCL all-reduce timeouts in an hour on the llm-pretrain job.",
            inputs={"node": node},
            links=links,
        )
        Ticket.objects.filter(pk=ticket.pk).update(created_at=start)
        TimelineEntry.objects.filter(ticket=ticket).update(at=start)
        ticket.refresh_from_db()
        transition_apply(ticket=ticket, name="start_work", system=True)
        transition_apply(
            ticket=ticket,
            name="resolve",
            system=True,
            data={"resolution": f"Slot {OFFENDER_SLOT} isolated; board sent for repair."},
        )
        follow_up = ticket_create(
            type_="incident",
            title=f"Board repair for {OFFENDER_HOST} slot {OFFENDER_SLOT}",
            requester=None,
            description="Action item of the postmortem of the restarting training jobs.",
            links=[(LinkRole.RELATED, node)],
        )
        postmortem = Postmortem.objects.create(
            ticket=ticket,
            summary=(
                f"The card in slot {OFFENDER_SLOT} of {OFFENDER_HOST} fell off the bus (XID 79) for the second "
                "time in 30 days - a different card each time. Jobs on the node restarted three times."
            ),
            root_cause=RootCauseCategory.objects.filter(slug="hardware-board").first(),
            root_cause_detail="Two cards in the same slot within 30 days: the baseboard, not the cards.",
            started_at=start,
            ended_at=start + dt.timedelta(hours=3),
        )
        PostmortemAction.objects.create(postmortem=postmortem, ticket=follow_up)
        transition_apply(ticket=ticket, name="close", system=True)
    # The story took three hours six days ago, not a second now.
    for offset, entry in enumerate(TimelineEntry.objects.filter(ticket=ticket, at__gt=start).order_by("at", "id")):
        TimelineEntry.objects.filter(pk=entry.pk).update(at=start + dt.timedelta(minutes=20 + 80 * offset))
    return ticket
