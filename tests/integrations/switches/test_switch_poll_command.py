"""`manage.py switch_poll` against snmpsim: dry-run JSON, persisting into the CMDB with change records, and
clear failures for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.contenttypes.models import ContentType
from django.core.management import CommandError, call_command

from cmdb.models import ChangeRecord, Fabric, Switch, SwitchPort
from integrations.switches.models import ObservedLink, PollRun

DELL = "librenms_dell-os10"
REPO = Path(__file__).resolve().parents[3]


def test_dry_run_json_needs_no_cmdb_record(snmpsim, db):
    out = StringIO()
    call_command(
        "switch_poll", f"{snmpsim.host}:{snmpsim.port}", "--community", DELL, "--dry-run", "--json", stdout=out
    )
    data = json.loads(out.getvalue())
    assert set(data) == {"system", "ports", "lldp_neighbors"}
    assert {"name", "description", "object_id", "model", "serial", "uptime"} <= set(data["system"])
    assert data["system"]["serial"] == "CN02NK09282988AT0259"
    assert len(data["ports"]) == 36
    assert {"name", "alias", "speed_mbps", "admin_state", "oper_state", "mac"} <= set(data["ports"][0])
    assert data["lldp_neighbors"][0] == {
        "local_port": "mgmt1/1/1",
        "remote_chassis_id": "14:18:77:dd:6f:ca",
        "remote_port": "Gi1/0/6",
        "remote_system": "1007-mnt-1",
        "remote_port_description": "Gi1/0/6",
    }
    assert not PollRun.objects.exists()


def test_persist_ports_links_and_change_records(snmpsim, fabric_site):
    site, vendor = fabric_site
    switch = Switch.objects.create(name="leaf-dell", vendor=vendor, site=site, mgmt_ip="127.0.0.1")
    planned = SwitchPort.objects.create(switch=switch, name="ethernet1/1/25", description="to lan-2")
    port_ct = ContentType.objects.get_for_model(SwitchPort)

    out = StringIO()
    call_command("switch_poll", f"127.0.0.1:{snmpsim.port}", "--community", DELL, "--json", stdout=out)
    summary = json.loads(out.getvalue())
    assert summary["status"] == "ok" and summary["lldp_neighbors"] == 5

    ports = {p.name: p for p in SwitchPort.objects.filter(switch=switch)}
    # port-channel / vlan interfaces are not cable ends: only physical ifTypes become SwitchPorts.
    assert "ethernet1/1/25" in ports and "mgmt1/1/1" in ports
    assert all(not name.startswith(("port-channel", "vlan")) for name in ports)
    assert summary["ports_created"] == len(ports) - 1 and summary["ports_updated"] == 1
    planned.refresh_from_db()
    assert planned.description == "VLT" and planned.mac  # the device's ifAlias wins over the planned text
    records = ChangeRecord.objects.filter(content_type=port_ct, source="integration")
    assert records.filter(action="create").count() == len(ports) - 1
    update = records.get(action="update", object_id=planned.pk)
    assert update.source == "integration" and update.changes["description"] == ["to lan-2", "VLT"]

    switch.refresh_from_db()
    assert (switch.serial, switch.model_name) == ("CN02NK09282988AT0259", "S4128F-ON")
    links = ObservedLink.objects.filter(switch=switch)
    assert links.count() == 5
    assert links.get(local_port="ethernet1/1/29").switch_port == ports["ethernet1/1/29"]
    run = PollRun.objects.get(switch=switch)
    assert run.status == "ok" and run.neighbors_seen == 5

    # A second poll of an unchanged device writes no change record and keeps the observations.
    before = ChangeRecord.objects.count()
    first_ids = set(links.values_list("id", flat=True))
    call_command("switch_poll", f"127.0.0.1:{snmpsim.port}", "--community", DELL, stdout=StringIO())
    assert ChangeRecord.objects.count() == before
    assert set(ObservedLink.objects.filter(switch=switch).values_list("id", flat=True)) == first_ids
    assert PollRun.objects.filter(switch=switch).count() == 2


def test_unknown_switch_without_dry_run(snmpsim, db):
    with pytest.raises(CommandError, match="no switch with mgmt_ip"):
        call_command("switch_poll", f"127.0.0.1:{snmpsim.port}", "--community", DELL)


def test_wrong_community_records_failed_run(snmpsim, fabric_site):
    site, vendor = fabric_site
    switch = Switch.objects.create(name="leaf-x", vendor=vendor, site=site, mgmt_ip="127.0.0.1")
    with pytest.raises(CommandError, match="no SNMP response"):
        call_command(
            "switch_poll", f"127.0.0.1:{snmpsim.port}", "--community", "wrong", "--timeout", "0.3", "--retries", "0"
        )
    run = PollRun.objects.get(switch=switch)
    assert run.status == "failed" and "no SNMP response" in run.error


def test_cli_exit_code_and_message_for_unreachable_host(snmpsim):
    # A real process: the operator sees one line on stderr and a non-zero exit status.
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "manage.py"),
            "switch_poll",
            f"127.0.0.1:{snmpsim.port}",
            "--community",
            "nope",
            "--dry-run",
            "--timeout",
            "0.3",
            "--retries",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode != 0
    assert "no SNMP response" in proc.stderr and "Traceback" not in proc.stderr


def test_the_demo_oob_switch_is_polled_through_snmpsim(snmpsim, db):
    """script/server's demo has one switch polled for real: sh1-oob-01 at 127.0.0.1 (docs/switches.md)."""
    from cmdb.services.demo import demo_load
    from integrations.switches.cabling_service import fabric_cabling_report

    demo_load(scale="small")
    call_command("switches_demo_observe", stdout=StringIO())
    fabric = Fabric.objects.get(name="sh1-ib-compute")
    before = sorted(str(f) for f in fabric_cabling_report(fabric))

    out = StringIO()
    call_command("switch_poll", f"127.0.0.1:{snmpsim.port}", "--community", DELL, "--json", stdout=out)
    summary = json.loads(out.getvalue())
    assert (summary["switch"], summary["status"], summary["lldp_neighbors"]) == ("sh1-oob-01", "ok", 5)
    assert SwitchPort.objects.filter(switch__name="sh1-oob-01").count() == summary["ports_created"] > 0
    # Out of band, in no fabric: the demo fabric's cabling report is untouched.
    assert sorted(str(f) for f in fabric_cabling_report(fabric)) == before
