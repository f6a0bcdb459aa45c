"""Firmware through ingestion: stored per node with change records, only when it changed, at a constant number
of queries; the unchanged report stays at two queries; a failing tool keeps the stored versions of its
components."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cmdb import models as m
from inventory_agents.services.tokens import agent_token_issue
from tests.inventory_agents.server.ingest_support import make_node, report_of

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _warm_content_types() -> None:
    ContentType.objects.get_for_models(m.Accelerator, m.Nic, m.NicPort, m.Node, m.InstalledSoftware, m.NodeFirmware)


def firmware(gpus: int, vbios: str = "96.00.74.00.01", bmc: str = "1.73") -> list[dict]:
    entries = [
        {"component": "bios", "device": "system", "model": "PowerEdge XE9680", "version": "2.1.6", "vendor": "Dell"},
        {"component": "bmc", "device": "bmc", "model": None, "version": bmc},
        {
            "component": "nic",
            "device": "0000:3b:00.0",
            "model": "ConnectX6DX",
            "version": "22.39.1002 ",
            "psid": "MT_0000000359",
        },
    ]
    entries += [
        {
            "component": "gpu_vbios",
            "device": f"0000:{0xA0 + i:02x}:00.0",
            "model": "NVIDIA H100 80GB HBM3",
            "version": vbios,
        }
        for i in range(gpus)
    ]
    return entries


def _node_with_token(hostname: str, cards: int = 8):
    node = make_node(hostname, cards=cards, nics=2)
    return node, agent_token_issue(node=node).token


def _records(node: m.Node) -> list[m.ChangeRecord]:
    ct = ContentType.objects.get_for_model(m.NodeFirmware)
    return list(m.ChangeRecord.objects.filter(content_type=ct, object_id=node.firmware.pk).order_by("id"))


def test_firmware_is_stored_once_and_changes_are_recorded(post):
    node, token = _node_with_token("gpu-f001")
    body = post(report_of(node, firmware=firmware(8), agent_version="1.1.0"), token).json()
    assert body["status"] == "applied" and body["summary"]["firmware_changed"] == 1
    rows = {(c.component, c.device): c for c in m.FirmwareComponent.objects.filter(node=node)}
    assert len(rows) == 11
    # BIOS and BMC are counted against the node's server model in the CMDB, not the DMI product name.
    assert rows[("bios", "system")].model == node.server_model.name
    assert rows[("nic", "0000:3b:00.0")].version == "22.39.1002" and rows[("nic", "0000:3b:00.0")].psid
    assert [r.action for r in _records(node)] == ["create"]

    again = post(
        report_of(node, firmware=firmware(8), agent_version="1.1.0", collected_at="2030-01-01T00:00:00Z"), token
    )
    assert again.json()["status"] == "unchanged"

    # One GPU's VBIOS moved: one update, recorded with the old and new list.
    changed = firmware(8)
    changed[3]["version"] = "96.00.89.00.01"
    post(report_of(node, firmware=changed, agent_version="1.1.0", collected_at="2030-01-02T00:00:00Z"), token)
    stored = m.NodeFirmware.objects.get(node=node)
    assert stored.version == 2
    update = _records(node)[-1]
    assert update.action == "update" and "components" in update.changes
    assert m.FirmwareComponent.objects.get(node=node, device="0000:a0:00.0").version == "96.00.89.00.01"


def test_a_failed_tool_keeps_its_stored_components(post):
    node, token = _node_with_token("gpu-f002")
    post(report_of(node, firmware=firmware(2), agent_version="1.1.0"), token)
    without_bmc = [e for e in firmware(2) if e["component"] != "bmc"]
    errors = [{"collector": "bmc", "error": "ipmitool mc info line 2: output ends without a 'Firmware Revision' line"}]
    report = report_of(
        node, firmware=without_bmc, collector_errors=errors, agent_version="1.1.0", collected_at="2030-01-01T00:00:00Z"
    )
    assert post(report, token).json()["status"] == "applied"
    assert m.FirmwareComponent.objects.get(node=node, component="bmc").version == "1.73"


def test_a_report_without_firmware_keeps_the_stored_one(post):
    node, token = _node_with_token("gpu-f003")
    post(report_of(node, firmware=firmware(2), agent_version="1.1.0"), token)
    report = report_of(node, collected_at="2030-01-01T00:00:00Z")
    report["system"]["kernel"] = "6.8.0-41-generic"
    assert post(report, token).json()["status"] == "applied"
    assert m.FirmwareComponent.objects.filter(node=node).count() == 5


def test_older_reports_without_firmware_apply_as_before(post):
    node, token = _node_with_token("gpu-f004")
    assert post(report_of(node), token).json()["status"] == "applied"
    assert not m.NodeFirmware.objects.filter(node=node).exists()


def _changed_report_queries(post, hostname: str, gpus: int) -> int:
    node, token = _node_with_token(hostname, cards=gpus)
    post(report_of(node, firmware=firmware(gpus)), token)
    report = report_of(node, firmware=firmware(gpus, vbios="96.00.89.00.01"), collected_at="2030-01-01T00:00:00Z")
    with CaptureQueriesContext(connection) as ctx:
        assert post(report, token).json()["summary"]["firmware_changed"] == 1
    return len(ctx.captured_queries)


def test_firmware_queries_do_not_grow_with_components(post):
    assert _changed_report_queries(post, "gpu-f102", 2) == _changed_report_queries(post, "gpu-f108", 8)


@pytest.mark.parametrize("gpus", [2, 8])
def test_unchanged_report_with_firmware_stays_two_queries(post, django_assert_max_num_queries, gpus):
    node, token = _node_with_token(f"gpu-f2{gpus:02d}", cards=gpus)
    assert post(report_of(node, firmware=firmware(gpus)), token).json()["status"] == "applied"
    report = report_of(node, firmware=firmware(gpus), collected_at="2030-01-01T00:00:00Z")
    with django_assert_max_num_queries(2):
        body = post(report, token).json()
    assert body["status"] == "unchanged", body
