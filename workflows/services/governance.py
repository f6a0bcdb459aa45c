"""Change governance: change tickets start work only inside maintenance windows, unless an emergency approval
lifts the rule for one ticket.

The engine (`transition_apply`) calls `change_window_errors` for the transitions a workflow lists in
`window_transitions` - the one place a change starts touching the fleet - so every path (UI, API, an approval
quorum) meets the same rule. The windows themselves are CMDB data (cmdb.models.MaintenanceWindow); which
scopes a ticket touches is the workflow's `change_scope`, else the ticket's own site/cluster and its linked
objects'.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from cmdb.services.windows import change_window_refusals

from ..declarations import Transition, Workflow
from ..models import Ticket, TimelineKind
from ..permissions import can_view, has_ticket_perm
from ..registry import workflow

EMERGENCY_KEY = "emergency_approval"
EMERGENCY_PERMISSION = "approve_emergency_change"


def change_scope_ids(ticket: Ticket, wf: Workflow) -> tuple[set[int], set[int]]:
    """(site ids, cluster ids) the change touches."""
    if wf.change_scope is not None:
        return wf.change_scope(ticket)
    sites = {ticket.site_id} if ticket.site_id else set()
    clusters = {ticket.cluster_id} if ticket.cluster_id else set()
    for link in ticket.links.select_related("node", "rack__room", "switch", "accelerator__node"):
        node = link.node or (link.accelerator.node if link.accelerator_id and link.accelerator.node_id else None)
        if node is not None:
            sites.add(node.site_id)
            if node.cluster_id:
                clusters.add(node.cluster_id)
        elif link.rack_id:
            sites.add(link.rack.room.site_id)
        elif link.switch_id:
            sites.add(link.switch.site_id)
    return sites, clusters


def has_emergency_approval(ticket: Ticket) -> bool:
    return bool((ticket.data or {}).get(EMERGENCY_KEY))


def change_window_errors(ticket: Ticket, wf: Workflow, t: Transition, *, at: dt.datetime | None = None) -> list[str]:
    """Why `t` may not start the change now (empty: it may). Only for the workflow's window transitions."""
    if t.name not in wf.window_transitions or has_emergency_approval(ticket):
        return []
    site_ids, cluster_ids = change_scope_ids(ticket, wf)
    refusals = change_window_refusals(site_ids=site_ids, cluster_ids=cluster_ids, at=at)
    return [r.message[:1].upper() + r.message[1:] + "." for r in refusals]


@transaction.atomic
def emergency_approval_record(*, ticket: Ticket, actor: AbstractBaseUser, reason: str) -> Ticket:
    """Let this change ticket start outside maintenance windows and freezes.

    Needs `workflows.approve_emergency_change` (globally or on the ticket); the requester never approves their
    own emergency; a reason is required. Recorded on the ticket (data and timeline) and notified.
    """
    from ..engine import ForbiddenError, GuardError, NotAllowedError, notify_on_commit, timeline_add

    wf = workflow(ticket.type)
    locked = Ticket.objects.select_for_update().get(pk=ticket.pk)
    if not can_view(actor, locked):
        raise ForbiddenError("You cannot see this ticket.")
    if not wf.is_change:
        raise NotAllowedError(f"{wf.label} tickets are not changes; they need no emergency approval.")
    if not locked.is_open:
        raise NotAllowedError(f"{locked.reference} is closed.")
    if locked.requester_id is not None and locked.requester_id == actor.pk:
        raise ForbiddenError("A requester cannot approve their own emergency change.")
    if not has_ticket_perm(actor, EMERGENCY_PERMISSION, locked):
        raise ForbiddenError(f"You lack the permission workflows.{EMERGENCY_PERMISSION}.")
    if not reason.strip():
        raise GuardError("Say why this change cannot wait.", field_errors={"reason": "A reason is required."})
    if has_emergency_approval(locked):
        raise NotAllowedError(f"{locked.reference} holds an emergency approval already.")
    by = str(actor.get_username())
    grant: dict[str, Any] = {"by": by, "at": timezone.now().isoformat(), "reason": reason.strip()[:1000]}
    locked.data = {**locked.data, EMERGENCY_KEY: grant}
    locked.save(update_fields=["data", "updated_at"])
    timeline_add(
        ticket=locked,
        kind=TimelineKind.APPROVAL,
        actor=actor,
        body=reason.strip(),
        message=f"{by} approved an emergency change: it may start outside maintenance windows and freezes",
        data={"emergency": True},
    )
    notify_on_commit(locked, "emergency_approved", f"{locked.reference}: emergency change approved by {by}")
    return locked


__all__ = [
    "EMERGENCY_KEY",
    "EMERGENCY_PERMISSION",
    "change_scope_ids",
    "change_window_errors",
    "emergency_approval_record",
    "has_emergency_approval",
]
