"""Console network pages: a switch (facts, ports, planned peers, cabling verdict, observed neighbours) and a fabric
(rails picture beside the cabling findings), against a small scoped world and the demo fabric's injected faults.
The fabric list, the cabling page and the fabric page count problems from one selector."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cmdb import models as m
from cmdb.permissions import grant_scope
from integrations.switches.models import ObservationSource, ObservedLink, PollRun, PollStatus
from tests.factories.cmdb import FabricFactory, NodeFactory, SiteFactory, SwitchFactory, UserFactory

pytestmark = pytest.mark.django_db

DEMO_FABRIC = "sh1-ib-compute"
DEMO_LEAF = f"{DEMO_FABRIC}-su001-leaf"


# --- a small world: site A's fabric with one leaf, a cable into a site-B node ---------------------------------


@pytest.fixture
def world():
    site_a, site_b = SiteFactory(code="site-a"), SiteFactory(code="site-b")
    fabric = FabricFactory(name="a-fabric", site=site_a, kind="roce", is_rail_optimized=True, rail_count=1)
    leaf = SwitchFactory(name="a-leaf0", site=site_a, fabric=fabric, rail=0, scalable_unit=1, model_name="SN4600")
    spine = SwitchFactory(name="a-spine0", site=site_a, fabric=fabric, role="spine")
    up = m.SwitchPort.objects.create(switch=leaf, name="Ethernet1/64", oper_state="up")
    down = m.SwitchPort.objects.create(switch=spine, name="Ethernet1/1", oper_state="up")
    m.Link.objects.create(fabric=fabric, a_switch_port=up, b_switch_port=down)
    PollRun.objects.create(switch=leaf, status=PollStatus.OK)
    viewer = UserFactory(username="viewer-a")
    grant_scope(scope_obj=site_a, perms=["view_scope"], users=[viewer])
    world = {"site_a": site_a, "site_b": site_b, "fabric": fabric, "leaf": leaf, "spine": spine, "viewer": viewer}
    world["foreign"] = _cable(world, "qzxb-node-001", 48, site=site_b)  # a site-B node cabled into site A's leaf
    return world


def _cable(world, hostname: str, port_no: int, *, site=None, observed: bool = True) -> m.Node:
    """A node with one rail-0 NIC planned on leaf port Ethernet1/<port_no>; the leaf sees it there by LLDP."""
    node = NodeFactory(hostname=hostname, site=site or world["site_a"])
    nic = m.Nic.objects.create(node=node, name="mlx5_0", kind="roce", rail=0)
    mac = f"b8:3f:d2:00:{port_no // 256:02x}:{port_no % 256:02x}"
    nport = m.NicPort.objects.create(nic=nic, name="1", mac=mac)
    sport = m.SwitchPort.objects.create(switch=world["leaf"], name=f"Ethernet1/{port_no}", oper_state="up")
    m.Link.objects.create(fabric=world["fabric"], a_nic_port=nport, b_switch_port=sport)
    if observed:
        ObservedLink.objects.create(
            source=ObservationSource.LLDP,
            switch=world["leaf"],
            switch_port=sport,
            local_device=world["leaf"].name,
            local_port=sport.name,
            remote_chassis_id=mac,
            remote_port=mac,
            remote_system=hostname,
        )
    return node


def _get(client, user, url):
    client.force_login(user)
    return client.get(url)


def test_switch_page_ports_peers_verdicts_and_neighbours(client, world):
    a1 = _cable(world, "a-node-001", 1)
    _cable(world, "a-node-002", 2, observed=False)
    response = _get(client, world["viewer"], "/switches/a-leaf0/")
    assert response.status_code == 200
    rows = {r.port.name: r for r in response.context["ports"]}
    # Ports in counting order, not string order.
    assert [r.port.name for r in response.context["ports"]] == [
        "Ethernet1/1",
        "Ethernet1/2",
        "Ethernet1/48",
        "Ethernet1/64",
    ]
    assert (rows["Ethernet1/1"].peer_device, rows["Ethernet1/1"].peer_port) == (a1.hostname, "mlx5_0/1")
    assert rows["Ethernet1/1"].finding.kind.value == "ok"
    assert rows["Ethernet1/2"].finding.kind.value == "missing"  # polled leaf, planned port sees nothing
    assert rows["Ethernet1/64"].peer_device == "a-spine0"
    html = response.content.decode()
    assert 'href="/nodes/a-node-001/"' in html and 'href="/switches/a-spine0/"' in html
    assert "SN4600" in html and f"/fabrics/{world['fabric'].pk}/" in html
    # The site-B node on port 48: the port is listed, its peer, its verdict and its LLDP neighbour are not.
    assert rows["Ethernet1/48"].peer_device == "" and rows["Ethernet1/48"].finding is None
    assert [o.remote_system for o in response.context["neighbours"]] == ["a-node-001"]
    assert "qzxb" not in html


def test_switch_of_another_site_is_a_404(client, world):
    SwitchFactory(name="qzxb-leaf", site=world["site_b"])
    assert _get(client, world["viewer"], "/switches/qzxb-leaf/").status_code == 404
    assert _get(client, world["viewer"], "/switches/no-such-switch/").status_code == 404


def test_fabric_page_draws_visible_devices_and_cables(client, world):
    _cable(world, "a-node-001", 1)
    _cable(world, "a-node-002", 2, observed=False)
    response = _get(client, world["viewer"], f"/fabrics/{world['fabric'].pk}/")
    assert response.status_code == 200
    diagram = response.context["diagram"]
    assert {b.name for b in diagram.boxes} == {"a-leaf0", "a-spine0", "a-node-001", "a-node-002"}
    assert diagram.box("a-spine0").y < diagram.box("a-leaf0").y < diagram.box("a-node-001").y
    states = {frozenset((s.a, s.b)): s.state for s in diagram.segments}
    # The leaf was polled and does not see its uplink: missing too.
    assert states == {
        frozenset(("a-node-001", "a-leaf0")): "ok",
        frozenset(("a-node-002", "a-leaf0")): "missing",
        frozenset(("a-leaf0", "a-spine0")): "missing",
    }
    assert {lab.text for lab in diagram.labels} >= {"rail 0", "SU 1"}
    html = response.content.decode()
    assert re.search(r'class="cable line-missing" [^>]*data-a="a-node-002" data-b="a-leaf0"', html)
    assert response.context["problem_count"] == 2 and response.context["link_count"] == 3
    assert "qzxb" not in html
    assert _get(client, world["viewer"], "/fabrics/999999/").status_code == 404
    b_fabric = FabricFactory(name="qzxb-fabric", site=world["site_b"])
    assert _get(client, world["viewer"], f"/fabrics/{b_fabric.pk}/").status_code == 404


def _queries(client, user, url) -> int:
    client.force_login(user)
    client.get(url)  # warm the process-wide caches (content types) so the first count is not inflated
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.parametrize("url", ["/switches/a-leaf0/", "/fabrics/{fabric}/"], ids=["switch-detail", "fabric-detail"])
def test_network_page_queries_do_not_grow_with_the_fabric(client, world, url):
    url = url.format(fabric=world["fabric"].pk)
    for i in range(2):
        _cable(world, f"a-node-{i:03d}", i + 1, observed=bool(i % 2))
    small = _queries(client, world["viewer"], url)
    for i in range(2, 12):
        _cable(world, f"a-node-{i:03d}", i + 1, observed=bool(i % 2))
    large = _queries(client, world["viewer"], url)
    assert small == large, (small, large)


def test_fabric_list_counts_each_fabric_like_its_page_in_a_fixed_number_of_queries(client, world):
    _cable(world, "a-node-001", 1, observed=False)
    small = _queries(client, world["viewer"], "/fabrics/")
    for i in range(3):
        fabric = FabricFactory(name=f"a-more-{i}", site=world["site_a"])
        leaf = SwitchFactory(name=f"a-more-leaf{i}", site=world["site_a"], fabric=fabric)
        port = m.SwitchPort.objects.create(switch=leaf, name="p1")
        ObservedLink.objects.create(
            source=ObservationSource.LLDP, switch=leaf, switch_port=port, local_device=leaf.name, local_port="p1",
            remote_chassis_id=f"aa:bb:cc:00:00:0{i}", remote_port=f"aa:bb:cc:00:00:0{i}", remote_system="stray",
        )  # fmt: skip
    large = _queries(client, world["viewer"], "/fabrics/")
    assert small == large, (small, large)
    response = client.get("/fabrics/")
    for row in response.context["rows"]:
        page = client.get(f"/fabrics/{row['fabric'].pk}/")
        assert row["cabling"].problem_count == page.context["problem_count"], row["fabric"].name
    counts = {row["fabric"].name: row["cabling"].problem_count for row in response.context["rows"]}
    # a-fabric: a-node-001 and the uplink missing (the site-B node's cable is not counted); each other one a stray.
    assert counts == {"a-fabric": 2, "a-more-0": 1, "a-more-1": 1, "a-more-2": 1}
    assert "qzxb" not in response.content.decode()


# --- the demo fabric: a crossed pair, a missing cable, and where it went ---------------------------------------------


@pytest.fixture
def demo(db) -> m.Fabric:
    from cmdb.services.demo import demo_load

    demo_load(scale="small", only="sh1-h100")
    call_command("switches_demo_observe", "--fabric", DEMO_FABRIC, stdout=StringIO())
    return m.Fabric.objects.get(name=DEMO_FABRIC)


def test_demo_fabric_faults_are_highlighted_and_every_page_counts_them_alike(client, demo):
    ops = get_user_model().objects.create_superuser("ops", "ops@example.com", "pw")
    client.force_login(ops)
    response = client.get(f"/fabrics/{demo.pk}/")
    assert response.status_code == 200
    diagram = response.context["diagram"]
    planned = {(s.a, s.b): s.state for s in diagram.segments if not s.observed}
    observed = {(s.a, s.b): s.state for s in diagram.segments if s.observed}
    assert planned[("sh1-h100-0003", f"{DEMO_LEAF}2")] == planned[("sh1-h100-0003", f"{DEMO_LEAF}5")] == "crossed"
    assert planned[("sh1-h100-0010", f"{DEMO_LEAF}6")] == "missing"
    assert observed[("sh1-h100-0010", f"{DEMO_LEAF}6")] == "unexpected"  # the moved cable, in the spare port
    assert diagram.counts["crossed"] == 2 and diagram.counts["missing"] == 1
    assert sum(1 for s in planned.values() if s == "ok") >= 24 * 8 - 3
    # Leaves grouped by rail, nodes by scalable unit.
    assert {f"rail {r}" for r in range(8)} <= {lab.text for lab in diagram.labels}
    assert any(lab.text.startswith("SU ") for lab in diagram.labels)
    problems = {(r["f"].kind.value, r["f"].switch, r["f"].port) for r in response.context["problem_rows"]}
    assert problems == {
        ("miswired", f"{DEMO_LEAF}2", "p3"),
        ("miswired", f"{DEMO_LEAF}5", "p3"),
        ("missing", f"{DEMO_LEAF}6", "p10"),
        ("unexpected", f"{DEMO_LEAF}6", "p30"),
    }
    # The fabric list, the cabling page and this page show the same count, and the list links here.
    cabling = client.get(f"/fabrics/{demo.pk}/cabling/", {"kind": "problems"})
    listing = client.get("/fabrics/")
    (row,) = [r for r in listing.context["rows"] if r["fabric"].pk == demo.pk]
    assert row["cabling"].problem_count == cabling.context["problem_count"] == len(cabling.context["rows"]) == 4
    assert response.context["problem_count"] == 4
    assert f'href="/fabrics/{demo.pk}/"' in listing.content.decode()
    assert 'data-problems="4"' in listing.content.decode() and 'data-problems="4"' in cabling.content.decode()

    # Fix the crossed pair's observations away: every page moves together.
    ObservedLink.objects.filter(switch__name=f"{DEMO_LEAF}2", local_port="p3").delete()
    listing = client.get("/fabrics/")
    (row,) = [r for r in listing.context["rows"] if r["fabric"].pk == demo.pk]
    cabling = client.get(f"/fabrics/{demo.pk}/cabling/")
    assert row["cabling"].problem_count == cabling.context["problem_count"]
    assert client.get(f"/fabrics/{demo.pk}/").context["problem_count"] == cabling.context["problem_count"]
