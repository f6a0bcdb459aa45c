"""The procurement ticket type: a ticket that mirrors its request, takes the people's actions to the request,
and gets a provisioning ticket opened for every delivered server."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from cmdb import models as m
from integrations.procurement.inbound import event_record, event_run
from integrations.procurement.models import ProcurementRequest, RequestState
from integrations.procurement.services import requests as svc
from integrations.procurement.services.events import procurement_event_handle
from tests.factories.cmdb import UserFactory
from tests.integrations.procurement.procurement_helpers import event_body, request_make
from workflows import engine
from workflows.definitions.procurement import WORKFLOW
from workflows.glue.procurement import TICKET_STATE_FOR, ticket_for, ticket_sync
from workflows.models import Ticket
from workflows.registry import workflow_problems

pytestmark = pytest.mark.django_db


@pytest.fixture
def committing(django_capture_on_commit_callbacks):
    """Run a call, then its on-commit work (ticket sync, tasks, steps) and whatever that registers."""

    def run(fn, *args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return fn(*args, **kwargs)

    return run


def play(committing, event_type: str, data: dict) -> None:
    def go() -> None:
        row, _ = event_record(channel="procurement", source="procurement", event=event_body(event_type, data))
        event_run(row.pk, procurement_event_handle)

    committing(go)


def timeline(ticket: Ticket) -> list[str]:
    return list(ticket.timeline.order_by("at", "id").values_list("message", flat=True))


def test_the_graph_is_sound_and_mirrors_every_request_state():
    assert workflow_problems(WORKFLOW) == []
    assert set(TICKET_STATE_FOR) == set(RequestState.values)
    assert set(TICKET_STATE_FOR.values()) <= set(WORKFLOW.states.values)


def test_a_request_is_followed_by_its_ticket_from_submit_to_closed(site, approvers, committing):
    req = request_make(site=site, requester=approvers["requester"], servers=2, cards=0)
    committing(svc.request_submit, request=req)
    req.refresh_from_db()
    ticket = ticket_for(req)
    assert ticket is not None and ticket.type == "procurement" and ticket.state == "awaiting_approval"
    assert req.correlation_id == ticket.correlation_id and ticket.data["request_id"] == req.pk
    assert ticket.watchers.filter(pk=approvers["requester"].pk).exists()
    committing(svc.request_approve, request=req, approver=approvers["lead"], comment="fine")
    ticket.refresh_from_db()
    req.refresh_from_db()
    assert (req.state, req.po_number, ticket.state) == (RequestState.ORDERED, "PO-1001", "ordered")
    line = req.lines.get()
    play(
        committing,
        "shipment.delivered",
        {
            "po_number": "PO-1001",
            "shipment_id": "S1",
            "site": "sh1",
            "lines": [{"line_ref": line.line_ref, "serials": ["SRV-1"]}],
        },
    )
    ticket.refresh_from_db()
    assert ticket.state == "receiving"
    play(
        committing,
        "shipment.delivered",
        {
            "po_number": "PO-1001",
            "shipment_id": "S2",
            "site": "sh1",
            "lines": [{"line_ref": line.line_ref, "serials": ["SRV-2"]}],
        },
    )
    play(committing, "invoice.posted", {"po_number": "PO-1001", "invoice_number": "INV-7", "amount": "20000.00"})
    ticket.refresh_from_db()
    assert (ticket.state, ticket.is_open) == ("closed", False)
    messages = timeline(ticket)
    for expected in (
        "submitted (round 1)",
        "lead approved",
        "PO PO-1001 created",
        "S1 delivered to sh1",
        "Received and invoiced",
    ):
        assert any(expected in msg for msg in messages), (expected, messages)
    # The delivered nodes' change records carry the ticket's correlation id (the ticket page merges them in).
    node = m.Node.objects.get(serial="SRV-1")
    assert m.ChangeRecord.objects.filter(object_id=node.pk, correlation_id=ticket.correlation_id).exists()


def test_delivered_servers_get_provisioning_tickets(approved_request, committing):
    assert committing(ticket_sync, approved_request.pk, open_ticket=True) == "ordered"
    line = next(ln for ln in approved_request.lines.all() if ln.server_model_id)
    play(
        committing,
        "shipment.delivered",
        {
            "po_number": approved_request.po_number,
            "shipment_id": "S1",
            "site": "sh1",
            "lines": [{"line_ref": line.line_ref, "serials": ["SRV-A", "SRV-B"]}],
        },
    )
    provisioning = Ticket.objects.filter(type="provisioning").order_by("id")
    assert [t.title for t in provisioning] == ["Provision sh1-srv-a", "Provision sh1-srv-b"]
    assert {t.state for t in provisioning} == {"new"}
    assert provisioning[0].links.get(role="subject").node.serial == "SRV-A"
    parent = ticket_for(ProcurementRequest.objects.get(pk=approved_request.pk))
    assert set(parent.links.filter(role="related").values_list("node__serial", flat=True)) == {"SRV-A", "SRV-B"}
    assert any("opened to provision sh1-srv-a" in msg for msg in timeline(parent))


def test_people_act_on_the_ticket_and_the_request_follows(site, approvers, committing):
    req = request_make(site=site, requester=approvers["requester"])
    owner = UserFactory(username="buyer")
    owner.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["add_ticket", "procurement_submit", "view_ticket"], content_type__app_label="workflows"
        )
    )
    owner = type(owner).objects.get(pk=owner.pk)
    ticket = committing(
        engine.ticket_create, type_="procurement", title="expansion", requester=owner, inputs={"request": req.reference}
    )
    assert ticket.state == "draft" and ProcurementRequest.objects.get(pk=req.pk).ticket_ref == f"ticket:{ticket.pk}"
    committing(engine.transition_apply, ticket=ticket, name="submit", actor=owner)
    req.refresh_from_db()
    ticket.refresh_from_db()
    assert (req.state, ticket.state) == (RequestState.SUBMITTED, "awaiting_approval")
    committing(svc.request_reject, request=req, approver=approvers["lead"], comment="too early")
    ticket.refresh_from_db()
    assert ticket.state == "rejected"
    committing(engine.transition_apply, ticket=ticket, name="revise", actor=owner)
    req.refresh_from_db()
    assert (req.state, req.is_open) == (RequestState.DRAFT, True)
    committing(
        engine.transition_apply,
        ticket=Ticket.objects.get(pk=ticket.pk),
        name="cancel",
        actor=owner,
        data={"cancel_reason": "not this quarter"},
    )
    req.refresh_from_db()
    assert req.state == RequestState.CANCELLED and "not this quarter" in req.notes


def test_a_second_ticket_for_the_same_request_is_refused(site, approvers, committing):
    req = request_make(site=site, requester=approvers["requester"])
    committing(svc.request_submit, request=req)
    with pytest.raises(engine.GuardError):
        engine.ticket_create(type_="procurement", title="again", requester=None, inputs={"request": req.reference})


def test_a_po_cancelled_by_procurement_cancels_the_ticket(approved_request, committing):
    committing(ticket_sync, approved_request.pk, open_ticket=True)
    play(committing, "po.cancelled", {"po_number": approved_request.po_number, "reason": "supplier out of stock"})
    ticket = ticket_for(ProcurementRequest.objects.get(pk=approved_request.pk))
    assert ticket.state == "cancelled"
    assert any("supplier out of stock" in msg for msg in timeline(ticket))
