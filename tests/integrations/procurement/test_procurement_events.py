"""Processing procurement events: PO states, deliveries into assets, discrepancies, and events out of order."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from cmdb import models as m
from integrations.procurement import hooks
from integrations.procurement.inbound import event_record, event_run
from integrations.procurement.models import (
    Discrepancy,
    EventStatus,
    InboundEvent,
    ProcurementRequest,
    RequestState,
    ShipmentItem,
)
from integrations.procurement.services.events import procurement_event_handle
from integrations.procurement.services.receiving import request_reconcile
from integrations.procurement.tasks import process_event
from tests.factories.cmdb import AcceleratorFactory, StockLocationFactory
from tests.integrations.procurement.procurement_helpers import event_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def play(django_capture_on_commit_callbacks):
    """Store an event as the webhook would and process it as the task does (on-commit work executed)."""

    def run(event_type: str, data: dict[str, Any], event_id: str | None = None) -> InboundEvent:
        with django_capture_on_commit_callbacks(execute=True):
            row, _ = event_record(
                channel="procurement", source="procurement", event=event_body(event_type, data, event_id)
            )
            event_run(row.pk, procurement_event_handle)
        row.refresh_from_db()
        return row

    return run


def lines_of(req: ProcurementRequest) -> dict[str, Any]:
    return {line.item_kind: line for line in req.lines.all()}


def serials(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i:03d}" for i in range(1, n + 1)]


def dispatch(req, shipment="SHP-1", servers=None, cards=None, cables=None) -> dict[str, Any]:
    lines = lines_of(req)
    out = []
    if servers is not None:
        out.append({"line_ref": lines["server"].line_ref, "serials": servers})
    if cards is not None:
        out.append({"line_ref": lines["accelerator"].line_ref, "serials": cards})
    if cables is not None:
        out.append({"line_ref": lines["part"].line_ref, "quantity": cables})
    return {"po_number": req.po_number, "shipment_id": shipment, "carrier": "DHL", "tracking": "JD0001", "lines": out}


def delivery(req, shipment="SHP-1", site="sh1", **kw) -> dict[str, Any]:
    data = dispatch(req, shipment, **kw)
    return {
        "po_number": data["po_number"],
        "shipment_id": shipment,
        "site": site,
        "lines": data["lines"],
        "delivered_at": "2026-01-09T08:30:00+00:00",
    }


def test_a_full_delivery_becomes_assets_in_the_ledger(approved_request, play, site):
    req = approved_request
    opened: list[tuple[int, int]] = []
    hooks.register_provisioning_opener(lambda node_id, request_id: opened.append((node_id, request_id)))
    try:
        assert play("po.approved", {"po_number": req.po_number}).status == EventStatus.PROCESSED
        assert (
            play(
                "shipment.dispatched", dispatch(req, servers=serials("SRV", 2), cards=serials("GPU", 3), cables=10)
            ).status
            == EventStatus.PROCESSED
        )
        row = play("shipment.delivered", delivery(req, servers=serials("SRV", 2), cards=serials("GPU", 3), cables=10))
    finally:
        hooks._openers.clear()
    assert row.status == EventStatus.PROCESSED, row.error
    req.refresh_from_db()
    assert (req.state, req.po_state, req.is_open) == (RequestState.RECEIVED, "delivered", False)
    nodes = list(m.Node.objects.filter(po_number=req.po_number).order_by("serial"))
    assert [(n.serial, n.hostname, n.status, n.site_id) for n in nodes] == [
        ("SRV001", "sh1-srv001", "received", site.pk),
        ("SRV002", "sh1-srv002", "received", site.pk),
    ]
    node = nodes[0]
    bought = req.po_created_at.date()
    assert (node.supplier, node.purchase_date, node.warranty_end) == (
        "Fake Supplier Ltd",
        bought,
        bought.replace(year=bought.year + 3),
    )
    cards = list(m.Accelerator.objects.filter(po_number=req.po_number))
    warehouse = m.StockLocation.objects.get(site=site, name="warehouse")
    assert {(c.lifecycle, c.stock_location_id, c.site_id) for c in cards} == {("in_stock", warehouse.pk, site.pk)}
    receipts = m.StockMovement.objects.filter(kind="receive", location=warehouse)
    assert receipts.filter(accelerator__isnull=False).count() == 3
    assert receipts.get(part_model__sku="CBL-DAC-400G-2M").quantity == 10
    assert set(receipts.values_list("ticket_ref", flat=True)) == {req.reference}
    # CMDB change records carry the request's correlation id and say it was the integration.
    records = m.ChangeRecord.objects.filter(correlation_id=req.correlation_id)
    assert records.filter(action="create").count() >= 5 and set(records.values_list("source", flat=True)) == {
        "integration"
    }
    assert sorted(opened) == sorted((n.pk, req.pk) for n in nodes)
    assert not Discrepancy.objects.exists()
    assert (
        play("invoice.posted", {"po_number": req.po_number, "invoice_number": "INV-1", "amount": "95800.00"}).status
        == EventStatus.PROCESSED
    )
    req.refresh_from_db()
    assert (req.state, req.po_state, req.invoice_number) == (RequestState.CLOSED, "invoiced", "INV-1")


def test_unexpected_and_missing_serials_are_discrepancies_never_dropped(approved_request, play):
    req = approved_request
    play("shipment.dispatched", dispatch(req, cards=["GPU001", "GPU002", "GPU003"]))
    play("shipment.delivered", delivery(req, cards=["GPU001", "GPU002", "GPU999"]))
    found = {(d.kind, d.serial) for d in Discrepancy.objects.filter(status="open")}
    assert found == {("missing", "GPU003"), ("unexpected", "GPU999")}
    # The unexpected card physically arrived: it is in the CMDB, flagged; the missing one is not.
    assert m.Accelerator.objects.filter(serial="GPU999", lifecycle="in_stock").exists()
    assert not m.Accelerator.objects.filter(serial="GPU003").exists()
    assert ShipmentItem.objects.get(serial="GPU003").status == "missing"
    req.refresh_from_db()
    assert req.state == RequestState.PARTIALLY_RECEIVED  # 3 of 3 cards but 0 of 2 servers


def test_a_missing_serial_arriving_later_resolves_its_discrepancy(approved_request, play):
    req = approved_request
    play("shipment.dispatched", dispatch(req, "SHP-1", cards=["GPU001", "GPU002"]))
    play("shipment.delivered", delivery(req, "SHP-1", cards=["GPU001"]))
    missing = Discrepancy.objects.get(kind="missing", serial="GPU002")
    play("shipment.delivered", delivery(req, "SHP-2", cards=["GPU002"]))  # the vendor split the boxes
    missing.refresh_from_db()
    assert missing.status == "resolved" and "later event" in missing.resolution
    # SHP-2 came without a notice: its serial was expected on SHP-1, so it is not "unexpected".
    assert not Discrepancy.objects.filter(kind="unexpected").exists()


def test_delivery_before_dispatch_creates_assets_then_reconciles_when_the_notice_arrives(approved_request, play):
    req = approved_request
    assert play("shipment.delivered", delivery(req, cards=["GPU001", "GPU009"])).status == EventStatus.PROCESSED
    assert m.Accelerator.objects.filter(serial__in=["GPU001", "GPU009"]).count() == 2
    assert not Discrepancy.objects.exists()  # nothing to compare with yet
    play("shipment.dispatched", dispatch(req, cards=["GPU001", "GPU002"]))
    assert {(d.kind, d.serial) for d in Discrepancy.objects.filter(status="open")} == {
        ("missing", "GPU002"),
        ("unexpected", "GPU009"),
    }


def test_a_delivery_whose_notice_never_comes_is_flagged_after_the_grace(approved_request, play):
    req = approved_request
    play("shipment.delivered", delivery(req, cards=["GPU001"]))
    request_reconcile(req, now=dt.datetime.now(dt.UTC) + dt.timedelta(hours=25))
    assert Discrepancy.objects.get().kind == "no_dispatch_notice"


def test_po_events_before_the_po_is_known_wait_and_run_when_it_arrives(
    site, approvers, play, part_models, django_capture_on_commit_callbacks
):
    from integrations.procurement.services import requests as svc
    from tests.integrations.procurement.procurement_helpers import request_make

    req = svc.request_approve(
        request=svc.request_submit(request=request_make(site=site, requester=approvers["requester"])),
        approver=approvers["lead"],
    )  # on-commit placement not run: no PO yet
    early = play("po.approved", {"po_number": "PO-7777"})
    assert (early.status, early.waits_for) == (EventStatus.DEFERRED, "po:PO-7777")
    assert (
        play(
            "shipment.delivered",
            {
                "po_number": "PO-7777",
                "shipment_id": "S-1",
                "site": "sh1",
                "lines": [{"line_ref": f"{req.reference}-2", "serials": ["GPU1"]}],
            },
        ).status
        == EventStatus.DEFERRED
    )
    created = play("po.created", {"po_number": "PO-7777", "request_ref": req.reference, "supplier": "Acme"})
    assert created.status == EventStatus.PROCESSED
    assert set(InboundEvent.objects.values_list("status", flat=True)) == {EventStatus.PROCESSED}
    req.refresh_from_db()
    assert (req.po_number, req.supplier, req.state) == ("PO-7777", "Acme", RequestState.PARTIALLY_RECEIVED)
    assert m.Accelerator.objects.filter(serial="GPU1", po_number="PO-7777").exists()


def test_po_states_never_move_back(approved_request, play):
    req = approved_request
    play("shipment.dispatched", dispatch(req, cards=["GPU001"]))
    play("po.approved", {"po_number": req.po_number})  # late
    req.refresh_from_db()
    assert req.po_state == "dispatched"


def test_processing_is_idempotent(approved_request, play):
    row = play("shipment.delivered", delivery(approved_request, cards=["GPU001"]))
    assert event_run(row.pk, procurement_event_handle) == "skipped"  # a redelivered task message
    assert process_event.apply(args=[row.pk]).get() == "skipped"
    # The same delivery re-sent under a new event id: nothing is created twice.
    play("shipment.delivered", delivery(approved_request, cards=["GPU001"]))
    assert m.Accelerator.objects.filter(serial="GPU001").count() == 1
    assert m.StockMovement.objects.filter(accelerator__serial="GPU001", kind="receive").count() == 1


def test_a_serial_known_elsewhere_is_a_duplicate_not_a_second_asset(approved_request, play, site):
    AcceleratorFactory(serial="GPU001", node=None, lifecycle="in_stock", stock_location=StockLocationFactory(site=site))
    play("shipment.delivered", delivery(approved_request, cards=["GPU001", "GPU002"]))
    dup = Discrepancy.objects.get(kind="duplicate_serial")
    assert dup.serial == "GPU001" and "already known" in dup.detail
    assert m.Accelerator.objects.filter(serial="GPU001").count() == 1
    assert m.Accelerator.objects.get(serial="GPU002").po_number == approved_request.po_number


def test_a_failing_delivery_writes_nothing(approved_request, play):
    row = play("shipment.delivered", delivery(approved_request, site="nowhere", cards=["GPU001"]))
    assert row.status == EventStatus.FAILED and "unknown site 'nowhere'" in row.error
    assert not m.Accelerator.objects.exists() and not m.StockMovement.objects.exists()
    assert not ShipmentItem.objects.exists()


def test_unknown_lines_and_wrong_sites_are_reported(approved_request, play):
    from tests.factories.cmdb import SiteFactory

    SiteFactory(code="bj2")
    data = delivery(approved_request, site="bj2", cards=["GPU001"])
    data["lines"].append({"line_ref": "PR-999-1", "serials": ["ZZZ1"]})
    play("shipment.delivered", data)
    kinds = set(Discrepancy.objects.values_list("kind", flat=True))
    assert kinds == {"unknown_line", "site_mismatch"}
    assert m.Accelerator.objects.get(serial="GPU001").site.code == "bj2"  # received where it physically is


def test_cancelled_po_closes_a_request_with_nothing_received(approved_request, play):
    play("po.cancelled", {"po_number": approved_request.po_number, "reason": "supplier out of stock"})
    approved_request.refresh_from_db()
    assert (approved_request.state, approved_request.po_state, approved_request.is_open) == (
        RequestState.CANCELLED,
        "cancelled",
        False,
    )


def test_cancelled_after_receipt_and_invoice_mismatch_are_discrepancies(approved_request, play):
    play("shipment.delivered", delivery(approved_request, cards=["GPU001"]))
    play("po.cancelled", {"po_number": approved_request.po_number})
    play("invoice.posted", {"po_number": approved_request.po_number, "invoice_number": "INV-9", "amount": 100})
    assert set(Discrepancy.objects.values_list("kind", flat=True)) == {"cancelled_after_receipt", "invoice_mismatch"}
