"""The demo fleet's compliance report: baselines for every model, a few outdated nodes, the rest compliant."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from cmdb import models as m
from cmdb.compliance import compliance_scope, compliance_slices

pytestmark = pytest.mark.django_db


def test_demo_fleet_has_a_few_outdated_nodes():
    call_command("seed_demo", "--scale", "small", verbosity=0)
    report = compliance_slices(compliance_scope(user=None))
    nodes = m.Node.objects.exclude(status="received").count()
    assert 0 < report["nodes_outdated"] < nodes // 4
    assert report["totals"]["compliant"] > 10 * report["totals"]["outdated"] > 0
    assert report["totals"]["not_in_baseline"] == 0 and report["totals"]["unknown"] == 0
    assert {s["component"] for s in report["slices"] if s["status"] == "outdated"} >= {"bios"}
    # Idempotent: a second seed adds no baseline.
    baselines = m.FirmwareBaseline.objects.count()
    call_command("seed_demo", "--scale", "small", verbosity=0)
    assert m.FirmwareBaseline.objects.count() == baselines
