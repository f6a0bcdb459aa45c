"""The cabling service on CMDB rows: planned Links + ObservedLink rows -> findings, Link.status updates."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from cmdb.models import ChangeRecord, Fabric, Link, Nic, NicPort, Node, ServerModel, Switch, SwitchPort
from integrations.switches.cabling import FindingKind
from integrations.switches.cabling_service import fabric_cabling_report
from integrations.switches.models import ObservedLink


@pytest.fixture
def fabric(fabric_site):
    site, vendor = fabric_site
    fabric = Fabric.objects.create(
        name="ib-a", kind="infiniband", purpose="compute", site=site, is_rail_optimized=True, rail_count=2
    )
    model = ServerModel.objects.create(vendor=vendor, name="HGX")
    leaves = [
        Switch.objects.create(name=f"su1-leaf{r}", vendor=vendor, site=site, fabric=fabric, rail=r, scalable_unit=1)
        for r in range(2)
    ]
    for n in range(2):
        node = Node.objects.create(hostname=f"gpu{n:03d}", serial=f"SN{n}", server_model=model, site=site)
        for r in range(2):
            nic = Nic.objects.create(node=node, name=f"mlx5_{r}", kind="infiniband", rail=r)
            port = NicPort.objects.create(nic=nic, name="1", mac=f"02:00:00:00:{n:02x}:{r:02x}")
            sp = SwitchPort.objects.create(switch=leaves[r], name=f"Ethernet1/{n + 1}")
            Link.objects.create(fabric=fabric, a_nic_port=port, b_switch_port=sp)
    return fabric


def _observe(switch: str, port: str, mac: str) -> None:
    sw = Switch.objects.get(name=switch)
    ObservedLink.objects.create(
        switch=sw, local_device=sw.name, local_port=port, remote_chassis_id=mac, remote_port=mac
    )


def test_report_and_link_status(fabric):
    # gpu000's two HCAs are crossed between the rail leaves; gpu001 mlx5_1 is unplugged.
    _observe("su1-leaf0", "Ethernet1/1", "02:00:00:00:00:01")
    _observe("su1-leaf1", "Ethernet1/1", "02:00:00:00:00:00")
    _observe("su1-leaf0", "Ethernet1/2", "02:00:00:00:01:00")
    _observe("su1-leaf1", "Ethernet1/5", "aa:bb:cc:00:00:01")

    findings = {(f.switch, f.port): f for f in fabric_cabling_report(fabric, update_link_status=True)}
    crossed = findings[("su1-leaf0", "Ethernet1/1")]
    assert crossed.kind == FindingKind.MISWIRED and str(crossed.swap_partner) == "su1-leaf1:Ethernet1/1"
    assert "node gpu000 HCA mlx5_1 (rail 1) lands on leaf su1-leaf0 (rail 0)" in crossed.rail_violation
    assert findings[("su1-leaf0", "Ethernet1/2")].kind == FindingKind.OK
    assert findings[("su1-leaf1", "Ethernet1/2")].kind == FindingKind.MISSING
    assert findings[("su1-leaf1", "Ethernet1/5")].kind == FindingKind.UNKNOWN_NEIGHBOR

    statuses = {
        (link.b_switch_port.switch.name, link.b_switch_port.name): link.status
        for link in Link.objects.select_related("b_switch_port__switch")
    }
    assert statuses[("su1-leaf0", "Ethernet1/2")] == "connected"
    assert statuses[("su1-leaf0", "Ethernet1/1")] == "mismatch"
    assert ChangeRecord.objects.filter(source="integration", reason="cabling validation").count() == 4


def test_cabling_report_command_json(fabric):
    _observe("su1-leaf0", "Ethernet1/1", "02:00:00:00:00:00")
    out = StringIO()
    call_command("cabling_report", "ib-a", "--json", "--problems-only", stdout=out)
    data = json.loads(out.getvalue())
    # Only su1-leaf0 was polled (has observations): its unplugged Ethernet1/2 is missing; leaf1 is not judged.
    assert data["summary"]["ok"] == 1 and data["summary"]["missing"] == 1
    assert [f["port"] for f in data["findings"]] == ["Ethernet1/2"]
