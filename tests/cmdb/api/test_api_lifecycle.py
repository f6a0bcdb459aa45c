"""Lifecycle reports and filters: warranties ending, idle cards, RMA turnaround - figures from crafted data,
scoped to what the caller may see, bad input a 400 naming the parameter."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from cmdb import models as m
from tests.cmdb.api.support import url
from tests.factories.cmdb import ClusterFactory, TenantFactory

pytestmark = pytest.mark.django_db

REPORTS = "/api/cmdb/reports"


def _set(obj, **fields) -> None:
    type(obj).objects.filter(pk=obj.pk).update(**fields)


@pytest.fixture
def warranties(two_sites):
    today = timezone.localdate()
    a0, a1 = two_sites.cards_a
    b0, _ = two_sites.cards_b
    _set(a0, warranty_end=today + dt.timedelta(days=10))
    _set(a1, warranty_end=today + dt.timedelta(days=200))
    _set(b0, warranty_end=today + dt.timedelta(days=5))
    _set(two_sites.node_a, warranty_end=today - dt.timedelta(days=3), status=m.NodeStatus.ACTIVE)
    _set(two_sites.node_b, warranty_end=today + dt.timedelta(days=1))
    return today


def test_warranty_report_lists_what_ends_within_the_window(root, two_sites, warranties):
    body = root.get(f"{REPORTS}/warranty/", {"days": 30}).json()
    assert {c["serial"] for c in body["cards"]} == {"A-0", "B-0"}
    assert body["cards_total"] == 2 and body["nodes_total"] == 1
    assert [n["hostname"] for n in body["nodes"]] == ["b-0001"]
    assert {(g["site"], g["n"]) for g in body["cards_by_site_vendor"]} == {("site-a", 1), ("site-b", 1)}
    # node_a's warranty ended three days ago and it is still active.
    assert body["expired_nodes_in_service"] == 1
    assert body["until"] == (warranties + dt.timedelta(days=30)).isoformat()


def test_warranty_report_is_scoped_to_the_callers_sites(viewer_a, two_sites, warranties):
    body = viewer_a.get(f"{REPORTS}/warranty/", {"days": 30}).json()
    assert [c["serial"] for c in body["cards"]] == ["A-0"]
    assert body["nodes"] == [] and body["nodes_total"] == 0
    assert "site-b" not in str(body)


def test_warranty_filters_on_the_lists_agree_with_the_report(root, two_sites, warranties):
    within = root.get(url("accelerators"), {"warranty_ends_within": 30}).json()["results"]
    assert {c["serial"] for c in within} == {"A-0", "B-0"}
    expired = root.get(url("nodes"), {"warranty_expired": "true"}).json()["results"]
    assert [n["hostname"] for n in expired] == ["a-0001"]
    later = root.get(url("accelerators"), {"warranty_end__gte": (warranties + dt.timedelta(days=100)).isoformat()})
    assert [c["serial"] for c in later.json()["results"]] == ["A-1"]


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        (f"{REPORTS}/warranty/", {"days": "soon"}, "days"),
        (f"{REPORTS}/idle-cards/", {"days": "-1"}, "days"),
        (f"{REPORTS}/rma-turnaround/", {"days": "99999"}, "days"),
        (url("accelerators"), {"warranty_ends_within": "1.5"}, "warranty_ends_within"),
        (url("nodes"), {"warranty_end__lte": "next-week"}, "warranty_end__lte"),
    ],
)
def test_bad_report_and_filter_input_is_a_400_naming_it(root, two_sites, path, params, field):
    response = root.get(path, params)
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"], response.json()


def _allocation(node, *, total=2, allocated=0, last=None, observed=None) -> None:
    m.NodeAllocation.objects.create(
        node=node,
        scheduler="slurm",
        total=total,
        allocated=allocated,
        observed_at=observed or timezone.now(),
        last_allocated_at=last,
    )


def test_idle_cards_are_those_no_scheduler_allocated_for_the_days_asked(root, two_sites):
    now = timezone.now()
    tenant, cluster = TenantFactory(slug="llm"), ClusterFactory(name="train-a")
    a, b = two_sites.node_a, two_sites.node_b
    for node in (a, b):
        _set(node, cluster=cluster, tenant=tenant, status=m.NodeStatus.ACTIVE)
    _allocation(a, last=now - dt.timedelta(days=12))  # idle 12 days
    _allocation(b, allocated=1, last=now)  # busy
    body = root.get(f"{REPORTS}/idle-cards/", {"days": 7}).json()
    assert [n["hostname"] for n in body["nodes"]] == ["a-0001"]
    assert body["nodes"][0]["idle_days"] == 12 and body["nodes"][0]["cards"] == 2
    assert body["by_tenant_cluster"] == [{"tenant": "llm", "cluster": "train-a", "n": 2}]
    assert body["cards_total"] == 2
    # Twelve days idle is not idle for a month.
    assert root.get(f"{REPORTS}/idle-cards/", {"days": 30}).json()["cards_total"] == 0


def test_a_node_never_allocated_is_idle_but_unknown_or_stale_reads_are_not(root, two_sites):
    now = timezone.now()
    cluster = ClusterFactory(name="train-b")
    a, b = two_sites.node_a, two_sites.node_b
    for node in (a, b):
        _set(node, cluster=cluster, status=m.NodeStatus.ACTIVE)
    _allocation(a, last=None)
    _allocation(b, last=None, observed=now - dt.timedelta(days=40))  # the scheduler has not been read since
    body = root.get(f"{REPORTS}/idle-cards/", {"days": 7}).json()
    assert [n["hostname"] for n in body["nodes"]] == ["a-0001"] and body["nodes"][0]["idle_days"] is None
    m.NodeAllocation.objects.filter(node=a).update(allocated=None)  # the scheduler does not count GPUs
    assert root.get(f"{REPORTS}/idle-cards/", {"days": 7}).json()["nodes"] == []


def test_idle_cards_are_scoped(viewer_a, two_sites):
    cluster = ClusterFactory(name="train-c")
    for node in (two_sites.node_a, two_sites.node_b):
        _set(node, cluster=cluster, status=m.NodeStatus.ACTIVE)
        _allocation(node)
    body = viewer_a.get(f"{REPORTS}/idle-cards/", {"days": 0}).json()
    assert [n["hostname"] for n in body["nodes"]] == ["a-0001"] and body["cards_total"] == 2


def test_rma_turnaround_per_vendor_from_the_placement_history(root, two_sites):
    now = timezone.now()
    a0, a1 = two_sites.cards_a
    vendor = a0.model.vendor.slug

    def away(card, start_days_ago, back_days_ago=None) -> None:
        m.AcceleratorPlacement.objects.create(
            accelerator=card,
            serial=card.serial or "",
            kind=m.PlacementKind.AT_VENDOR,
            started_at=now - dt.timedelta(days=start_days_ago),
            ended_at=now - dt.timedelta(days=back_days_ago) if back_days_ago is not None else None,
        )

    away(a0, 40, 20)  # 20 days away
    away(a0, 15, 5)  # 10 days away
    away(a1, 9)  # at the vendor for 9 days now
    away(a1, 800, 700)  # back long before the period
    rows = {r["vendor"]: r for r in root.get(f"{REPORTS}/rma-turnaround/", {"days": 365}).json()["rows"]}
    assert rows[vendor]["returned"] == 2 and rows[vendor]["avg_days"] == 15.0 and rows[vendor]["max_days"] == 20.0
    assert rows[vendor]["open"] == 1 and rows[vendor]["oldest_open_days"] == 9.0
