"""The console's inventory lists: the API's filters, sort, chosen columns, pages, CSV of every row, 400s that
name the parameter, scoping, and a constant number of queries whatever the fleet size."""

from __future__ import annotations

import csv
import io

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cmdb import models as m
from cmdb.permissions import grant_scope
from tests.factories.cmdb import (
    AcceleratorFactory,
    ClusterFactory,
    FabricFactory,
    NodeFactory,
    RackFactory,
    RoomFactory,
    SiteFactory,
    StockLocationFactory,
    SwitchFactory,
    TenantFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

LISTS = ["/nodes/", "/accelerators/", "/switches/", "/links/", "/stock/"]


@pytest.fixture
def sites():
    return SiteFactory(code="sh1"), SiteFactory(code="bj2")


@pytest.fixture
def viewer(client, sites):
    """A person who may see site sh1 only."""
    user = UserFactory(username="viewer", is_staff=False)
    grant_scope(scope_obj=sites[0], perms=["view_scope"], users=[user])
    client.force_login(user)
    return client


def fleet(site: m.Site, n: int, prefix: str = "gpu") -> list[m.Node]:
    """`n` nodes in a rack with cluster and tenant, 2 cards each (one degraded on the first), a leaf and a link."""
    room = RoomFactory(site=site)
    cluster, tenant = ClusterFactory(site=site), TenantFactory()
    fabric = FabricFactory(site=site)
    leaf = SwitchFactory(site=site, fabric=fabric, rail=0)
    nodes = []
    for i in range(n):
        hostname = f"{site.code}-{prefix}-{i:04d}"
        node = NodeFactory(site=site, hostname=hostname, rack=RackFactory(room=room), position=3, cluster=cluster)
        node.tenant = tenant
        node.save(update_fields=["tenant"])
        for slot in range(2):
            AcceleratorFactory(node=node, slot_index=slot, health="degraded" if (i == 0 and slot == 0) else "ok")
        nic = m.Nic.objects.create(node=node, name="mlx5_0", kind="infiniband", rail=0)
        port = m.NicPort.objects.create(nic=nic, name="1")
        sp = m.SwitchPort.objects.create(switch=leaf, name=f"Ethernet1/{i + 1}")
        m.Link.objects.create(fabric=fabric, a_nic_port=port, b_switch_port=sp, status="connected")
        nodes.append(node)
    return nodes


def rows_of(response) -> list[list[str]]:
    assert response.status_code == 200, response.content[:500]
    body = b"".join(response.streaming_content).decode()
    return list(csv.reader(io.StringIO(body)))


def test_nodes_default_columns_and_links_to_object_pages(viewer, sites):
    fleet(sites[0], 2)
    page = viewer.get("/nodes/").content.decode()
    for label in ("Hostname", "Site", "Rack / U", "Model", "Status", "Health", "Cordon", "Cluster", "Tenant"):
        assert f">{label}" in page
    assert "Cards (count/healthy)" in page and "Last seen" in page
    assert 'href="/nodes/sh1-gpu-0000/"' in page
    assert ">2/1<" in page and ">2/2<" in page  # the first node has one degraded card


def test_a_healthy_uncordoned_node_is_drawn_quietly(viewer, sites):
    (node,) = fleet(sites[0], 1)
    m.Accelerator.objects.update(health="ok")
    page = viewer.get("/nodes/?cols=hostname,health,cordon").content.decode()
    assert "False" not in page and "tone-rejected" not in page and "tone-waiting" not in page
    m.Node.objects.filter(pk=node.pk).update(is_cordoned=True, cordon_reason="bad NVLink")
    page = viewer.get("/nodes/?cols=hostname,health,cordon").content.decode()
    assert 'title="bad NVLink"' in page and "cordoned" in page


def test_filters_mean_what_the_api_filters_mean(viewer, sites):
    nodes = fleet(sites[0], 3)
    m.Node.objects.filter(pk=nodes[1].pk).update(health="failed")
    for query in ("health=failed", "health__in=failed,degraded", "q=gpu-0001", f"hostname={nodes[1].hostname}"):
        got = rows_of(viewer.get(f"/nodes/?{query}&format=csv&cols=hostname"))
        api = viewer.get(f"/api/cmdb/nodes/?{query}").json()
        assert [r[0] for r in got[1:]] == sorted(n["hostname"] for n in api["results"]) == [nodes[1].hostname]


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/nodes/?health=awful", "health"),
        ("/nodes/?is_cordoned=perhaps", "is_cordoned"),
        ("/nodes/?last_seen_at__gte=yesterday", "last_seen_at__gte"),
        ("/nodes/?sort=password", "sort"),
        ("/nodes/?cols=hostname,secret", "cols"),
        ("/nodes/?page=zero", "page"),
        ("/nodes/?page=9", "page"),
        ("/nodes/?per_page=100000", "per_page"),
        ("/nodes/?format=xlsx", "format"),
        ("/accelerators/?lifecycle=lost", "lifecycle"),
        ("/switches/?rail=one", "rail"),
        ("/links/?status=broken", "status"),
        ("/stock/?below_minimum=maybe", "below_minimum"),
        ("/stock/?sort=price", "sort"),
    ],
)
def test_bad_values_are_a_400_naming_the_field(viewer, sites, url, field):
    fleet(sites[0], 1)
    response = viewer.get(url)
    assert response.status_code == 400
    assert f"<code>{field}</code>" in response.content.decode()


def test_unknown_parameters_are_ignored(viewer, sites):
    fleet(sites[0], 1)
    assert viewer.get("/nodes/?utm_source=mail").status_code == 200


def test_sort_by_column_both_ways_and_pages_are_bounded(viewer, sites):
    fleet(sites[0], 5)
    asc = rows_of(viewer.get("/nodes/?sort=hostname&format=csv&cols=hostname"))
    desc = rows_of(viewer.get("/nodes/?sort=-hostname&format=csv&cols=hostname"))
    assert [r[0] for r in asc[1:]] == list(reversed([r[0] for r in desc[1:]])) and len(asc) == 6
    page2 = viewer.get("/nodes/?sort=-hostname&per_page=2&page=2").content.decode()
    assert "sh1-gpu-0002" in page2 and "sh1-gpu-0001" in page2 and "sh1-gpu-0004" not in page2
    assert "Page 2 of 3" in page2
    # The next/previous links keep the sort and the page size.
    assert "sort=-hostname" in page2 and "per_page=2" in page2


def test_csv_exports_the_shown_columns_of_every_page(viewer, sites):
    fleet(sites[0], 5)
    page = viewer.get("/nodes/?cols=hostname,cards,cordon&per_page=2").content.decode()
    assert "Export CSV (all 5 nodes, every page)" in page
    assert "format=csv" in page and "cols=hostname,cards,cordon" in page
    rows = rows_of(viewer.get("/nodes/?cols=hostname,cards,cordon&per_page=2&format=csv"))
    assert rows[0] == ["Hostname", "Cards (count/healthy)", "Cordon"]
    assert len(rows) == 6  # every node, not the page of 2
    assert rows[1] == ["sh1-gpu-0000", "2/1", ""]


def test_chosen_columns_stay_in_the_links(viewer, sites):
    fleet(sites[0], 3)
    page = viewer.get("/nodes/?cols=hostname,serial&per_page=1").content.decode()
    head = page.split("<thead>")[1].split("</thead>")[0]
    assert ">Serial" in head and ">Tenant" not in head
    assert "cols=hostname,serial" in page  # pager, sort headers and export keep the choice


def test_nothing_of_another_site_is_listed_or_counted(viewer, sites):
    fleet(sites[0], 1)
    fleet(sites[1], 3, prefix="qzxb")
    AcceleratorFactory(node=None, lifecycle="in_stock", stock_location=StockLocationFactory(site=sites[1]))
    for url in LISTS:
        response = viewer.get(url)
        assert response.status_code == 200
        assert "qzxb" not in response.content.decode() and "bj2" not in response.content.decode()
    assert "1 node<" in viewer.get("/nodes/").content.decode()
    for url in LISTS:
        body = b"".join(viewer.get(f"{url}?format=csv").streaming_content).decode()
        assert "qzxb" not in body and "bj2" not in body


def test_anonymous_is_sent_to_log_in(client):
    for url in LISTS:
        response = client.get(url)
        assert response.status_code == 302 and "/login" in response["Location"]


def test_accelerator_switch_and_link_lists_link_their_objects(viewer, sites):
    fleet(sites[0], 1)
    cards = viewer.get("/accelerators/").content.decode()
    serial = m.Accelerator.objects.first().serial
    assert f'href="/accelerators/{serial}/"' in cards and 'href="/nodes/sh1-gpu-0000/"' in cards
    switches = viewer.get("/switches/").content.decode()
    leaf = m.Switch.objects.get()
    assert f'href="/switches/{leaf.name}/"' in switches
    links = viewer.get("/links/").content.decode()
    assert "sh1-gpu-0000 mlx5_0/1" in links and f'href="/switches/{leaf.name}/"' in links


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
        assert response.status_code == 200
        if hasattr(response, "streaming_content"):
            b"".join(response.streaming_content)
    return len(ctx.captured_queries)


@pytest.mark.parametrize(
    "url",
    [
        "/nodes/",
        "/nodes/?cols=hostname,site,rack,model,status,health,cordon,cluster,tenant,cards,last_seen,serial,stale",
        "/nodes/?format=csv",
        "/accelerators/?cols=serial,model,vendor,site,node,rack,cluster,tenant,stock_location",
        "/accelerators/?format=csv",
        "/switches/?cols=name,site,rack,fabric,vendor,ports",
        "/links/",
        "/links/?format=csv",
        "/stock/",
    ],
)
def test_queries_do_not_grow_with_the_fleet(viewer, sites, url):
    fleet(sites[0], 2)
    small = _queries(viewer, url)
    fleet(sites[0], 10, prefix="more")
    for _ in range(4):
        AcceleratorFactory(node=None, lifecycle="in_stock", stock_location=StockLocationFactory(site=sites[0]))
    assert _queries(viewer, url) == small
