"""`ibnetdiscover -p` parsing on the real captures, link de-duplication, storage and cabling over GUIDs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cmdb.models import Switch
from integrations.switches.cabling import Endpoint, FindingKind, Inventory, PlannedLink, validate_cabling
from integrations.switches.infiniband import (
    IbPort,
    ib_links,
    ib_observations,
    ibnetdiscover_apply,
    parse_ibnetdiscover_ports,
)
from integrations.switches.models import ObservedLink

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
