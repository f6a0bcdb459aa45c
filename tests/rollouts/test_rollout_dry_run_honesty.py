"""Under the demo's dry-run executor nothing is installed, and every page says so: a rollout whose nodes all
"succeeded" reads "N of N dry-run (nothing installed)" and "dry run - nothing changed" on the ticket page, the
rollout page and the node page - never "N of N succeeded" while every node keeps its old driver."""

from __future__ import annotations

import pytest
from django.test import Client

from cmdb import models as m
from integrations.executors import registry as executor_registry
from integrations.executors.dry_run import DryRunExecutor
from integrations.executors.fake import FakeExecutor
from integrations.os_install import registry as os_registry
from integrations.os_install.fake import FakeOsInstaller
from workflows.engine import approval_record, ticket_create, transition_apply
from workflows.models import Ticket, TimelineEntry
from workflows.rollouts.models import NodeRun, Rollout
from workflows.rollouts.progress import rollout_progress
from workflows.rollouts.selectors import DRY_RUN_NOTE, node_dry_run_notes, ticket_dry_run_notes

BASELINE, TARGET = "550.127.05", "570.133.20"


def _fresh(ticket: Ticket) -> Ticket:
    return Ticket.objects.get(pk=ticket.pk)


def _rollout_ticket(fakes, lead, approver) -> Ticket:
    ticket = fakes.run(
        ticket_create,
        type_="driver_rollout",
        title="nvidia-driver 570 on sh1-train",
        requester=lead,
        inputs={"package": f"nvidia-driver {TARGET}", "clusters": "sh1-train", "canary_size": 1, "wave_size": 4},
    )
    fakes.run(transition_apply, ticket=_fresh(ticket), name="submit", actor=lead, data={})
    fakes.run(approval_record, ticket=_fresh(ticket), actor=approver, decision="approved")
    return _fresh(ticket)


def _page(user, url: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200, url
    return response.content.decode()


@pytest.mark.django_db
def test_a_dry_run_rollout_says_nothing_was_installed_everywhere(demo_fleet, fakes, people):
    lead, approver = people
    with executor_registry.override(DryRunExecutor()):
        ticket = _rollout_ticket(fakes, lead, approver)
    rollout = Rollout.objects.get(ticket=ticket)
    runs = NodeRun.objects.filter(rollout=rollout)
    total = runs.count()
    assert ticket.state == "completed" and {r.state for r in runs} == {"succeeded"}
    # Nothing was installed: every node keeps its old driver ...
    versions = set(
        m.InstalledSoftware.objects.filter(node__in=runs.values("node_id"), component="nvidia-driver").values_list(
            "version", flat=True
        )
    )
    assert versions == {BASELINE}
    # ... and the progress says so, not "succeeded".
    progress = rollout_progress(rollout)
    assert progress["summary"] == f"{total} of {total} dry-run (nothing installed)"
    assert progress["is_dry_run"] and progress["totals"]["installed"] == 0
    assert progress["totals"]["nodes"] == total  # the dry-run count is not a node state of its own

    rollout_page = _page(lead, f"/rollouts/{rollout.pk}/")
    assert DRY_RUN_NOTE in rollout_page and f"{total} of {total} dry-run (nothing installed)" in rollout_page
    assert f"{total} of {total} succeeded" not in rollout_page
    panel = _page(lead, f"/rollouts/tickets/{ticket.pk}/progress/")
    assert DRY_RUN_NOTE in panel
    # The ticket page says it without waiting for its htmx panel, and the step that watched the rollout too.
    ticket_page = _page(lead, ticket.get_absolute_url())
    assert DRY_RUN_NOTE in ticket_page
    assert ticket_dry_run_notes(ticket) == [ticket_dry_run_notes(ticket)[0]]
    # The step that saw the rollout complete says how, on the ticket's timeline.
    finished = [e.message for e in TimelineEntry.objects.filter(ticket=ticket) if "rollout completed" in e.message]
    assert finished and finished[-1].endswith(f"rollout completed ({total} of {total} dry-run (nothing installed))")
    assert "rollout completed (" in ticket_page

    # The node page's selector: the run that did nothing, with the version the node keeps.
    node = m.Node.objects.get(pk=runs.first().node_id)
    (note,) = node_dry_run_notes(node, lead)
    assert note.text.startswith(DRY_RUN_NOTE) and BASELINE in note.text and ticket.reference in note.text
    assert note.href == ticket.get_absolute_url()


@pytest.mark.django_db
def test_a_real_rollout_says_succeeded_and_no_dry_run(demo_fleet, fakes, people):
    lead, approver = people
    ticket = _rollout_ticket(fakes, lead, approver)  # the fake executor "installs" and its agent reports
    rollout = Rollout.objects.get(ticket=ticket)
    total = rollout.node_runs.count()
    progress = rollout_progress(rollout)
    assert progress["summary"] == f"{total} of {total} succeeded" and not progress["is_dry_run"]
    assert DRY_RUN_NOTE not in _page(lead, ticket.get_absolute_url())
    assert DRY_RUN_NOTE not in _page(lead, f"/rollouts/{rollout.pk}/")
    assert ticket_dry_run_notes(ticket) == []
    assert node_dry_run_notes(m.Node.objects.get(pk=rollout.node_runs.first().node_id), lead) == []


@pytest.mark.django_db
def test_a_mixed_rollout_counts_real_and_dry_runs_apart(demo_fleet, fakes, people):
    lead, approver = people
    ticket = _rollout_ticket(fakes, lead, approver)
    rollout = Rollout.objects.get(ticket=ticket)
    total = rollout.node_runs.count()
    NodeRun.objects.filter(pk__in=list(rollout.node_runs.values_list("pk", flat=True)[:3])).update(is_dry_run=True)
    assert rollout_progress(rollout)["summary"] == (
        f"{total - 3} of {total} succeeded, 3 of {total} dry-run (nothing installed)"
    )


@pytest.mark.django_db
def test_a_dry_run_provisioning_says_no_driver_was_installed(demo_fleet, fakes, people, settings):
    lead, _ = people
    settings.GPUOPS_ROLLOUTS = {"BURN_IN_WINDOW_MINUTES": 0}
    node = m.Node.objects.get(hostname="sh1-h100-0024")
    with executor_registry.override(DryRunExecutor()), os_registry.override(FakeOsInstaller()):
        ticket = fakes.run(
            ticket_create,
            type_="provisioning",
            title="Bring up sh1-h100-0024",
            requester=lead,
            inputs={"node": node.hostname, "cluster": "sh1-train"},
        )
        for name in ("start", "confirm_cabling"):
            fakes.run(transition_apply, ticket=_fresh(ticket), name=name, actor=lead, data={})
    notes = ticket_dry_run_notes(_fresh(ticket))
    assert notes and all(n.startswith(DRY_RUN_NOTE) for n in notes) and "no driver" in notes[-1]
    assert DRY_RUN_NOTE in _page(lead, ticket.get_absolute_url())
    assert any("no driver" in n.text for n in node_dry_run_notes(node, lead))


def test_the_fake_executor_is_not_a_dry_run():
    # The honesty above rests on the executors saying what they are.
    assert DryRunExecutor.is_dry_run and not FakeExecutor().is_dry_run
