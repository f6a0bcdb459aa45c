"""Decommission: plans before submit, N approvals without the requester, rejection, drain to decommissioned."""

from __future__ import annotations

import pytest

from cmdb import models as m
from tests.workflows.helpers import take, ticket_fresh
from workflows.engine import (
    ForbiddenError,
    GuardError,
    NotAllowedError,
    approval_record,
    ticket_create,
    ticket_plans_update,
)
from workflows.models import Approval, Ticket

pytestmark = pytest.mark.django_db

PLAN = "1. drain via Slurm\n2. remove from sh9-train\n3. wipe NVMe (nvme format -s1)\n4. unrack, cards to stock"
ROLLBACK = "Before wipe: re-add to the cluster and resume. After wipe: reprovision from PXE."


def open_decommission(wf, fleet, requester, *, plans: bool = True) -> Ticket:
    ticket = wf.run(
        ticket_create,
        type_="decommission",
        title=f"Decommission {fleet.node}",
        requester=requester,
        inputs={"node": fleet.node.hostname},
        priority="normal",
    )
    if plans:
        ticket_plans_update(
            ticket=ticket,
            actor=requester,
            title=ticket.title,
            description="end of life",
            change_plan=PLAN,
            rollback_plan=ROLLBACK,
        )
    return ticket_fresh(ticket)


def approve(wf, ticket: Ticket, user, decision: str = "approved", comment: str = "") -> None:
    wf.run(approval_record, ticket=ticket_fresh(ticket), actor=user, decision=decision, comment=comment)


def test_decommission_end_to_end_cards_to_stock(wf, fleet, tech, approvers):
    ticket = open_decommission(wf, fleet, tech, plans=False)
    assert ticket.state == "draft" and ticket.site_id == fleet.site.pk and ticket.cluster_id == fleet.cluster.pk
    with pytest.raises(GuardError) as err:
        take(wf, ticket, "submit", tech)
    assert err.value.errors == [
        "Write the change plan before submitting.",
        "Write the rollback plan before submitting.",
    ]

    ticket_plans_update(
        ticket=ticket, actor=tech, title=ticket.title, description="", change_plan=PLAN, rollback_plan=ROLLBACK
    )
    ticket = take(wf, ticket, "submit", tech)
    assert ticket.state == "awaiting_approval" and ticket.approval_round == 1
    with pytest.raises(NotAllowedError, match="cannot be edited"):
        ticket_plans_update(ticket=ticket, actor=tech, title="x", description="", change_plan="", rollback_plan="")

    with pytest.raises(ForbiddenError, match="cannot approve their own"):
        approve(wf, ticket, tech)
    approve(wf, ticket, approvers[0], comment="capacity checked")
    assert ticket_fresh(ticket).state == "awaiting_approval"
    with pytest.raises(NotAllowedError, match="already decided"):
        approve(wf, ticket, approvers[0])

    # What the approver saw is kept with the approval: plans, objects, the planned diff.
    snapshot = Approval.objects.get(approver=approvers[0]).snapshot
    assert snapshot["change_plan"] == PLAN and snapshot["rollback_plan"] == ROLLBACK
    assert {
        "obj": "sh9-h100-0001",
        "field": "status",
        "before": "active",
        "after": "decommissioned",
        "url": f"/admin/cmdb/node/{fleet.node.pk}/change/",
    } in snapshot["planned_changes"]
    assert any(o["repr"] == "sh9-h100-0001" for o in snapshot["objects"])

    approve(wf, ticket, approvers[1])
    ticket = ticket_fresh(ticket)
    assert ticket.state == "awaiting_wipe"
    node = m.Node.objects.get(pk=fleet.node.pk)
    assert node.cluster_id is None and node.status == "maintenance" and node.is_cordoned
    assert wf.scheduler.calls["drain"] == 1 and wf.scheduler.calls["remove"] == 1

    ticket = take(wf, ticket, "confirm_wipe", tech, wipe_method="nist_purge", wipe_evidence="WIPE-2026-0042")
    assert ticket.state == "awaiting_unrack"
    ticket = take(wf, ticket, "confirm_unrack", tech, card_disposition="stock")
    assert ticket.state == "closed"
    node.refresh_from_db()
    assert node.status == "decommissioned" and node.rack_id is None and node.position is None
    assert not m.RackUnit.objects.filter(node=node).exists()
    cards = m.Accelerator.objects.filter(pk__in=[c.pk for c in fleet.cards])
    assert {c.lifecycle for c in cards} == {"in_stock"}
    assert {c.stock_location_id for c in cards} == {fleet.warehouse.pk}
    assert m.StockMovement.objects.filter(ticket_ref=f"ticket:{ticket.pk}", kind="return").count() == 8
    sources = set(m.ChangeRecord.objects.filter(correlation_id=ticket.correlation_id).values_list("source", flat=True))
    assert sources == {"workflow"}


def test_decommission_scrap_cards(wf, fleet, tech, approvers):
    ticket = open_decommission(wf, fleet, tech)
    take(wf, ticket, "submit", tech)
    approve(wf, ticket, approvers[0])
    approve(wf, ticket, approvers[1])
    take(wf, ticket, "confirm_wipe", tech, wipe_method="destroy", wipe_evidence="shredder receipt 77")
    ticket = take(wf, ticket, "confirm_unrack", tech, card_disposition="scrap")
    assert ticket.state == "closed"
    assert set(
        m.Accelerator.objects.filter(pk__in=[c.pk for c in fleet.cards]).values_list("lifecycle", flat=True)
    ) == {"scrapped"}


def test_rejection_needs_a_reason_and_resets_the_round(wf, fleet, tech, approvers):
    ticket = open_decommission(wf, fleet, tech)
    take(wf, ticket, "submit", tech)
    approve(wf, ticket, approvers[0])
    with pytest.raises(GuardError, match="why"):
        approve(wf, ticket, approvers[1], decision="rejected")
    approve(wf, ticket, approvers[1], decision="rejected", comment="cluster below capacity floor this week")
    ticket = ticket_fresh(ticket)
    assert ticket.state == "rejected"
    assert m.Node.objects.get(pk=fleet.node.pk).status == "active"  # nothing moved
    assert wf.scheduler.calls["drain"] == 0

    take(wf, ticket, "revise", tech)
    ticket = take(wf, ticket, "submit", tech)
    assert ticket.approval_round == 2
    approve(wf, ticket, approvers[2])
    # approver0's vote was in round 1: one approval in round 2 is not enough.
    assert ticket_fresh(ticket).state == "awaiting_approval"
    approve(wf, ticket, approvers[0])
    assert ticket_fresh(ticket).state == "awaiting_wipe"


def test_users_without_the_approval_permission_cannot_approve(wf, fleet, tech, lead, groups):
    from cmdb.permissions import grant_scope
    from tests.factories.cmdb import UserFactory

    ticket = open_decommission(wf, fleet, tech)
    take(wf, ticket, "submit", tech)
    other_tech = UserFactory(username="tech2")
    other_tech.groups.add(groups["dc-technicians"])
    grant_scope(scope_obj=fleet.site, perms=["change_scope"], users=[other_tech])  # sees it, may not approve
    with pytest.raises(ForbiddenError, match="decommission_approve"):
        approve(wf, ticket, other_tech)
    approve(wf, ticket, lead)  # ops leads may approve
    assert ticket_fresh(ticket).approvals.count() == 1


def test_cancel_before_approval(wf, fleet, tech):
    ticket = open_decommission(wf, fleet, tech)
    ticket = take(wf, ticket, "cancel", tech, cancel_reason="node reassigned to inference")
    assert ticket.state == "cancelled" and not ticket.is_open


def test_one_open_decommission_per_node(wf, fleet, tech):
    open_decommission(wf, fleet, tech)
    with pytest.raises(GuardError, match="already open"):
        open_decommission(wf, fleet, tech)
