"""One health policy: a fresh install (its data migrations) and the demo grade every signal with the same rows,
cmdb.services.health_policies.DEFAULT_POLICIES."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.core.management import call_command

from cmdb import models as m
from cmdb.services.health_policies import DEFAULT_POLICIES
from inventory_agents.services.health import PolicyBook

pytestmark = pytest.mark.django_db

FIELDS = ("kind", "code", "severity", "action", "marks_failed", "description")


def _rows(**filters: object) -> set[tuple]:
    return set(m.HealthPolicy.objects.filter(**filters).values_list(*FIELDS))


def _fresh_install() -> None:
    """What `migrate` writes on an empty database: the data migrations' own (frozen) logic, replayed in order."""
    m.HealthPolicy.objects.all().delete()
    for name, fn in (
        ("0002_default_health_policies", "ensure"),
        ("0004_more_default_health_policies", "ensure"),
        ("0005_xid_63_94_fail_cards", "forwards"),
        ("0006_monitoring_health_policies", "ensure"),
        ("0007_topology_health_policy", "ensure"),
        ("0008_topology_policy_default", "forward"),
    ):
        getattr(importlib.import_module(f"inventory_agents.migrations.{name}"), fn)(apps, None)


def test_a_fresh_install_holds_exactly_the_default_policies():
    _fresh_install()
    assert _rows() == set(DEFAULT_POLICIES) and len(DEFAULT_POLICIES) == len({(k, c) for k, c, *_ in DEFAULT_POLICIES})
    assert not m.HealthPolicy.objects.filter(vendor__isnull=False).exists()


def test_the_demo_grades_every_signal_as_a_fresh_install():
    _fresh_install()
    fresh = _rows()
    call_command("seed_demo", "--scale", "small", verbosity=0)
    assert _rows() == fresh and not m.HealthPolicy.objects.filter(vendor__isnull=False).exists()
    nvidia = m.Vendor.objects.get(slug="nvidia")
    book = PolicyBook.load()
    for kind, code, severity, action, fails, _ in DEFAULT_POLICIES:
        grade = book.grade(nvidia.pk, kind, code)
        assert (grade.severity, grade.action, grade.marks_failed) == (severity, action, fails), (kind, code)
    assert book.grade(nvidia.pk, "xid", "94").marks_failed  # only warned in the demo once


def test_the_demo_drops_the_nvidia_rows_older_demos_wrote_but_keeps_an_operators_edit():
    call_command("seed_demo", "--scale", "small", verbosity=0)
    nvidia = m.Vendor.objects.get(slug="nvidia")
    m.HealthPolicy.objects.create(
        vendor=nvidia,
        kind="xid",
        code="94",
        severity="warning",
        action="reset",
        marks_failed=False,
        description="Contained ECC error",
    )  # an older demo's row
    edited = m.HealthPolicy.objects.create(
        vendor=nvidia,
        kind="xid",
        code="79",
        severity="critical",
        action="rma",
        marks_failed=True,
        description="RMA at once here",
    )
    call_command("seed_demo", "--scale", "small", verbosity=0)
    assert list(m.HealthPolicy.objects.filter(vendor=nvidia)) == [edited]


def test_0008_grades_a_topology_departure_degraded_and_leaves_an_operators_edit():
    migration = importlib.import_module("inventory_agents.migrations.0008_topology_policy_default")
    _fresh_install()
    topology = m.HealthPolicy.objects.get(vendor__isnull=True, kind="topology", code="departure")
    assert (topology.severity, topology.action, topology.marks_failed) == ("critical", "drain_repair", False)
    assert PolicyBook.load().grade(None, "topology", "departure").health == "degraded"
    migration.backward(apps, None)
    topology.refresh_from_db()
    assert topology.marks_failed  # 0007's row again
    # An operator who graded departures as monitor-only keeps that.
    topology.action = "monitor"
    topology.save()
    migration.forward(apps, None)
    topology.refresh_from_db()
    assert (topology.action, topology.marks_failed) == ("monitor", True)
