"""`ibnetdiscover -p` parsing on the real captures, link de-duplication, storage and cabling over GUIDs."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from django.db import connection

from cmdb.models import ChangeRecord, Fabric, Link, Nic, NicPort, Node, Switch, SwitchPort
from integrations.switches import infiniband
from integrations.switches.cabling import (
    Endpoint,
    FindingKind,
    Inventory,
    PlannedLink,
    canonical_guid,
    validate_cabling,
)
from integrations.switches.cabling_service import fabric_cabling_report
from integrations.switches.infiniband import (
    IbPort,
    ib_links,
    ib_observations,
    ibnetdiscover_apply,
    parse_ibnetdiscover_ports,
)
from integrations.switches.models import ObservedLink
from inventory_agents.services.health import health_policies_ensure
from inventory_agents.services.tokens import agent_token_issue
from tests.inventory_agents.server.ingest_support import REPORTS_URL, make_node, report_of

SHARED = Path(os.environ.get("GPUOPS_SHARED_FIXTURES", Path(__file__).resolve().parents[4] / "shared" / "fixtures"))
IB = SHARED / "infiniband"


def _read(name: str) -> str:
    path = IB / name
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return path.read_text()


def test_ports_report_of_a_small_fabric():
    records = parse_ibnetdiscover_ports(_read("treydock_ibnetdiscover_test.out"))
    assert len(records) == 9
    first = records[0]
    assert first.local == IbPort("CA", 134, 1, "0x7cfe9003003b4bde", "o0001 HCA-1")
    assert first.peer == IbPort("SW", 1719, 10, "0x7cfe9003009ce5b0", "ib-i1l1s01")
    assert (first.width, first.speed, first.local.host) == ("4x", "EDR", "o0001")
    down = [r for r in records if r.peer is None]
    assert [(r.local.description, r.local.port, r.speed) for r in down] == [
        ("ib-i4l1s01", 37, "???"), ("ib-i7l2s01", 80, "SDR")]

    links = ib_links(records)
    # 3 HCA cables + 1 inter-switch cable, each listed from both ends in the report (the p0001 one from both).
    assert len(links) == 4
    assert {(link.a.description, link.a.port, link.b.host, link.b.port) for link in links} == {
        ("ib-i1l1s01", 10, "o0001", 1), ("ib-i1l1s01", 11, "o0002", 1), ("ib-i4l1s01", 35, "p0001", 1),
        ("ib-i1l1s01", 1, "ib-i1l2s01", 1),
    }


def test_unquoted_description_edge_case():
    (record,) = parse_ibnetdiscover_ports(_read("treydock_ibnetdiscover_test3.out"))
    assert record.local == IbPort("SW", 479, 22, "0x0002c9020040f161", "Infiniscale-IV Mellanox Technologies")
    assert (record.speed, record.peer) == ("QDR", None)
    assert ib_links([record]) == []


def test_cabling_by_port_guid():
    observed = ib_observations(parse_ibnetdiscover_ports(_read("treydock_ibnetdiscover_test.out")))
    o1 = Endpoint("o0001", "mlx5_0/1", guids=frozenset({"0x7cfe9003003b4bde"}), hca="mlx5_0")
    o2 = Endpoint("o0002", "mlx5_0/1", guids=frozenset({"0x7cfe9003003b4b96"}), hca="mlx5_0")
    # Planned o0001 on port 11 and o0002 on port 10: the report shows them crossed.
    planned = [PlannedLink("ib-i1l1s01", "10", o2), PlannedLink("ib-i1l1s01", "11", o1)]
    findings = validate_cabling(planned=planned, observed=observed, inventory=Inventory([o1, o2]),
                                polled_switches={"ib-i1l1s01"})
    by_port = {f.port: f for f in findings}
    assert by_port["10"].kind == FindingKind.MISWIRED and str(by_port["10"].swap_partner) == "ib-i1l1s01:11"
    assert by_port["1"].kind == FindingKind.UNKNOWN_NEIGHBOR  # the spine is not in this inventory


def test_store_sweep(fabric_site):
    site, vendor = fabric_site
    leaf = Switch.objects.create(name="ib-i1l1s01", vendor=vendor, site=site)
    run = ibnetdiscover_apply(_read("treydock_ibnetdiscover_test.out"))
    rows = ObservedLink.objects.filter(source="ibnetdiscover")
    assert run.status == "ok" and rows.count() == 4 == run.neighbors_seen
    row = rows.get(switch=leaf, local_port="10")
    assert (row.remote_port_guid, row.remote_system, row.local_lid, row.remote_lid) == (
        "0x7cfe9003003b4bde", "o0001", 1719, 134)
    ibnetdiscover_apply(_read("treydock_ibnetdiscover_test.out"))  # a new sweep replaces the old rows
    assert ObservedLink.objects.filter(source="ibnetdiscover").count() == 4


@pytest.mark.parametrize("spelling", ["0x7cfe9003003b4bde", "7CFE9003003B4BDE", "7cfe:9003:003b:4bde",
                                      "0x7CFE9003003B4BDE"])
def test_guids_compare_by_value(spelling):
    assert canonical_guid(spelling) == "0x7cfe9003003b4bde"
    assert canonical_guid("0x2c9020040f161") == "0x0002c9020040f161"  # unpadded, as some imports have it
    assert canonical_guid("0x0") == canonical_guid("n/a") == ""


def test_a_bare_hex_guid_column_parses_too():
    (record,) = parse_ibnetdiscover_ports(
        "CA   134  1 7cfe9003003b4bde 4x EDR - SW  1719 10 0x7CFE9003009CE5B0 ( 'o0001 HCA-1' - 'ib-i1l1s01' )")
    assert (record.local.guid, record.peer.guid) == ("0x7cfe9003003b4bde", "0x7cfe9003009ce5b0")


def _ib_report(ca: str, node_guid: str, port_guid: str) -> list[dict]:
    """The agent's `infiniband` section (ibstat) for one single-port HCA."""
    return [{"ca": ca, "node_guid": node_guid, "firmware": "16.35.2000", "ports": [
        {"port": 1, "state": "active", "phys_state": "linkup", "rate_gbps": 100, "port_guid": port_guid,
         "link_layer": "infiniband", "lid": 134}]}]


def test_hcas_resolve_by_the_agents_port_guids(fabric_site, settings, client, django_capture_on_commit_callbacks):
    """ibnetdiscover's host ends are the HCA ports the node agents reported - whether the agent report came before
    the sweep or after it - and cabling validation judges them by those ports."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    health_policies_ensure()
    site, vendor = fabric_site
    fabric = Fabric.objects.create(name="ib-a", kind="infiniband", purpose="compute", site=site)
    leaf = Switch.objects.create(name="ib-i1l1s01", vendor=vendor, site=site, fabric=fabric)
    leaf4 = Switch.objects.create(name="ib-i4l1s01", vendor=vendor, site=site, fabric=fabric)
    o1, o2, p1 = (make_node(h, cards=0, nics=0, site=site) for h in ("o0001", "o0002", "p0001"))
    # Provisioning planned each node's HCA before any agent ran: placeholder ports without GUIDs.
    planned = {}
    for node, switch, port in ((o1, leaf, "10"), (o2, leaf, "11"), (p1, leaf4, "35")):
        nic = Nic.objects.create(node=node, name="mlx5_0", kind="infiniband", rail=0)
        planned[node.hostname] = NicPort.objects.create(nic=nic, name="1")
        Link.objects.create(fabric=fabric, a_nic_port=planned[node.hostname],
                            b_switch_port=SwitchPort.objects.create(switch=switch, name=port))
    # p0001's HCA came from an import that knows only the node GUID, spelled its own way (port 1 carries it).
    Nic.objects.filter(node=p1).update(node_guid="506B4B0300CC02A6")

    def report(node: Node, port_guid: str) -> None:
        node_guid = f"{port_guid[:-1]}0"  # not a port GUID of the sweep: only the port GUID can match
        body = json.dumps(report_of(node, infiniband=_ib_report("mlx5_0", node_guid, port_guid)))
        with django_capture_on_commit_callbacks(execute=True):
            response = client.generic("POST", REPORTS_URL, body.encode(), content_type="application/json",
                                      HTTP_AUTHORIZATION=f"Bearer {agent_token_issue(node=node).token}")
        assert response.json().get("status") == "applied", response.content

    report(o1, "0x7cfe9003003b4bde")  # o0001's agent reported before the sweep
    ibnetdiscover_apply(_read("treydock_ibnetdiscover_test.out"))
    rows = {r.local_port: r for r in ObservedLink.objects.filter(source="ibnetdiscover").select_related("nic_port")}
    assert rows["10"].nic_port == planned["o0001"] and rows["10"].node == o1
    assert rows["35"].nic_port == planned["p0001"]  # by node GUID + port number
    assert rows["11"].nic_port is None  # o0002's agent has not reported yet

    report(o2, "0x7cfe9003003b4b96")  # ... now it has: the sweep's observation points at its HCA port
    rows["11"].refresh_from_db()
    assert rows["11"].nic_port == planned["o0002"] and rows["11"].node == o2

    report(o2, "0x7cfe9003003b4b97")  # the HCA was replaced: the old sweep no longer describes this node
    rows["11"].refresh_from_db()
    assert (rows["11"].nic_port, rows["11"].node) == (None, None)

    kinds = {(f.switch, f.port): f.kind for f in fabric_cabling_report(fabric)}
    assert kinds[("ib-i1l1s01", "10")] == kinds[("ib-i4l1s01", "35")] == FindingKind.OK
    assert kinds[("ib-i1l1s01", "11")] == FindingKind.UNKNOWN_NEIGHBOR


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_overlapping_sweeps_store_one_after_the_other(monkeypatch):
    """A second sweep starting while the first is still storing (cron plus a manual run) waits for it, then keeps
    the rows the first wrote instead of inserting them again (which failed on the unique constraint)."""
    text = _read("treydock_ibnetdiscover_test.out")
    sync = infiniband.observations_sync
    stored, release = threading.Event(), threading.Event()

    def sync_then_hold(**kwargs):
        result = sync(**kwargs)
        if threading.current_thread().name == "first":  # hold the first sweep's transaction open
            stored.set()
            release.wait(timeout=30)
        return result

    monkeypatch.setattr(infiniband, "observations_sync", sync_then_hold)
    errors: dict[str, BaseException] = {}

    def sweep() -> None:
        name = threading.current_thread().name
        try:
            ibnetdiscover_apply(text, task_id=name)
        except BaseException as exc:  # reported by the assertion below
            errors[name] = exc
        finally:
            connection.close()

    first = threading.Thread(target=sweep, name="first")
    first.start()
    assert stored.wait(timeout=30)
    second = threading.Thread(target=sweep, name="second")
    second.start()
    second.join(timeout=1)
    assert second.is_alive()  # waiting for the first sweep
    release.set()
    first.join(timeout=30)
    second.join(timeout=30)
    assert errors == {}
    rows = ObservedLink.objects.filter(source="ibnetdiscover")
    assert rows.count() == 4
    assert set(rows.values_list("poll_run__task_id", flat=True)) == {"second"}  # kept and touched by the second
    assert ChangeRecord.objects.filter(action="create", correlation_id="first").count() == 4
    assert not ChangeRecord.objects.filter(correlation_id="second").exists()
