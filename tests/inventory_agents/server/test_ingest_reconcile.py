"""Reconciliation: first sight, idempotence, moves, missing cards, conflicts, locked fields, NICs, software."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType

from cmdb import models as m
from inventory_agents.models import AgentState, Report
from inventory_agents.services.tokens import agent_token_issue
from tests.factories.cmdb import AcceleratorFactory, NodeFactory
from tests.inventory_agents.server.ingest_support import card_entry, make_node, new_cards_report, report_of

pytestmark = pytest.mark.django_db


def _counts() -> tuple[int, int, int]:
    return m.ChangeRecord.objects.count(), m.HealthEvent.objects.count(), m.AcceleratorPlacement.objects.count()


def _always_full(settings) -> None:
    settings.GPUOPS = {**settings.GPUOPS, "AGENT_FULL_RECONCILE_MINUTES": 0}


def test_first_report_creates_cards_with_placements_and_agent_records(post):
    node = make_node("gpu-0100", cards=0)
    token = agent_token_issue(node=node).token
    report = new_cards_report(node, 8)
    response = post(report, token)
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "applied" and body["summary"]["cards_created"] == 8
    cards = m.Accelerator.objects.filter(node=node).order_by("slot_index")
    assert [c.slot_index for c in cards] == list(range(8))
    assert all(
        c.lifecycle == "installed" and c.site_id == node.site_id and c.model.name == "H100-SXM5-80GB" for c in cards
    )
    assert m.AcceleratorPlacement.objects.filter(accelerator__node=node, ended_at__isnull=True).count() == 8
    records = m.ChangeRecord.objects.filter(correlation_id=body["report_id"])
    assert {r.source for r in records} == {"agent"} and not m.ChangeRecord.objects.filter(source="agent").exclude(
        correlation_id=body["report_id"]
    ).exists()
    assert records.filter(content_type=ContentType.objects.get_for_model(m.Accelerator), action="create").count() == 8
    assert set(
        m.AcceleratorPlacement.objects.filter(accelerator__node=node).values_list("source", "correlation_id")
    ) == {("agent", body["report_id"])}
    report_row = Report.objects.get(pk=body["report_id"])
    assert report_row.status == "applied" and report_row.payload["hostname"] == node.hostname
    node.refresh_from_db()
    assert node.last_seen_at is not None and node.health == "ok"


def test_same_report_twice_writes_nothing_the_second_time(token, node, post):
    report = report_of(node)
    report["system"]["kernel"] = "6.8.0-40-generic"
    assert post(report, token).json()["status"] == "applied"
    counts, version = _counts(), m.Node.objects.get(pk=node.pk).version
    second = post(report, token).json()
    assert second["status"] == "unchanged"
    assert _counts() == counts
    assert m.Node.objects.get(pk=node.pk).version == version
    assert Report.objects.count() == 1


def test_full_reconcile_of_an_unchanged_report_is_idempotent_too(token, node, post, settings):
    _always_full(settings)
    report = report_of(node)
    report["accelerators"][2]["health"]["xid_events"] = [
        {
            "xid": 79,
            "pci_bus_id": report["accelerators"][2]["pci_bus_id"],
            "message": "GPU has fallen off the bus.",
            "occurred_at": "2026-11-29T10:00:00Z",
        }
    ]
    assert post(report, token).json()["status"] == "applied"
    counts = _counts()
    event = m.HealthEvent.objects.get(kind="xid")
    report["collected_at"] = "2030-01-01T00:00:00Z"  # a new collection with the same content
    again = post(report, token).json()
    assert again["status"] == "applied" and again["summary"].get("records", 0) == 0
    assert _counts() == counts
    assert m.HealthEvent.objects.get(pk=event.pk).count == 1


def test_changed_facts_are_recorded_once_with_before_and_after(token, node, post):
    report = report_of(node)
    report["accelerators"][0]["firmware_version"] = "96.00.99.00.01"
    report["system"]["bios_version"] = "2.1.0"
    body = post(report, token).json()
    card = m.Accelerator.objects.get(node=node, slot_index=0)
    records = m.ChangeRecord.objects.filter(correlation_id=body["report_id"])
    card_record = records.get(object_id=card.pk, content_type=ContentType.objects.get_for_model(m.Accelerator))
    assert card_record.changes == {"firmware_version": ["", "96.00.99.00.01"]}
    node_record = records.get(object_id=node.pk, content_type=ContentType.objects.get_for_model(m.Node))
    assert node_record.changes == {"bios_version": ["", "2.1.0"]}
    assert card.version == 2
    assert "last_seen_at" not in str([r.changes for r in records])


def test_missing_card_is_flagged_not_deleted(token, node, post):
    report = report_of(node)
    gone = report["accelerators"].pop(6)
    body = post(report, token).json()
    assert body["summary"]["cards_missing"] == 1
    card = m.Accelerator.objects.get(serial=gone["serial"])
    assert card.is_missing and card.node_id == node.pk and card.lifecycle == "installed"
    assert m.Accelerator.objects.filter(node=node).count() == 8
    event = m.HealthEvent.objects.get(kind="missing", accelerator=card, resolved_at__isnull=True)
    assert event.severity == "critical"
    # It comes back: the flag clears and the missing event resolves.
    report["accelerators"].insert(6, gone)
    post(report, token)
    card.refresh_from_db()
    assert not card.is_missing and card.health == "ok"
    assert m.HealthEvent.objects.get(pk=event.pk).resolved_at is not None


def test_collector_error_does_not_flag_cards_missing(token, node, post):
    report = report_of(
        node, accelerators=[], collector_errors=[{"collector": "nvidia", "error": "nvidia-smi timed out after 30s"}]
    )
    post(report, token)
    assert not m.Accelerator.objects.filter(node=node, is_missing=True).exists()


def test_card_moved_between_nodes_keeps_its_placement_history(token, node, post):
    other = make_node("gpu-0002", site=node.site)  # cards change sites through shipping, not by a report
    other_token = agent_token_issue(node=other).token
    report_a, report_b = report_of(node), report_of(other)
    assert post(report_a, token).json()["status"] == "applied"
    moved = report_a["accelerators"].pop(4)
    replaced = report_b["accelerators"].pop(4)  # B's slot 4 held another card, which went out
    report_b["accelerators"].insert(4, {**moved, "index": 4, "pci_bus_id": replaced["pci_bus_id"]})
    body = post(report_b, other_token).json()
    assert body["summary"]["cards_moved"] == 1 and body["summary"]["cards_replaced"] == 1
    card = m.Accelerator.objects.get(serial=moved["serial"])
    assert card.node_id == other.pk and card.slot_index == 4 and card.site_id == other.site_id
    history = list(card.placements.order_by("started_at", "id"))
    assert [(p.node_hostname, p.slot_index) for p in history] == [(node.hostname, 4), (other.hostname, 4)]
    assert history[0].ended_at is not None and history[1].ended_at is None
    assert history[1].source == "agent" and history[1].correlation_id == body["report_id"]
    moved_event = m.HealthEvent.objects.get(kind="moved", accelerator=card)
    assert node.hostname in moved_event.message and moved_event.resolved_at is not None
    record = m.ChangeRecord.objects.get(
        correlation_id=body["report_id"],
        object_id=card.pk,
        content_type=ContentType.objects.get_for_model(m.Accelerator),
    )
    assert record.changes["node_id"] == [node.pk, other.pk]
    out = m.Accelerator.objects.get(serial=replaced["serial"])
    assert out.is_missing and out.slot_index is None and out.health != "failed"
    assert m.HealthEvent.objects.filter(kind="replaced", accelerator=out, resolved_at__isnull=True).exists()
    # A's digest no longer describes the CMDB: its next report is reconciled fully, and the card stays on B.
    assert AgentState.objects.get(node=node).last_hash == ""
    assert post(report_a, token).json()["status"] == "applied"
    assert m.Accelerator.objects.get(serial=moved["serial"]).node_id == other.pk
    assert not m.Accelerator.objects.filter(node=node, is_missing=True).exists()


def test_cards_swapping_slots_in_one_node(token, node, post):
    report = report_of(node)
    cards = report["accelerators"]
    cards[0]["index"], cards[1]["index"] = 1, 0
    assert post(report, token).status_code == 200
    assert m.Accelerator.objects.get(serial=cards[0]["serial"]).slot_index == 1
    assert m.Accelerator.objects.get(serial=cards[1]["serial"]).slot_index == 0


def test_serial_of_a_card_in_stock_is_a_conflict_and_the_stock_record_stays(token, node, post, stock):
    spare = AcceleratorFactory(
        node=None, stock_location=stock, lifecycle="in_stock", site=stock.site, slot_index=None, serial="1654SPARE0001"
    )
    report = report_of(node)
    replaced = report["accelerators"][7]
    report["accelerators"][7] = {**replaced, "serial": spare.serial, "serial_raw": spare.serial, "uuid": None}
    body = post(report, token).json()
    assert body["summary"]["conflicts"] == 1
    spare.refresh_from_db()
    assert spare.lifecycle == "in_stock" and spare.stock_location == stock and spare.node is None
    event = m.HealthEvent.objects.get(kind="conflict", code="serial_in_stock")
    assert spare.serial in event.message and event.node == node and event.resolved_at is None
    out = m.Accelerator.objects.get(serial=replaced["serial"])
    assert out.is_missing and out.slot_index is None  # the slot holds the card in conflict
    # Reported again: still one open conflict, not counted again.
    body = post(report_of(node, accelerators=report["accelerators"], collected_at="2030-01-01T00:00:00Z"), token)
    assert m.HealthEvent.objects.filter(kind="conflict").count() == 1


@pytest.mark.parametrize("junk", ["N/A", "0000000000000", "xxxxxxxx1234", "[Not Supported]", "  ", "FFFFFFFFFFFF"])
def test_junk_serials_never_become_identities(token, post, junk):
    node = NodeFactory(hostname="junk-0001")
    token = agent_token_issue(node=node).token
    report = report_of(node)
    report["accelerators"] = [card_entry(0, junk.strip() or None, serial_raw=junk)]
    assert post(report, token).status_code == 200
    card = m.Accelerator.objects.get(node=node)
    assert card.serial is None and card.slot_index == 0
    # The next report matches the same card by its slot instead of creating another.
    post(report_of(node, accelerators=report["accelerators"], collected_at="2030-01-01T00:00:00Z"), token)
    assert m.Accelerator.objects.filter(node=node).count() == 1


def test_locked_fields_are_not_overwritten(token, node, post):
    m.Node.objects.filter(pk=node.pk).update(locked_fields=["os_name", "kernel"], os_name="Ubuntu 22.04 (golden)")
    report = report_of(node)
    report["system"].update(os_pretty_name="Ubuntu 24.04 LTS", kernel="6.8.0", bios_version="3.0")
    post(report, token)
    node.refresh_from_db()
    assert node.os_name == "Ubuntu 22.04 (golden)" and node.kernel == "5.15.0-119-generic"
    assert node.bios_version == "3.0"


def test_unknown_model_becomes_a_catalog_entry_to_review(token, node, post):
    report = report_of(node)
    report["accelerators"].append(
        {
            **report["accelerators"][0],
            "serial": "1654NEW00001",
            "uuid": None,
            "index": 8,
            "model": "NVIDIA B200",
            "pci_bus_id": "0000:f0:00.0",
        }
    )
    post(report, token)
    card = m.Accelerator.objects.get(serial="1654NEW00001")
    assert card.model.name == "NVIDIA B200" and card.model.vendor.slug == "nvidia"
    assert card.model.aliases == ["NVIDIA B200"]
    assert m.HealthEvent.objects.filter(kind="conflict", code="unknown_model").count() == 1


def test_node_serial_mismatch_is_a_conflict_not_an_overwrite(token, node, post):
    report = report_of(node)
    report["system"]["serial"] = "OTHER-SERIAL-1"
    post(report, token)
    assert m.Node.objects.get(pk=node.pk).serial == node.serial
    assert m.HealthEvent.objects.filter(kind="conflict", code="node_serial_mismatch").exists()


def test_nic_port_guid_change_and_missing_hca(token, node, post):
    report = report_of(node)
    report["infiniband"][0]["ports"][0]["port_guid"] = "0x0000deadbeef0001"
    dropped = report["infiniband"].pop(1)
    body = post(report, token).json()
    port = m.NicPort.objects.get(nic__node=node, nic__name="mlx5_0")
    assert port.guid == "0x0000deadbeef0001"
    assert m.Nic.objects.get(node=node, name=dropped["ca"]).is_missing
    assert m.ChangeRecord.objects.filter(
        correlation_id=body["report_id"], object_id=port.pk, content_type=ContentType.objects.get_for_model(m.NicPort)
    ).exists()


def test_new_netdev_nic_is_created_with_its_port(token, node, post):
    report = report_of(node)
    report["nics"].append(
        {
            "name": "eno1",
            "mac": "B8:3F:D2:00:00:01",
            "speed_mbps": 25000,
            "state": "up",
            "kind": "physical",
            "pci_bus_id": "0000:31:00.0",
        }
    )
    report["nics"].append(
        {"name": "bond0", "mac": "b8:3f:d2:00:00:01", "speed_mbps": None, "state": "up", "kind": "bond"}
    )
    post(report, token)
    nic = m.Nic.objects.get(node=node, name="eno1")
    assert nic.kind == "ethernet" and nic.pci_bus_id == "0000:31:00.0"
    assert list(nic.ports.values_list("name", "mac", "speed_mbps", "link_state")) == [
        ("1", "b8:3f:d2:00:00:01", 25000, "up")
    ]
    assert not m.Nic.objects.filter(name="bond0").exists()


def test_software_versions_are_upserted(token, node, post):
    report = report_of(node)
    report["software"] = [
        {"component": "nvidia-driver", "version": "570.133.20"},
        {"component": "cuda", "version": "12.8"},
        {"component": "nccl", "version": "2.21"},
    ]
    post(report, token)
    installed = dict(m.InstalledSoftware.objects.filter(node=node).values_list("component", "version"))
    assert installed == {"nvidia-driver": "570.133.20", "cuda": "12.8"}


def test_stale_flag_clears_on_report(token, node, post):
    m.Node.objects.filter(pk=node.pk).update(is_stale=True)
    post(report_of(node), token)
    assert not m.Node.objects.get(pk=node.pk).is_stale


def test_older_report_replayed_from_the_spool_is_not_applied(token, node, post):
    report = report_of(node, collected_at="2030-01-01T10:00:00Z")
    post(report, token)
    old = report_of(node, collected_at="2030-01-01T09:00:00Z")
    old["accelerators"].pop()
    body = post(old, token).json()
    assert body["status"] == "superseded"
    assert not m.Accelerator.objects.filter(node=node, is_missing=True).exists()


def test_a_report_without_any_card_flags_none_missing(token, node, post, failed_calls):
    body = post(report_of(node, accelerators=[]), token).json()
    assert not m.Accelerator.objects.filter(node=node, is_missing=True).exists() and not failed_calls
    event = m.HealthEvent.objects.get(kind="collector", code="no_accelerators", resolved_at__isnull=True)
    assert "8" in event.message and body["summary"].get("cards_missing", 0) == 0
    assert m.Node.objects.get(pk=node.pk).health == "ok"  # collection trouble is no hardware health


def test_collector_errors_are_events_that_close_when_the_collector_works(token, node, post):
    report = report_of(node, collector_errors=[{"collector": "infiniband", "error": "ibstat timed out"}])
    report["infiniband"] = []
    post(report, token)
    event = m.HealthEvent.objects.get(kind="collector", code="infiniband")
    assert not m.Nic.objects.filter(node=node, is_missing=True).exists()  # the section is not trusted
    post(report_of(node, collected_at="2030-01-01T00:00:00Z"), token)
    assert m.HealthEvent.objects.get(pk=event.pk).resolved_at is not None
