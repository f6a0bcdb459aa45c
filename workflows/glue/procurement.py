"""Procurement requests and their tickets (workflows/definitions/procurement.py), and provisioning tickets for
delivered servers: the glue between integrations.procurement and the workflow engine.

The request is the record; the ticket mirrors its state through system transitions. The procurement services
report every change through `integrations.procurement.hooks` on commit of the change that prompted it, never
inside it: a ticket transition starts steps and notifications of its own, and a failure there must not roll
back a delivery or a vote. A failed sync is logged and redone by the procurement sweep (`tickets_resync`), so the
two never drift for long. Everything is a no-op when the engine has no `procurement` type registered.
`register()` (from WorkflowsConfig.ready) connects the hooks.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

from cmdb.models import Node
from integrations.procurement import hooks
from integrations.procurement.conf import procurement_setting
from integrations.procurement.models import OPEN_REQUEST_STATES, ProcurementRequest, RequestState
from integrations.procurement.tickets import ticket_id_of

from ..declarations import Workflow
from ..engine import link_add, ticket_create, timeline_add, transition_apply
from ..models import LinkRole, Ticket, TimelineKind
from ..registry import workflow_or_none

logger = logging.getLogger(__name__)

TICKET_TYPE = "procurement"
TICKET_STATE_FOR: dict[str, str] = {
    RequestState.DRAFT: "draft",
    RequestState.SUBMITTED: "awaiting_approval",
    RequestState.APPROVED: "ordering",
    RequestState.ORDERED: "ordered",
    RequestState.PARTIALLY_RECEIVED: "receiving",
    RequestState.RECEIVED: "received",
    RequestState.CLOSED: "closed",
    RequestState.REJECTED: "rejected",
    RequestState.CANCELLED: "cancelled",
}


def tickets_enabled() -> bool:
    return workflow_or_none(TICKET_TYPE) is not None


def ticket_for(request: ProcurementRequest) -> Ticket | None:
    """The request's ticket, or None."""
    pk = ticket_id_of(request)
    return None if pk is None else Ticket.objects.filter(pk=pk).first()


def ticket_open(request: ProcurementRequest) -> Ticket | None:
    """Open the request's ticket as the system (the requester watches it). Returns it, or None."""
    if not tickets_enabled() or request.ticket_ref:
        return None
    lines = "\n".join(
        f"- {line.quantity} x {line.item} at {line.site.code} ({line.amount:,.2f} {request.currency})"
        for line in request.lines.select_related("site", "server_model", "accelerator_model", "part_model")
    )
    description = (
        f"{request.justification}\n\nBudget {request.budget_code}, {request.total_amount:,.2f} "
        f"{request.currency}:\n{lines}\n\nVote on /admin/procurement/procurementrequest/{request.pk}/"
        f"change/ or POST /api/integrations/procurement/requests/{request.pk}/approve/."
    )
    watchers = [request.requested_by] if request.requested_by_id else []
    return ticket_create(
        type_=TICKET_TYPE,
        title=f"{request.reference}: {request.title}",
        requester=None,
        description=description,
        inputs={"request": request.reference},
        watchers=watchers,
    )


def ticket_sync(request_id: int, *, open_ticket: bool = False) -> str | None:
    """Bring the ticket to the state matching the request (one system transition). Returns the ticket state."""
    wf = workflow_or_none(TICKET_TYPE)
    request = ProcurementRequest.objects.filter(pk=request_id).first()
    if wf is None or request is None:
        return None
    ticket = ticket_for(request)
    if ticket is None and open_ticket and request.state in OPEN_REQUEST_STATES:
        ticket = ticket_open(request)
    if ticket is None:
        return None
    target = TICKET_STATE_FOR[request.state]
    if ticket.state == target or ticket.state in wf.terminal:
        return ticket.state
    path = _system_path(wf, ticket.state, target)
    if path is None:
        logger.warning("%s: no system transitions lead from %s to %s", ticket.reference, ticket.state, target)
    for name in path or ():
        ticket = transition_apply(ticket=ticket, name=name, system=True).ticket
    return ticket.state


def _system_path(wf: Workflow, source: str, target: str) -> list[str] | None:
    """The shortest chain of system transitions from `source` to `target` (usually one; more for a ticket
    opened late, e.g. a draft ticket for a request already ordered)."""
    queue: deque[tuple[str, list[str]]] = deque([(source, [])])
    seen = {source}
    while queue:
        state, path = queue.popleft()
        for t in wf.transitions:
            if t.is_system and state in t.sources and t.target not in seen:
                if t.target == target:
                    return [*path, t.name]
                seen.add(t.target)
                queue.append((t.target, [*path, t.name]))
    return None


def ticket_note(request: ProcurementRequest, message: str, *, body: str = "") -> None:
    """A timeline entry on the request's ticket (votes, PO errors, discrepancies), if it has one."""
    ticket = ticket_for(request)
    if ticket is not None:
        timeline_add(ticket=ticket, kind=TimelineKind.NOTE, message=message, body=body)


def _safely(what: str, fn: Callable[[], object]) -> None:
    try:
        fn()
    except Exception:
        # Never undo the procurement change that already committed; the sweep re-syncs.
        logger.exception("procurement ticket %s failed", what)


def on_request_changed(change: hooks.RequestChanged) -> None:
    """`hooks.request_changed_on_commit` receiver (after the change committed): note on the ticket, then sync its
    state, opening it first if the change asks for it."""
    if not tickets_enabled():
        return
    fresh = ProcurementRequest.objects.filter(pk=change.request_id).first()
    if fresh is None:
        return
    if change.open_ticket and not fresh.ticket_ref and fresh.state in OPEN_REQUEST_STATES:
        _safely("open", lambda: ticket_open(fresh))
        fresh.refresh_from_db()
    if change.note:
        _safely("note", lambda: ticket_note(fresh, change.note))
    _safely("sync", lambda: ticket_sync(change.request_id))


def tickets_resync() -> int:
    """Sweep: sync every request with a ticket that is not in the matching state. Returns how many moved."""
    if not tickets_enabled():
        return 0
    moved = 0
    for request in ProcurementRequest.objects.exclude(ticket_ref="").filter(is_open=True).iterator():
        ticket = ticket_for(request)
        if ticket is not None and ticket.state != TICKET_STATE_FOR[request.state]:
            _safely("resync", lambda request=request: ticket_sync(request.pk))
            moved += 1
    return moved


def provisioning_ticket_open(node_id: int, request_id: int) -> Ticket:
    """Open a provisioning ticket for a delivered node (state `new`: a technician starts it), link the node to
    the request's ticket, and note it on the request."""
    node = Node.objects.get(pk=node_id)
    request = ProcurementRequest.objects.get(pk=request_id)
    ticket = ticket_create(
        type_=procurement_setting("PROVISIONING_TICKET_TYPE"),
        title=f"Provision {node.hostname}",
        requester=None,
        description=f"Delivered on {request.reference} (PO {request.po_number}, {request.supplier}); serial "
        f"{node.serial}, {node.server_model}.",
        inputs={"node": node},
    )
    parent = ticket_for(request)
    if parent is not None:
        link_add(ticket=parent, obj=node, role=LinkRole.RELATED)
        ticket_note(request, f"{ticket.reference} opened to provision {node.hostname} ({node.serial})")
    return ticket


def provisioning_available() -> bool:
    return workflow_or_none(procurement_setting("PROVISIONING_TICKET_TYPE")) is not None


def register() -> None:
    """Connect procurement's hooks to tickets (WorkflowsConfig.ready)."""
    hooks.register_request_observer(on_request_changed)
    hooks.register_requests_resync(tickets_resync)
    hooks.provisioning_default_set(provisioning_ticket_open, available=provisioning_available)


__all__ = [
    "TICKET_STATE_FOR",
    "TICKET_TYPE",
    "on_request_changed",
    "provisioning_available",
    "provisioning_ticket_open",
    "register",
    "ticket_for",
    "ticket_note",
    "ticket_open",
    "ticket_sync",
    "tickets_enabled",
    "tickets_resync",
]
