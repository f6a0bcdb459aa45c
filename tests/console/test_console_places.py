"""Console place and group pages: a site (rooms, racks, fill, power), a rack (elevation of both faces), a
cluster and a tenant (nodes, cards by health, open work). Scoped: another site's objects are a 404 or absent."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from guardian.shortcuts import assign_perm

from cmdb import models as m
from cmdb.permissions import grant_scope
from tests.factories.cmdb import (
    AcceleratorFactory,
    ClusterFactory,
    NodeFactory,
    RackFactory,
    RoomFactory,
    ServerModelFactory,
    SiteFactory,
    SwitchFactory,
    TenantFactory,
    UserFactory,
)
from workflows.engine import ticket_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    """Site A (hall a1 with rack ra1, hall a2 empty) and site B (rack rb1), a 2U 1.5 kW model."""
    model = ServerModelFactory(name="2U-test", u_height=2, power_draw_kw="1.50")
    site_a, site_b = SiteFactory(code="site-a"), SiteFactory(code="site-b")
    room_a = RoomFactory(site=site_a, name="a1")
    RoomFactory(site=site_a, name="a2")
    rack_a = RackFactory(room=room_a, name="ra1", u_height=42, power_budget_kw=20, cooling="liquid")
    rack_b = RackFactory(room=RoomFactory(site=site_b, name="b1"), name="rb1")
    cluster_a = ClusterFactory(name="train-a", site=site_a)
    cluster_b = ClusterFactory(name="train-b", site=site_b)
    tenant = TenantFactory(slug="research")
    viewer = UserFactory(username="viewer-a")
    grant_scope(scope_obj=site_a, perms=["view_scope"], users=[viewer])
    return {
        "model": model,
        "site_a": site_a,
        "site_b": site_b,
        "rack_a": rack_a,
        "rack_b": rack_b,
        "cluster_a": cluster_a,
        "cluster_b": cluster_b,
        "tenant": tenant,
        "viewer": viewer,
    }


def _fill(world, count: int, *, prefix: str = "a", rack=None, site=None, cluster=None, start: int = 1) -> list:
    """`count` nodes stacked from U`start` in a rack (2U each), tenant `research`, a card each (every third failed)."""
    rack = rack or world["rack_a"]
    site = site or world["site_a"]
    nodes = []
    for i in range(count):
        node = NodeFactory(
            hostname=f"{prefix}-node-{i:03d}",
            site=site,
            rack=rack,
            position=start + 2 * i,
            server_model=world["model"],
            cluster=cluster or (world["cluster_a"] if site == world["site_a"] else world["cluster_b"]),
            tenant=world["tenant"],
            health="failed" if i % 3 == 2 else "ok",
        )
        AcceleratorFactory(node=node, serial=f"{prefix}-card-{i:03d}", health=node.health)
        nodes.append(node)
    return nodes


def _get(client, user, url):
    client.force_login(user)
    return client.get(url)


# --- site ---------------------------------------------------------------------------------------------------------


def test_site_page_shows_rooms_racks_fill_and_estimated_power(client, world):
    _fill(world, 3)
    SwitchFactory(name="a-tor", site=world["site_a"], rack=world["rack_a"], position=42, u_height=1)
    _fill(world, 2, prefix="qzxb", rack=world["rack_b"], site=world["site_b"])
    response = _get(client, world["viewer"], "/sites/site-a/")
    assert response.status_code == 200
    html = response.content.decode()
    (room,) = [r for r in response.context["rooms"] if r.room.name == "a1"]
    (row,) = room.racks
    assert (row.used_u, row.node_count, row.switch_count) == (7, 3, 1)  # 3 x 2U + a 1U switch
    assert str(row.power_kw) == "4.50" and row.power_pct == 22 and row.worst_health == "failed"
    assert re.search(r"7 / 42 U", html) and "4.5 / 20.0 kW" in html
    assert f"/racks/{world['rack_a'].pk}/" in html
    assert "Room a2" in html and "No racks in this room." in html
    assert "estimated from each server model" in html  # the page says the power figure is not measured
    assert "qzxb" not in html and "rb1" not in html


def test_site_of_another_site_is_a_404(client, world):
    assert _get(client, world["viewer"], "/sites/site-b/").status_code == 404
    assert _get(client, world["viewer"], "/sites/no-such-site/").status_code == 404
    assert _get(client, UserFactory(username="nobody"), "/sites/site-a/").status_code == 404


def test_site_page_counts_only_what_a_narrower_grant_sees(client, world):
    """A direct grant on one rack shows that rack but not the nodes in it: neither drawn nor counted."""
    _fill(world, 2)
    user = UserFactory(username="rack-only")
    assign_perm("cmdb.view_site", user, world["site_a"])
    assign_perm("cmdb.view_room", user, world["rack_a"].room)
    assign_perm("cmdb.view_rack", user, world["rack_a"])
    response = _get(client, user, "/sites/site-a/")
    assert response.status_code == 200
    (row,) = [r for room in response.context["rooms"] for r in room.racks]
    assert (row.used_u, row.node_count) == (0, 0)
    assert "a-node-000" not in response.content.decode()


# --- rack ---------------------------------------------------------------------------------------------------------


def test_rack_page_draws_each_device_at_its_u_on_its_face(client, world):
    nodes = _fill(world, 3)
    rear = NodeFactory(
        hostname="a-rear-01", site=world["site_a"], rack=world["rack_a"], position=20, face="rear",
        server_model=world["model"],
    )  # fmt: skip
    SwitchFactory(name="a-tor", site=world["site_a"], rack=world["rack_a"], position=42, u_height=1, status="failed")
    response = _get(client, world["viewer"], f"/racks/{world['rack_a'].pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    drawn = {
        (h, int(u), int(height), face)
        for h, u, height, face in re.findall(
            r'data-hostname="([^"]+)" data-u="(\d+)" data-height="(\d+)" data-face="(\w+)"', html
        )
    }
    assert drawn == {(n.hostname, n.position, 2, "front") for n in nodes} | {("a-rear-01", 20, 2, "rear")}
    assert re.search(r'data-switch="a-tor" data-u="42" data-height="1" data-face="front"', html)
    front, back = response.context["faces"]
    assert (front.used_u, back.used_u) == (7, 2)
    assert sum(1 for slot in front.units if slot.is_empty) == 35 and 'class="u-row empty" data-u="41"' in html
    # Health colours: a failed node and the failed switch.
    assert re.search(r'class="device node health-failed"[^>]*data-hostname="a-node-002"', html)
    assert re.search(r'class="device switch health-failed"[^>]*data-switch="a-tor"', html)
    for n in [*nodes, rear]:
        assert f'href="/nodes/{n.hostname}/"' in html
    assert 'href="/switches/a-tor/"' in html
    assert "6.00 kW of 20.00 kW (30 %)" in html and "Liquid (DLC)" in html
    assert "estimated from each server model" in html


def test_rack_of_another_site_is_a_404(client, world):
    _fill(world, 1, prefix="qzxb", rack=world["rack_b"], site=world["site_b"])
    assert _get(client, world["viewer"], f"/racks/{world['rack_b'].pk}/").status_code == 404
    assert _get(client, world["viewer"], "/racks/999999/").status_code == 404


def test_rack_over_budget_is_flagged(client, world):
    m.Rack.objects.filter(pk=world["rack_a"].pk).update(power_budget_kw=2)
    _fill(world, 2)
    html = _get(client, world["viewer"], f"/racks/{world['rack_a'].pk}/").content.decode()
    assert "over budget" in html and "3.00 kW of 2.00 kW (150 %)" in html


# --- cluster and tenant -----------------------------------------------------------------------------------------


def test_cluster_page_nodes_cards_by_health_and_scoped_open_work(client, world):
    nodes = _fill(world, 3)
    failed_card = m.Accelerator.objects.get(node=nodes[2])
    ticket = ticket_create(type_="repair", title="repair a", requester=None, inputs={"accelerator": failed_card})
    b_nodes = _fill(world, 3, prefix="qzxb", rack=world["rack_b"], site=world["site_b"])
    ticket_create(
        type_="repair",
        title="qzxb-repair",
        requester=None,
        inputs={"accelerator": m.Accelerator.objects.get(node=b_nodes[2])},
    )
    response = _get(client, world["viewer"], "/clusters/train-a/")
    assert response.status_code == 200
    ctx = response.context
    assert [n.hostname for n in ctx["nodes"]] == [n.hostname for n in nodes]
    assert dict((v, c) for v, _, c, _ in ctx["card_health"]) == {"ok": 2, "degraded": 0, "failed": 1, "unknown": 0}
    assert [t.pk for t in ctx["tickets"]] == [ticket.pk]
    html = response.content.decode()
    assert ticket.reference in html and "qzxb" not in html
    assert _get(client, world["viewer"], "/clusters/train-b/").status_code == 404


def test_tenant_page_shows_only_the_nodes_the_user_may_see(client, world):
    a_nodes = _fill(world, 2)
    _fill(world, 2, prefix="qzxb", rack=world["rack_b"], site=world["site_b"])
    # Site A's viewer with a direct grant on the tenant: the tenant page opens, with site A's nodes only.
    assert _get(client, world["viewer"], "/tenants/research/").status_code == 404
    assign_perm("cmdb.view_tenant", world["viewer"], world["tenant"])
    response = _get(client, world["viewer"], "/tenants/research/")
    assert response.status_code == 200
    assert [n.hostname for n in response.context["nodes"]] == [n.hostname for n in a_nodes]
    assert response.context["node_total"] == 2 and response.context["card_total"] == 2
    assert "qzxb" not in response.content.decode()
    # A tenant-wide grant covers the tenant's nodes in every site.
    tenant_viewer = UserFactory(username="tenant-viewer")
    grant_scope(scope_obj=world["tenant"], perms=["view_scope"], users=[tenant_viewer])
    assert _get(client, tenant_viewer, "/tenants/research/").context["node_total"] == 4


# --- a fixed number of queries whatever the number of devices ---------------------------------------------------


def _queries(client, user, url) -> int:
    client.force_login(user)
    client.get(url)  # warm the process-wide caches (content types) so the first count is not inflated
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.parametrize(
    "url",
    ["/sites/site-a/", "/racks/{rack}/", "/clusters/train-a/", "/tenants/research/"],
    ids=["site-detail", "rack-detail", "cluster-detail", "tenant-detail"],
)
def test_page_queries_do_not_grow_with_the_fleet(client, world, url):
    assign_perm("cmdb.view_tenant", world["viewer"], world["tenant"])
    url = url.format(rack=world["rack_a"].pk)
    _fill(world, 2)
    small = _queries(client, world["viewer"], url)
    _fill(world, 10, prefix="b", start=5)
    _fill(world, 10, prefix="c", rack=RackFactory(room=world["rack_a"].room, name="ra2"))
    m.Node.objects.filter(hostname__startswith="c-node-00").update(rack=None, position=None)
    for i in range(5):
        SwitchFactory(name=f"a-sw-{i}", site=world["site_a"], rack=world["rack_a"], position=30 + i)
    large = _queries(client, world["viewer"], url)
    assert small == large, (small, large)
