"""One guarded writer for node status and cordon: a node held by an open repair cannot be put back to work by
the API or the admin; an override needs the permission, is recorded on the ticket and pauses it; the repair's
own steps still resume the node; cordons from the API reach the scheduler."""

# The workflow fixtures are imported into this module; their names are test parameters here too.
# ruff: noqa: F811

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import PermissionDenied
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from cmdb import models as m
from cmdb.holds import HeldError
from cmdb.permissions import grant_scope
from cmdb.services.nodes import node_cordon, node_uncordon
from gpuops.context import ChangeSource, change_context
from tests.factories.cmdb import NodeFactory, SiteFactory, UserFactory
from tests.workflows.conftest import (  # noqa: F401  (fixtures)
    eager,
    fast_passwords,
    fleet,
    groups,
    notifier,
    scheduler,
    tech,
    wf,
)
from tests.workflows.helpers import open_by_hook, take, ticket_fresh
from workflows.models import TimelineEntry

NODE_URL = "/api/cmdb/nodes/{}/"
PERMS = [
    "view_node",
    "view_accelerator",
    "change_accelerator",
    "view_stocklocation",
    "view_site",
    "view_rack",
    "view_cluster",
    "view_tenant",
    "view_servermodel",
]


def _client(user) -> APIClient:
    token, _ = Token.objects.get_or_create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def ops(db):
    """A site operator with change rights on every node, but not the override permission."""
    user = UserFactory(username="ops", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=[*PERMS, "change_node"]))
    return user


@pytest.fixture
def forcer(db):
    """An ops lead who may override holds."""
    user = UserFactory(username="forcer", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=[*PERMS, "change_node", "override_hold"]))
    return user


@pytest.fixture
def repair(wf, fleet):
    """An open repair that drained fleet.node (maintenance, cordoned by the ticket)."""
    ticket = open_by_hook(wf, fleet)
    node = m.Node.objects.get(pk=fleet.node.pk)
    assert ticket.state == "diagnosing" and node.status == "maintenance" and node.is_cordoned
    return ticket


def _node_row(node: m.Node) -> tuple:
    node = m.Node.objects.get(pk=node.pk)
    return node.status, node.is_cordoned, node.cordon_reason, node.version


# --- the API -----------------------------------------------------------------------------------------------------


def test_api_uncordon_of_a_node_held_by_a_repair_is_409_naming_the_ticket(wf, fleet, repair, ops):
    before = _node_row(fleet.node)
    response = _client(ops).post(NODE_URL.format(fleet.node.pk) + "uncordon/", format="json")
    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert error["code"] == "held" and error["held_by"] == repair.reference
    assert repair.reference in error["message"]
    assert _node_row(fleet.node) == before
    assert wf.scheduler.calls["resume"] == 0


@pytest.mark.parametrize(
    "body", [{"status": "active"}, {"is_cordoned": False}, {"status": "active", "is_cordoned": False}]
)
def test_api_patch_back_to_service_on_a_held_node_is_409_and_writes_nothing(wf, fleet, repair, ops, body):
    before = _node_row(fleet.node)
    records = m.ChangeRecord.objects.count()
    response = _client(ops).patch(NODE_URL.format(fleet.node.pk), body, format="json")
    assert response.status_code == 409, response.content
    assert response.json()["error"]["held_by"] == repair.reference
    assert _node_row(fleet.node) == before
    assert m.ChangeRecord.objects.count() == records
    assert not ticket_fresh(repair).is_paused


def test_api_move_of_a_held_node_is_409(fleet, repair, ops):
    response = _client(ops).patch(NODE_URL.format(fleet.node.pk), {"position": 20}, format="json")
    assert response.status_code == 409, response.content
    assert m.Node.objects.get(pk=fleet.node.pk).position == 1


def test_api_patch_of_other_fields_on_a_held_node_still_works(fleet, repair, ops):
    response = _client(ops).patch(NODE_URL.format(fleet.node.pk), {"asset_tag": "AT-1"}, format="json")
    assert response.status_code == 200, response.content
    assert m.Node.objects.get(pk=fleet.node.pk).asset_tag == "AT-1"


def test_api_override_without_the_permission_is_403(fleet, repair, ops):
    before = _node_row(fleet.node)
    response = _client(ops).post(NODE_URL.format(fleet.node.pk) + "uncordon/?override_hold=1", format="json")
    assert response.status_code == 403, response.content
    assert _node_row(fleet.node) == before
    assert not ticket_fresh(repair).is_paused


def test_api_override_is_recorded_on_the_ticket_which_pauses(wf, fleet, repair, forcer):
    with wf.committing():
        response = _client(forcer).patch(
            NODE_URL.format(fleet.node.pk) + "?force=1", {"status": "active", "is_cordoned": False}, format="json"
        )
    assert response.status_code == 200, response.content
    node = m.Node.objects.get(pk=fleet.node.pk)
    assert node.status == "active" and not node.is_cordoned
    ticket = ticket_fresh(repair)
    assert ticket.is_paused
    overrides = TimelineEntry.objects.filter(ticket=ticket, data__override_hold=True)
    assert {e.data["what"] for e in overrides} == {"set status active on", "uncordon"}
    assert all(e.actor == forcer and "forcer" in e.message for e in overrides)
    assert TimelineEntry.objects.filter(ticket=ticket, message="Paused").count() == 1
    assert wf.scheduler.calls["resume"] == 1  # the uncordon reached the scheduler


def test_api_cordon_and_uncordon_reach_the_scheduler_once_each(wf, fleet, ops):
    with wf.committing():
        response = _client(ops).post(NODE_URL.format(fleet.node.pk) + "cordon/", {"reason": "bad fan"}, format="json")
    assert response.status_code == 200, response.content
    assert wf.scheduler.log == [("drain", fleet.node.hostname, "bad fan")]
    with wf.committing():
        response = _client(ops).patch(NODE_URL.format(fleet.node.pk), {"is_cordoned": False}, format="json")
    assert response.status_code == 200, response.content
    assert wf.scheduler.log[-1] == ("resume", fleet.node.hostname, "")
    assert wf.scheduler.calls == {"drain": 1, "resume": 1}


# --- the holder itself, other workflows, permissions -------------------------------------------------------------


def test_the_repairs_own_steps_still_resume_the_node(wf, fleet, repair, tech):
    grant_scope(scope_obj=fleet.site, perms=["change_scope"], users=[tech])
    take(wf, repair, "diagnose_reseat", tech, note="reseated the card")
    # The repair verifies and resumes the node through its own steps: its hold does not stop it.
    from tests.workflows.helpers import agent_reports_healthy

    agent_reports_healthy(fleet.failed)
    wf.wake()
    node = m.Node.objects.get(pk=fleet.node.pk)
    assert not ticket_fresh(repair).is_open
    assert node.status == "active" and not node.is_cordoned
    assert wf.scheduler.calls["resume"] == 1  # by the step itself; the service sent no second resume


def test_another_tickets_step_cannot_uncordon_the_held_node(fleet, repair):
    with change_context(source=ChangeSource.WORKFLOW, correlation_id="another-ticket"), pytest.raises(HeldError):
        node_uncordon(node=fleet.node)
    assert m.Node.objects.get(pk=fleet.node.pk).is_cordoned


def test_a_person_without_scope_on_the_node_is_refused_by_the_writer(db):
    site_a, site_b = SiteFactory(code="pa"), SiteFactory(code="pb")
    node_b = NodeFactory(site=site_b, hostname="pb-001")
    tech_a = UserFactory(username="tech-a")
    grant_scope(scope_obj=site_a, perms=["change_scope"], users=[tech_a])
    with change_context(actor=tech_a, source=ChangeSource.API), pytest.raises(PermissionDenied):
        node_cordon(node=node_b, reason="not mine")
    assert not m.Node.objects.get(pk=node_b.pk).is_cordoned


def test_a_workflow_step_may_only_touch_nodes_linked_to_its_ticket(fleet, repair):
    other = NodeFactory(site=fleet.site, hostname="sh9-other")
    with (
        change_context(source=ChangeSource.WORKFLOW, correlation_id=repair.correlation_id),
        pytest.raises(PermissionDenied),
    ):
        node_cordon(node=other, reason=f"{repair.reference}: not its node")
    assert not m.Node.objects.get(pk=other.pk).is_cordoned


# --- the admin ---------------------------------------------------------------------------------------------------


def test_admin_bulk_mark_active_on_a_held_node_shows_an_error_and_writes_nothing(client, fleet, repair, ops):
    client.force_login(ops)
    before = _node_row(fleet.node)
    response = client.post(
        "/admin/cmdb/node/", {"action": "mark_active", "_selected_action": [fleet.node.pk]}, follow=True
    )
    assert response.status_code == 200
    shown = [str(msg) for msg in response.context["messages"]]
    assert any(repair.reference in msg and "held" in msg for msg in shown), shown
    assert _node_row(fleet.node) == before


def _admin_form_data(client, node: m.Node) -> dict:
    page = client.get(f"/admin/cmdb/node/{node.pk}/change/")
    form = page.context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None and not isinstance(v, list)}
    data.update({"tags": [], "labels": "{}", "locked_fields": "[]"})
    for inline in page.context["inline_admin_formsets"]:
        fs = inline.formset
        data.update({f"{fs.prefix}-TOTAL_FORMS": 0, f"{fs.prefix}-INITIAL_FORMS": 0})
    return {k: v for k, v in data.items() if k != "is_cordoned"}  # an unticked checkbox is absent


def test_admin_form_uncordon_of_a_held_node_is_a_form_error(client, fleet, repair, ops):
    client.force_login(ops)
    before = _node_row(fleet.node)
    data = _admin_form_data(client, fleet.node)
    data.update({"status": "active", "cordon_reason": ""})
    response = client.post(f"/admin/cmdb/node/{fleet.node.pk}/change/", data)
    assert response.status_code == 200  # the form again, with the error
    assert repair.reference in str(response.context["adminform"].form.non_field_errors())
    assert "override_hold" not in response.context["adminform"].form.fields
    assert _node_row(fleet.node) == before


def test_admin_form_override_is_recorded_and_pauses_the_ticket(wf, client, fleet, repair, forcer):
    client.force_login(forcer)
    data = _admin_form_data(client, fleet.node)
    data.update({"status": "active", "cordon_reason": "", "override_hold": "on"})
    with wf.committing():
        response = client.post(f"/admin/cmdb/node/{fleet.node.pk}/change/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else response
    node = m.Node.objects.get(pk=fleet.node.pk)
    assert node.status == "active" and not node.is_cordoned
    ticket = ticket_fresh(repair)
    assert ticket.is_paused
    assert TimelineEntry.objects.filter(ticket=ticket, data__override_hold=True, data__source="admin").count() == 2
    record = m.ChangeRecord.objects.filter(object_id=node.pk, source="admin").latest("id")
    assert record.actor == forcer
    assert wf.scheduler.calls["resume"] == 1


# --- card placement ----------------------------------------------------------------------------------------------


def test_api_cannot_take_a_card_out_of_a_node_held_by_a_repair(fleet, repair, ops):
    card = fleet.cards[0]
    response = _client(ops).patch(
        f"/api/cmdb/accelerators/{card.pk}/", {"stock_location": fleet.warehouse.pk}, format="json"
    )
    assert response.status_code == 409, response.content
    assert response.json()["error"]["held_by"] == repair.reference
    card.refresh_from_db()
    assert card.node_id == fleet.node.pk and card.placements.filter(ended_at__isnull=True).count() <= 1


def test_api_bulk_move_of_a_card_in_a_held_node_is_409_and_moves_nothing(fleet, repair, ops):
    spare = fleet.spare("SP-BULK")
    rows = [
        {"id": spare.pk, "stock_location": fleet.warehouse.pk},
        {"id": fleet.cards[1].pk, "stock_location": fleet.warehouse.pk},
    ]
    response = _client(ops).patch("/api/cmdb/accelerators/", rows, format="json")
    assert response.status_code == 409, response.content
    assert m.Accelerator.objects.get(pk=fleet.cards[1].pk).node_id == fleet.node.pk
