"""Beat tasks: flag nodes whose agent went silent; keep the newest raw reports per node."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.contenttypes.models import ContentType
from django.utils import timezone

from cmdb import models as m
from inventory_agents.models import Report
from inventory_agents.services.maintenance import nodes_flag_stale, reports_prune
from inventory_agents.tasks import flag_stale_nodes, prune_reports
from tests.factories.cmdb import NodeFactory
from tests.inventory_agents.server.ingest_support import report_of

pytestmark = pytest.mark.django_db


def _seen(minutes_ago: int | None, **fields) -> m.Node:
    node = NodeFactory(**fields)
    seen = timezone.now() - dt.timedelta(minutes=minutes_ago) if minutes_ago is not None else None
    m.Node.objects.filter(pk=node.pk).update(last_seen_at=seen)
    return node


def test_silent_nodes_are_flagged_with_bulk_records(settings):
    settings.GPUOPS = {**settings.GPUOPS, "AGENT_STALE_AFTER_MINUTES": 30}
    silent = [_seen(45) for _ in range(3)]
    fresh = _seen(5)
    never = _seen(None)
    planned = _seen(600, status="planned")
    gone = _seen(600, status="decommissioned")
    result = flag_stale_nodes.apply()
    assert result.get() == 3
    assert set(m.Node.objects.filter(is_stale=True).values_list("pk", flat=True)) == {n.pk for n in silent}
    assert not m.Node.objects.filter(pk__in=[fresh.pk, never.pk, planned.pk, gone.pk], is_stale=True).exists()
    records = m.ChangeRecord.objects.filter(
        content_type=ContentType.objects.get_for_model(m.Node), changes__has_key="is_stale", action="update"
    )
    assert records.count() == 3
    assert all(
        r.changes == {"is_stale": [False, True]} and r.source == "system" and "30 minutes" in r.reason for r in records
    )
    assert set(m.Node.objects.filter(is_stale=True).values_list("version", flat=True)) == {2}
    # Running again changes nothing.
    assert nodes_flag_stale() == 0 and records.count() == 3


def test_flagging_many_nodes_takes_few_queries(django_assert_max_num_queries):
    for _ in range(25):
        _seen(90)
    with django_assert_max_num_queries(8):
        assert nodes_flag_stale() == 25


def test_a_report_clears_the_flag(node, token, post):
    m.Node.objects.filter(pk=node.pk).update(is_stale=True, last_seen_at=timezone.now() - dt.timedelta(hours=3))
    post(report_of(node), token)
    node.refresh_from_db()
    assert not node.is_stale and node.last_seen_at > timezone.now() - dt.timedelta(minutes=1)
    record = m.ChangeRecord.objects.get(object_id=node.pk, changes__has_key="is_stale", source="agent", action="update")
    assert record.changes["is_stale"] == [True, False]


def test_only_the_newest_reports_per_node_are_kept(node, token, post, settings):
    settings.GPUOPS = {**settings.GPUOPS, "AGENT_REPORTS_KEEP_PER_NODE": 3, "AGENT_FULL_RECONCILE_MINUTES": 0}
    for hour in range(6):
        report = report_of(node, collected_at=f"2030-01-01T{hour:02d}:00:00Z")
        report["system"]["kernel"] = f"6.8.0-{hour}-generic"  # a change each time: each report keeps its payload
        post(report, token)
    other = NodeFactory()
    Report.objects.create(node=other, received_at=timezone.now(), status="rejected")
    assert Report.objects.filter(node=node).count() == 6
    assert prune_reports.apply().get() == 3
    kept = list(Report.objects.filter(node=node).order_by("collected_at").values_list("collected_at", flat=True))
    assert [k.hour for k in kept] == [3, 4, 5]
    assert Report.objects.filter(node=other).count() == 1
    assert reports_prune() == 0


def test_the_newest_report_with_a_payload_survives_pruning(node, token, post, settings):
    settings.GPUOPS = {**settings.GPUOPS, "AGENT_REPORTS_KEEP_PER_NODE": 2, "AGENT_FULL_RECONCILE_MINUTES": 0}
    for hour in range(5):  # the same inventory: only the first full pass stores the payload
        post(report_of(node, collected_at=f"2030-01-01T{hour:02d}:00:00Z"), token)
    assert Report.objects.filter(node=node, payload__isnull=False).count() == 1
    reports_prune()
    kept = Report.objects.filter(node=node).order_by("collected_at")
    assert [r.collected_at.hour for r in kept] == [0, 3, 4]
    assert kept[0].payload is not None
