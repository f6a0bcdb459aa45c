"""Discovery writes a change record for every observation that appeared, disappeared or changed since the last
poll - and none for a poll that saw the same cables again (which also keeps the rows)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cmdb.models import ChangeRecord, Switch, SwitchPort
from integrations.ports import LldpNeighbor, SnmpCredential, SnmpTarget, SwitchSnapshot
from integrations.switches import services
from integrations.switches.fakes import FakeSnmpPoller, empty_snapshot
from integrations.switches.infiniband import ibnetdiscover_apply
from integrations.switches.models import ObservedLink
from tests.integrations.switches.test_switch_infiniband import compute_report, storage_report

SHARED = Path(os.environ.get("GPUOPS_SHARED_FIXTURES", Path(__file__).resolve().parents[4] / "shared" / "fixtures"))
IB_REPORT = SHARED / "infiniband" / "treydock_ibnetdiscover_test.out"

GPU1 = LldpNeighbor("Ethernet1/1", "0e:00:00:00:00:01", "0e:00:00:00:00:01", "gpu001", "mlx5_0")
GPU2 = LldpNeighbor("Ethernet1/2", "0e:00:00:00:00:02", "0e:00:00:00:00:02", "gpu002", "mlx5_0")
GPU3 = LldpNeighbor("Ethernet1/3", "0e:00:00:00:00:03", "0e:00:00:00:00:03", "gpu003", "mlx5_0")


def link_records():
    return ChangeRecord.objects.filter(content_type__model="observedlink").order_by("id")


def _snapshot(*neighbors: LldpNeighbor) -> SwitchSnapshot:
    return SwitchSnapshot(system=empty_snapshot("leaf-a").system, ports=(), lldp_neighbors=neighbors)


@pytest.fixture
def leaf(fabric_site) -> Switch:
    site, vendor = fabric_site
    switch = Switch.objects.create(
        name="leaf-a", vendor=vendor, site=site, mgmt_ip="10.0.0.1", snmp_credential_ref="fabric-a"
    )
    for i in (1, 2, 3):
        SwitchPort.objects.create(switch=switch, name=f"Ethernet1/{i}")
    return switch


def _poll(leaf: Switch, *neighbors: LldpNeighbor, task_id: str) -> None:
    services.switch_poll(
        leaf,
        poller=FakeSnmpPoller({"10.0.0.1": _snapshot(*neighbors)}),
        target=SnmpTarget(host="10.0.0.1", credential=SnmpCredential()),
        task_id=task_id,
    )


def test_snmp_poll_records_what_changed_since_the_last_poll(leaf):
    _poll(leaf, GPU1, GPU2, task_id="task-1")
    first = list(link_records())
    assert [(r.action, r.source, r.correlation_id) for r in first] == [("create", "integration", "task-1")] * 2
    assert first[0].changes["remote_system"] == [None, "gpu001"]
    assert first[0].changes["switch_port"] == [None, "leaf-a:Ethernet1/1"]
    assert first[0].reason.startswith("SNMP poll #")
    ids = set(ObservedLink.objects.filter(switch=leaf).values_list("id", flat=True))

    # The same cables again: no record, the same rows.
    _poll(leaf, GPU1, GPU2, task_id="task-2")
    assert link_records().count() == 2
    assert set(ObservedLink.objects.filter(switch=leaf).values_list("id", flat=True)) == ids

    # gpu002's cable gone, gpu003's new, gpu001 renamed itself: one record each.
    renamed = LldpNeighbor(GPU1.local_port, GPU1.remote_chassis_id, GPU1.remote_port, "gpu001.dc1", "mlx5_0")
    _poll(leaf, renamed, GPU3, task_id="task-3")
    third = {r.action: r for r in link_records().filter(correlation_id="task-3")}
    assert set(third) == {"create", "delete", "update"}
    assert third["update"].changes == {"remote_system": ["gpu001", "gpu001.dc1"]}
    assert third["delete"].changes["remote_system"] == ["gpu002", None]
    assert third["create"].changes["local_port"] == [None, "Ethernet1/3"]
    assert ObservedLink.objects.get(switch=leaf, local_port="Ethernet1/1").pk in ids  # updated in place


def test_snmp_poll_all_correlates_records_with_the_task(leaf, monkeypatch):
    monkeypatch.setenv("GPUOPS_CREDENTIAL_FABRIC_A", '{"community": "c"}')
    services.switches_poll_all(poller=FakeSnmpPoller({"10.0.0.1": _snapshot(GPU1)}), task_id="beat-1")
    (record,) = link_records()
    assert (record.action, record.source, record.correlation_id) == ("create", "integration", "beat-1")


def test_ibnetdiscover_sweep_records_only_changes(fabric_site):
    if not IB_REPORT.exists():
        pytest.skip(f"{IB_REPORT} is absent")
    text = IB_REPORT.read_text()
    site, vendor = fabric_site
    Switch.objects.create(name="ib-i1l1s01", vendor=vendor, site=site)
    ibnetdiscover_apply(text, task_id="sweep-1")
    created = list(link_records())
    assert len(created) == 4 and {(r.action, r.source, r.correlation_id) for r in created} == {
        ("create", "integration", "sweep-1")
    }
    ids = set(ObservedLink.objects.filter(source="ibnetdiscover").values_list("id", flat=True))

    # The subnet manager handed out new LIDs, nothing was re-cabled: no record, same rows, LIDs refreshed.
    ibnetdiscover_apply(text.replace(" 134  1 ", " 934  1 "), task_id="sweep-2")
    assert link_records().count() == 4
    assert set(ObservedLink.objects.filter(source="ibnetdiscover").values_list("id", flat=True)) == ids
    assert ObservedLink.objects.get(source="ibnetdiscover", local_port="10").remote_lid == 934

    # o0002's cable moved from port 11 to port 12.
    ibnetdiscover_apply(text.replace("SW  1719 11 ", "SW  1719 12 "), task_id="sweep-3")
    moved = link_records().filter(correlation_id="sweep-3")
    assert sorted((r.action, (r.changes.get("local_port") or [None, None])) for r in moved) == [
        ("create", [None, "12"]),
        ("delete", ["11", None]),
    ]


def test_a_switch_gone_from_its_subnet_is_recorded_and_the_other_subnet_is_not(fabric_site):
    """Two subnets swept alternately write no record for each other's cables; a switch powered off in one of them
    gets a delete record per observation at that subnet's next sweep."""
    site, vendor = fabric_site
    Switch.objects.create(name="ib-s1", vendor=vendor, site=site)  # the others are unknown to the CMDB
    ibnetdiscover_apply(compute_report(), task_id="compute-1")
    ibnetdiscover_apply(storage_report(), task_id="storage-1")
    assert link_records().count() == 4 + 7
    ibnetdiscover_apply(compute_report(), task_id="compute-2")
    ibnetdiscover_apply(storage_report(without="ib-s3"), task_id="storage-2")
    assert not link_records().filter(correlation_id="compute-2").exists()
    gone = link_records().filter(correlation_id="storage-2")
    assert {r.action for r in gone} == {"delete"}
    assert sorted(
        (r.changes["local_device"][0], r.changes["local_port"][0], r.changes["remote_system"][0]) for r in gone
    ) == [("ib-s1", "3", "ib-s3"), ("ib-s3", "1", "ib-s1"), ("ib-s3", "2", "s0003")]
    assert all(r.reason.startswith("ibnetdiscover sweep #") for r in gone)
    assert ObservedLink.objects.filter(source="ibnetdiscover").count() == 4 + 4
