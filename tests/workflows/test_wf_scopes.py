"""Groups give roles, scopes give where: a dc-technicians member of site A neither sees nor moves site B's work,
and opening a ticket needs change rights on every object it touches."""

from __future__ import annotations

import pytest

from cmdb import models as m
from cmdb.permissions import grant_scope, restrict
from tests.factories.cmdb import FabricFactory, NodeFactory, SiteFactory, SwitchFactory, UserFactory
from tests.workflows.helpers import open_by_hook
from workflows.engine import ForbiddenError, comment_add, ticket_create, ticket_pause
from workflows.models import Ticket
from workflows.permissions import can_act, can_view, tickets_visible
from workflows.selectors import ticket_actions

pytestmark = pytest.mark.django_db


@pytest.fixture
def tech_a(groups):
    """A dc-technicians member who works at site 'sa' only (the fleet is at 'sh9': site B for them)."""
    user = UserFactory(username="tech-a")
    user.groups.add(groups["dc-technicians"])
    site_a = SiteFactory(code="sa")
    grant_scope(scope_obj=site_a, perms=["change_scope"], users=[user])
    NodeFactory(hostname="sa-node-1", site=site_a)
    return user


def test_technicians_group_holds_no_global_view_of_scoped_models(tech_a, fleet):
    assert not tech_a.has_perm("cmdb.view_node") and not tech_a.has_perm("cmdb.view_accelerator")
    assert list(restrict(m.Node.objects.all(), tech_a).values_list("hostname", flat=True)) == ["sa-node-1"]
    assert not restrict(m.Accelerator.objects.filter(node=fleet.node), tech_a).exists()


def test_site_a_technician_cannot_see_pause_or_comment_on_a_site_b_ticket(wf, fleet, tech_a):
    ticket = open_by_hook(wf, fleet)  # assigned to dc-technicians, which once let every member see it
    assert ticket.assignee_group.name == "dc-technicians"
    assert not tickets_visible(tech_a).filter(pk=ticket.pk).exists()
    assert not can_view(tech_a, ticket)
    actions = ticket_actions(tech_a, ticket)
    assert not (actions.transitions or actions.can_operate or actions.can_comment)
    with pytest.raises(ForbiddenError):
        ticket_pause(ticket=ticket, actor=tech_a, reason="not mine")
    with pytest.raises(ForbiddenError):
        comment_add(ticket=ticket, actor=tech_a, body="hello")
    assert not Ticket.objects.get(pk=ticket.pk).is_paused


def test_view_only_scope_may_comment_but_not_move_the_ticket(wf, fleet, groups):
    watcher = UserFactory(username="viewer")
    watcher.groups.add(groups["dc-technicians"])
    grant_scope(scope_obj=fleet.site, perms=["view_scope"], users=[watcher])
    ticket = open_by_hook(wf, fleet)
    assert can_view(watcher, ticket) and not can_act(watcher, ticket)
    actions = ticket_actions(watcher, ticket)
    assert actions.can_comment and not actions.transitions and not actions.can_operate
    comment_add(ticket=ticket, actor=watcher, body="seen")


def test_opening_a_repair_on_a_healthy_card_of_another_site_is_refused(wf, fleet, tech_a):
    healthy = fleet.cards[0]
    with pytest.raises(ForbiddenError, match="is healthy") as exc:
        ticket_create(type_="repair", title="drain it", requester=tech_a, inputs={"accelerator": healthy}, start=True)
    assert "change rights" in str(exc.value)
    assert not Ticket.objects.exists()
    assert m.Node.objects.get(pk=fleet.node.pk).status == "active"


def test_opening_a_repair_with_view_only_rights_is_refused(wf, fleet, groups):
    viewer = UserFactory(username="viewer2")
    viewer.groups.add(groups["dc-technicians"])
    grant_scope(scope_obj=fleet.site, perms=["view_scope"], users=[viewer])
    with pytest.raises(ForbiddenError, match="healthy"):
        ticket_create(type_="repair", title="x", requester=viewer, inputs={"accelerator": fleet.cards[1].serial})
    with pytest.raises(ForbiddenError, match="change rights"):
        ticket_create(type_="repair", title="x", requester=viewer, inputs={"accelerator": fleet.failed.serial})
    assert not Ticket.objects.exists()


def test_opening_a_cabling_ticket_on_another_sites_fabric_is_refused(wf, fleet, tech_a):
    fabric = FabricFactory(name="sh9-fab", site=fleet.site)
    SwitchFactory(name="sh9-leafx", site=fleet.site, fabric=fabric)
    with pytest.raises(ForbiddenError, match="change rights"):
        ticket_create(
            type_="cabling",
            title="recable",
            requester=tech_a,
            inputs={"fabric": "sh9-fab", "ports": "sh9-leafx:Ethernet1/1"},
        )
    assert not Ticket.objects.exists()


def test_site_b_technician_opens_a_repair_on_their_failed_card(wf, fleet, tech):
    ticket = wf.run(
        ticket_create, type_="repair", title="fix", requester=tech, inputs={"accelerator": fleet.failed.serial}
    )
    assert ticket.pk and can_act(tech, ticket)
