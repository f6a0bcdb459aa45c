"""The demo fleet is believable and idempotent."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.management import call_command
from django.db.models import Count

from cmdb import models as m

pytestmark = pytest.mark.django_db


def test_small_demo_has_three_vendors_fabrics_spares_and_failures():
    call_command("seed_demo", "--scale", "small", verbosity=0)
    vendors = set(m.Accelerator.objects.values_list("model__vendor__slug", flat=True))
    assert vendors == {"nvidia", "ascend", "hygon"}
    assert m.Node.objects.count() == 48
    assert m.Accelerator.objects.filter(lifecycle="installed").count() == 48 * 8
    assert m.Accelerator.objects.filter(lifecycle="in_stock", stock_location__isnull=False).exists()
    assert m.Accelerator.objects.filter(health="failed").count() >= 3
    assert m.HealthEvent.objects.filter(resolved_at__isnull=True).exists()
    assert m.Fabric.objects.filter(kind="infiniband", purpose="compute", is_rail_optimized=True).exists()
    assert m.Fabric.objects.filter(kind="roce", purpose="storage").exists()
    assert m.Node.objects.filter(status="received").exists()  # waits for provisioning
    # Rail-aligned: every link goes from HCA rail i to a leaf of rail i.
    links = m.Link.objects.select_related("a_nic_port__nic", "b_switch_port__switch")
    assert links.exists() and all(lk.a_nic_port.nic.rail == lk.b_switch_port.switch.rail for lk in links)
    # Each installed card has its open placement.
    assert m.AcceleratorPlacement.objects.filter(ended_at__isnull=True).count() == m.Accelerator.objects.count()
    # Every driver baseline is a known package that supports the cards.
    assert not m.InstalledSoftware.objects.filter(package__isnull=True).exists()
    # History was written in bulk with source "import".
    assert m.ChangeRecord.objects.filter(source="import", action="create").count() > 48 * 8


def test_seed_is_idempotent():
    call_command("seed_demo", verbosity=0)
    counts = {model: model.objects.count() for model in (m.Node, m.Accelerator, m.Link, m.ChangeRecord)}
    call_command("seed_demo", verbosity=0)
    assert counts == {model: model.objects.count() for model in counts}


def test_racks_are_not_overfilled():
    call_command("seed_demo", verbosity=0)
    per_rack = m.RackUnit.objects.values("rack", "face", "unit").annotate(n=Count("id")).filter(n__gt=1)
    assert not per_rack.exists()


def test_the_demo_has_months_of_card_hours_priced_by_its_cost_model():
    from cmdb.capacity import CapacityQuery, card_hours
    from cmdb.services.capacity import month_start
    from tests.factories.cmdb import UserFactory

    call_command("seed_demo", "--scale", "small", verbosity=0)
    today = dt.date.today()
    last = month_start(month_start(today) - dt.timedelta(days=1))
    first = month_start(last - dt.timedelta(days=120))
    report = card_hours(UserFactory(is_superuser=True), CapacityQuery(start=first, end=last, by="tenant"))
    hours = report.total.hours
    assert hours["in_service"] > 0
    assert hours["repair"] > 0 and hours["idle"] > 0  # the demo's maintenance and cordon episodes
    assert report.total.total_cost > 0 and report.total.idle_cost > 0
    assert any(r.key != "none" for r in report.rows)  # held by tenants


def test_last_month_of_the_demo_shows_idle_and_repair_time():
    """What the capacity page opens on (last month) has every kind of hour an ops lead looks for."""
    from cmdb.capacity import CapacityQuery, card_hours
    from tests.factories.cmdb import UserFactory

    call_command("seed_demo", "--scale", "small", verbosity=0)
    query = CapacityQuery.from_params({}, today=dt.date.today())
    hours = card_hours(UserFactory(is_superuser=True), query).total.hours
    assert hours["in_service"] > 0 and hours["idle"] > 0 and hours["repair"] > 0
