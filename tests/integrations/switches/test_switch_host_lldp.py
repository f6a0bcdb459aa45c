"""The host's view of its cables: agent reports with `lldp_neighbors`, through the real ingestion endpoint, become
host-LLDP observations that cabling validation reads next to the switches' own view."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from cmdb.models import ChangeRecord, Fabric, Link, Nic, NicPort, Node, Switch, SwitchPort
from integrations.switches.cabling import FindingKind
from integrations.switches.cabling_service import fabric_cabling_report
from integrations.switches.models import ObservedLink, PollRun
from integrations.switches.tasks import node_report_observe
from inventory_agents.models import AgentState
from inventory_agents.services.health import health_policies_ensure
from inventory_agents.services.tokens import agent_token_issue
from tests.inventory_agents.server.ingest_support import REPORTS_URL, make_node, report_of

LEAF_MAC = "0c:42:a1:7e:55:0{}"  # chassis id of su1-leaf<rail>


@dataclass
class Roce:
    fabric: Fabric
    node: Node
    token: str
    leaves: list[Switch]


@pytest.fixture
def roce(fabric_site, settings) -> Roce:
    """A rail-optimised RoCE fabric: two rail leaves, one node whose two netdevs are planned on port 1 of their
    rail's leaf. Celery runs in-process, so a committed report runs its discovery task."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    health_policies_ensure()
    site, vendor = fabric_site
    fabric = Fabric.objects.create(
        name="roce-a", kind="roce", purpose="compute", site=site, is_rail_optimized=True, rail_count=2
    )
    leaves = [
        Switch.objects.create(
            name=f"su1-leaf{r}", vendor=vendor, site=site, fabric=fabric, rail=r, scalable_unit=1, platform="arista_eos"
        )
        for r in range(2)
    ]
    for leaf in leaves:
        for i in range(1, 5):
            SwitchPort.objects.create(switch=leaf, name=f"Ethernet1/{i}")
    node = make_node("gpu-0001", cards=0, nics=0, site=site)
    for rail in range(2):
        nic = Nic.objects.create(node=node, name=f"ens{rail + 1}f0np0", kind="roce", rail=rail)
        port = NicPort.objects.create(nic=nic, name="1", mac=f"b8:3f:d2:00:01:{rail:02x}", speed_mbps=400000)
        Link.objects.create(
            fabric=fabric,
            a_nic_port=port,
            b_switch_port=SwitchPort.objects.get(switch=leaves[rail], name="Ethernet1/1"),
        )
    return Roce(fabric=fabric, node=node, token=agent_token_issue(node=node).token, leaves=leaves)


def neighbour(local: str, system: str, port: str, *, chassis: str | None = None, descr: str = "") -> dict[str, Any]:
    """One entry of the report's lldp_neighbors, as the agent's lldpctl collector writes it."""
    return {
        "local_port": local,
        "remote_chassis_id": chassis,
        "remote_chassis_id_type": "mac",
        "remote_system": system,
        "remote_port": port,
        "remote_port_id_type": "ifname",
        "remote_port_description": descr or None,
        "remote_mgmt_ips": [],
    }


def post(client, capture, node: Node, token: str, **changes: Any) -> dict[str, Any]:
    """POST the node's report to the agent endpoint and run what it deferred to the commit (the discovery task)."""
    body = json.dumps(report_of(node, **changes)).encode()
    with capture(execute=True):
        response = client.generic(
            "POST", REPORTS_URL, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
        )
    assert response.status_code == 200, response.content
    return response.json()


def findings(fabric: Fabric) -> dict[tuple[str, str], Any]:
    return {(f.switch, f.port): f for f in fabric_cabling_report(fabric)}


def host_rows(node: Node):
    return ObservedLink.objects.filter(node=node, source="host_lldp").order_by("local_port")


def test_host_lldp_alone_validates_the_cabling(roce, client, django_capture_on_commit_callbacks):
    # lldpd says the FQDN and the short port name; no switch of the fabric was ever polled.
    body = post(
        client,
        django_capture_on_commit_callbacks,
        roce.node,
        roce.token,
        lldp_neighbors=[
            neighbour("ens1f0np0", "su1-leaf0.dc1", "Et1/1", chassis=LEAF_MAC.format(0)),
            neighbour("ens2f0np0", "SU1-LEAF1", "Ethernet1/1", chassis=LEAF_MAC.format(1)),
        ],
    )
    assert body["status"] == "applied"

    rows = list(host_rows(roce.node))
    assert [(r.local_port, str(r.nic_port), str(r.switch_port)) for r in rows] == [
        ("ens1f0np0", "gpu-0001:ens1f0np0/1", "su1-leaf0:Ethernet1/1"),
        ("ens2f0np0", "gpu-0001:ens2f0np0/1", "su1-leaf1:Ethernet1/1"),
    ]
    # Each new observation is in the history, from the agent, under the report's correlation id.
    records = ChangeRecord.objects.filter(correlation_id=body["report_id"], content_type__model="observedlink")
    assert records.count() == 2 and {r.source for r in records} == {"agent"}

    report = findings(roce.fabric)
    assert {k: f.kind for k, f in report.items()} == {
        ("su1-leaf0", "Ethernet1/1"): FindingKind.OK,
        ("su1-leaf1", "Ethernet1/1"): FindingKind.OK,
    }
    fabric_cabling_report(roce.fabric, update_link_status=True)
    assert set(Link.objects.filter(fabric=roce.fabric).values_list("status", flat=True)) == {"connected"}


def test_crossed_cables_seen_only_from_the_host(roce, client, django_capture_on_commit_callbacks):
    post(
        client,
        django_capture_on_commit_callbacks,
        roce.node,
        roce.token,
        lldp_neighbors=[
            neighbour("ens1f0np0", "su1-leaf1", "Ethernet1/1"),
            neighbour("ens2f0np0", "su1-leaf0", "Ethernet1/1"),
        ],
    )
    report = findings(roce.fabric)
    leaf0, leaf1 = report[("su1-leaf0", "Ethernet1/1")], report[("su1-leaf1", "Ethernet1/1")]
    assert (leaf0.kind, leaf1.kind) == (FindingKind.MISWIRED, FindingKind.MISWIRED)
    assert (str(leaf0.found), str(leaf0.swap_partner)) == ("gpu-0001:ens2f0np0/1", "su1-leaf1:Ethernet1/1")
    assert "HCA ens2f0np0 (rail 1) lands on leaf su1-leaf0 (rail 0)" in leaf0.rail_violation
    fabric_cabling_report(roce.fabric, update_link_status=True)
    assert set(Link.objects.filter(fabric=roce.fabric).values_list("status", flat=True)) == {"mismatch"}


def test_the_same_neighbours_again_change_nothing(roce, client, django_capture_on_commit_callbacks):
    neighbours = [neighbour("ens1f0np0", "su1-leaf0", "Ethernet1/1"), neighbour("ens2f0np0", "su1-leaf1", "Et1/1")]
    first = post(client, django_capture_on_commit_callbacks, roce.node, roce.token, lldp_neighbors=neighbours)
    rows = {r.pk: (r.first_seen_at, r.switch_port_id, r.nic_port_id) for r in host_rows(roce.node)}
    records = ChangeRecord.objects.filter(content_type__model="observedlink").count()

    assert (
        post(client, django_capture_on_commit_callbacks, roce.node, roce.token, lldp_neighbors=neighbours)["status"]
        == "unchanged"
    )
    # The periodic full pass applies the same inventory again: the task runs, and finds nothing to change.
    AgentState.objects.filter(node=roce.node).update(last_full_at=timezone.now() - dt.timedelta(days=1))
    again = post(client, django_capture_on_commit_callbacks, roce.node, roce.token, lldp_neighbors=neighbours)
    assert again["status"] == "applied" and again["report_id"] != first["report_id"]

    assert {r.pk: (r.first_seen_at, r.switch_port_id, r.nic_port_id) for r in host_rows(roce.node)} == rows
    assert ChangeRecord.objects.filter(content_type__model="observedlink").count() == records


def test_a_moved_cable_replaces_the_observation_with_records(roce, client, django_capture_on_commit_callbacks):
    post(
        client,
        django_capture_on_commit_callbacks,
        roce.node,
        roce.token,
        lldp_neighbors=[neighbour("ens1f0np0", "su1-leaf0", "Ethernet1/1")],
    )
    moved = post(
        client,
        django_capture_on_commit_callbacks,
        roce.node,
        roce.token,
        lldp_neighbors=[neighbour("ens1f0np0", "su1-leaf0", "Ethernet1/3")],
    )
    assert [str(r.switch_port) for r in host_rows(roce.node)] == ["su1-leaf0:Ethernet1/3"]
    actions = ChangeRecord.objects.filter(correlation_id=moved["report_id"], content_type__model="observedlink")
    assert sorted(r.action for r in actions) == ["create", "delete"]

    report = findings(roce.fabric)
    assert report[("su1-leaf0", "Ethernet1/1")].kind == FindingKind.MISSING
    assert str(report[("su1-leaf0", "Ethernet1/1")].elsewhere) == "su1-leaf0:Ethernet1/3"
    assert report[("su1-leaf0", "Ethernet1/3")].kind == FindingKind.UNEXPECTED
    assert ("su1-leaf1", "Ethernet1/1") not in report  # leaf1 was never polled and nobody reported on it


def test_unknown_neighbours_are_reported_as_unknown(roce, client, django_capture_on_commit_callbacks):
    post(
        client,
        django_capture_on_commit_callbacks,
        roce.node,
        roce.token,
        lldp_neighbors=[
            # The rail-0 cable lands on a switch no inventory record knows (neither its name nor its chassis MAC).
            neighbour("ens1f0np0", "rogue-tor", "Gi0/7", chassis="aa:bb:cc:00:00:07"),
            # An interface the CMDB does not list, on a port of a known leaf.
            neighbour("eth9", "su1-leaf1", "Ethernet1/4"),
        ],
    )
    stored = {r.local_port: r for r in host_rows(roce.node)}
    assert stored["ens1f0np0"].switch is None and stored["ens1f0np0"].remote_system == "rogue-tor"
    assert stored["eth9"].nic_port is None and str(stored["eth9"].switch_port) == "su1-leaf1:Ethernet1/4"

    report = findings(roce.fabric)
    rogue = report[("rogue-tor", "Gi0/7")]
    assert rogue.kind == FindingKind.UNKNOWN_NEIGHBOR and str(rogue.found) == "gpu-0001:ens1f0np0/1"
    assert "reports a switch inventory does not know" in rogue.message
    assert report[("su1-leaf0", "Ethernet1/1")].kind == FindingKind.MISSING
    eth9 = report[("su1-leaf1", "Ethernet1/4")]
    assert eth9.kind == FindingKind.UNKNOWN_NEIGHBOR and str(eth9.observed) == "gpu-0001:eth9"


def test_switch_and_host_disagree(roce, client, django_capture_on_commit_callbacks):
    leaf0 = roce.leaves[0]
    run = PollRun.objects.create(switch=leaf0, kind="snmp", status="ok")
    # leaf0's LLDP table says port 1 sees the rail-1 netdev (lldpd's port id: its MAC) ...
    ObservedLink.objects.create(
        switch=leaf0,
        local_device=leaf0.name,
        local_port="Ethernet1/1",
        poll_run=run,
        remote_chassis_id="b8:3f:d2:00:01:00",
        remote_port="b8:3f:d2:00:01:01",
    )
    # ... the host says its rail-0 netdev is there, as planned.
    post(
        client,
        django_capture_on_commit_callbacks,
        roce.node,
        roce.token,
        lldp_neighbors=[neighbour("ens1f0np0", "su1-leaf0", "Ethernet1/1")],
    )

    finding = findings(roce.fabric)[("su1-leaf0", "Ethernet1/1")]
    assert finding.kind == FindingKind.MISWIRED
    assert finding.message == (
        "su1-leaf0:Ethernet1/1 miswired: the views disagree: the switch sees "
        "gpu-0001:ens2f0np0/1, the host reports gpu-0001:ens1f0np0/1 on this port "
        "(expected gpu-0001:ens1f0np0/1); rail violation: node gpu-0001 HCA ens2f0np0 "
        "(rail 1) lands on leaf su1-leaf0 (rail 0)"
    )
    # The fabric's cabling page says so too, next to the finding.
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "x"))
    page = client.get(f"/fabrics/{roce.fabric.pk}/cabling/?kind=miswired").content.decode()
    assert "switch and host disagree: the switch sees gpu-0001:ens2f0np0/1" in page


def test_a_failed_lldp_collector_keeps_the_last_view(roce, client, django_capture_on_commit_callbacks):
    post(
        client,
        django_capture_on_commit_callbacks,
        roce.node,
        roce.token,
        lldp_neighbors=[neighbour("ens1f0np0", "su1-leaf0", "Ethernet1/1")],
    )
    post(
        client,
        django_capture_on_commit_callbacks,
        roce.node,
        roce.token,
        lldp_neighbors=[],
        collector_errors=[{"collector": "lldp", "error": "lldpctl timed out after 10 s"}],
    )
    assert [r.local_port for r in host_rows(roce.node)] == ["ens1f0np0"]
    # lldpd answering with no neighbour is news, though: the cable was pulled.
    post(client, django_capture_on_commit_callbacks, roce.node, roce.token, lldp_neighbors=[])
    assert not host_rows(roce.node).exists()


def test_a_late_task_of_an_older_report_does_not_roll_back(roce, client, django_capture_on_commit_callbacks):
    old = post(
        client,
        django_capture_on_commit_callbacks,
        roce.node,
        roce.token,
        lldp_neighbors=[neighbour("ens1f0np0", "su1-leaf0", "Ethernet1/1")],
    )
    post(
        client,
        django_capture_on_commit_callbacks,
        roce.node,
        roce.token,
        lldp_neighbors=[neighbour("ens1f0np0", "su1-leaf0", "Ethernet1/2")],
    )
    node_report_observe(roce.node.pk, old["report_id"], [["ens1f0np0", "", "su1-leaf0", "Ethernet1/1", ""]])
    assert [str(r.switch_port) for r in host_rows(roce.node)] == ["su1-leaf0:Ethernet1/2"]


def test_the_receiver_only_defers(roce, django_assert_num_queries, django_capture_on_commit_callbacks):
    """It runs inside the reconciliation transaction, whose query count is asserted: no query, one callback."""
    from inventory_agents.services.normalize import LldpObs, Observed
    from inventory_agents.signals import report_applied

    observed = Observed(
        schema="v1",
        hostname="gpu-0001",
        collected_at=None,
        agent_version="1",
        node_facts={},
        node_serial=None,
        cards=[],
        nics=[],
        software={},
        orphan_signals={},
        complete_sections=frozenset(),
        lldp=[LldpObs("ens1f0np0", "", "su1-leaf0", "Ethernet1/1", "")],
    )
    with django_capture_on_commit_callbacks() as callbacks, django_assert_num_queries(0):
        report_applied.send(
            sender=Node, node=roce.node, report_id="6f1c0c54-1d43-4c0e-9a3e-0d2b1f7c9e11", observed=observed
        )
    assert len(callbacks) == 1


def test_a_roce_nic_planned_by_its_rdma_device(roce, client, django_capture_on_commit_callbacks):
    """Provisioning plans the RDMA device (mlx5_0), lldpd runs on its netdev: one port when they share the MAC."""
    netdev = NicPort.objects.get(nic__node=roce.node, nic__name="ens1f0np0")
    rdma = NicPort.objects.create(
        nic=Nic.objects.create(node=roce.node, name="mlx5_0", kind="roce", rail=0), name="1", mac=netdev.mac
    )
    Link.objects.filter(a_nic_port=netdev).update(a_nic_port=rdma)
    post(
        client,
        django_capture_on_commit_callbacks,
        roce.node,
        roce.token,
        lldp_neighbors=[neighbour("ens1f0np0", "su1-leaf0", "Ethernet1/1")],
    )
    finding = findings(roce.fabric)[("su1-leaf0", "Ethernet1/1")]
    assert (finding.kind, str(finding.found)) == (FindingKind.OK, "gpu-0001:mlx5_0/1")


def test_a_roce_rdma_device_gets_its_netdev_mac_from_the_agent(roce, client, django_capture_on_commit_callbacks):
    """ibstat prints no MAC: the agent's sysfs facts (PCI address, netdevs of the CA) pair the RDMA device with its
    netdev, so a plan on mlx5_0 matches what lldpd sees on ens1f0np0 without anyone typing a MAC in."""
    netdev = NicPort.objects.get(nic__node=roce.node, nic__name="ens1f0np0")
    rdma = NicPort.objects.create(nic=Nic.objects.create(node=roce.node, name="mlx5_0", kind="roce", rail=0), name="1")
    Link.objects.filter(a_nic_port=netdev).update(a_nic_port=rdma)
    nics = [
        {
            "name": f"ens{r + 1}f0np0",
            "mac": f"b8:3f:d2:00:01:{r:02x}",
            "speed_mbps": 400000,
            "state": "up",
            "kind": "physical",
            "pci_bus_id": f"0000:{0x1A + r:02x}:00.0",
            "mtu": 9000,
        }
        for r in range(2)
    ]
    hca = {
        "ca": "mlx5_0",
        "node_guid": "0xb83fd20300000100",
        "firmware": "28.39.1002",
        "pci_bus_id": "0000:1a:00.0",
        "netdevs": ["ens1f0np0"],
        "ports": [
            {
                "port": 1,
                "state": "active",
                "phys_state": "linkup",
                "rate_gbps": 400,
                "port_guid": "0xba3fd2fffe000100",
                "link_layer": "ethernet",
                "lid": 0,
            }
        ],
    }
    post(
        client,
        django_capture_on_commit_callbacks,
        roce.node,
        roce.token,
        nics=nics,
        infiniband=[hca],
        lldp_neighbors=[neighbour("ens1f0np0", "su1-leaf0", "Ethernet1/1")],
    )
    rdma.refresh_from_db()
    assert rdma.mac == "b8:3f:d2:00:01:00" and rdma.nic.pci_bus_id == "0000:1a:00.0"
    finding = findings(roce.fabric)[("su1-leaf0", "Ethernet1/1")]
    assert (finding.kind, str(finding.found)) == (FindingKind.OK, "gpu-0001:mlx5_0/1")


def test_reports_without_lldp_or_infiniband_queue_discovery_only_after_a_view(fabric_site, client, monkeypatch):
    """The first report of a node, and any report after one that had neighbours, queue the discovery task; a
    report with neither LLDP nor InfiniBand after one with neither queues nothing (it would have nothing to do)."""
    import datetime as dt

    from workflows.glue import host_lldp as glue

    queued: list[tuple[Any, ...]] = []

    class Recorder:
        @staticmethod
        def delay_on_commit(*args: Any) -> None:
            queued.append(args)

    monkeypatch.setattr(glue, "node_report_observe", Recorder)
    node = make_node("gpu-quiet", cards=1, nics=0, site=fabric_site[0])
    token = agent_token_issue(node=node).token
    start = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)

    def send(minutes: int, kernel: str = "", **changes: Any) -> str:
        at = (start + dt.timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
        report = report_of(node, collected_at=at, **changes)
        if kernel:
            report["system"]["kernel"] = kernel
        body = json.dumps(report).encode()
        response = client.generic(
            "POST", REPORTS_URL, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
        )
        assert response.status_code == 200, response.content
        return response.json()["status"]

    assert send(0, lldp_neighbors=[], infiniband=[]) == "applied"
    assert len(queued) == 1  # nothing known about the node's view before its first report
    assert send(5, lldp_neighbors=[], infiniband=[], kernel="6.8.0-45-generic") == "applied"
    assert len(queued) == 1 and AgentState.objects.get(node=node).host_view_empty
    assert send(10, lldp_neighbors=[neighbour("eth0", "tor-1", "Ethernet1/9")], infiniband=[]) == "applied"
    assert len(queued) == 2
    # The view had a neighbour: the report that shows none must clear it.
    assert send(15, lldp_neighbors=[], infiniband=[]) == "applied"
    assert len(queued) == 3 and queued[-1][2] == []
