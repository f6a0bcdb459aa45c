"""Opening a rollout ticket is quick whatever the selection: the request saves the inputs; the plan's rows (node
runs, node locks) are written afterwards by the ticket's prepare step, in one transaction, once. Until then the
ticket and the rollout say "preparing" and nothing can be submitted, approved or started."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cmdb import models as m
from workflows.engine import NotAllowedError, ticket_create, transition_apply
from workflows.models import StepRun, Ticket
from workflows.rollouts.models import NodeLock, NodeRun, Rollout, RolloutStatus, RolloutWave
from workflows.rollouts.options import RolloutOptions
from workflows.rollouts.selectors import NodeSelector
from workflows.rollouts.services import (
    RolloutError,
    rollout_create,
    rollout_prepare,
    rollout_start,
    rollouts_prepare_stalled,
)

# Queries of the whole POST /api/workflows/tickets/ (session, permissions, ticket, rollout, step run, the answer):
# 37 today, for any selection.
REQUEST_MAX_QUERIES = 40
# The whole prepare step run for 200 nodes (claim, set-based reads, bulk INSERTs in batches, change plan, outcome,
# transition): about 60 today; one query per node would be 400 more.
PREPARE_MAX_QUERIES = 70


@pytest.fixture
def extra_nodes(demo_fleet):
    """200 more active H100 nodes in sh1-train running the baseline driver, outside racks (cloned in bulk)."""
    model = m.Node.objects.get(hostname="sh1-h100-0002")
    nodes = m.Node.objects.bulk_create(
        [
            m.Node(
                hostname=f"sh1-x-{i:04d}",
                serial=f"XSN{i:06d}",
                server_model_id=model.server_model_id,
                site_id=model.site_id,
                cluster_id=model.cluster_id,
                status="active",
                health="ok",
            )
            for i in range(200)
        ]
    )
    m.InstalledSoftware.objects.bulk_create(
        [m.InstalledSoftware(node=n, component="nvidia-driver", version="550.127.05") for n in nodes]
    )
    return [n.hostname for n in nodes]


def _inputs(hostnames: list[str]) -> dict:
    return {
        "package": "nvidia-driver 570.133.20",
        "hostnames": "\n".join(hostnames),
        "canary_size": 1,
        "wave_size": 50,
        "max_per_rack": 0,
        "max_per_cluster": 0,
    }


def _post(client, hostnames: list[str]):
    return client.post(
        "/api/workflows/tickets/",
        {
            "type": "driver_rollout",
            "title": f"nvidia-driver 570 on {len(hostnames)} nodes",
            "inputs": _inputs(hostnames),
        },
        content_type="application/json",
    )


def test_options_survive_the_round_trip_through_the_rollout_row():
    for given in (
        {"max_per_rack": 0, "max_per_cluster": 0, "wave_size": 3},
        {"max_per_rack": 2, "max_per_cluster": 5, "wave_percent": 20, "failure_budget_percent": 10},
        {},
    ):
        options = RolloutOptions.from_dict(given)
        assert RolloutOptions.from_dict(options.as_dict()) == options


def test_opening_the_ticket_costs_the_same_queries_for_10_or_200_nodes_and_writes_no_node_rows(
    client, people, extra_nodes, fakes, django_assert_max_num_queries
):
    lead, _ = people
    client.force_login(lead)
    counts = {}
    for size in (10, 200):
        with CaptureQueriesContext(connection) as queries, django_assert_max_num_queries(REQUEST_MAX_QUERIES):
            response = _post(client, extra_nodes[:size])
        assert response.status_code == 201, response.content
        counts[size] = len(queries)
        ticket = Ticket.objects.get(pk=response.json()["id"])
        assert ticket.state == "preparing"
        rollout = Rollout.objects.get(ticket=ticket)
        assert rollout.status == RolloutStatus.PREPARING and rollout.plan == {}
        assert not NodeRun.objects.filter(rollout=rollout).exists()
        assert not NodeLock.objects.filter(owner_key=rollout.lock_key).exists()
        assert StepRun.objects.get(ticket=ticket).step == "prepare"
    assert counts[10] == counts[200], counts


def test_preparing_is_shown_and_refuses_submit_and_start_until_the_step_wrote_the_plan(
    client, people, extra_nodes, fakes
):
    lead, approver = people
    client.force_login(lead)
    with fakes.capture() as published:
        response = _post(client, extra_nodes)
    ticket_id = response.json()["id"]
    rollout = Rollout.objects.get(ticket_id=ticket_id)

    # API and UI say so.
    detail = client.get(f"/api/rollouts/{rollout.pk}/").json()
    assert detail["status"] == "preparing" and detail["status_label"] == "Preparing the plan"
    progress = client.get(f"/api/rollouts/{rollout.pk}/progress/").json()
    assert progress["is_preparing"] and "Approval and start wait" in progress["message"]
    page = client.get(f"/tickets/{ticket_id}/")
    assert page.status_code == 200 and b"Preparing the plan" in page.content
    fragment = client.get(f"/rollouts/tickets/{ticket_id}/progress/", HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200 and b"Preparing the plan" in fragment.content  # htmx keeps polling
    assert b"Approval and start wait" in fragment.content and b"0 of 0 nodes" not in fragment.content
    # Nothing can move: submit is refused with 409 and a reason, the service refuses to start.
    refused = client.post(
        f"/api/workflows/tickets/{ticket_id}/transitions/submit/", {"inputs": {}}, content_type="application/json"
    )
    assert refused.status_code == 409 and "Preparing the plan" in refused.json()["error"]["message"]
    with pytest.raises(RolloutError, match="still preparing its plan"):
        rollout_start(rollout=rollout)
    approver_client = Client()
    approver_client.force_login(approver)
    vote = approver_client.post(
        f"/api/workflows/tickets/{ticket_id}/approve/", {"decision": "approved"}, content_type="application/json"
    )
    assert vote.status_code == 409 and "not awaiting approval" in vote.json()["error"]["message"]

    # The published step runs on a worker (eager here): one transaction writes runs, locks and the change plan.
    with CaptureQueriesContext(connection) as queries, fakes.capture(execute=True):
        for callback in published:
            callback()
    assert len(queries) <= PREPARE_MAX_QUERIES
    rollout.refresh_from_db()
    ticket = Ticket.objects.get(pk=ticket_id)
    assert rollout.status == RolloutStatus.PLANNED and ticket.state == "draft"
    assert rollout.node_runs.count() == 200 == rollout.plan["node_count"]
    assert NodeLock.objects.filter(owner_key=rollout.lock_key, released_at__isnull=True).count() == 200
    assert "Install nvidia-driver 570.133.20 on 200 node(s)" in ticket.change_plan
    fragment = client.get(f"/rollouts/tickets/{ticket_id}/progress/", HTTP_HX_REQUEST="true")
    assert fragment.status_code == 286  # a written plan does not move until approved
    # The ticket page still showing "preparing" is told to reload (its badge and buttons follow); one showing
    # the current state is not.
    page_was = client.get(f"/rollouts/tickets/{ticket_id}/progress/?state=preparing", HTTP_HX_REQUEST="true")
    assert page_was["HX-Refresh"] == "true"
    current = client.get(f"/rollouts/tickets/{ticket_id}/progress/?state=draft", HTTP_HX_REQUEST="true")
    assert "HX-Refresh" not in current
    assert 'progress/?state=draft"' in client.get(f"/tickets/{ticket_id}/").content.decode()
    accepted = client.post(
        f"/api/workflows/tickets/{ticket_id}/transitions/submit/", {"inputs": {}}, content_type="application/json"
    )
    assert accepted.status_code == 200, accepted.content


def test_preparation_is_all_or_nothing_and_never_writes_twice(demo_fleet, fakes, monkeypatch):
    from workflows.rollouts.tasks import rollout_prepare_task

    package = m.DriverPackage.objects.get(component="nvidia-driver", version="570.133.20")
    rollout = rollout_create(
        package=package,
        selector=NodeSelector(clusters=("sh1-train",)),
        options=RolloutOptions.from_dict({"canary_size": 1, "wave_size": 4}),
    )
    assert rollout.status == RolloutStatus.PREPARING

    def disk_full(*args, **kwargs):
        raise RuntimeError("disk full")

    # Fails after the waves and the locks were inserted: none of it stays.
    monkeypatch.setattr(NodeRun.objects, "bulk_create", disk_full)
    with pytest.raises(RuntimeError, match="disk full"):
        rollout_prepare(rollout=rollout)
    monkeypatch.undo()
    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.PREPARING and rollout.plan == {}
    assert not NodeLock.objects.exists() and not RolloutWave.objects.exists() and not NodeRun.objects.exists()

    assert rollout_prepare_task.apply(args=[rollout.pk]).get() == RolloutStatus.PLANNED
    written = (NodeRun.objects.count(), NodeLock.objects.count(), RolloutWave.objects.count())
    assert written[0] == 20 and written[1] == 20
    # A redelivered message, a retried task: nothing more.
    assert rollout_prepare_task.apply(args=[rollout.pk]).get() == RolloutStatus.PLANNED
    assert rollout_prepare(rollout=rollout).status == RolloutStatus.PLANNED
    assert (NodeRun.objects.count(), NodeLock.objects.count(), RolloutWave.objects.count()) == written


def test_a_rollout_without_ticket_is_prepared_by_the_task_published_on_commit(demo_fleet, fakes):
    package = m.DriverPackage.objects.get(component="nvidia-driver", version="570.133.20")
    rollout = fakes.run(
        rollout_create,
        package=package,
        selector=NodeSelector(hostnames=("sh1-h100-0002",)),
        options=RolloutOptions.from_dict({}),
    )
    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.PLANNED and rollout.node_runs.count() == 1


def test_beat_republishes_a_lost_preparation(demo_fleet, fakes):
    package = m.DriverPackage.objects.get(component="nvidia-driver", version="570.133.20")
    rollout = rollout_create(
        package=package, selector=NodeSelector(hostnames=("sh1-h100-0002",)), options=RolloutOptions.from_dict({})
    )  # its on-commit message is lost here
    assert fakes.run(rollouts_prepare_stalled) == 0  # too young to be presumed lost
    Rollout.objects.filter(pk=rollout.pk).update(created_at=timezone.now() - dt.timedelta(minutes=10))
    assert fakes.run(rollouts_prepare_stalled) == 1
    rollout.refresh_from_db()
    assert rollout.status == RolloutStatus.PLANNED
    assert fakes.run(rollouts_prepare_stalled) == 0


def test_cancel_while_preparing_leaves_nothing_behind(demo_fleet, fakes, people):
    lead, _ = people
    ticket = ticket_create(
        type_="driver_rollout",
        title="nvidia-driver 570 on sh1-train",
        requester=lead,
        inputs={"package": "nvidia-driver 570.133.20", "clusters": "sh1-train"},
    )
    assert ticket.state == "preparing"
    with pytest.raises(NotAllowedError, match="Preparing the plan"):
        transition_apply(ticket=ticket, name="submit", actor=lead)
    fakes.run(
        transition_apply,
        ticket=Ticket.objects.get(pk=ticket.pk),
        name="cancel",
        actor=lead,
        data={"cancel_reason": "wrong package"},
    )
    rollout = Rollout.objects.get(ticket=ticket)
    assert Ticket.objects.get(pk=ticket.pk).state == "cancelled" and rollout.status == RolloutStatus.CANCELLED
    assert StepRun.objects.get(ticket=ticket, step="prepare").status == "cancelled"
    # A preparation that was already on its way finds the rollout cancelled and writes nothing.
    assert rollout_prepare(rollout=rollout).status == RolloutStatus.CANCELLED
    assert not NodeRun.objects.exists() and not NodeLock.objects.exists()


def test_replan_goes_through_preparing_again(demo_fleet, fakes, people):
    lead, _ = people
    ticket = fakes.run(
        ticket_create,
        type_="driver_rollout",
        title="nvidia-driver 570 on sh1-train",
        requester=lead,
        inputs={"package": "nvidia-driver 570.133.20", "clusters": "sh1-train"},
    )
    rollout = Rollout.objects.get(ticket=ticket)
    first = rollout.plan["planned_at"]
    assert Ticket.objects.get(pk=ticket.pk).state == "draft"
    with fakes.capture() as published:
        transition_apply(ticket=Ticket.objects.get(pk=ticket.pk), name="replan", actor=lead)
    assert Ticket.objects.get(pk=ticket.pk).state == "preparing"
    with fakes.capture(execute=True):
        for callback in published:
            callback()
    rollout.refresh_from_db()
    assert Ticket.objects.get(pk=ticket.pk).state == "draft" and rollout.plan["planned_at"] > first
    assert rollout.node_runs.count() == rollout.plan["node_count"] == 20
