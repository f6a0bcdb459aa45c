"""The ticket UI: login, list filters, create, detail with timeline and live partial, transitions, approvals."""

from __future__ import annotations

import pytest
from django.urls import reverse

from cmdb import models as m
from tests.workflows.helpers import open_by_hook, ticket_fresh
from workflows.engine import ticket_create, ticket_plans_update
from workflows.models import Ticket

pytestmark = pytest.mark.django_db


def test_login_required(client):
    response = client.get("/tickets/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_login_page_renders(client):
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    assert b'name="username"' in response.content and b"app.css" in response.content


def test_site_root_is_the_dashboard_behind_the_login(client):
    assert client.get("/")["Location"] == "/accounts/login/?next=/"


def test_list_shows_only_visible_tickets_and_filters(client, wf, fleet, tech, lead, outsider):
    repair = open_by_hook(wf, fleet)
    incident = ticket_create(type_="incident", title="Hall 2 PDU alarm", requester=lead)
    client.force_login(tech)
    page = client.get("/tickets/").content.decode()
    assert repair.reference in page and incident.reference not in page  # the incident is not the tech's
    client.force_login(lead)
    page = client.get("/tickets/").content.decode()
    assert repair.reference in page and incident.reference in page
    assert incident.reference not in client.get("/tickets/?type=repair").content.decode()
    assert repair.reference not in client.get("/tickets/?q=PDU").content.decode()
    assert repair.reference in client.get(f"/tickets/?q={repair.reference}").content.decode()
    assert repair.reference in client.get("/tickets/?node=h100-0001").content.decode()
    assert repair.reference not in client.get("/tickets/?node=nope").content.decode()
    assert repair.reference in client.get("/tickets/?site=sh9&state=diagnosing").content.decode()
    assert repair.reference not in client.get("/tickets/?status=closed").content.decode()
    mine = client.get("/tickets/?mine=1").content.decode()
    assert incident.reference in mine and repair.reference not in mine
    client.force_login(outsider)
    assert "No tickets match" in client.get("/tickets/").content.decode()


def test_list_query_count_does_not_grow_with_tickets(client, wf, fleet, lead, django_assert_max_num_queries):
    client.force_login(lead)
    for i in range(3):
        ticket_create(type_="incident", title=f"incident {i}", requester=lead, inputs={"node": fleet.node.hostname})
    with django_assert_max_num_queries(40) as few:
        client.get("/tickets/")
    for i in range(12):
        ticket_create(type_="incident", title=f"more {i}", requester=lead, inputs={"node": fleet.node.hostname})
    with django_assert_max_num_queries(len(few.captured_queries)):
        client.get("/tickets/")


def test_detail_shows_timeline_links_runs_and_actions(client, wf, fleet, tech):
    ticket = open_by_hook(wf, fleet)
    client.force_login(tech)
    page = client.get(f"/tickets/{ticket.pk}/").content.decode()
    assert "Diagnosing" in page
    assert f'href="/nodes/{fleet.node.hostname}/"' in page  # the console page, not the admin form
    assert "Health signal: xid 79" in page
    assert "Drain the node" in page and "Succeeded" in page
    assert 'data-transition="diagnose_replace"' in page and 'data-transition="cancel"' in page
    assert "CMDB change" in page and "maintenance" in page  # the node's status change, by correlation id
    assert "htmx" in page and "hx-get" not in page  # nothing running: no polling


def test_live_partial_polls_while_steps_run(client, wf, fleet, tech, settings, django_capture_on_commit_callbacks):
    from workflows.engine import transition_apply

    settings.GPUOPS_WORKFLOWS = {"REPAIR_AUTO_START": False}
    ticket = open_by_hook(wf, fleet)
    with django_capture_on_commit_callbacks(execute=False):
        transition_apply(ticket=ticket, name="start", actor=tech)
    client.force_login(tech)
    response = client.get(f"/tickets/{ticket.pk}/live/", HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200 and "<html" not in body
    assert f'hx-get="/tickets/{ticket.pk}/live/"' in body and 'hx-trigger="every 3s"' in body
    assert "Pending" in body


def test_transition_through_the_ui(client, wf, fleet, tech):
    ticket = open_by_hook(wf, fleet)
    client.force_login(tech)
    url = reverse("workflows:ticket-transition", args=[ticket.pk, "diagnose_reseat"])
    assert "Verify the card" in client.get(url).content.decode()
    with wf.committing():
        response = client.post(url, {"note": "reseated", "idempotency_key": "abc"})
    assert response.status_code == 302
    assert ticket_fresh(ticket).state == "verifying"
    page = client.get(f"/tickets/{ticket.pk}/").content.decode()
    assert "Verdict: reseated: Diagnosing → Verifying" in page and "reseated" in page
    # A double submit of the same form is recorded once.
    with wf.committing():
        client.post(url, {"note": "reseated", "idempotency_key": "abc"})
    assert ticket.transition_logs.filter(name="diagnose_reseat").count() == 1


def test_transition_errors_are_shown_on_the_form(client, wf, fleet, tech):
    fleet.spare()
    ticket = open_by_hook(wf, fleet)
    client.force_login(tech)
    with wf.committing():
        client.post(reverse("workflows:ticket-transition", args=[ticket.pk, "diagnose_replace"]), {})
    url = reverse("workflows:ticket-transition", args=[ticket.pk, "confirm_swap"])
    response = client.post(url, {"old_serial": "WRONG", "new_serial": "SPARE-0001"})
    assert response.status_code == 400
    assert "is not the failed card 1654SH900003" in response.content.decode()
    assert ticket_fresh(ticket).state == "awaiting_swap"


def test_system_transitions_and_outsiders_get_404(client, wf, fleet, tech, outsider):
    ticket = open_by_hook(wf, fleet)
    client.force_login(tech)
    assert client.get(reverse("workflows:ticket-transition", args=[ticket.pk, "spare_reserved"])).status_code == 404
    client.force_login(outsider)
    assert client.get(f"/tickets/{ticket.pk}/").status_code == 404
    assert client.post(reverse("workflows:ticket-comment", args=[ticket.pk]), {"body": "hi"}).status_code == 404


def test_create_repair_by_hand(client, wf, fleet, tech):
    client.force_login(tech)
    assert "Failed card (serial)" in client.get("/tickets/new/repair/").content.decode()
    with wf.committing():
        response = client.post(
            "/tickets/new/repair/",
            {"title": "GPU 3 throws XID 48", "accelerator": fleet.failed.serial, "priority": "high", "start": "on"},
        )
    assert response.status_code == 302
    ticket = Ticket.objects.get(type="repair")
    assert ticket.requester == tech and ticket.state == "diagnosing" and ticket.assignee_group.name == "dc-technicians"
    response = client.post("/tickets/new/repair/", {"title": "again", "accelerator": "NOPE", "priority": "high"})
    assert response.status_code == 400 and "no accelerator &#x27;NOPE&#x27;" in response.content.decode()


def test_approval_panel_shows_plan_and_diff_and_records_decisions(client, wf, fleet, tech, approvers):
    ticket = wf.run(
        ticket_create, type_="decommission", title="retire node", requester=tech, inputs={"node": fleet.node.hostname}
    )
    ticket_plans_update(
        ticket=ticket, actor=tech, title=ticket.title, description="", change_plan="drain, wipe", rollback_plan="resume"
    )
    client.force_login(tech)
    with wf.committing():
        client.post(reverse("workflows:ticket-transition", args=[ticket.pk, "submit"]), {})
    page = client.get(f"/tickets/{ticket.pk}/").content.decode()
    assert "You requested this change" in page and 'value="approved"' not in page
    client.force_login(approvers[0])
    page = client.get(f"/tickets/{ticket.pk}/").content.decode()
    assert "drain, wipe" in page and "decommissioned" in page and 'value="approved"' in page
    with wf.committing():
        client.post(reverse("workflows:ticket-approve", args=[ticket.pk]), {"decision": "approved"})
    client.force_login(approvers[1])
    with wf.committing():
        client.post(reverse("workflows:ticket-approve", args=[ticket.pk]), {"decision": "approved"})
    assert ticket_fresh(ticket).state == "awaiting_wipe"
    assert m.Node.objects.get(pk=fleet.node.pk).cluster_id is None


def test_comment_pause_resume_watch_assign(client, wf, fleet, lead, tech):
    ticket = open_by_hook(wf, fleet)
    client.force_login(lead)
    client.post(reverse("workflows:ticket-comment", args=[ticket.pk]), {"body": "on it"})
    client.post(reverse("workflows:ticket-pause", args=[ticket.pk]))
    assert ticket_fresh(ticket).is_paused
    assert "Automation is paused" in client.get(f"/tickets/{ticket.pk}/").content.decode()
    with wf.committing():
        client.post(reverse("workflows:ticket-resume", args=[ticket.pk]))
    assert not ticket_fresh(ticket).is_paused
    client.post(reverse("workflows:ticket-watch", args=[ticket.pk]), {"watch": "1"})
    assert ticket.watchers.filter(pk=lead.pk).exists()
    client.post(reverse("workflows:ticket-assign", args=[ticket.pk]), {"assignee": "tech"})
    assert ticket_fresh(ticket).assignee == tech
    page = client.get(f"/tickets/{ticket.pk}/").content.decode()
    assert "on it" in page and "Assigned to tech" in page


def test_failed_step_can_be_retried_from_the_page(client, wf, fleet, lead):
    wf.scheduler.fail_next["drain"] = 5
    ticket = open_by_hook(wf, fleet)
    run = ticket.runs.get(step="drain")
    client.force_login(lead)
    page = client.get(f"/tickets/{ticket.pk}/").content.decode()
    assert "gave up after 5 attempts" in page and reverse("workflows:run-retry", args=[ticket.pk, run.pk]) in page
    with wf.committing():
        client.post(reverse("workflows:run-retry", args=[ticket.pk, run.pk]))
    assert ticket_fresh(ticket).state == "diagnosing"
