"""Procurement: a ticket that follows one procurement request from draft to closed.

    draft --submit (lines, an approval rule covering the amount)--> awaiting_approval [submit_request]
    awaiting_approval --approved (every level of the chain)--> ordering --ordered (PO created)--> ordered
    awaiting_approval --rejected--> rejected --revise--> draft [reopen_request]
    ordering --retry_order--> ordering [retry_order: place the PO again, same idempotency key]
    ordering / ordered --receiving (part delivered)--> receiving --received (all lines)--> received
    ordering / ordered / receiving --received--> received --closed (invoiced, no open discrepancy)--> closed
    draft / awaiting_approval / rejected --cancel--> cancelled [cancel_request]
    ordering / ordered / receiving --cancelled (PO cancelled by procurement)--> cancelled

The request (integrations.procurement.models.ProcurementRequest) is the record; this ticket is how people
follow and act on it. System transitions mirror the request's state (integrations.procurement.tickets
.ticket_sync): the approval chain is chosen by amount from the ApprovalRule table (data), so votes are cast on
the request (admin action "Approve (my vote)" or POST /api/integrations/procurement/requests/<id>/approve/),
and every vote, PO change, delivery and discrepancy lands on this ticket's timeline. Delivered servers are
linked to the ticket and get a provisioning ticket each. The ticket's correlation id becomes the request's,
so the CMDB changes of its deliveries appear on the timeline.

Tickets are opened by gpuops when a request is submitted, or by hand with the request's reference.
Ticket data: request_id, request_ref (create).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from django.db import models

from ..declarations import Field, PlannedChange, Transition, Workflow, step
from ..engine import GuardError
from ..models import Ticket
from ..steps import Done, Failed, StepContext, StepOutcome


class ProcurementState(models.TextChoices):
    DRAFT = "draft", "Draft"
    AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"
    REJECTED = "rejected", "Rejected"
    ORDERING = "ordering", "Placing the PO"
    ORDERED = "ordered", "Ordered (with the supplier)"
    RECEIVING = "receiving", "Partially received"
    RECEIVED = "received", "Received"
    CLOSED = "closed", "Closed"
    CANCELLED = "cancelled", "Cancelled"


S = ProcurementState


def _request(ticket: Ticket):
    from integrations.procurement.models import ProcurementRequest

    return ProcurementRequest.objects.filter(pk=ticket.data.get("request_id")).first()


# --- create -------------------------------------------------------------------------------------------------------


def _request_pk(ref: Any) -> int | None:
    text = str(ref or "").strip().upper().removeprefix("PR-")
    return int(text) if text.isdigit() else None


def _dedup(values: Mapping[str, Any]) -> str:
    pk = _request_pk(values.get("request"))
    return f"procurement:request:{pk}" if pk else ""


def _on_create(ticket: Ticket, values: Mapping[str, Any]) -> None:
    """Link the request: its ticket reference, and the ticket's correlation id for its CMDB changes."""
    from integrations.procurement.tickets import request_ticket_link

    pk = _request_pk(values.get("request"))
    if pk is None or not request_ticket_link(request_id=pk, ticket=ticket):
        raise GuardError(
            f"No procurement request {values.get('request')!r} without a ticket.",
            field_errors={"request": "Unknown request, or it has a ticket already."},
        )


def plan_preview(ticket: Ticket) -> list[PlannedChange]:
    """What approvers buy: one line per request line, with the amount."""
    req = _request(ticket)
    if req is None:
        return []
    url = f"/admin/procurement/procurementrequest/{req.pk}/change/"
    changes = [
        PlannedChange(
            req.reference,
            "order",
            "",
            f"{line.quantity} x {line.item} at {line.site.code} = {line.amount:,.2f} {req.currency}",
            url,
        )
        for line in req.lines.select_related("site", "server_model", "accelerator_model", "part_model")
    ]
    changes.append(
        PlannedChange(
            req.reference, "total", "", f"{req.total_amount:,.2f} {req.currency} (budget {req.budget_code})", url
        )
    )
    return changes


# --- guards -------------------------------------------------------------------------------------------------------


def chain_exists(ticket: Ticket, values: Mapping[str, Any]) -> list[str]:
    """A request is submitted with lines and an approval rule covering its amount."""
    from integrations.procurement.services.requests import approval_rules_for

    req = _request(ticket)
    if req is None:
        return ["The procurement request no longer exists."]
    if not req.lines.exists():
        return [f"{req.reference} has no lines."]
    if not approval_rules_for(req.total_amount):
        return [f"No approval rule covers {req.total_amount:,.2f} {req.currency}."]
    return []


def no_po_yet(ticket: Ticket, values: Mapping[str, Any]) -> list[str]:
    req = _request(ticket)
    return (
        [f"{req.reference} has PO {req.po_number}; it is cancelled in the procurement system."]
        if (req and req.po_number)
        else []
    )


# --- steps (each calls one procurement service, once) -------------------------------------------------------------


def _call(ctx: StepContext, name: str, fn: Any) -> StepOutcome:
    from django.core.exceptions import ValidationError

    req = _request(ctx.ticket)
    if req is None:
        return Failed(reason="the procurement request no longer exists")
    try:
        ctx.effect(name, lambda: fn(req) and None)
    except ValidationError as exc:
        return Failed(reason="; ".join(exc.messages))
    return Done(message=f"{req.reference}: {name.replace('_', ' ')}")


@step("submit_request", label="Submit the request into its approval chain", time_limit_s=60)
def submit_request(ctx: StepContext) -> StepOutcome:
    """Fix the approval chain from the amount (request_submit)."""
    from integrations.procurement.services.requests import request_submit

    return _call(ctx, "submit", lambda req: request_submit(request=req, actor=ctx.run.actor))


@step("reopen_request", label="Reopen the request as a draft", time_limit_s=60)
def reopen_request(ctx: StepContext) -> StepOutcome:
    from integrations.procurement.services.requests import request_revise

    return _call(ctx, "reopen", lambda req: request_revise(request=req, actor=ctx.run.actor))


@step("cancel_request", label="Cancel the request", time_limit_s=60)
def cancel_request(ctx: StepContext) -> StepOutcome:
    from integrations.procurement.services.requests import request_cancel

    reason = ctx.ticket.data.get("cancel_reason") or "cancelled on the ticket"
    return _call(ctx, "cancel", lambda req: request_cancel(request=req, actor=ctx.run.actor, reason=reason))


@step("retry_order", label="Place the PO again", time_limit_s=60)
def retry_order(ctx: StepContext) -> StepOutcome:
    """Re-enqueue the PO placement (same idempotency key: the supplier never gets two orders)."""
    from integrations.procurement.tickets import order_retry

    return _call(ctx, f"retry_order_{ctx.run.sequence}", lambda req: order_retry(request=req))


# --- the graph ----------------------------------------------------------------------------------------------------

NOTE = Field("note", "Note", kind="textarea", required=False, store=False)
AFTER_APPROVAL = frozenset({S.ORDERING, S.ORDERED, S.RECEIVING})

TRANSITIONS = (
    Transition(
        "submit",
        "Submit for approval",
        frozenset({S.DRAFT}),
        S.AWAITING_APPROVAL,
        "procurement_submit",
        guards=(chain_exists,),
        step="submit_request",
        allow_requester=True,
        fields=(NOTE,),
    ),
    Transition(
        "revise",
        "Revise",
        frozenset({S.REJECTED}),
        S.DRAFT,
        "procurement_submit",
        step="reopen_request",
        allow_requester=True,
        style="secondary",
        fields=(NOTE,),
    ),
    Transition(
        "cancel",
        "Cancel",
        frozenset({S.DRAFT, S.AWAITING_APPROVAL, S.REJECTED}),
        S.CANCELLED,
        "procurement_submit",
        guards=(no_po_yet,),
        step="cancel_request",
        allow_requester=True,
        allowed_when_paused=True,
        style="danger",
        fields=(Field("cancel_reason", "Why cancel", kind="textarea"),),
    ),
    Transition(
        "retry_order",
        "Place the PO again",
        frozenset({S.ORDERING}),
        S.ORDERING,
        "procurement_operate",
        step="retry_order",
        style="secondary",
        fields=(NOTE,),
    ),
    # System transitions: the request's state, mirrored (integrations.procurement.tickets.ticket_sync).
    Transition("submitted", "Submitted", frozenset({S.DRAFT, S.REJECTED}), S.AWAITING_APPROVAL, None),
    Transition("reopened", "Back to draft", frozenset({S.REJECTED, S.AWAITING_APPROVAL}), S.DRAFT, None),
    Transition("approved", "Approved", frozenset({S.AWAITING_APPROVAL}), S.ORDERING, None),
    Transition("rejected", "Rejected", frozenset({S.AWAITING_APPROVAL}), S.REJECTED, None),
    Transition("ordered", "PO created", frozenset({S.AWAITING_APPROVAL, S.ORDERING}), S.ORDERED, None),
    Transition("receiving", "Partly delivered", frozenset({S.ORDERING, S.ORDERED}), S.RECEIVING, None),
    Transition("received", "Delivered", AFTER_APPROVAL, S.RECEIVED, None),
    Transition("closed", "Received and invoiced", AFTER_APPROVAL | {S.RECEIVED}, S.CLOSED, None),
    Transition(
        "cancelled",
        "Cancelled",
        frozenset({S.DRAFT, S.AWAITING_APPROVAL, S.REJECTED}) | AFTER_APPROVAL,
        S.CANCELLED,
        None,
    ),
)


def _group() -> str:
    from integrations.procurement.conf import procurement_setting

    return procurement_setting("TICKET_ASSIGNEE_GROUP")


WORKFLOW = Workflow(
    type="procurement",
    label="Procurement",
    prefix="PRQ",
    states=ProcurementState,
    initial=S.DRAFT,
    terminal=frozenset({S.CLOSED, S.CANCELLED}),
    transitions=TRANSITIONS,
    steps=(submit_request, reopen_request, cancel_request, retry_order),
    create_fields=(
        Field(
            "request",
            "Procurement request (PR-<id>)",
            max_length=32,
            help_text="Create the request (lines, budget code) in the admin or the API first.",
        ),
    ),
    waiting_states=frozenset({S.AWAITING_APPROVAL, S.ORDERED, S.RECEIVING, S.REJECTED}),
    editable_states=frozenset({S.DRAFT, S.REJECTED}),
    default_group=_group,
    dedup=_dedup,
    on_create=_on_create,
    plan_preview=plan_preview,
    sla={
        "critical": dt.timedelta(days=3),
        "high": dt.timedelta(days=14),
        "normal": dt.timedelta(days=45),
        "low": dt.timedelta(days=90),
    },
    description=__doc__ or "",
)
