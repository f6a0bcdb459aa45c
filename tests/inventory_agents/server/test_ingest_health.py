"""Health signals: events graded by policy, dedup and repeats, failed cards and the failed-card hook."""

from __future__ import annotations

import pytest
from django.utils import timezone

from cmdb import models as m
from inventory_agents.services.tokens import agent_token_issue
from tests.factories.cmdb import AcceleratorFactory, AcceleratorModelFactory, NodeFactory, VendorFactory
from tests.inventory_agents.server.ingest_support import card_entry, report_of

pytestmark = pytest.mark.django_db


def _xid(report: dict, slot: int, code: int, when: str = "2026-11-29T10:00:00Z", message: str = "") -> dict:
    card = report["accelerators"][slot]
    card["health"]["xid_events"].append(
        {
            "xid": code,
            "pci_bus_id": card["pci_bus_id"],
            "message": message,
            "occurred_at": when,
            "pid": None,
            "process": None,
            "timestamp_raw": when,
        }
    )
    card["health"]["status"] = "failed"
    return report


def test_xid_79_fails_the_card_and_calls_the_hook_once(token, node, post, failed_calls, settings):
    settings.GPUOPS = {**settings.GPUOPS, "AGENT_FULL_RECONCILE_MINUTES": 0}
    report = _xid(report_of(node), 3, 79, message="GPU has fallen off the bus.")
    body = post(report, token).json()
    card = m.Accelerator.objects.get(node=node, slot_index=3)
    assert card.health == "failed" and "Xid 79" in card.health_detail
    event = m.HealthEvent.objects.get(accelerator=card, kind="xid", code="79")
    assert (event.severity, event.action, event.count, event.dedup_key) == (
        "critical",
        "drain_repair",
        1,
        f"acc:{card.pk}:xid:79",
    )
    assert len(failed_calls) == 1
    call = failed_calls[0]
    assert (call.accelerator_id, call.node_id, call.health_event_id, call.kind, call.code, call.is_repeat) == (
        card.pk,
        node.pk,
        event.pk,
        "xid",
        "79",
        False,
    )
    assert call.extra["report_id"] == body["report_id"]
    assert m.Node.objects.get(pk=node.pk).health == "failed"
    # The same report again (a retry from the agent's spool): nothing new, no second call.
    post(report, token)
    assert m.HealthEvent.objects.get(pk=event.pk).count == 1 and len(failed_calls) == 1
    # A later report without Xids: the card stays failed (the repair resolves the event, not silence).
    post(report_of(node, collected_at="2030-01-01T00:00:00Z"), token)
    assert m.Accelerator.objects.get(pk=card.pk).health == "failed"
    # A new occurrence of the open event: counted, last_seen moves, still no second call.
    again = _xid(report_of(node, collected_at="2030-01-02T00:00:00Z"), 3, 79, when="2030-01-02T00:00:00Z")
    post(again, token)
    event.refresh_from_db()
    assert event.count == 2 and event.resolved_at is None and len(failed_calls) == 1


@pytest.mark.parametrize("code", [48, 63, 64, 74, 79, 92, 94, 95])
def test_every_severe_xid_fails_the_card_and_calls_the_hook(token, node, post, failed_calls, code):
    post(_xid(report_of(node), 6, code), token)
    card = m.Accelerator.objects.get(node=node, slot_index=6)
    assert card.health == "failed" and f"Xid {code}" in card.health_detail
    assert [(c.accelerator_id, c.code) for c in failed_calls] == [(card.pk, str(code))]


def test_a_second_severe_signal_on_a_failed_card_is_a_repeat_for_the_hook(token, node, post, failed_calls):
    report = _xid(_xid(report_of(node), 1, 79), 1, 48, message="Double Bit ECC Error")
    post(report, token)
    assert [(c.code, c.is_repeat) for c in failed_calls] == [("79", False), ("48", True)]


def test_resolved_event_is_not_reopened_by_a_replayed_report(token, node, post, failed_calls, settings):
    settings.GPUOPS = {**settings.GPUOPS, "AGENT_FULL_RECONCILE_MINUTES": 0}
    report = _xid(report_of(node), 2, 79)
    post(report, token)
    card = m.Accelerator.objects.get(node=node, slot_index=2)
    m.HealthEvent.objects.filter(accelerator=card).update(resolved_at=timezone.now())  # repaired
    report["collected_at"] = "2030-01-01T00:00:00Z"
    post(report, token)
    assert not m.HealthEvent.objects.filter(accelerator=card, resolved_at__isnull=True).exists()
    assert m.Accelerator.objects.get(pk=card.pk).health == "ok" and len(failed_calls) == 1


def test_warning_xid_degrades_while_reported_only(token, node, post, failed_calls):
    post(_xid(report_of(node), 0, 13, message="Graphics SM Warp Exception"), token)
    card = m.Accelerator.objects.get(node=node, slot_index=0)
    assert card.health == "degraded" and not failed_calls
    assert m.Node.objects.get(pk=node.pk).health == "degraded"
    post(report_of(node, collected_at="2030-01-01T00:00:00Z"), token)
    assert m.Accelerator.objects.get(pk=card.pk).health == "ok"
    assert m.Node.objects.get(pk=node.pk).health == "ok"


@pytest.mark.parametrize(
    ("counters", "kind", "health"),
    [
        ({"ecc_volatile_dbe": 2}, "ecc_uncorrectable", "failed"),
        ({"remapped_rows_failure": True}, "remap_failure", "failed"),
        ({"remapped_rows_pending": True}, "remap_pending", "degraded"),
        ({"retired_pages_sbe": 40, "retired_pages_dbe": 22}, "retired_pages_limit", "failed"),
        ({"ecc_aggregate_dbe": 1}, "ecc_uncorrectable_aggregate", "degraded"),
    ],
)
def test_nvidia_counters_become_graded_events(token, node, post, failed_calls, counters, kind, health):
    report = report_of(node)
    report["accelerators"][5]["health"].update(counters)
    post(report, token)
    card = m.Accelerator.objects.get(node=node, slot_index=5)
    assert card.health == health
    assert m.HealthEvent.objects.filter(accelerator=card, kind=kind).count() == 1
    assert len(failed_calls) == (1 if health == "failed" else 0)


def test_counter_growth_is_a_repeat(token, node, post, settings):
    settings.GPUOPS = {**settings.GPUOPS, "AGENT_FULL_RECONCILE_MINUTES": 0}
    report = report_of(node)
    report["accelerators"][5]["health"]["ecc_volatile_dbe"] = 1
    post(report, token)
    report["accelerators"][5]["health"]["ecc_volatile_dbe"] = 3
    report["collected_at"] = "2030-01-01T00:00:00Z"
    post(report, token)
    assert m.HealthEvent.objects.get(kind="ecc_uncorrectable").count == 2


@pytest.mark.parametrize(
    ("raw", "health", "fails"),
    [("Alarm", "failed", True), ("Critical", "failed", True), ("Warning", "degraded", False), ("OK", "ok", False)],
)
def test_ascend_health_text(post, failed_calls, raw, health, fails):
    ascend = VendorFactory(slug="ascend", name="Huawei Ascend")
    model = AcceleratorModelFactory(name="Ascend 910B3", vendor=ascend, aliases=["910B3", "Ascend910B3"])
    node = NodeFactory(hostname="npu-0001")
    AcceleratorFactory(node=node, model=model, slot_index=0, serial="1023ABC0001")
    token = agent_token_issue(node=node).token
    card = card_entry(0, "1023ABC0001", model="910B3", vendor="ascend")
    card["health"] = {"status": "ok", "health_raw": raw, "error_codes": ["80E18401"] if raw != "OK" else []}
    post(report_of(node, accelerators=[card]), token)
    row = m.Accelerator.objects.get(serial="1023ABC0001")
    assert row.health == health
    if raw != "OK":
        event = m.HealthEvent.objects.get(accelerator=row, kind="vendor_health", code=raw.lower())
        assert "80E18401" in event.message
    assert len(failed_calls) == (1 if fails else 0)


def test_xid_of_a_card_the_tool_no_longer_lists_lands_on_the_cmdb_card(token, node, post, failed_calls):
    report = report_of(node)
    gone = report["accelerators"].pop(6)  # fell off the bus: nvidia-smi does not list it
    stub = {
        key: None
        for key in (
            "model",
            "serial",
            "serial_raw",
            "uuid",
            "index",
            "memory_mib",
            "driver_version",
            "firmware_version",
        )
    }
    stub.update(
        vendor="nvidia",
        pci_bus_id=gone["pci_bus_id"],
        seen_by_tool=False,
        health={
            "status": "failed",
            "xid_events": [
                {
                    "xid": 79,
                    "pci_bus_id": gone["pci_bus_id"],
                    "message": "GPU has fallen off the bus.",
                    "occurred_at": "2026-11-29T10:00:00Z",
                }
            ],
        },
    )
    report["accelerators"].append(stub)
    post(report, token)
    card = m.Accelerator.objects.get(serial=gone["serial"])
    assert card.is_missing and card.health == "failed"
    assert m.HealthEvent.objects.filter(accelerator=card, kind="xid", code="79").exists()
    assert m.Accelerator.objects.filter(node=node).count() == 8  # the stub is no card of its own
    assert {c.kind for c in failed_calls} == {"xid", "missing"}


def test_xid_for_an_unknown_bus_stays_on_the_node(token, node, post, failed_calls):
    report = report_of(node)
    report["accelerators"].append(
        {
            "vendor": "nvidia",
            "model": None,
            "serial": None,
            "serial_raw": None,
            "uuid": None,
            "index": None,
            "pci_bus_id": "0000:ee:00.0",
            "memory_mib": None,
            "driver_version": None,
            "firmware_version": None,
            "seen_by_tool": False,
            "health": {
                "status": "failed",
                "xid_events": [{"xid": 79, "pci_bus_id": "0000:ee:00.0", "message": "GPU has fallen off the bus."}],
            },
        }
    )
    post(report, token)
    event = m.HealthEvent.objects.get(kind="xid")
    assert event.accelerator is None and event.dedup_key == f"node:{node.pk}:xid:79"
    assert m.Node.objects.get(pk=node.pk).health == "degraded" and not failed_calls


def test_policy_is_data_a_vendor_row_wins(token, node, post, failed_calls):
    m.HealthPolicy.objects.create(
        vendor=m.Vendor.objects.get(slug="nvidia"),
        kind="xid",
        code="79",
        severity="warning",
        action="reset",
        marks_failed=False,
    )
    post(_xid(report_of(node), 3, 79), token)
    assert m.Accelerator.objects.get(node=node, slot_index=3).health == "degraded" and not failed_calls
    assert m.HealthEvent.objects.get(kind="xid").action == "reset"
