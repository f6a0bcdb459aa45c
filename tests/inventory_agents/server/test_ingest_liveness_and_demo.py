"""An unchanged re-report confirms the cards of the last reconciliation (workflows waiting for "a report since T"
must not wait for the hourly full pass), and the demo fleet's stand-in agents report through real ingestion."""

from __future__ import annotations

import datetime as dt

import pytest

from cmdb import models as m
from inventory_agents.models import Report
from inventory_agents.services.demo_agents import demo_agents_report
from inventory_agents.services.liveness import cards_last_seen
from tests.inventory_agents.server.ingest_support import report_of

pytestmark = pytest.mark.django_db


def _cards(node: m.Node) -> list[m.Accelerator]:
    return list(m.Accelerator.objects.filter(node=node).order_by("slot_index"))


def test_an_unchanged_report_confirms_every_card_the_last_pass_saw(post, node, token):
    report = report_of(node)
    assert post(report, token).json()["status"] == "applied"
    applied_at = m.Accelerator.objects.filter(node=node).first().last_seen_at
    since = applied_at + dt.timedelta(microseconds=1)  # a burn-in that started right after that report

    report["collected_at"] = "2030-01-01T00:00:00Z"
    assert post(report, token).json()["status"] == "unchanged"
    node.refresh_from_db()
    cards = _cards(node)
    assert all(c.last_seen_at == applied_at for c in cards)  # the cheap path wrote no card row...
    seen = cards_last_seen(node, cards)
    assert all(seen[c.pk] == node.last_seen_at > since for c in cards)  # ...yet each card counts as seen since


def test_a_card_missing_from_the_last_pass_is_not_confirmed_by_later_reports(post, node, token):
    report = report_of(node)
    report["accelerators"] = report["accelerators"][1:]  # slot 0 fell off the bus
    assert post(report, token).json()["status"] == "applied"
    report["collected_at"] = "2030-01-01T00:00:00Z"
    assert post(report, token).json()["status"] == "unchanged"
    node.refresh_from_db()
    cards = _cards(node)
    seen = cards_last_seen(node, cards)
    gone = cards[0]
    assert gone.is_missing
    assert seen[gone.pk] is None or seen[gone.pk] < node.last_seen_at
    assert all(seen[c.pk] == node.last_seen_at for c in cards[1:])


@pytest.fixture
def demo(db):
    from cmdb.services.demo import demo_load

    demo_load(scale="small")


def test_demo_agents_report_for_nodes_under_a_workflow_only(demo):
    burn_in = list(m.Node.objects.filter(status="burn_in"))
    assert burn_in
    sick_node = m.Node.objects.filter(accelerators__health="failed").first()
    m.Node.objects.filter(pk=sick_node.pk).update(status="draining")  # drained for its repair
    active_seen = dict(m.Node.objects.filter(status="active").values_list("pk", "last_seen_at"))
    # The demo's own history (the repeat-offender cards' failures) predates the reports.
    last_record = m.ChangeRecord.objects.order_by("-pk").values_list("pk", flat=True).first() or 0

    first = demo_agents_report()
    assert (first.nodes, first.applied, first.refused) == (len(burn_in), len(burn_in), 0)
    assert set(Report.objects.values_list("node_id", flat=True)) == {n.pk for n in burn_in}
    # The node with a failed card stays silent (a healthy report would hide the failure); active nodes too.
    assert not Report.objects.filter(node=sick_node).exists()
    assert dict(m.Node.objects.filter(status="active").values_list("pk", "last_seen_at")) == active_seen
    # What the demo agent reports is what the CMDB holds: nothing changes, no change record is written.
    assert not m.ChangeRecord.objects.filter(pk__gt=last_record, source="agent", action="update").exists()

    again = demo_agents_report()
    assert (again.nodes, again.unchanged) == (len(burn_in), len(burn_in))


def test_a_failing_signal_receiver_does_not_fail_the_report(
    post, node, token, caplog, django_capture_on_commit_callbacks
):
    from inventory_agents.signals import report_applied, report_received

    def boom(**kwargs):
        raise RuntimeError("receiver bug")

    report_applied.connect(boom, dispatch_uid="test-boom-applied")
    report_received.connect(boom, dispatch_uid="test-boom-received")
    try:
        report = report_of(node)
        with django_capture_on_commit_callbacks(execute=True):
            assert post(report, token).json()["status"] == "applied"
        report["collected_at"] = "2030-01-01T00:00:00Z"
        assert post(report, token).json()["status"] == "unchanged"
    finally:
        report_applied.disconnect(dispatch_uid="test-boom-applied")
        report_received.disconnect(dispatch_uid="test-boom-received")
    assert m.Accelerator.objects.filter(node=node, last_seen_at__isnull=False).count() == 8
    failures = [r for r in caplog.records if "ingestion signal failed" in r.getMessage()]
    assert len(failures) == 3  # applied (in the transaction), received after commit, received when unchanged
