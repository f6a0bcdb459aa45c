"""The compliance report: statuses against baselines (minimum / exact, per model or for every model), counts per
slice, component rows and CSV, scoped to what the user may see, at a query count that does not grow with the
fleet; baselines through the API with history and JSON 4xx errors."""

from __future__ import annotations

import csv
import io

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cmdb import models as m
from cmdb.compliance import BaselineBook, compliance_scope, compliance_slices, node_compliance
from cmdb.permissions import grant_scope
from cmdb.services.firmware import firmware_baseline_save, firmware_canonical, node_firmware_record
from tests.factories.cmdb import NodeFactory, SiteFactory, UserFactory

pytestmark = pytest.mark.django_db


def _firmware(node: m.Node, vbios: str, bmc: str = "1.73", nic: str = "22.39.1002") -> None:
    entries = [
        {"component": "bmc", "device": "bmc", "model": None, "version": bmc},
        {"component": "nic", "device": "0000:3b:00.0", "model": "ConnectX6DX", "version": nic},
        {"component": "gpu_vbios", "device": "0000:18:00.0", "model": "NVIDIA H100 80GB HBM3", "version": vbios},
        {"component": "gpu_vbios", "device": "0000:28:00.0", "model": "NVIDIA H100 80GB HBM3", "version": vbios},
    ]
    node_firmware_record(node, firmware_canonical(entries), None)


def _baselines(server_model: str) -> None:
    firmware_baseline_save(
        m.FirmwareBaseline(
            component="gpu_vbios", model="NVIDIA H100 80GB HBM3", rule="minimum", versions=["96.00.89.00.01"]
        )
    )
    firmware_baseline_save(
        m.FirmwareBaseline(component="bmc", model=server_model, rule="exact", versions=["1.73", "1.74"])
    )
    firmware_baseline_save(
        m.FirmwareBaseline(component="nvidia-driver", model="", rule="minimum", versions=["550.54.15"])
    )


@pytest.fixture
def fleet(db):
    site_a, site_b = SiteFactory(code="site-a"), SiteFactory(code="site-b")
    nodes = [NodeFactory(site=site_a, hostname=f"a-{i:04d}") for i in range(3)]
    nodes += [NodeFactory(site=site_b, hostname=f"b-{i:04d}", server_model=nodes[0].server_model) for i in range(2)]
    for i, node in enumerate(nodes):
        _firmware(node, vbios="96.00.74.00.01" if i in (0, 3) else "96.00.9A.00.01", bmc="1.72" if i == 1 else "1.73")
        m.InstalledSoftware.objects.create(
            node=node, component="nvidia-driver", version="535.54.03" if i == 4 else "550.127.05"
        )
    _baselines(nodes[0].server_model.name)
    return nodes


def test_verdicts():
    book = BaselineBook(
        [
            m.FirmwareBaseline(component="nic", model="ConnectX6", rule="minimum", versions=["20.39.1002"]),
            m.FirmwareBaseline(component="nic", model="", rule="exact", versions=["2.1.6 (MT_0000000838)"]),
        ]
    )
    assert book.verdict("nic", "ConnectX6", "20.41.1000").status == "compliant"
    assert book.verdict("nic", "ConnectX6", "20.39.1002").status == "compliant"
    assert book.verdict("nic", "ConnectX6", "20.31.1014").status == "outdated"
    assert book.verdict("nic", "ConnectX6", "N/A").status == "unknown"
    # No baseline of its own: the component's baseline for every model applies (exact, PSID suffix ignored).
    assert book.verdict("nic", "ConnectX7", "2.1.6").status == "compliant"
    assert book.verdict("nic", "ConnectX7", "2.1.7").status == "outdated"
    assert book.verdict("bios", "XE9680", "2.1.6").status == "not_in_baseline"


def test_slices_count_each_status(fleet, superuser):
    report = compliance_slices(compliance_scope(user=superuser))
    # vbios: nodes 0 and 3 outdated (2 cards each), the rest compliant; bmc: node 1 outdated; nic: no baseline;
    # driver: node 4 outdated.
    assert report["totals"] == {"compliant": 6 + 4 + 4, "outdated": 4 + 1 + 1, "unknown": 0, "not_in_baseline": 5}
    assert report["nodes_outdated"] == 4  # nodes 0 and 3 (VBIOS), 1 (BMC), 4 (driver)
    site_b_vbios = [s for s in report["slices"] if s["site"] == "site-b" and s["component"] == "gpu_vbios"]
    assert {(s["status"], s["components"], s["nodes"]) for s in site_b_vbios} == {
        ("outdated", 2, 1),
        ("compliant", 2, 1),
    }


def test_report_queries_do_not_grow_with_the_fleet(fleet, superuser):
    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            compliance_slices(compliance_scope(user=superuser))
        return len(ctx.captured_queries)

    before = count()
    for i in range(6):
        node = NodeFactory(site=fleet[0].site, hostname=f"c-{i:04d}", server_model=fleet[0].server_model)
        _firmware(node, vbios=f"96.00.{70 + i}.00.01", nic=f"22.{30 + i}.1000")
    assert count() == before


def test_api_summary_rows_and_csv(fleet, root):
    body = root.get("/api/cmdb/compliance/", {"site": "site-b"}).json()
    assert body["nodes_outdated"] == 2
    rows = root.get("/api/cmdb/compliance/components/", {"status": "outdated"}).json()
    assert rows["count"] == 6
    assert {(r["hostname"], r["component"]) for r in rows["results"]} == {
        ("a-0000", "gpu_vbios"),
        ("a-0001", "bmc"),
        ("b-0000", "gpu_vbios"),
        ("b-0001", "nvidia-driver"),
    }
    response = root.get("/api/cmdb/compliance/export.csv", {"status": "outdated", "component": "bmc"})
    assert response["Content-Type"] == "text/csv"
    lines = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert lines == [
        ["hostname", "component", "device", "model", "version", "status"],
        ["a-0001", "bmc", "bmc", fleet[0].server_model.name, "1.72", "outdated"],
    ]


def test_api_bad_filters_are_400_naming_the_parameter(fleet, root):
    for params, field in (
        ({"status": "stale"}, "status"),
        ({"component": "gpu"}, "component"),
        ({"zone": "x"}, "zone"),
    ):
        response = root.get("/api/cmdb/compliance/", params)
        assert response.status_code == 400, response.content
        assert field in str(response.json()), response.json()


def test_report_is_scoped(fleet, client_for):
    user = UserFactory(username="tech-a")
    grant_scope(scope_obj=fleet[0].site, perms=["view_scope"], users=[user])
    body = client_for(user).get("/api/cmdb/compliance/").json()
    assert {s["site"] for s in body["slices"]} == {"site-a"}


def test_baseline_api_validates_and_records_history(root):
    bad = root.post(
        "/api/cmdb/firmware-baselines/",
        {"component": "bios", "model": "X", "rule": "minimum", "versions": ["N/A"]},
        format="json",
    )
    assert bad.status_code == 400 and "versions" in str(bad.json())
    unknown = root.post(
        "/api/cmdb/firmware-baselines/", {"component": "psu", "model": "X", "versions": ["1"]}, format="json"
    )
    assert unknown.status_code == 400 and "component" in str(unknown.json())
    created = root.post(
        "/api/cmdb/firmware-baselines/",
        {"component": "bios", "model": "X", "rule": "minimum", "versions": ["2.1.6"]},
        format="json",
    )
    assert created.status_code == 201, created.json()
    pk = created.json()["id"]
    changed = root.patch(f"/api/cmdb/firmware-baselines/{pk}/", {"versions": ["2.2.0"]}, format="json")
    assert changed.status_code == 200
    records = m.ChangeRecord.objects.filter(object_id=pk, content_type__model="firmwarebaseline").order_by("id")
    assert [r.action for r in records] == ["create", "update"]
    assert records[1].changes["versions"] == [["2.1.6"], ["2.2.0"]]


def test_node_compliance(fleet):
    rows = node_compliance(fleet[1])
    by = {(r["component"], r["device"]): r for r in rows}
    assert by[("bmc", "bmc")]["status"] == "outdated" and by[("bmc", "bmc")]["approved"] == ["1.73", "1.74"]
    assert by[("nvidia-driver", "")]["status"] == "compliant"
    assert by[("nic", "0000:3b:00.0")]["status"] == "not_in_baseline"


def test_metrics_gauges(fleet):
    from cmdb.metrics import compliance_fleet_gauges

    components, outdated = compliance_fleet_gauges()
    samples = dict(components.samples)
    assert samples[("site-a", "gpu_vbios", "outdated")] == 2 and samples[("site-b", "nvidia-driver", "outdated")] == 1
    assert outdated.samples == [((), 4.0)]
