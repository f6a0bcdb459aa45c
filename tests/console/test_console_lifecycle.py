"""The lifecycle page (/lifecycle/): warranties ending, idle cards and RMA turnaround as the API reports them,
scoped to the user's sites, with a fixed number of queries whatever the fleet holds."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cmdb import models as m
from cmdb.permissions import grant_scope
from tests.factories.cmdb import AcceleratorFactory, ClusterFactory, NodeFactory, SiteFactory, UserFactory

pytestmark = pytest.mark.django_db


def _site(code: str, nodes: int) -> m.Site:
    """`nodes` active cluster nodes of 2 cards each: warranties ending in 20 days, idle for 10 days, one card
    back from RMA after 6 days."""
    site = SiteFactory(code=code)
    cluster = ClusterFactory(name=f"{code}-train")
    now, today = timezone.now(), timezone.localdate()
    for i in range(nodes):
        node = NodeFactory(site=site, hostname=f"{code}-{i:04d}", cluster=cluster, status=m.NodeStatus.ACTIVE)
        m.Node.objects.filter(pk=node.pk).update(warranty_end=today + dt.timedelta(days=20))
        cards = [AcceleratorFactory(node=node, slot_index=s, serial=f"{code}-{i}-{s}") for s in range(2)]
        m.Accelerator.objects.filter(pk__in=[c.pk for c in cards]).update(warranty_end=today + dt.timedelta(days=20))
        m.NodeAllocation.objects.create(
            node=node,
            scheduler="slurm",
            total=2,
            allocated=0,
            observed_at=now,
            last_allocated_at=now - dt.timedelta(days=10),
        )
        m.AcceleratorPlacement.objects.create(
            accelerator=cards[0],
            kind=m.PlacementKind.AT_VENDOR,
            started_at=now - dt.timedelta(days=30),
            ended_at=now - dt.timedelta(days=24),
        )
    return site


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_page_shows_warranties_idle_cards_and_turnaround():
    _site("la", nodes=2)
    page = _client(UserFactory(is_superuser=True)).get("/lifecycle/", {"warranty_days": 30, "idle_days": 7})
    assert page.status_code == 200
    html = page.content.decode()
    assert "4 cards, 2 nodes" in html  # warranties ending within 30 days
    assert "4 cards on 2 nodes" in html  # idle for 7 days or more
    assert "/accelerators/?warranty_ends_within=30&amp;site=la" in html
    assert "la-0001" in html and "la-train" in html
    assert ">6.0<" in html  # six days at the vendor


def test_a_site_viewer_sees_only_their_site():
    _site("la", nodes=1)
    _site("qzxb", nodes=1)
    viewer = UserFactory(username="viewer-la")
    grant_scope(scope_obj=m.Site.objects.get(code="la"), perms=["view_scope"], users=[viewer])
    html = _client(viewer).get("/lifecycle/", {"warranty_days": 30}).content.decode()
    assert "la-0000" in html and "qzxb" not in html


def test_bad_days_are_a_400_naming_the_input():
    response = _client(UserFactory(is_superuser=True)).get("/lifecycle/", {"idle_days": "a week"})
    assert response.status_code == 400 and "idle_days" in response.content.decode()


def _queries(user) -> int:
    client = _client(user)
    with CaptureQueriesContext(connection) as ctx:
        assert client.get("/lifecycle/", {"warranty_days": 30}).status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.parametrize("who", ["viewer", "root"])
def test_constant_queries_whatever_the_fleet_size(who):
    site = _site("la", nodes=1)
    viewer = UserFactory(username="viewer")
    grant_scope(scope_obj=site, perms=["view_scope"], users=[viewer])
    user = viewer if who == "viewer" else UserFactory(username="root", is_superuser=True)
    small = _queries(user)
    grant_scope(scope_obj=_site("lb", nodes=6), perms=["view_scope"], users=[viewer])
    assert _queries(user) == small


def test_last_months_card_hours_and_cost_per_tenant():
    from cmdb.services.capacity import capacity_rollup, month_start
    from tests.factories.cmdb import TenantFactory

    site = _site("la", nodes=1)
    m.Site.objects.filter(pk=site.pk).update(power_price_kwh="0.1000", pue="1.00")
    node = m.Node.objects.get(hostname="la-0000")
    m.Node.objects.filter(pk=node.pk).update(tenant=TenantFactory(slug="acme"))
    cards = list(m.Accelerator.objects.filter(node=node))
    m.AcceleratorModel.objects.filter(pk=cards[0].model_id).update(unit_price=730, amortisation_months=1, tdp_w=1000)
    m.AcceleratorPlacement.objects.filter(accelerator__in=cards, kind="node").delete()
    for card in cards:
        m.AcceleratorPlacement.objects.create(
            accelerator=card,
            kind="node",
            node=node,
            slot_index=card.slot_index,
            started_at=timezone.now() - dt.timedelta(days=70),
        )
    capacity_rollup(months=3)
    today = timezone.localdate()
    last = month_start(month_start(today) - dt.timedelta(days=1))
    hours = 24 * (month_start(today) - last).days * len(cards)
    html = _client(UserFactory(is_superuser=True)).get("/lifecycle/").content.decode()
    assert f"Card-hours and cost, {last:%Y-%m}" in html
    assert ">acme<" in html and f">{hours}<" in html
    # 1.00 capital + 1 kW x 0.10 per card-hour in service.
    assert f">{hours * 1.1:.2f}<" in html


def test_the_page_lists_failure_rates_per_model():
    _site("la", nodes=1)
    card = m.Accelerator.objects.filter(serial="la-0-0").get()
    m.AcceleratorPlacement.objects.filter(accelerator=card).delete()
    m.AcceleratorPlacement.objects.create(
        accelerator=card, kind="node", node=card.node, slot_index=0, started_at=timezone.now() - dt.timedelta(days=200)
    )
    html = _client(UserFactory(is_superuser=True)).get("/lifecycle/").content.decode()
    assert "Failure rates per model, last 365 days" in html and f">{card.model.name}<" in html
