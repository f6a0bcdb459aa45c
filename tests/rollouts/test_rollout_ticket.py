"""The driver rollout as a ticket: plan on create, approval, run, auto-pause, resume, roll back all, cancel."""

from __future__ import annotations

import pytest

from cmdb import models as m
from workflows.engine import GuardError, approval_record, ticket_create, transition_apply
from workflows.models import Ticket
from workflows.registry import workflow, workflow_problems
from workflows.rollouts.models import NodeLock, NodeRun, Rollout


def _fresh(ticket: Ticket) -> Ticket:
    return Ticket.objects.get(pk=ticket.pk)


def _take(fakes, ticket, name, user, **data) -> Ticket:
    fakes.run(transition_apply, ticket=_fresh(ticket), name=name, actor=user, data=data)
    return _fresh(ticket)


def _open(fakes, lead, **inputs) -> Ticket:
    base = {
        "package": "nvidia-driver 570.133.20",
        "clusters": "sh1-train",
        "canary_size": 1,
        "wave_size": 4,
        "failure_budget": 0,
    }
    # The prepare step runs in the on-commit callbacks fakes.run executes: the ticket comes back a draft.
    return _fresh(
        fakes.run(
            ticket_create,
            type_="driver_rollout",
            title="nvidia-driver 570 on sh1-train",
            requester=lead,
            inputs={**base, **inputs},
        )
    )


def test_declaration_is_sound():
    assert workflow_problems(workflow("driver_rollout")) == []


def test_ticket_plans_on_create_then_runs_after_approval(demo_fleet, fakes, people):
    lead, approver = people
    ticket = _open(fakes, lead)
    rollout = Rollout.objects.get(ticket=ticket)
    assert ticket.state == "draft" and ticket.data["rollout_id"] == rollout.pk
    assert ticket.cluster.name == "sh1-train"
    assert "Install nvidia-driver 570.133.20 on 20 node(s)" in ticket.change_plan
    assert "newest first" in ticket.rollback_plan
    assert NodeLock.objects.filter(owner_key=rollout.lock_key, released_at__isnull=True).count() == 20
    preview = workflow("driver_rollout").plan_preview(ticket)
    assert len(preview) == 20 and preview[0].before == "550.127.05" and preview[0].after == "570.133.20"

    ticket = _take(fakes, ticket, "submit", lead)
    assert ticket.state == "awaiting_approval"
    fakes.run(approval_record, ticket=ticket, actor=approver, decision="approved")
    ticket = _fresh(ticket)
    assert ticket.state == "completed"
    assert set(rollout.node_runs.values_list("state", flat=True)) == {"succeeded"}
    # Every CMDB change of the rollout carries the ticket's correlation id.
    records = m.ChangeRecord.objects.filter(correlation_id=ticket.correlation_id)
    assert records.exists() and set(records.values_list("source", flat=True)) == {"workflow"}

    ticket = _take(fakes, ticket, "rollback_all", lead, note="driver regression in NCCL tests")
    assert ticket.state == "rolled_back" and not ticket.is_open
    assert set(
        m.InstalledSoftware.objects.filter(
            node__cluster__name="sh1-train", component="nvidia-driver", node__status="active"
        ).values_list("version", flat=True)
    ) == {"550.127.05"}


def test_budget_pauses_the_ticket_and_resume_finishes_it(demo_fleet, fakes, people):
    lead, approver = people
    ticket = _open(fakes, lead)
    bad = NodeRun.objects.filter(rollout__ticket=ticket, wave__index=2).order_by("position").first()
    fakes.executor.fail(host=bad.hostname, contains="570.133.20", stderr="nvidia-installer: kernel module failed")
    ticket = _take(fakes, ticket, "submit", lead)
    fakes.run(approval_record, ticket=ticket, actor=approver, decision="approved")
    ticket = _fresh(ticket)
    assert ticket.state == "paused"
    assert "failure budget" in ticket.rollout.paused_reason
    ticket = _take(fakes, ticket, "resume", lead, note="kernel module issue is host-specific")
    # The failed node stays drained and holds its rack's one slot: its rack mate waits, the ticket pauses again.
    assert ticket.state == "paused"
    assert (
        ticket.rollout.paused_reason.startswith("rack limit: ") and f"({bad.hostname})" in ticket.rollout.paused_reason
    )
    m.Node.objects.filter(pk=bad.node_id).update(status="active", is_cordoned=False, cordon_reason="")
    ticket = _take(fakes, ticket, "resume", lead, note="module rebuilt by hand; node back in service")
    assert ticket.state == "completed"
    ticket = _take(fakes, ticket, "close", lead)
    assert ticket.state == "closed" and not ticket.is_open
    assert not NodeLock.objects.filter(owner_key=ticket.rollout.lock_key, released_at__isnull=True).exists()


def test_abort_cancels_pending_nodes_and_releases_locks(demo_fleet, fakes, people):
    lead, approver = people
    ticket = _open(fakes, lead, pause_after_canary=True)
    ticket = _take(fakes, ticket, "submit", lead)
    fakes.run(approval_record, ticket=ticket, actor=approver, decision="approved")
    ticket = _fresh(ticket)
    assert ticket.state == "paused" and "canary done" in ticket.rollout.paused_reason
    ticket = _take(fakes, ticket, "abort", lead, note="wrong maintenance window")
    assert ticket.state == "aborted"
    states = dict(ticket.rollout.node_runs.values_list("wave__kind", "state").distinct())
    assert states == {"canary": "succeeded", "wave": "cancelled"}
    assert not NodeLock.objects.filter(owner_key=ticket.rollout.lock_key, released_at__isnull=True).exists()


def test_submit_refuses_an_empty_plan_and_cancel_releases_locks(demo_fleet, fakes, people):
    lead, _ = people
    empty = _open(fakes, lead, clusters="", hostnames="bj2-a910b-0002")
    with pytest.raises(GuardError, match="changes no node"):
        _take(fakes, empty, "submit", lead)
    ticket = _open(fakes, lead, clusters="", hostnames="sh1-h100-0002\nsh1-h100-0003")
    assert NodeLock.objects.filter(released_at__isnull=True, ticket=ticket).count() == 2
    ticket = _take(fakes, ticket, "cancel", lead, cancel_reason="not this week")
    assert ticket.state == "cancelled"
    assert not NodeLock.objects.filter(released_at__isnull=True, ticket=ticket).exists()


def test_bad_inputs_are_refused_at_create(demo_fleet, fakes, people):
    lead, _ = people
    with pytest.raises(GuardError, match="no driver package"):
        _open(fakes, lead, package="nvidia-driver 999")
    with pytest.raises(GuardError, match="no cluster named 'nope'"):
        _open(fakes, lead, clusters="nope")


def test_ticket_page_shows_the_panel_once_the_urls_are_mounted(demo_fleet, fakes, people, client, settings):
    lead, _ = people
    ticket = _open(fakes, lead)
    client.force_login(lead)
    # Without the rollouts URLs: the page renders, without the panel.
    settings.ROOT_URLCONF = "tests.rollouts.urls_unmounted"
    page = client.get(f"/tickets/{ticket.pk}/")
    assert page.status_code == 200 and b"rollout-panel" not in page.content
    # With them (the project mounts them): the panel polls the fragment, which renders the plan.
    settings.ROOT_URLCONF = "gpuops.urls"
    page = client.get(f"/tickets/{ticket.pk}/")
    assert b"rollout-panel" in page.content and f"/rollouts/tickets/{ticket.pk}/progress/".encode() in page.content
    fragment = client.get(f"/rollouts/tickets/{ticket.pk}/progress/", HTTP_HX_REQUEST="true")
    # A plan does not move until it is approved (the page reloads then): htmx is told to stop polling.
    assert fragment.status_code == 286 and b"Driver rollout: nvidia-driver 570.133.20" in fragment.content
