"""Incidents: people move them; requesters close their own; visibility follows grants."""

from __future__ import annotations

import pytest

from tests.workflows.helpers import take
from workflows.engine import ForbiddenError, GuardError, comment_add, ticket_create, transition_apply
from workflows.models import StepRun
from workflows.permissions import can_view, tickets_visible
from workflows.services.postmortems import postmortem_save

pytestmark = pytest.mark.django_db


def test_incident_lifecycle(wf, fleet, tech, lead):
    ticket = wf.run(
        ticket_create,
        type_="incident",
        title="IB port flapping on leaf 3",
        requester=tech,
        inputs={"node": fleet.node.hostname},
        priority="high",
        description="sm logs show flaps",
    )
    assert ticket.state == "open" and ticket.reference == f"INC-{ticket.pk}"
    assert ticket.due_at is not None and ticket.links.filter(node=fleet.node).exists()
    ticket = take(wf, ticket, "start_work", lead)
    ticket = take(wf, ticket, "wait", lead, wait_reason="vendor TAC case 123")
    ticket = take(wf, ticket, "continue_work", lead)
    ticket = take(wf, ticket, "resolve", lead, resolution="replaced the AOC")
    assert ticket.data["resolution"] == "replaced the AOC"
    with pytest.raises(GuardError, match="missing a postmortem"):
        take(wf, ticket, "close", tech)
    postmortem_save(ticket=ticket, actor=tech, data={"summary": "AOC degraded", "root_cause": "cabling"})
    ticket = take(wf, ticket, "close", tech)  # the requester closes their own
    assert ticket.state == "closed" and not ticket.is_open
    # The one automated step: the jobs on the node before the incident (none in the fake scheduler).
    assert list(StepRun.objects.filter(ticket=ticket).values_list("step", "status")) == [("jobs_impact", "succeeded")]


def test_incident_node_is_optional(wf, tech):
    ticket = wf.run(ticket_create, type_="incident", title="Badge reader broken in hall 2", requester=tech)
    assert ticket.site_id is None and not ticket.links.exists()


def test_visibility_follows_grants(wf, fleet, tech, lead, outsider):
    ticket = wf.run(ticket_create, type_="incident", title="x", requester=tech)
    assert can_view(tech, ticket) and can_view(lead, ticket)
    assert not can_view(outsider, ticket)
    assert list(tickets_visible(outsider)) == []
    with pytest.raises(ForbiddenError):
        comment_add(ticket=ticket, actor=outsider, body="hello")
    with pytest.raises(ForbiddenError):
        transition_apply(ticket=ticket, name="cancel", actor=outsider, data={"cancel_reason": "x"})


def test_site_scope_grant_shows_the_sites_tickets(wf, fleet, tech, outsider):
    from cmdb.permissions import grant_scope

    ticket = wf.run(ticket_create, type_="incident", title="x", requester=tech, inputs={"node": fleet.node.hostname})
    assert not can_view(outsider, ticket)
    grant_scope(scope_obj=fleet.site, perms=["view_scope"], users=[outsider])
    assert can_view(outsider, ticket)


def test_opening_needs_permission_and_visible_objects(wf, fleet, outsider, tech):
    with pytest.raises(ForbiddenError):
        ticket_create(type_="incident", title="x", requester=outsider)
    with pytest.raises(GuardError, match="no node 'nope'"):
        ticket_create(type_="incident", title="x", requester=tech, inputs={"node": "nope"})
