"""The fleet dashboard: its numbers count only what the user may see, equal the API summary, and each links to
the filtered list that shows exactly those rows."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cmdb import models as m
from cmdb.filtersets import AcceleratorFilterSet, LinkFilterSet, NodeFilterSet
from cmdb.permissions import grant_scope, restrict
from console.dashboard import Cell, fleet_dashboard
from integrations.warehouse.models import MinimumStock
from tests.factories.cmdb import (
    AcceleratorFactory,
    AcceleratorModelFactory,
    DriverPackageFactory,
    FabricFactory,
    NodeFactory,
    SiteFactory,
    StockLocationFactory,
    SwitchFactory,
    UserFactory,
)
from workflows.models import LinkRole, Ticket, TicketLink
from workflows.rollouts.models import NodeRun, Rollout, RolloutWave
from workflows.selectors import ticket_list

NOW = timezone.now()


def _ticket(site: m.Site, *, type_: str = "repair", state: str = "diagnosing", age_days: float = 0, **kw) -> Ticket:
    n = Ticket.objects.count()
    ticket = Ticket.objects.create(
        type=type_, title=f"{type_} {n}", state=state, site=site, correlation_id=f"c-{site.code}-{n}", **kw
    )
    Ticket.objects.filter(pk=ticket.pk).update(created_at=NOW - dt.timedelta(days=age_days))
    return ticket


def _link(fabric: m.Fabric, node: m.Node, leaf: m.Switch, n: int, status: str) -> m.Link:
    nic = m.Nic.objects.create(node=node, name=f"mlx5_{n}", kind="infiniband")
    port = m.NicPort.objects.create(nic=nic, name="1")
    b = m.SwitchPort.objects.create(switch=leaf, name=f"p{n}")
    return m.Link.objects.create(fabric=fabric, a_nic_port=port, b_switch_port=b, status=status)


def build_site(code: str, *, nodes: int) -> dict[str, Any]:
    """A site with `nodes` active nodes (4 cards each) plus a fixed set of interesting ones."""
    site = SiteFactory(code=code)
    h100 = AcceleratorModelFactory()
    world: dict[str, Any] = {"site": site}
    for i in range(nodes):
        node = NodeFactory(site=site, hostname=f"{code}-gpu-{i:04d}", last_seen_at=NOW)
        for slot in range(4):
            AcceleratorFactory(node=node, model=h100, slot_index=slot, serial=f"{code.upper()}-C{i:04d}{slot}")
    cordoned = NodeFactory(site=site, hostname=f"{code}-cordoned", is_cordoned=True, cordon_reason="bad fan")
    stale = NodeFactory(
        site=site,
        hostname=f"{code}-stale",
        status="failed",
        health="failed",
        is_stale=True,
        last_seen_at=NOW - dt.timedelta(hours=3),
    )
    AcceleratorFactory(node=stale, model=h100, slot_index=0, health="failed", serial=f"{code.upper()}-FAILED")
    AcceleratorFactory(node=stale, model=h100, slot_index=1, is_missing=True, serial=f"{code.upper()}-MISSING")
    NodeFactory(site=site, hostname=f"{code}-planned", status="planned", last_seen_at=NOW - dt.timedelta(days=9))
    warehouse = StockLocationFactory(site=site, name=f"{code}-wh")
    AcceleratorFactory(node=None, stock_location=warehouse, lifecycle="in_stock", model=h100, serial=f"{code}-spare")
    m.StockMovement.objects.create(at=NOW, kind="receive", accelerator_model=h100, quantity=1, location=warehouse)
    MinimumStock.objects.create(site=site, accelerator_model=h100, minimum=3)
    # Tickets: a fresh repair, an old overdue one, and a provisioning ticket holding the cordoned node.
    _ticket(site, age_days=0.2, due_at=NOW + dt.timedelta(days=1))
    _ticket(site, age_days=5, due_at=NOW - dt.timedelta(hours=1))
    _ticket(site, type_="incident", state="closed", age_days=1, is_open=False)
    held = _ticket(site, type_="provisioning", state="installing", age_days=2)
    TicketLink.objects.create(ticket=held, node=cordoned, role=LinkRole.SUBJECT, object_repr=cordoned.hostname)
    # Cabling: one verified link, one mismatch.
    fabric = FabricFactory(site=site, name=f"{code}-ib")
    leaf = SwitchFactory(site=site, name=f"{code}-leaf-01", fabric=fabric)
    _link(fabric, stale, leaf, 0, "connected")
    _link(fabric, stale, leaf, 1, "mismatch")
    # A rollout in flight, belonging to a ticket on this site (that is how a site's people may see it).
    rticket = _ticket(site, type_="driver_rollout", state="running", age_days=1)
    package = DriverPackageFactory()
    rollout = Rollout.objects.create(
        ticket=rticket,
        package=package,
        component=package.component,
        target_version=package.version,
        status="running",
        correlation_id=rticket.correlation_id,
    )
    wave = RolloutWave.objects.create(rollout=rollout, index=0, kind="canary", status="running")
    for hostname, state in zip(
        (f"{code}-gpu-0000", f"{code}-gpu-0001", f"{code}-cordoned"),
        ("succeeded", "installing", "pending"),
        strict=True,
    ):
        NodeRun.objects.create(
            rollout=rollout,
            wave=wave,
            node=m.Node.objects.get(hostname=hostname),
            hostname=hostname,
            previous_version="1",
            target_version=package.version,
            state=state,
        )
    world["rollout"] = rollout
    return world


@pytest.fixture
def fleet(db) -> dict[str, Any]:
    a = build_site("sa", nodes=3)
    b = build_site("sb", nodes=2)
    viewer = UserFactory(username="site-a-viewer", is_staff=False)
    grant_scope(scope_obj=a["site"], perms=["view_scope"], users=[viewer])
    root = UserFactory(username="root", is_superuser=True)
    return {"a": a, "b": b, "viewer": viewer, "root": root}


def cells(value: Any) -> Iterator[Cell]:
    """Every Cell anywhere in the dashboard's figures."""
    if isinstance(value, Cell):
        yield value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from cells(getattr(value, f.name))
    elif isinstance(value, dict):
        for v in value.values():
            yield from cells(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from cells(v)


def count_behind(href: str, user) -> int | None:
    """How many rows the list at `href` shows `user`, read through the same filter sets the lists use."""
    parts = urlsplit(href)
    params = dict(parse_qsl(parts.query))
    if parts.path == "/accelerators/":
        return AcceleratorFilterSet(data=params, queryset=restrict(m.Accelerator.objects.all(), user)).qs.count()
    if parts.path == "/nodes/":
        return NodeFilterSet(data=params, queryset=restrict(m.Node.objects.all(), user)).qs.count()
    if parts.path == "/links/":
        return LinkFilterSet(data=params, queryset=restrict(m.Link.objects.all(), user)).qs.count()
    if parts.path == "/tickets/" and "type" in params:
        return ticket_list(user, params).count()
    return None  # a list that counts other rows (tickets of holders, stock lines)


def test_site_a_user_counts_only_site_a(fleet):
    d = fleet_dashboard(user=fleet["viewer"])
    a = d["accelerators"]
    assert [g.site for g in a["sites"]] == ["sa"]
    assert a["total"].value == 3 * 4 + 2 + 1  # installed, the stale node's two, the spare
    assert dict(a["health"])["Failed"].value == 1
    assert a["missing"].value == 1
    nodes = d["nodes"]
    assert [s.site for s in nodes["sites"]] == ["sa"]
    assert nodes["all"].total.value == 3 + 3
    assert nodes["all"].cordoned.value == 1
    assert nodes["all"].schedulable.value == 3  # active and not cordoned
    assert nodes["all"].stale.value == 1
    assert nodes["all"].silent.value == 1  # the planned node is not expected to report
    assert d["tickets"]["total"].value == 4  # the closed incident does not count
    assert d["tickets"]["overdue"].value == 1
    assert d["held"]["total"].value == 1
    assert d["rollouts"]["total"].value == 1
    assert d["drift"]["cabling_faults"].value == 1
    assert d["stock"]["below"].value == 1


def test_superuser_sees_both_sites(fleet):
    d = fleet_dashboard(user=fleet["root"])
    assert [g.site for g in d["accelerators"]["sites"]] == ["sa", "sb"]
    assert d["nodes"]["all"].total.value == 6 + 5
    assert d["tickets"]["total"].value == 8
    assert d["held"]["total"].value == 2
    assert d["rollouts"]["total"].value == 2


@pytest.mark.parametrize("who", ["viewer", "root"])
def test_totals_equal_the_api_summary(fleet, who):
    client = Client()
    client.force_login(fleet[who])
    summary = client.get("/api/cmdb/summary/").json()
    d = fleet_dashboard(user=fleet[who])
    assert d["accelerators"]["total"].value == summary["accelerators"]["total"]
    assert d["nodes"]["all"].total.value == summary["nodes"]["total"]
    by_site = {g.site: g.total.value for g in d["accelerators"]["sites"]}
    assert by_site == summary["accelerators"]["by_site"]
    health = {label.lower(): c.value for label, c in d["accelerators"]["health"] if c.value}
    assert health == summary["accelerators"]["by_health"]
    statuses = {v: c.value for (v, _l, _t), c in zip(d["nodes"]["statuses"], d["nodes"]["all"].statuses, strict=True)}
    assert statuses == summary["nodes"]["by_status"]


@pytest.mark.parametrize("who", ["viewer", "root"])
def test_every_number_is_the_count_of_the_list_it_links_to(fleet, who):
    user = fleet[who]
    checked = 0
    for cell in cells(fleet_dashboard(user=user)):
        behind = count_behind(cell.href, user) if cell.href else None
        if behind is not None:
            assert behind == cell.value, cell
            checked += 1
    assert checked > 40


def test_links_use_the_list_filter_names(fleet):
    body = _page(fleet["viewer"])
    for href in (
        "/accelerators/?site=sa&amp;vendor=nvidia&amp;health=failed",
        "/accelerators/?site=sa&amp;vendor=nvidia&amp;is_missing=true",
        "/nodes/?site=sa&amp;status=active",
        "/nodes/?site=sa&amp;is_cordoned=true",
        "/nodes/?site=sa&amp;is_stale=true",
        "/nodes/?hostname__in=sa-cordoned",
        "/tickets/?type=repair&amp;age=3to7d",
        "/tickets/?type=repair&amp;overdue=1",
        "/tickets/?type=provisioning&amp;site=sa",
        "/links/?site=sa&amp;status=mismatch",
        "/stock/?below_minimum=true",
        "/stock/?site=sa",
        f"/rollouts/{fleet['a']['rollout'].pk}/",
    ):
        assert f'href="{href}"' in body, href


def test_page_is_scoped_and_draws_svg_bars(fleet):
    body = _page(fleet["viewer"])
    assert "<svg" in body and "<rect" in body
    assert "sb" not in {w.strip(">< ") for w in body.split()}
    for hidden in ("sb-gpu", "sb-stale", "sb-leaf", "SB-C", "/rollouts/{}/".format(fleet["b"]["rollout"].pk)):
        assert hidden not in body


def test_overdue_and_age_filters_of_the_ticket_list(fleet):
    user = fleet["viewer"]
    assert ticket_list(user, {"overdue": "1"}).count() == 1
    assert ticket_list(user, {"type": "repair", "age": "lt1d"}).count() == 1
    assert ticket_list(user, {"type": "repair", "age": "3to7d"}).count() == 1
    assert ticket_list(user, {"type": "repair", "age": "nonsense"}).count() == 2  # an unknown bucket filters nothing


def test_the_ticket_api_takes_the_same_filters(fleet):
    client = Client()
    client.force_login(fleet["viewer"])
    response = client.get("/api/workflows/tickets/", {"overdue": "true"})
    assert response.status_code == 200
    assert response.json()["count"] == 1
    assert client.get("/api/workflows/tickets/", {"type": "repair", "age": "lt1d"}).json()["count"] == 1


def test_stock_line_below_minimum(fleet):
    rows = fleet_dashboard(user=fleet["viewer"])["stock"]["rows"]
    [line] = [r.line for r in rows]
    assert (line.site_code, line.free, line.minimum, line.is_below_minimum) == ("sa", 1, 3, True)


def test_rollout_progress(fleet):
    [row] = fleet_dashboard(user=fleet["viewer"])["rollouts"]["rows"]
    assert (row.item.total, row.item.succeeded, row.item.in_flight, row.item.pending) == (3, 1, 1, 1)


def test_anonymous_is_sent_to_log_in(db):
    response = Client().get("/")
    assert response.status_code == 302 and "/login" in response["Location"]


def _page(user) -> str:
    client = Client()
    client.force_login(user)
    response = client.get("/")
    assert response.status_code == 200
    return response.content.decode()


def _queries(user) -> int:
    client = Client()
    client.force_login(user)
    with CaptureQueriesContext(connection) as ctx:
        assert client.get("/").status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.parametrize("who", ["viewer", "root"])
def test_constant_queries_whatever_the_fleet_size(db, who):
    build_site("sa", nodes=2)
    viewer = UserFactory(username="site-a-viewer", is_staff=False)
    grant_scope(scope_obj=m.Site.objects.get(code="sa"), perms=["view_scope"], users=[viewer])
    user = viewer if who == "viewer" else UserFactory(username="root", is_superuser=True)
    small = _queries(user)
    build_site("sc", nodes=10)
    grant_scope(scope_obj=m.Site.objects.get(code="sc"), perms=["view_scope"], users=[viewer])
    assert _queries(user) == small


@pytest.mark.django_db
def test_unmatched_firing_alerts_are_shown_to_who_may_see_them():
    from integrations.monitoring.models import ReceivedAlert

    site = SiteFactory(code="ua1")
    ReceivedAlert.objects.create(
        fingerprint="f00d",
        starts_at=NOW,
        status="firing",
        alertname="DCGM_FI_DEV_XID_ERRORS",
        labels={"Hostname": "ghost-node-17"},
        unmatched_reason="no node named ghost-node-17",
    )
    ReceivedAlert.objects.create(fingerprint="f00e", starts_at=NOW, status="resolved", alertname="NodeDown")
    root = Client()
    root.force_login(UserFactory(username="ua-root", is_superuser=True))
    page = root.get("/").content.decode()
    assert "ghost-node-17" in page and "no node named ghost-node-17" in page
    assert fleet_dashboard(user=UserFactory(username="ua-root2", is_superuser=True))["alerts"]["unmatched"].value == 1

    scoped = UserFactory(username="ua-tech")
    grant_scope(scope_obj=site, perms=["view_scope"], users=[scoped])
    assert fleet_dashboard(user=scoped)["alerts"]["unmatched"].value == 0  # an unmatched alert names no site
